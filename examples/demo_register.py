"""Train one of the demo's credit-scoring classifiers and register it as the next version of
``credit_scoring`` with alias ``candidate``, its population model shipped inside the version.

Usage: ``python examples/demo_register.py --variant biased|fair`` (the tracking store comes
from ``MLFLOW_TRACKING_URI``; ``examples/demo.sh`` points it at ``demo_out/mlflow.db``).
"""

from __future__ import annotations

import argparse
import sys

import mlflow
from demo_credit import accuracy, population_model, train_classifier

from registry_hooks.connection import connect
from registry_hooks.publish import log_model_with_population

MODEL_NAME = "credit_scoring"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=["biased", "fair"], required=True)
    parser.add_argument("--alias", default="candidate")
    args = parser.parse_args()
    biased = args.variant == "biased"
    registry = connect()
    mlflow.set_experiment("certgate-demo-training")
    model = train_classifier(biased=biased)
    with mlflow.start_run(run_name=f"train {args.variant}"):
        mlflow.log_params({"variant": args.variant, "architecture": "6-8-2 ReLU MLP"})
        mlflow.log_metric("accuracy", accuracy(model, biased=biased))
        info = log_model_with_population(
            model, population_model(), registered_model_name=MODEL_NAME, alias=args.alias,
            registry=registry, tags={"variant": args.variant},
        )
    print(f"registered models:/{MODEL_NAME}/{info.registered_model_version} "
          f"({args.variant}, accuracy {accuracy(model, biased=biased):.3f}) "
          f"with alias {args.alias!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The pyfunc model code of the self-correcting variant, and the deploy step's input checks,
without a registry: the model code imports nothing of certgate, reproduces the SC-Net's outputs
and ⊥ flags from its TorchScript artifact, orders named DataFrame columns by the network's input
names, and rejects inputs of the wrong width or type with a message naming the columns;
``certgate run`` refuses a deploy section whose constraints file is missing before it audits.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from mlflow import MlflowClient
from mlflow.pyfunc import PythonModelContext

from configs.schema import parse_config
from pipeline_steps.cli import main
from pipeline_steps.deploy import DeployError, deploy_self_correcting, run_deploy
from registry_hooks import selfcorrect_pyfunc
from registry_hooks.connection import Registry
from registry_hooks.selfcorrect_pyfunc import SelfCorrectingPyfunc
from verifier.selfcorrect import SelfCorrectingNetwork, parse_constraints
from verifier.selfcorrect.export import save_torchscript

NAMES = ["a", "b", "c", "d"]
ALLOWED_IMPORTS = {"__future__", "typing", "warnings", "mlflow", "numpy", "pandas", "torch"}
CONSTRAINTS = {
    "num_classes": 3,
    "constraints": [
        {"name": "a_positive", "precondition": {"kind": "box", "lower": [0, None, None, None],
                                                "upper": [None, None, None, None]},
         "postcondition": [["0 < 1"]]},
        {"name": "b_positive", "precondition": {"kind": "box", "lower": [None, 0, None, None],
                                                "upper": [None, None, None, None]},
         "postcondition": [["1 < 0"]]},
    ],
}


@pytest.fixture
def scnet() -> SelfCorrectingNetwork:
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 5, dtype=torch.float64), torch.nn.ReLU(),
                                torch.nn.Linear(5, 3, dtype=torch.float64))
    return SelfCorrectingNetwork(model, parse_constraints(CONSTRAINTS, num_classes=3),
                                 input_size=4).eval()


@pytest.fixture
def served(scnet: SelfCorrectingNetwork, tmp_path: Path) -> SelfCorrectingPyfunc:
    path = save_torchscript(scnet, tmp_path / "scnet.pt")
    model = SelfCorrectingPyfunc()
    model.load_context(PythonModelContext(
        artifacts={selfcorrect_pyfunc.TORCHSCRIPT_ARTIFACT: str(path)},
        model_config={"input_names": NAMES, "output_columns": ["logit_0", "logit_1", "logit_2"]},
    ))
    return model


def test_model_code_imports_nothing_of_certgate() -> None:
    tree = ast.parse(Path(selfcorrect_pyfunc.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= ALLOWED_IMPORTS, imported - ALLOWED_IMPORTS


def test_predict_matches_the_sc_net(scnet: SelfCorrectingNetwork,
                                    served: SelfCorrectingPyfunc) -> None:
    x = np.random.default_rng(0).normal(size=(500, 4))
    frame = served.predict(None, x)
    with torch.no_grad():
        expected, bottom = scnet.forward_with_bottom(torch.from_numpy(x))
    assert list(frame.columns) == ["logit_0", "logit_1", "logit_2", "bottom", "predicted_class"]
    np.testing.assert_array_equal(frame[["logit_0", "logit_1", "logit_2"]].to_numpy(),
                                  expected.numpy())
    np.testing.assert_array_equal(frame["bottom"].to_numpy(), bottom.numpy())
    both_active = (x[:, 0] >= 0) & (x[:, 1] >= 0)
    np.testing.assert_array_equal(frame["bottom"].to_numpy(), both_active)
    assert frame["bottom"].dtype == bool and frame["predicted_class"].dtype == np.int64
    np.testing.assert_array_equal(frame["predicted_class"].to_numpy(),
                                  expected.numpy().argmax(axis=1))


def test_named_columns_are_reordered_and_bad_rows_rejected(
        served: SelfCorrectingPyfunc) -> None:
    x = np.random.default_rng(1).normal(size=(20, 4))
    shuffled = pd.DataFrame(x, columns=NAMES)[["c", "a", "d", "b"]]
    pd.testing.assert_frame_equal(served.predict(None, shuffled), served.predict(None, x))
    pd.testing.assert_frame_equal(served.predict(None, x[0]), served.predict(None, x[:1]))
    with pytest.raises(ValueError, match=r"expected 4 input columns \(a, b, c, d\), got 3"):
        served.predict(None, x[:, :3])
    with pytest.raises(ValueError, match="expected 2-D input rows"):
        served.predict(None, x.reshape(4, 5, 4))
    with pytest.raises(ValueError, match="input values must be numeric"):
        served.predict(None, np.array([["x", "1", "2", "3"]], dtype=object))


def execute_model_code(module_name: str) -> object:
    """Run the model-code file as module ``module_name``; return what it registered with
    ``mlflow.models.set_model`` (``None``: nothing). MLflow's global is restored after."""
    saved = mlflow.models.model.__mlflow_model__
    mlflow.models.model.__mlflow_model__ = None
    try:
        spec = importlib.util.spec_from_file_location(module_name, selfcorrect_pyfunc.__file__)
        assert spec is not None and spec.loader is not None
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        return mlflow.models.model.__mlflow_model__
    finally:
        mlflow.models.model.__mlflow_model__ = saved


def test_module_registers_itself_only_when_loaded_as_model_code() -> None:
    assert execute_model_code("registry_hooks.selfcorrect_pyfunc") is None
    registered = execute_model_code("code_model_under_test")
    assert type(registered).__name__ == "SelfCorrectingPyfunc"
    assert isinstance(registered, mlflow.pyfunc.PythonModel)


def unused_registry() -> Registry:
    """A client for a server that does not exist: any registry call would fail."""
    uri = "http://127.0.0.1:9"
    return Registry(MlflowClient(uri, uri), uri, uri)


def test_deploy_input_errors_name_the_problem(tmp_path: Path) -> None:
    registry = unused_registry()
    with pytest.raises(DeployError, match=r"deploy constraints file not found: .*missing\.yaml"):
        deploy_self_correcting("models:/any/1", tmp_path / "missing.yaml", registry=registry,
                               workdir=tmp_path)
    document = {"model": {"uri": "models:/credit@candidate"},
                "audits": [{"kind": "demographic_parity", "protected": "sex", "privileged": 1,
                            "favorable_class": 1, "gamma": 0.8}]}
    with pytest.raises(DeployError, match="no 'deploy' section"):
        run_deploy(parse_config(document), registry=registry, model_name="credit",
                   model_version="1")
    with_deploy = {**document, "deploy": {"constraints": str(tmp_path / "c.yaml"),
                                          "registered_model": "credit"}}
    with pytest.raises(DeployError, match="needs a registered model version"):
        run_deploy(parse_config(with_deploy), registry=registry, model_name=None,
                   model_version=None)


def test_run_refuses_a_missing_constraints_file_before_auditing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "absent.yaml"
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "tracking": {"tracking_uri": "http://127.0.0.1:9"},
        "model": {"uri": "models:/credit@candidate"},
        "audits": [{"kind": "demographic_parity", "protected": "sex", "privileged": 1,
                    "favorable_class": 1, "gamma": 0.8}],
        "deploy": {"constraints": str(missing), "registered_model": "credit"},
    }))
    capsys.readouterr()
    assert main(["run", "--config", str(config), "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"certgate: error: deploy.constraints: constraints file not found: "
                            f"{missing}\n")


def test_self_correcting_variants_are_never_due_for_audit() -> None:
    from registry_hooks.tags import VARIANT_SELF_CORRECTING, VARIANT_TAG, is_due

    assert is_due({})
    assert not is_due({VARIANT_TAG: VARIANT_SELF_CORRECTING})

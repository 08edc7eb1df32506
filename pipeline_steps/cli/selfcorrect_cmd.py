"""``certgate selfcorrect``: correct logits under safe-ordering constraints, wrap a model.

* ``apply --constraints C --inputs X --logits Y [--json]``: correct a batch of logits (paper 004);
  ``X``/``Y`` are ``.npy`` arrays or ``.json`` lists of rows. The JSON output is
  ``{"logits": [[...]], "bottom": [...], "changed": [...]}``.
* ``wrap --model M --constraints C --out DIR``: write ``DIR/model.pt`` (TorchScript of the
  self-correcting network, checked against the eager module), ``DIR/constraints.yaml`` (the
  normalised constraints) and ``DIR/model.onnx`` when the ONNX exporter can express the module
  (otherwise the reason is printed). With ``--out models:/NAME`` the variant is registered
  instead as a new version of ``NAME`` (``pipeline_steps.deploy``; ``M`` may then also be a
  registry URI), and ``--alias`` (default ``safe``) is pointed at it.
* ``describe --constraints C``: the constraints in readable form.

The constraints assume the max-logit convention (predicted class = argmax); ``wrap
--negate-outputs`` converts argmin networks such as ACAS Xu.

``--network`` picks one network's constraints from files that assign them per network (the ACAS Xu
``properties.json``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline_steps.cli.inputs import read_model
from pipeline_steps.cli.output import JSON_HELP, emit_json
from verifier.errors import CertgateInputError
from verifier.text_files import read_text
from verifier.yaml_documents import dump_yaml

if TYPE_CHECKING:
    import torch

    from verifier.selfcorrect.scnet import SelfCorrectingNetwork

TORCHSCRIPT_CHECK_ROWS = 256
ON_BOTTOM_CHOICES = ("mark", "raise", "abstain")
"""``verifier.selfcorrect.scnet.ON_BOTTOM``, listed here so that ``certgate selfcorrect …
--help`` does not import torch; ``tests/test_cli_startup.py`` checks they agree."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "selfcorrect",
        help="self-correcting layer: correct logits, wrap a model (paper 004)",
        description="Enforce safe-ordering constraints on a classifier's logits at run time.",
    )
    verbs = parser.add_subparsers(dest="selfcorrect_command", metavar="VERB", required=True)

    apply = verbs.add_parser(
        "apply",
        help="correct a batch of logits",
        description="Correct LOGITS (one row per input row of INPUTS) so that every active "
        "constraint holds; rows where the constraints are unsatisfiable are flagged (bottom) "
        "and left unchanged.",
    )
    apply.add_argument("--constraints", required=True, help="constraint file (.yaml/.json)")
    apply.add_argument("--inputs", required=True, help="inputs x: .npy or .json list of rows")
    apply.add_argument("--logits", required=True, help="logits y: .npy or .json list of rows")
    apply.add_argument("--network", help="network whose constraints to use (per-network files)")
    apply.add_argument("--json", action="store_true", help=JSON_HELP)
    apply.set_defaults(func=run_apply)

    wrap = verbs.add_parser(
        "wrap",
        help="wrap a model in the SC-layer and export it",
        description="Write DIR/model.pt (TorchScript), DIR/constraints.yaml and, when "
        "exportable, DIR/model.onnx; or, with --out models:/NAME, register the wrapped model "
        "as a new version of NAME (pyfunc flavour) and set --alias on it.",
    )
    wrap.add_argument("--model", required=True,
                      help="network file (.onnx, .nnet, .json, .pt); with --out models:/NAME "
                      "also a model URI (models:/NAME/VERSION, models:/NAME@ALIAS, runs:/…)")
    wrap.add_argument("--constraints", required=True, help="constraint file (.yaml/.json)")
    wrap.add_argument("--out", required=True,
                      help="output directory, or models:/NAME to register a new version")
    wrap.add_argument("--alias", default="safe",
                      help="with --out models:/NAME: alias set on the new version (default safe)")
    wrap.add_argument("--tracking-uri",
                      help="with --out models:/NAME: MLflow tracking URI (default: "
                      "$MLFLOW_TRACKING_URI)")
    wrap.add_argument("--network", help="network whose constraints to use (per-network files)")
    wrap.add_argument(
        "--on-bottom",
        choices=ON_BOTTOM_CHOICES,
        default="mark",
        help="what to do where the constraints are unsatisfiable (default: mark)",
    )
    wrap.add_argument("--abstain-class", help="with --on-bottom abstain: class put on top")
    wrap.add_argument(
        "--negate-outputs",
        action="store_true",
        help="negate the network's outputs first (networks that predict the argmin, e.g. the "
        "ACAS Xu files; the constraints use the max-logit convention)",
    )
    wrap.add_argument("--json", action="store_true", help=JSON_HELP)
    wrap.set_defaults(func=run_wrap)

    describe = verbs.add_parser("describe", help="print constraints in readable form")
    describe.add_argument("--constraints", required=True, help="constraint file (.yaml/.json)")
    describe.add_argument("--num-classes", type=int, help="class count, if the file has none")
    describe.add_argument("--network", help="network whose constraints to use")
    describe.add_argument("--json", action="store_true", help=JSON_HELP)
    describe.set_defaults(func=run_describe)


def load_rows(path: str, option: str) -> np.ndarray:
    """A 2-D float array from ``.npy`` or a ``.json`` list of rows; errors name the option."""
    file = Path(path)
    suffix = file.suffix.lower()
    try:
        if suffix == ".npy":
            array = np.load(file, allow_pickle=False)
        elif suffix == ".json":
            array = np.array(json.loads(read_text(file)), dtype=np.float64)
        else:
            raise CertgateInputError(f"--{option} {path}: expected a .npy or .json file")
    except (ValueError, TypeError, json.JSONDecodeError) as error:
        raise CertgateInputError(
            f"--{option} {path}: cannot read a numeric array ({error})"
        ) from error
    if array.ndim != 2:
        raise CertgateInputError(f"--{option} {path}: expected rows (2-D), got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.floating):
        array = array.astype(np.float64)
    return array


def run_apply(args: argparse.Namespace) -> int:
    import torch

    from verifier.selfcorrect.layer import SelfCorrectingLayer
    from verifier.selfcorrect.loaders import load_constraints

    x = load_rows(args.inputs, "inputs")
    y = load_rows(args.logits, "logits")
    if x.shape[0] != y.shape[0]:
        raise CertgateInputError(f"--inputs has {x.shape[0]} rows but --logits has {y.shape[0]}")
    constraints = load_constraints(args.constraints, num_classes=y.shape[1], network=args.network)
    layer = SelfCorrectingLayer(constraints, y.shape[1])
    logits = torch.from_numpy(y)
    with torch.no_grad():
        corrected, bottom = layer(torch.from_numpy(x), logits)
    changed = (corrected != logits).any(dim=1)
    if args.json:
        payload = {
            "logits": corrected.tolist(),
            "bottom": bottom.tolist(),
            "changed": changed.tolist(),
        }
        emit_json(payload)
        return 0
    rows = y.shape[0]
    top_changed = corrected.argmax(dim=1) != logits.argmax(dim=1)
    print(f"{rows} row(s), {len(constraints)} constraint(s) over {y.shape[1]} classes:")
    print(f"  unchanged (already safe): {rows - int(changed.sum()) - int(bottom.sum())}")
    print(f"  corrected: {int(changed.sum())} (top class changed in {int(top_changed.sum())})")
    print(f"  bottom (constraints unsatisfiable, left unchanged): {int(bottom.sum())}")
    for row in changed.nonzero().flatten().tolist()[:10]:
        print(f"  row {row}: {_format_row(y[row])} -> {_format_row(corrected[row].numpy())}")
    for row in bottom.nonzero().flatten().tolist()[:10]:
        print(f"  row {row}: bottom")
    return 0


def _format_row(values: np.ndarray) -> str:
    return "[" + ", ".join(f"{value:.6g}" for value in values) + "]"


ONNX_NOT_EXPRESSIBLE = ("The self-correcting layer's control flow depends on each batch, "
                        "which the ONNX exporter cannot express.")
"""Why the exporter fails on every wrapped model (:mod:`verifier.selfcorrect.export`)."""
ONNX_WHAT_TO_DO = ("model.pt is the wrapped model: load it with torch.jit.load (no certgate "
                   "needed), or register it in MLflow with --out models:/NAME.")
"""What a user does when ``wrap`` writes no ``model.onnx``."""


def run_wrap(args: argparse.Namespace) -> int:
    import torch

    from verifier.selfcorrect.conventions import scored_module, scored_network
    from verifier.selfcorrect.export import (
        OnnxExportError,
        OnnxNotExpressible,
        export_onnx,
        save_torchscript,
    )
    from verifier.selfcorrect.loaders import load_constraints
    from verifier.selfcorrect.scnet import SelfCorrectingNetwork

    if args.out.startswith("models:"):
        return _register_wrapped(args)

    loaded = read_model(args.model)
    dtype = getattr(torch, loaded.dtype)
    network = scored_network(loaded.network, args.negate_outputs)
    constraints = load_constraints(
        args.constraints, num_classes=network.output_size, network=args.network,
        input_names=network.input_names,
    )
    scnet = SelfCorrectingNetwork(
        scored_module(loaded.network, args.negate_outputs, dtype),
        constraints,
        on_bottom=args.on_bottom,
        abstain_class=args.abstain_class,
        input_size=network.input_size,
    ).eval()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Any] = {}
    model_path = save_torchscript(scnet, out / "model.pt")
    _check_torchscript(scnet, model_path, network.input_size, dtype)
    written["model.pt"] = str(model_path)
    constraints_path = out / "constraints.yaml"
    constraints_path.write_text(
        dump_yaml(constraints.to_dict())
    )
    written["constraints.yaml"] = str(constraints_path)
    example = torch.zeros(2, network.input_size, dtype=dtype)
    onnx_error: str | None = None
    try:
        written["model.onnx"] = str(export_onnx(scnet, out / "model.onnx", example))
    except OnnxNotExpressible as error:
        onnx_error = f"{error}. {ONNX_NOT_EXPRESSIBLE} {ONNX_WHAT_TO_DO}"
    except OnnxExportError as error:
        onnx_error = f"{error}. {ONNX_WHAT_TO_DO}"
    if args.json:
        emit_json({"written": written, "onnx_error": onnx_error})
        return 0
    print(
        f"self-correcting network: {network.input_size} inputs -> {scnet.num_outputs} "
        f"outputs, {len(constraints)} constraint(s), on_bottom={args.on_bottom}"
    )
    for path in written.values():
        print(f"  wrote {path}")
    if onnx_error is not None:
        print(f"  model.onnx not written: {onnx_error}")
    return 0


def _register_wrapped(args: argparse.Namespace) -> int:
    """``wrap --out models:/NAME``: register the variant with the deploy step."""
    from pipeline_steps.deploy import deploy_self_correcting
    from registry_hooks.connection import connect, registry_errors

    name = args.out.removeprefix("models:/").strip("/")
    if not args.out.startswith("models:/") or not name or "/" in name or "@" in name:
        raise CertgateInputError(
            f"--out {args.out}: to register, give models:/NAME (no version or alias)"
        )
    with registry_errors("certgate selfcorrect wrap"), \
            tempfile.TemporaryDirectory(prefix="certgate-wrap-") as workdir:
        record = deploy_self_correcting(
            args.model, args.constraints, registry=connect(args.tracking_uri),
            target_name=name, alias=args.alias, on_bottom=args.on_bottom,
            abstain_class=args.abstain_class, constraints_network=args.network,
            negate=args.negate_outputs, workdir=Path(workdir),
        )
    if args.json:
        emit_json({"registered": {"name": record.name, "version": record.version,
                                  "alias": record.alias, "uri": record.uri}})
    else:
        print(record)
    return 0


def _check_torchscript(scnet: SelfCorrectingNetwork, path: Path, input_size: int,
                       dtype: torch.dtype) -> None:
    """The saved TorchScript model and SC-layer must reproduce the eager ones on random inputs
    in ``dtype``, the network's (logits, corrected logits and ⊥ flags, compared exactly)."""
    import torch

    from verifier.selfcorrect.export import load_torchscript

    loaded = load_torchscript(path)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(TORCHSCRIPT_CHECK_ROWS, input_size))).to(dtype)
    with torch.no_grad():
        logits = scnet.model(x)
        same = torch.equal(loaded.model(x), logits)
        expected, got = scnet.layer(x, logits), loaded.layer(x, logits)
    if not (same and torch.equal(expected[0], got[0]) and torch.equal(expected[1], got[1])):
        path.unlink(missing_ok=True)
        raise CertgateInputError(f"{path}: the TorchScript module disagrees with the eager one")


def run_describe(args: argparse.Namespace) -> int:
    from verifier.selfcorrect.loaders import load_constraints

    constraints = load_constraints(
        args.constraints, num_classes=args.num_classes, network=args.network
    )
    if args.json:
        emit_json({"constraints": len(constraints), "description": constraints.describe()})
    else:
        print(constraints.describe())
    return 0

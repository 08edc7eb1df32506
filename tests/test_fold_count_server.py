"""A batch-norm model logged with plain ``mlflow.pytorch.log_model`` (``pickle`` and the default
``pt2``) whose parity turns on one near-tie lattice point, through ``certgate run`` against a
real ``mlflow server``.

The model (``Linear → BatchNorm1d → ReLU → Linear``, float64) is folded by the converter, so
its bounds used to take the flat relative margin ``1e-9``: at the lattice point
``(sex 0, a 1, b 2)``, whose real class margin is ``+5e-9``, CROWN's interval of the logit
difference (about ``±1.8e-8`` around it) held 0, the point stayed undecided, and the parity
ratio's interval ``[7/10, 8/10]`` straddled ``γ = 0.75`` (verdict unknown, the gate
refused). With the fold's roundings counted the point is decided and the audit proves
``8/10 > 0.75``. Oracle: exact
enumeration of the 50 lattice points, each class read from the UNFOLDED model in 300-bit
interval arithmetic (real square roots), the ratio in ``Fraction``. The same run with the
flat margin put back is the "before" (unknown).
"""

from __future__ import annotations

import itertools
import json
import uuid
from fractions import Fraction
from pathlib import Path

import mlflow
import numpy as np
import pytest
import torch
from mlflow_server import run_cli, write_server_config

import verifier.bounds.affine as affine
from registry_hooks.certgate_model import pinned_requirements
from registry_hooks.connection import Registry, connect
from tests.test_binding_server import register_unnamed
from tests.test_fold_count import _ends, _real_outputs
from verifier.numerics import SOUNDNESS_REL_MARGIN
from verifier.population import population_from_json, save_population

pytest_plugins = ["mlflow_server"]

TIE = (0.0, 1.0, 2.0)
MARGIN = Fraction(5, 10**9)
GAMMA = 0.75


@pytest.fixture(scope="module")
def registry(mlflow_server) -> Registry:
    return connect(mlflow_server.url)


def _model() -> torch.nn.Sequential:
    """The batch-norm model, its last bias set so that the real logit difference at
    :data:`TIE` is :data:`MARGIN` (to within the bias's rounding, read back exactly)."""
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
                                 torch.nn.Linear(4, 2)).double().eval()
    with torch.no_grad():
        module[0].weight.copy_(torch.tensor([[-0.3, 0.71, -0.2], [0.4, 0.13, 0.52],
                                             [-0.9, -0.35, 0.27], [-0.15, 0.45, 0.61]]))
        module[0].bias.copy_(torch.tensor([0.1, -0.2, 0.3, 0.05]))
        module[1].running_mean.copy_(torch.tensor([0.7, 0.4, 0.2, 1.1]))
        module[1].running_var.copy_(torch.tensor([0.3, 0.8, 1.7, 0.45]))
        module[1].weight.copy_(torch.tensor([1.2, 0.8, 1.1, 0.9]))
        module[1].bias.copy_(torch.tensor([4.0, 4.0, 4.0, 4.0]))
        module[3].weight.copy_(torch.tensor([[0.5, -0.3, 0.2, 0.1], [-0.4, 0.6, 0.35, -0.25]]))
        module[3].bias.zero_()
        outputs = _real_outputs(module, np.array(TIE))
        low, _ = _ends(outputs[1] - outputs[0])
        module[3].bias[1] = float(MARGIN - low)
    return module


def _population(tmp_path: Path) -> Path:
    uniform = {"kind": "discrete", "values": [0, 1, 2, 3, 4], "probabilities": [0.2] * 5}
    path = tmp_path / "population.json"
    save_population(population_from_json({
        "format": "certgate.population/v1",
        "features": [{"name": "sex", "kind": "binary"},
                     {"name": "a", "kind": "integer", "domain": [0, 4]},
                     {"name": "b", "kind": "integer", "domain": [0, 4]}],
        "distribution": {"kind": "product", "factors": [
            {"columns": ["sex"], "distribution": {
                "kind": "discrete", "values": [0, 1], "probabilities": [0.5, 0.5]}},
            {"columns": ["a"], "distribution": uniform},
            {"columns": ["b"], "distribution": uniform}]}}), path)
    return path


def _exact_ratio(module: torch.nn.Module) -> tuple[Fraction, Fraction]:
    """P[class 1 | sex 0] / P[class 1 | sex 1] over the uniform lattice, every class read
    from the unfolded model in interval arithmetic; and the tie point's real margin's
    lower end."""
    favourable = {0: 0, 1: 0}
    tie_low = Fraction(0)
    for point in itertools.product(range(2), range(5), range(5)):
        outputs = _real_outputs(module, np.array(point, dtype=np.float64))
        low, high = _ends(outputs[1] - outputs[0])
        assert low > 0 or high <= 0
        favourable[point[0]] += low > 0
        if point == TIE:
            tie_low = low
    return Fraction(favourable[0], favourable[1]), tie_low


def _register(registry: Registry, module: torch.nn.Module, name: str, serialization: str
              ) -> None:
    """Plain ``mlflow.pytorch.log_model``: ``pickle`` as the binding tests log it, or MLflow's
    default ``pt2`` (an exported program, which needs an input example)."""
    if serialization == "pickle":
        register_unnamed(registry, module, name)
        return
    mlflow.set_tracking_uri(registry.tracking_uri)
    info = mlflow.pytorch.log_model(module, name="model", input_example=np.zeros((2, 3)),
                                    pip_requirements=pinned_requirements("pytorch"),
                                    registered_model_name=name)
    registry.client.set_registered_model_alias(name, "candidate",
                                               str(info.registered_model_version))


def _audit(registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str],
           module: torch.nn.Module, population: Path, serialization: str) -> tuple[int, dict]:
    name = f"foldcount_{uuid.uuid4().hex[:8]}"
    _register(registry, module, name, serialization)
    parity = {"kind": "demographic_parity", "protected": "sex", "privileged": 1,
              "favorable_class": 1, "gamma": GAMMA, "timeout_s": 60}
    config = write_server_config(
        tmp_path, registry.tracking_uri,
        {"uri": f"models:/{name}@candidate", "population_uri": str(population),
         "input_names": ["sex", "a", "b"]}, [parity])
    code, out, err = run_cli(capsys, "run", "--config", str(config), "--no-progress", "--json")
    assert code in (0, 1), (out, err)
    return code, json.loads(out.strip().splitlines()[-1])["audit"]["audits"][
        "demographic_parity"]


@pytest.mark.parametrize("serialization", ["pickle", "pt2"])
def test_a_near_tie_lattice_point_of_a_batch_norm_model_is_decided(
        registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, serialization: str) -> None:
    module = _model()
    ratio, tie_low = _exact_ratio(module)
    assert ratio == Fraction(8, 10) and ratio > GAMMA
    assert 0 < tie_low < Fraction(1, 10**8)
    population = _population(tmp_path)

    with monkeypatch.context() as patch:
        patch.setattr(affine, "_network_rel_margin", lambda _: SOUNDNESS_REL_MARGIN)
        code, before = _audit(registry, tmp_path, capsys, module, population, serialization)
    assert code == 1 and before["verdict"] == "unknown", before
    low, high = before["ratio"]
    assert low <= 0.7 and high >= 0.8

    code, after = _audit(registry, tmp_path, capsys, module, population, serialization)
    assert code == 0 and after["verdict"] == "satisfied", after
    low, high = after["ratio"]
    assert Fraction(low) <= ratio <= Fraction(high)
    assert high - low < 1e-9

"""Paper 000 §2: the toy credit network (x01 credit amount, x02 age, protected)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from verifier.causal import CausalSettings, build_problem, certify_causal_fairness, load_libra_spec
from verifier.convert import load_network

TOY = Path("/work/shared/benchmarks/libra/toy")
BIAS_START = 0.5354  # paper: biased for x01 in [0.5354, 0.75] inside the analysed 75 %

pytestmark = pytest.mark.skipif(not TOY.is_dir(), reason="Libra benchmark folder not present")


def _problem(query=None):
    network = load_network(TOY / "networks" / "toy.json")
    spec = load_libra_spec(TOY / "specs" / "toy.json")
    return network, build_problem(network, **spec, query=query)


def _grid_share(network, low: float, high: float) -> float:
    x = np.linspace(low, high, 4001)
    s = np.linspace(0.0, 1.0, 401)
    rows = np.stack(np.meshgrid(x, s, indexing="ij"), axis=-1).reshape(-1, 2)
    classes = network.classify(rows).reshape(x.size, s.size)
    return float((classes.min(axis=1) != classes.max(axis=1)).mean())


def test_libra_budget_semantics_reproduce_the_paper() -> None:
    """L = 0.25, U = 2 without witness sampling: [0, 0.5] fair, [0.5, 0.75] biased,
    [0.75, 1] excluded; the biased part of the analysed 75 % is x01 in (0.5354.., 0.75]."""
    network, problem = _problem()
    certificate = certify_causal_fairness(
        problem, CausalSettings(min_edge=0.25, max_unstable=2, target_width=1e-4,
                                witness_sampling=False),
    )
    details = certificate.details
    assert certificate.verdict == "biased"
    assert details["excluded_fraction"] == pytest.approx(0.25)
    low, high = certificate.bounds["biased_share"]
    assert low == pytest.approx(0.75 - BIAS_START, abs=2e-4)
    assert high == pytest.approx(low + 0.25, abs=2e-4)
    assert details["fair_fraction"] == pytest.approx(BIAS_START, abs=2e-4)
    for region in details["regions"]:
        start, end = region["box"]["x01"]
        assert start >= BIAS_START - 1e-3 and end <= 0.75
    for witness in details["witnesses"]:
        assert network.classify(np.array([witness["x"], witness["x_other"]])).tolist() == \
            witness["classes"]


def test_whole_space_share_matches_a_brute_force_grid() -> None:
    network, problem = _problem()
    certificate = certify_causal_fairness(
        problem, CausalSettings(min_edge=0.0, max_unstable=2, target_width=1e-3)
    )
    low, high = certificate.bounds["biased_share"]
    grid = _grid_share(network, 0.0, 1.0)
    assert high - low <= 1e-3
    assert low - 1e-3 <= grid <= high + 1e-3
    assert certificate.details["excluded_fraction"] <= 1e-6


def test_query_on_the_analysed_part() -> None:
    network, problem = _problem(query={"x01": (0.0, 0.75)})
    assert problem.query_fraction() == pytest.approx(0.75)
    certificate = certify_causal_fairness(
        problem, CausalSettings(min_edge=0.0, max_unstable=2, target_width=1e-4)
    )
    low, high = certificate.bounds["biased_share"]
    whole_space = (low * 0.75, high * 0.75)
    assert whole_space[0] <= 0.75 - BIAS_START + 1e-4
    assert whole_space[1] >= 0.75 - BIAS_START - 1e-4
    assert low <= _grid_share(network, 0.0, 0.75) <= high + 1e-3

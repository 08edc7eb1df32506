"""Finite causal queries decided by exact enumeration (``verifier.causal.enumeration``), against
brute force in rational arithmetic over every point and against the partitioning path."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_causal_ties import _oracle_class
from verifier.causal import CausalSettings, FairnessProblem, build_problem, certify_causal_fairness
from verifier.causal.enumeration import enumeration_work, point_count
from verifier.convert import save_network
from verifier.network import Layer, Network
from verifier.population import Factor, Product, Uniform

ROOT = Path(__file__).resolve().parent.parent
PARTITIONING = CausalSettings(timeout_s=60.0, enumeration_work=0)


def _brute_force(problem: FairnessProblem, network: Network) -> tuple[int, int]:
    """``(biased points, points)`` of a finite query, every point at every protected value."""
    grids = [list(np.arange(problem.query_lower[i], problem.query_upper[i] + 1))
             for i in problem.continuous]
    grids += [[members for members, ok in zip(group, allowed, strict=True) if ok]
              for group, allowed in zip(problem.onehot_groups, problem.query_allowed,
                                        strict=True)]
    values = problem.protected_cells[:, 0, :]
    biased = total = 0
    for combination in itertools.product(*grids):
        point = np.zeros(problem.inputs)
        for index, value in zip(problem.continuous, combination, strict=False):
            point[index] = value
        for member in combination[len(problem.continuous):]:
            point[member] = 1.0
        classes = set()
        for value in values:
            point[list(problem.protected)] = value
            classes.add(_oracle_class(network, point))
        biased += len(classes) > 1
        total += 1
    return biased, total


@st.composite
def finite_problems(draw: st.DrawFn) -> tuple[Network, FairnessProblem]:
    """A small ReLU network on integer inputs (small ranges), at most one non-protected
    one-hot group, and an integer or one-hot protected feature; weights on a grid of
    quarters, so that exact ties (a logit exactly 0, two equal outputs) occur."""
    integers = draw(st.integers(1, 3))
    group = draw(st.integers(0, 3))
    protected_onehot = draw(st.booleans())
    inputs = integers + group + (3 if protected_onehot else 1)
    hidden = draw(st.integers(1, 5))
    outputs = draw(st.sampled_from([1, 2, 3]))
    quarter = st.integers(-6, 6).map(lambda k: k / 4)
    first = np.array(draw(st.lists(quarter, min_size=hidden * inputs, max_size=hidden * inputs)))
    last = np.array(draw(st.lists(quarter, min_size=outputs * hidden,
                                  max_size=outputs * hidden)))
    biases = np.array(draw(st.lists(quarter, min_size=hidden + outputs,
                                    max_size=hidden + outputs)))
    network = Network([Layer(first.reshape(hidden, inputs), biases[:hidden], "relu"),
                       Layer(last.reshape(outputs, hidden), biases[hidden:], "none")])
    names = network.input_names
    highs = draw(st.lists(st.integers(0, 3), min_size=integers, max_size=integers))
    domain = {names[i]: (0.0, float(high)) for i, high in enumerate(highs)}
    groups = [list(names[integers:integers + group])] if group >= 2 else []
    integer_names = list(names[:integers]) + ([names[integers]] if group == 1 else [])
    if group == 1:
        domain[names[integers]] = (0.0, 1.0)
    start = integers + group
    if protected_onehot:
        protected = list(names[start:start + 3])
        problem = build_problem(network, protected, protected_kind="one_hot",
                                onehot_groups=groups, domain=domain,
                                integer_inputs=integer_names)
    else:
        top = draw(st.integers(1, 3))
        domain[names[start]] = (0.0, float(top))
        problem = build_problem(network, [names[start]], onehot_groups=groups, domain=domain,
                                integer_inputs=[*integer_names, names[start]])
    return network, problem


@settings(max_examples=40, deadline=None)
@given(finite_problems())
def test_enumeration_equals_brute_force_and_the_partitioning(case) -> None:
    network, problem = case
    biased, total = _brute_force(problem, network)
    assert point_count(problem) == total
    certificate = certify_causal_fairness(problem, CausalSettings(timeout_s=60.0))
    enumerated = certificate.details["enumerated"]
    assert (enumerated["points"], enumerated["biased"]) == (total, biased)
    assert enumerated["fair"] == total - biased
    low, high = certificate.bounds["biased_share"]
    assert Fraction(low) <= Fraction(biased, total) <= Fraction(high)
    assert high == np.nextafter(low, 2.0) or low == high
    assert certificate.verdict == ("biased" if biased else "fair")
    assert certificate.details["witness_count"] == biased
    for witness in certificate.details["witnesses"]:
        a, b = np.array(witness["x"]), np.array(witness["x_other"])
        others = [i for i in range(problem.inputs) if i not in problem.protected]
        assert np.array_equal(a[others], b[others])
        assert [_oracle_class(network, a), _oracle_class(network, b)] == witness["classes"]
    partitioned = certify_causal_fairness(problem, PARTITIONING)
    assert "enumerated" not in partitioned.details
    p_low, p_high = partitioned.bounds["biased_share"]
    assert p_low <= high and low <= p_high  # both enclose the exact share
    assert p_high - p_low == pytest.approx(0.0, abs=1e-12)  # refined down to points
    assert set(partitioned.details) <= set(certificate.details)
    assert partitioned.settings == certificate.settings
    assert set(partitioned.cost) - {"coverage_done_s"} <= set(certificate.cost)


def test_exact_ties_are_classed_by_the_classify_rule() -> None:
    """``z = x0 − x1 + x2/2`` (``x2`` protected): at ``x0 = x1`` the logit is exactly 0
    (class 0) with the protected input at 0 and 0.5 (class 1) at 1; elsewhere ``|x0 − x1|``
    is at least 1 and the class does not change."""
    network = Network([Layer(np.array([[1.0, -1.0, 0.5]]), np.zeros(1), "none")])
    problem = build_problem(network, ["x2"], domain={"x0": (0, 3), "x1": (0, 3), "x2": (0, 1)},
                            integer_inputs="all")
    certificate = certify_causal_fairness(problem, CausalSettings())
    assert certificate.details["enumerated"]["biased"] == _brute_force(problem, network)[0] == 4
    assert certificate.bounds["biased_share"] == (0.25, 0.25)  # 4 / 16, a float: exact
    view = network.as_classifier()
    for witness in certificate.details["witnesses"]:
        pair = np.array([witness["x"], witness["x_other"]])
        assert view.classify(pair).tolist() == witness["classes"]


def test_queries_that_are_not_finite_or_too_large_are_partitioned() -> None:
    rng = np.random.default_rng(3)
    network = Network([Layer(rng.normal(size=(4, 3)), rng.normal(size=4), "relu"),
                       Layer(rng.normal(size=(1, 4)), np.zeros(1), "none")])
    continuous = build_problem(network, ["x2"], domain={"x0": (0, 3), "x2": (0, 1)},
                               integer_inputs=["x0", "x2"])
    assert point_count(continuous) is None
    certificate = certify_causal_fairness(continuous, CausalSettings(timeout_s=20.0))
    assert "enumerated" not in certificate.details
    assert certificate.algorithm.startswith("input partitioning")
    large = build_problem(network, ["x2"], domain={"x0": (0, 3), "x1": (0, 3), "x2": (0, 1)},
                          integer_inputs="all")
    work = enumeration_work(large, point_count(large))
    assert certify_causal_fairness(large, CausalSettings(enumeration_work=work)) \
        .details["enumerated"]["points"] == 16
    below = certify_causal_fairness(large, CausalSettings(enumeration_work=work - 1))
    assert "enumerated" not in below.details


def test_the_enumerated_cli_run_imports_no_torch(tmp_path: Path) -> None:
    """``verify causal-fairness --json`` on a finite query (FairQuant's set-up: integer
    inputs, chosen protected values) neither imports torch nor scipy."""
    rng = np.random.default_rng(5)
    network = Network([Layer(rng.normal(size=(6, 4)), rng.normal(size=6), "relu"),
                       Layer(rng.normal(size=(1, 6)), np.zeros(1), "none")])
    model = tmp_path / "net.json"
    save_network(network, model)
    argv = ["pipeline_steps", "verify", "causal-fairness", "--model", str(model),
            "--protected", "x3", "--domain", "x0=0:1,x1=0:9,x2=0:2,x3=0:1",
            "--integer-inputs", "all", "--protected-values", "0,1", "--json"]
    code = ("import runpy, sys\n"
            f"sys.argv = {argv!r}\n"
            "try:\n    runpy.run_module('pipeline_steps', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print(sorted(n for n in ('torch', 'scipy', 'verifier.causal.analysis') "
            "if n in sys.modules), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert '"partitions": 60' in result.stdout, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "[]"


def test_the_population_share_of_an_enumerated_query() -> None:
    """Uniform densities over ``[lo − ½, hi + ½]`` give every integer point the same mass, so
    the population share equals the exact uniform one; the partitioning path agrees."""
    network = Network([Layer(np.array([[1.0, -1.0, 0.5]]), np.zeros(1), "none")])
    problem = build_problem(network, ["x2"], domain={"x0": (0, 3), "x1": (0, 3), "x2": (0, 1)},
                            integer_inputs="all")
    population = Product(factors=[
        Factor(columns=[name], distribution=Uniform(lower=-0.5, upper=high + 0.5))
        for name, high in (("x0", 3), ("x1", 3), ("x2", 1))])
    enumerated = certify_causal_fairness(problem, CausalSettings(), population=population)
    partitioned = certify_causal_fairness(problem, PARTITIONING, population=population)
    low, high = enumerated.bounds["biased_share_population"]
    assert "enumerated" in enumerated.details
    assert low <= 0.25 <= high and high - low < 1e-9
    p_low, p_high = partitioned.bounds["biased_share_population"]
    assert p_low <= high and low <= p_high

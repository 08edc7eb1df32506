"""An exact-probability certificate holds the probability in real arithmetic, float rounding
included, or proves nothing.

Region enumeration integrates each cell in float64 over Qhull's float vertices, a vertex off
by about an ulp of its coordinates. A cell whose mass lies within a few ulps (a narrow
uniform population far from 0, a density spike at the decision boundary) is then integrated
with an error far above the old ``1e-6`` allowance, and the old certificates ``[p − 1e-6,
p + 1e-6]`` missed the truth and passed a gate the model fails. The oracles are exact: each
case is one input, a linear logit ``3x − c`` (class 1 iff ``3x >= c``, ties included) and a
piecewise-constant population, so the truth is a ratio of interval lengths of the float
data read as rationals (:class:`fractions.Fraction`).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from pipeline_steps.cli import main
from pipeline_steps.report import AuditSection, ReportData, render_report
from verifier.audits import run_audit
from verifier.audits.local_robustness import LocalRobustnessSettings
from verifier.convert import save_network
from verifier.network import Layer, Network
from verifier.population import (
    Discrete,
    Feature,
    PopulationModel,
    Uniform,
    save_population,
)
from verifier.population.piecewise import Leaf, PiecewiseDensity
from verifier.population.product import Factor, Product


def line(offset: float) -> Network:
    """One logit ``3x − offset``: class 1 exactly where ``x >= offset / 3`` (real
    arithmetic; ``offset / 3`` is rarely a float)."""
    return Network([Layer(np.array([[3.0]]), np.array([-offset]))], ["x"], ["logit"])


def piecewise(cuts: list[float], densities: list[float]) -> PopulationModel:
    leaves = [Leaf(lower=[a], upper=[b], constant=c)
              for a, b, c in zip(cuts, cuts[1:], densities, strict=False)]
    return PopulationModel(features=[Feature(name="x", kind="continuous",
                                             domain=[cuts[0], cuts[-1]])],
                           distribution=PiecewiseDensity(leaves=leaves))


def share_above(cuts: list[float], densities: list[float], offset: float) -> Fraction:
    """``P(3x >= offset)`` under the piecewise-constant density, exactly."""
    threshold = Fraction(offset) / 3
    total = above = Fraction(0)
    for a, b, c in zip(map(Fraction, cuts), map(Fraction, cuts[1:]), map(Fraction, densities),
                       strict=False):
        total += c * (b - a)
        above += c * max(Fraction(0), b - max(a, threshold))
    return above / total


def half_plane_area(polygon: list[tuple[Fraction, Fraction]], normal: tuple[int, int],
                    level: Fraction) -> Fraction:
    """Area of the convex ``polygon``'s part where ``normal · p >= level``, exactly (clip,
    then the shoelace formula)."""
    kept = []
    for p, q in zip(polygon, polygon[1:] + polygon[:1], strict=True):
        above_p = normal[0] * p[0] + normal[1] * p[1] - level
        above_q = normal[0] * q[0] + normal[1] * q[1] - level
        if above_p >= 0:
            kept.append(p)
        if (above_p >= 0) != (above_q >= 0):
            t = above_p / (above_p - above_q)
            kept.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
    twice = sum(p[0] * q[1] - q[0] * p[1] for p, q in zip(kept, kept[1:] + kept[:1],
                                                          strict=True))
    return abs(twice) / 2


def audit(network: Network, population: PopulationModel, low: float, high: float,
          threshold: float):
    settings = LocalRobustnessSettings(kind="local_robustness", center=[(low + high) / 2],
                                       epsilon=(high - low) / 2, expected_class=1,
                                       min_probability=threshold, timeout_s=10)
    return run_audit(settings, network, population)


def spike(ulps: int, mass: float) -> tuple[list[float], list[float]]:
    """On [0, 1]: ``mass`` within ``ulps`` floats either side of fl(1/3), the rest uniform."""
    below = above = 1 / 3
    for _ in range(ulps):
        below, above = math.nextafter(below, 0.0), math.nextafter(above, 1.0)
    return [0.0, below, above, 1.0], [1 - mass, mass / (above - below), 1 - mass]


@pytest.mark.parametrize(("offset", "width"), [(1e7, 1e-6), (1e6, 1e-6), (1e7, 1e-5)])
def test_a_narrow_uniform_far_from_zero_is_not_passed_on_float(offset: float,
                                                               width: float) -> None:
    """U(offset, offset + width), class 1 above 30 % of the width: the float value is off by
    about 1e-5 … 1e-3 of the truth, so a threshold between the two was certified on the
    wrong side (``satisfied`` for a model that fails it, or ``violated`` for one that
    passes; on the old code every one of these fails)."""
    low, high = offset, offset + width
    logit_offset = 3 * (low + 0.3 * width)
    cuts, densities = [low, high], [1 / (high - low)]
    truth = share_above(cuts, densities, logit_offset)
    population = PopulationModel(
        features=[Feature(name="x", kind="continuous", domain=[low, high])],
        distribution=Product(factors=[Factor(columns=["x"],
                                             distribution=Uniform(lower=low, upper=high))]))
    network = line(logit_offset)
    computed = audit(network, population, low, high, 0.5).details["computed_probability"]
    between = float((truth + Fraction(computed)) / 2)
    certificate = audit(network, population, low, high, between)
    bound_low, bound_high = certificate.bounds["probability"]
    assert bound_low <= truth <= bound_high
    assert certificate.details["proven"] is False
    assert certificate.details["proven_by"] == "box branching (PV)"
    assert certificate.verdict in ("unknown", "satisfied" if truth >= between else "violated")


def test_a_narrow_square_far_from_zero_is_not_passed_on_float() -> None:
    """The same in two dimensions, where the vertices are Qhull's: x, y ~ U(1e7, 1e7 + 1e-6)
    independent, class 1 iff x + 2y >= c; the truth is the clipped square's area in
    rationals (0.79691…), the float value was 0.79447 (an error of 2.4e-3), so a model that
    meets 0.796 was certified ``violated``."""
    low, high = 1e7, 1e7 + 1e-6
    offset = 3 * (low + 0.3 * (high - low))
    network = Network([Layer(np.array([[1.0, 2.0]]), np.array([-offset]))], ["x", "y"],
                      ["logit"])
    population = PopulationModel(
        features=[Feature(name=name, kind="continuous", domain=[low, high])
                  for name in ("x", "y")],
        distribution=Product(factors=[Factor(columns=[name],
                                             distribution=Uniform(lower=low, upper=high))
                                      for name in ("x", "y")]))
    side_low, side_high = Fraction(low), Fraction(high)
    square = [(side_low, side_low), (side_high, side_low), (side_high, side_high),
              (side_low, side_high)]
    truth = half_plane_area(square, (1, 2), Fraction(offset)) / (side_high - side_low) ** 2
    settings = LocalRobustnessSettings(kind="local_robustness", center=[(low + high) / 2] * 2,
                                       epsilon=(high - low) / 2, expected_class=1,
                                       min_probability=0.7960, timeout_s=10)
    certificate = run_audit(settings, network, population)
    bound_low, bound_high = certificate.bounds["probability"]
    assert bound_low <= truth <= bound_high
    assert certificate.verdict in ("unknown", "satisfied")


def test_a_row_composed_in_float_is_not_passed_on_float() -> None:
    """The rows of a region past the first layer are float products: here the logit is
    ``relu(0.1x) − 2 relu(0.2x) + relu(0.3x) + 1e-17`` on x ~ U(0, 1), whose slope is
    fl(0.1) − 2 fl(0.2) + fl(0.3) = −2.78e-17 exactly but −5.55e-17 in float, so class 1
    (logit >= 0) holds on [0, 0.36…] in real arithmetic and on [0, 0.18…] in float. The old
    certificate was [0.180143, 0.180145]."""
    network = Network([Layer(np.array([[0.1], [0.2], [0.3]]), np.zeros(3), "relu"),
                       Layer(np.array([[1.0, -2.0, 1.0]]), np.array([1e-17]))], ["x"],
                      ["logit"])
    slope = Fraction(0.1) - 2 * Fraction(0.2) + Fraction(0.3)
    truth = Fraction(1e-17) / -slope
    assert 0.36 < truth < 0.361
    population = PopulationModel(
        features=[Feature(name="x", kind="continuous", domain=[0, 1])],
        distribution=Product(factors=[Factor(columns=["x"],
                                             distribution=Uniform(lower=0.0, upper=1.0))]))
    certificate = audit(network, population, 0.0, 1.0, 0.3)
    low, high = certificate.bounds["probability"]
    assert low <= truth <= high
    assert certificate.verdict in ("unknown", "satisfied")


def test_a_density_spike_at_the_boundary_is_not_passed_on_float() -> None:
    """Half the mass within 256 ulps of 1/3, the boundary of ``3x >= 1``: the truth is
    0.58300781…, the float value 0.58333333… (an error of 3.3e-4), certified ``satisfied``
    at 0.5833 before. The spike's cell used to be integrated with an error relative to its
    ends (1.2e13 · 1e-12, the whole mass), so box branching was refused ("precision must
    be positive") and the certificate was [0, 1]; its width is now the only rounding, and
    branching proves the mass off the spike: [1/3, 5/6], which decides 0.3."""
    cuts, densities = spike(256, 0.5)
    truth = share_above(cuts, densities, 1.0)
    assert abs(float(truth) - 0.5830078125) < 1e-9
    certificate = audit(line(1.0), piecewise(cuts, densities), 0.0, 1.0, 0.5833)
    low, high = certificate.bounds["probability"]
    assert low <= truth <= high
    assert certificate.verdict == "unknown"
    assert certificate.details["float_verdict"] == "satisfied"
    assert "proof_refused" not in certificate.details
    assert high - low < 0.5 + 1e-9
    passed = audit(line(1.0), piecewise(cuts, densities), 0.0, 1.0, 0.3)
    assert passed.verdict == "satisfied" and passed.bounds["probability"][0] <= truth


@pytest.mark.parametrize("mass", [1e-12, 1e-300, 5e-324])
def test_a_precondition_of_vanishing_mass_is_branched_not_refused(mass: float) -> None:
    """P(class 1 | x = 1) for ``y − 0.1x − 0.2 > 0``, y ~ U(0, 1), P(x = 1) = ``mass``: 7/10
    in closed form. At 5e-324 the precondition's mass has lower end 0 and branching was
    refused ("precision must be positive"); it now runs and says why it ends at [0, 1]."""
    network = Network([Layer(np.array([[-0.1, 1.0]]), np.array([-0.2]))], ["x", "y"],
                      ["logit"])
    population = PopulationModel(
        features=[Feature(name="x", kind="binary", domain=[0, 1]),
                  Feature(name="y", kind="continuous", domain=[0, 1])],
        distribution=Product(factors=[
            Factor(columns=["x"], distribution=Discrete(values=[0, 1],
                                                        probabilities=[1 - mass, mass])),
            Factor(columns=["y"], distribution=Uniform(lower=0.0, upper=1.0))]))
    truth = Fraction(7, 10)
    for threshold, verdict in ((0.6, "satisfied"), (0.8, "violated")):
        settings = LocalRobustnessSettings(kind="local_robustness", center=[1.0, 0.5],
                                           epsilon=0.5, expected_class=1,
                                           min_probability=threshold, timeout_s=2)
        certificate = run_audit(settings, network, population)
        low, high = certificate.bounds["probability"]
        assert low <= truth <= high
        assert "proof_refused" not in certificate.details
        if mass < 1e-320:
            assert certificate.verdict == "unknown"
            assert certificate.details["precondition_mass"][0] == 0.0
        else:
            assert certificate.verdict == verdict


def test_the_report_shows_the_float_value_beside_the_proof() -> None:
    """The run's HTML report names the unproven float value and its verdict."""
    cuts, densities = spike(256, 0.5)
    certificate = audit(line(1.0), piecewise(cuts, densities), 0.0, 1.0, 0.5833)
    settings = LocalRobustnessSettings(kind="local_robustness", center=[0.5], epsilon=0.5,
                                       expected_class=1, min_probability=0.5833)
    page = render_report(ReportData(
        model_uri="line.json", model_name="line", model_version="1", run_id="r",
        audits=[AuditSection("spike", settings.model_dump(mode="json"), settings.requirement,
                             certificate, "undecided", None)],
        domain_checks=[], data_validation=[], gate_preview="failed"))
    for row in ("<td>proven</td><td>False</td>", "<td>float_verdict</td><td>satisfied</td>",
                "<td>computed_probability</td>", "<td>float_interval</td>"):
        assert row in page


def test_the_command_line_reports_the_float_value_beside_the_proof(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The spike through ``certgate verify local-robustness``: exit 1 (not proven), the
    certified interval holds the truth, the float interval and ``proven: false`` are
    printed. The run is never decided, so it ends at its budget: 10 s, not the verb's 300-s
    default."""
    cuts, densities = spike(256, 0.5)
    truth = share_above(cuts, densities, 1.0)
    save_network(line(1.0), tmp_path / "line.json")
    save_population(piecewise(cuts, densities), tmp_path / "spike.json")
    code = main(["verify", "local-robustness", "--model", str(tmp_path / "line.json"),
                 "--population", str(tmp_path / "spike.json"), "--center", "0.5",
                 "--epsilon", "0.5", "--expected-class", "1", "--min-probability", "0.5833",
                 "--timeout", "10", "--json", "--no-progress"])
    document = json.loads(capsys.readouterr().out)
    low, high = document["probability_interval"]
    assert code == 1
    assert document["verdict"] == "unknown"
    assert document["proven"] is False
    assert low <= truth <= high
    assert document["float_interval"][0] > truth  # the engineering margin is not a bound


def test_a_proven_result_keeps_its_verdict() -> None:
    """A network on an all-discrete population is decided by box branching (PV's certified
    ends): proven, and judged on that interval. x ∈ {0, 1, 2, 3} with P(x = 0) = 0.4: the
    truth P(3x >= 1) = 0.6 exactly."""
    population = PopulationModel(
        features=[Feature(name="x", kind="integer", domain=[0, 3])],
        distribution=Product(factors=[Factor(columns=["x"], distribution=Discrete(
            values=[0, 1, 2, 3], probabilities=[0.4, 0.3, 0.2, 0.1]))]))
    truth = 1 - Fraction(0.4) / (Fraction(0.4) + Fraction(0.3) + Fraction(0.2)
                                 + Fraction(0.1))
    certificate = audit(line(1.0), population, 0.0, 3.0, 0.55)
    low, high = certificate.bounds["probability"]
    assert certificate.details["proven"] is True
    assert low <= truth <= high
    assert certificate.verdict == "satisfied"


def test_the_proof_needs_a_threshold_and_a_budget() -> None:
    """``prove`` attaches box branching's proof only with a threshold to decide and a
    finite budget; the proof holds the exact share P(3x >= 1) = 2/3 on U(0, 1) and leaves
    the float value as it was."""
    from verifier.wmi import local_robustness

    population = piecewise([0.0, 1.0], [1.0])
    truth = share_above([0.0, 1.0], [1.0], 1.0)
    assert truth == Fraction(2, 3)
    without_threshold = local_robustness(line(1.0), population, [0.5], 0.5, 1, timeout_s=5,
                                         prove=True)
    without_budget = local_robustness(line(1.0), population, [0.5], 0.5, 1, stop_at=0.5,
                                      prove=True)
    assert without_threshold.proof is None and without_budget.proof is None
    result = local_robustness(line(1.0), population, [0.5], 0.5, 1, stop_at=0.5, timeout_s=5,
                              prove=True)
    assert result.proven is False and result.proof is not None and result.proof.proven
    assert result.proof.probability_lower <= truth <= result.proof.probability_upper
    assert result.probability == without_threshold.probability

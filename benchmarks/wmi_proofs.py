"""The proven interval of exact-probability audits whose probability region enumeration
computed in float: each case's truth (closed form or exact rationals), the certificate's
proven interval, its verdict, the float verdict and the audit's CPU seconds.

The cases are the tests' closed forms (``tests/test_pipeline_audit_kinds.py``: class 1 iff
``x + 0.5 s > 0.75`` on the unit square; ``tests/test_wmi_audit_intervals.py``: a normal
population's envelopes) and the red-team's wrong certificates
(``tests/test_wmi_float_certificates.py``). Run from the repository root as a module, so
this checkout is imported, before and after a change: ``python -m benchmarks.wmi_proofs
[--timeout S] [--only NAME…]``; one JSON line per case.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.stats import norm

from configs.schema import parse_config
from tests.test_wmi_float_certificates import half_plane_area, share_above, spike
from verifier.audits import run_audit
from verifier.network import Layer, Network
from verifier.population import Feature, PopulationModel, Uniform
from verifier.population.distributions import Normal
from verifier.population.piecewise import Leaf, PiecewiseDensity
from verifier.population.product import Factor, Product

SQUARE = Network([Layer(np.array([[0.0, 0.0], [1.0, 0.5]]), np.array([0.0, -0.75]), "none")],
                 ["x", "s"], ["no", "yes"])


def _uniforms(names: list[str], low: float, high: float) -> PopulationModel:
    return PopulationModel(
        features=[Feature(name=n, kind="continuous", domain=[low, high]) for n in names],
        distribution=Product(factors=[Factor(columns=[n], distribution=Uniform(lower=low,
                                                                                 upper=high))
                                      for n in names]))


def _audit(timeout: float, **fields: Any) -> Any:
    document = {"name": fields["kind"], "timeout_s": timeout, **fields}
    return parse_config({"model": {"uri": "m.onnx"}, "audits": [document]}).audits[0]


def _line(offset: float) -> Network:
    return Network([Layer(np.array([[3.0]]), np.array([-offset]))], ["x"], ["logit"])


def _narrow(offset: float, width: float, threshold: float, timeout: float
            ) -> tuple[Any, Network, PopulationModel, float]:
    low, high = offset, offset + width
    logit = 3 * (low + 0.3 * width)
    truth = share_above([low, high], [1 / width], logit)
    settings = _audit(timeout, kind="local_robustness", center=[(low + high) / 2],
                      epsilon=width / 2, expected_class=1, min_probability=threshold)
    return settings, _line(logit), _uniforms(["x"], low, high), float(truth)


def _square_far(timeout: float) -> tuple[Any, Network, PopulationModel, float]:
    low, high = 1e7, 1e7 + 1e-6
    offset = 3 * (low + 0.3 * (high - low))
    network = Network([Layer(np.array([[1.0, 2.0]]), np.array([-offset]))], ["x", "y"],
                      ["logit"])
    a, b = Fraction(low), Fraction(high)
    truth = half_plane_area([(a, a), (b, a), (b, b), (a, b)], (1, 2), Fraction(offset))
    settings = _audit(timeout, kind="local_robustness", center=[(low + high) / 2] * 2,
                      epsilon=(high - low) / 2, expected_class=1, min_probability=0.7960)
    return settings, network, _uniforms(["x", "y"], low, high), float(truth / (b - a) ** 2)


def _composed(timeout: float) -> tuple[Any, Network, PopulationModel, float]:
    network = Network([Layer(np.array([[0.1], [0.2], [0.3]]), np.zeros(3), "relu"),
                       Layer(np.array([[1.0, -2.0, 1.0]]), np.array([1e-17]))], ["x"],
                      ["logit"])
    slope = Fraction(0.1) - 2 * Fraction(0.2) + Fraction(0.3)
    settings = _audit(timeout, kind="local_robustness", center=[0.5], epsilon=0.5,
                      expected_class=1, min_probability=0.3)
    return settings, network, _uniforms(["x"], 0.0, 1.0), float(Fraction(1e-17) / -slope)


def _spike_case(timeout: float) -> tuple[Any, Network, PopulationModel, float]:
    cuts, densities = spike(256, 0.5)
    leaves = [Leaf(lower=[a], upper=[b], constant=c)
              for a, b, c in zip(cuts, cuts[1:], densities, strict=False)]
    population = PopulationModel(features=[Feature(name="x", kind="continuous",
                                                   domain=[0.0, 1.0])],
                                 distribution=PiecewiseDensity(leaves=leaves))
    settings = _audit(timeout, kind="local_robustness", center=[0.5], epsilon=0.5,
                      expected_class=1, min_probability=0.5833)
    return settings, _line(1.0), population, float(share_above(cuts, densities, 1.0))


def _normal(threshold: float, timeout: float) -> tuple[Any, Network, PopulationModel, float]:
    network = Network([Layer(np.array([[0.0], [1.0]]), np.array([0.0, -0.3]), "none")],
                      ["x"], ["no", "yes"])
    population = PopulationModel(
        features=[Feature(name="x", kind="continuous")],
        distribution=Product(factors=[Factor(columns=["x"],
                                             distribution=Normal(mean=0.0, std=1.0))]))
    exact = (norm.cdf(0.8) - norm.cdf(0.3)) / (norm.cdf(0.8) - norm.cdf(-0.2))
    settings = _audit(timeout, kind="local_robustness", center=[0.3], epsilon=0.5,
                      expected_class=1, min_probability=threshold)
    return settings, network, population, float(exact)


def _square(timeout: float, truth: float, **fields: Any
            ) -> tuple[Any, Network, PopulationModel, float]:
    return _audit(timeout, **fields), SQUARE, _uniforms(["x", "s"], 0.0, 1.0), truth


CASES: dict[str, Callable[[float], tuple[Any, Network, PopulationModel, float]]] = {
    "mono_s_0.8": lambda t: _square(t, 5 / 6, kind="monotonicity", feature="s",
                                    decreasing=True, min_probability=0.8),
    "mono_s_0.9": lambda t: _square(t, 5 / 6, kind="monotonicity", feature="s",
                                    decreasing=True, min_probability=0.9),
    "mono_s_5/6": lambda t: _square(t, 5 / 6, kind="monotonicity", feature="s",
                                    decreasing=True, min_probability=5 / 6),
    "mono_x_0.99": lambda t: _square(t, 1.0, kind="monotonicity", feature="x",
                                     min_probability=0.99),
    "mono_x_prior_0.99": lambda t: _square(t, 1.0, kind="monotonicity", feature="x",
                                           use_prior=True, min_probability=0.99),
    "noise_unif_0.89": lambda t: _square(t, 0.9, kind="noise_robustness", features=["x"],
                                         noise_uniform=[0.0, 0.2], min_probability=0.89),
    "noise_unif_0.91": lambda t: _square(t, 0.9, kind="noise_robustness", features=["x"],
                                         noise_uniform=[0.0, 0.2], min_probability=0.91),
    "noise_tri_0.92": lambda t: _square(t, 1 - 0.2 / 3, kind="noise_robustness",
                                        features=["x"], noise_triangular=[0.0, 0.0, 0.2],
                                        min_probability=0.92),
    "local_0.9": lambda t: _square(t, 15 / 16, kind="local_robustness", center=[0.6, 0.5],
                                   epsilon=0.1, min_probability=0.9),
    "local_c0_0.07": lambda t: _square(t, 1 / 16, kind="local_robustness", center=[0.6, 0.5],
                                       epsilon=0.1, expected_class=0, min_probability=0.07),
    "normal_0.3": lambda t: _normal(0.3, t),
    "normal_0.7": lambda t: _normal(0.7, t),
    "narrow_1e7_1e-6": lambda t: _narrow(1e7, 1e-6, 0.6996, t),
    "narrow_1e6_1e-6": lambda t: _narrow(1e6, 1e-6, 0.69998, t),
    "narrow_1e7_1e-5": lambda t: _narrow(1e7, 1e-5, 0.6999, t),
    "square_1e7": _square_far,
    "composed_row": _composed,
    "spike_256": _spike_case,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    for name, build in CASES.items():
        if args.only and name not in args.only:
            continue
        settings, network, population, truth = build(args.timeout)
        started = time.process_time()
        certificate = run_audit(settings, network, population)
        cpu = time.process_time() - started
        low, high = certificate.bounds["probability"]
        details = certificate.details
        print(json.dumps({
            "case": name, "threshold": settings.min_probability, "truth": truth,
            "proven": [low, high], "holds": low <= truth <= high, "width": high - low,
            "verdict": certificate.verdict, "float_verdict": details["float_verdict"],
            "proven_by": details.get("proven_by", "engine" if details["proven"] else None),
            "boxes": details.get("proof_boxes"), "cpu_s": round(cpu, 2),
            "elapsed_s": round(certificate.cost["elapsed_s"], 2)}), flush=True)


if __name__ == "__main__":
    main()

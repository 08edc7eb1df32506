"""The exact-probability audit kinds when the probability is not exact (a normal density's
envelopes, a time-out): the float interval contains the closed form, the certificate's bounds
are proven (box branching's after a cell was integrated in float64) and contain it too, the
verdict is judged on those bounds, and the time budget reaches the engine."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from verifier.audits import run_audit
from verifier.audits.local_robustness import LocalRobustnessSettings
from verifier.network import Layer, Network
from verifier.population.distributions import Normal
from verifier.population.model import PopulationModel
from verifier.population.product import Factor, Product
from verifier.population.schema import Feature


def _case() -> tuple[Network, PopulationModel, float]:
    """Class 1 iff x > 0.3 (logits (0, x − 0.3)), x ~ N(0, 1); the closed form of
    P(class 1 | |x − 0.3| <= 0.5)."""
    network = Network([Layer(np.array([[0.0], [1.0]]), np.array([0.0, -0.3]), "none")],
                      ["x"], ["no", "yes"])
    population = PopulationModel(
        features=[Feature(name="x", kind="continuous")],
        distribution=Product(factors=[Factor(columns=["x"],
                                             distribution=Normal(mean=0.0, std=1.0))]),
    )
    exact = (norm.cdf(0.8) - norm.cdf(0.3)) / (norm.cdf(0.8) - norm.cdf(-0.2))
    return network, population, float(exact)


@pytest.mark.parametrize(("threshold", "verdict"), [(0.3, "satisfied"), (0.7, "violated")])
def test_an_envelope_interval_is_reported_not_proven(threshold: float, verdict: str) -> None:
    """The envelopes' interval integrates cells in float64 (no error bound): it is the
    float interval and its verdict, while the certificate's interval is box branching's in
    the budget left, which holds the closed form and decides both thresholds."""
    network, population, exact = _case()
    settings = LocalRobustnessSettings(kind="local_robustness", center=[0.3], epsilon=0.5,
                                       expected_class=1, min_probability=threshold, timeout_s=30)
    certificate = run_audit(settings, network, population)
    low, high = certificate.details["float_interval"]
    assert low <= exact <= high
    assert certificate.details["exact"] is False
    assert certificate.details["float_verdict"] == verdict
    low, high = certificate.bounds["probability"]
    assert low <= exact <= high
    assert (certificate.verdict, certificate.details["proven_by"]) == (verdict,
                                                                      "box branching (PV)")
    assert certificate.settings["timeout_s"] == 30


def test_a_budget_reaches_the_engine_and_the_interval_stays_sound() -> None:
    network, population, exact = _case()
    settings = LocalRobustnessSettings(kind="local_robustness", center=[0.3], epsilon=0.5,
                                       expected_class=1, min_probability=exact, timeout_s=30)
    certificate = run_audit(settings, network, population, budget=1e-9)
    low, high = certificate.bounds["probability"]
    assert low <= exact <= high
    assert certificate.settings["timeout_s"] == pytest.approx(1e-9)
    assert certificate.verdict == "unknown"


@pytest.mark.parametrize(("audit", "message"), [
    ({"kind": "monotonicity", "feature": "x", "use_prior": False},
     "needs a bounded support, but column 'x'"),
    ({"kind": "noise_robustness", "features": ["s"], "noise_uniform": [-0.5, 0.5]},
     "noise on column 's' needs a continuous column or a discrete noise distribution"),
])
def test_an_audit_wmi_cannot_run_is_refused_before_any_audit_starts(
    audit: dict, message: str
) -> None:
    """Audits WMI cannot run (uniform pairs on an unbounded support; continuous noise on a
    discrete column) fail while the pipeline binds the model, naming the audit and the column,
    before any audit of the run has started."""
    from configs.schema import parse_config
    from pipeline_steps.audit import bound_inputs
    from registry_hooks.certgate_model import LoadedModel
    from verifier.errors import CertgateInputError
    from verifier.population.distributions import Discrete

    network = Network([Layer(np.array([[0.0, 0.0], [1.0, 2.0]]), np.array([0.0, -0.3]), "none")],
                      ["x", "s"], ["no", "yes"])
    population = PopulationModel(
        features=[Feature(name="x", kind="continuous"),
                  Feature(name="s", kind="binary")],
        distribution=Product(factors=[
            Factor(columns=["x"], distribution=Normal(mean=0.5, std=0.2)),
            Factor(columns=["s"], distribution=Discrete(values=[0, 1], probabilities=[0.5, 0.5])),
        ]),
    )
    config = parse_config({"model": {"uri": "models:/m/1"}, "audits": [
        {"name": "mono", "min_probability": 0.9, **audit}]})
    loaded = LoadedModel(uri="models:/m/1", network=network, flavor="file", serialization="json")
    with pytest.raises(CertgateInputError) as error:
        bound_inputs(config, loaded, population)
    assert str(error.value).startswith("audit 'mono': ") and message in str(error.value)

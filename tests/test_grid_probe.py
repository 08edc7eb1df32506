"""Probability specifications over several coded columns at once (negative offsets, steps
that are not powers of two), on multi-layer networks, with exact ties at coded points: the
certified interval of every probability contains its exact value, which enumeration in
rationals gives at the real points offset + step·k of the original network."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from verifier.audits.binding import bind
from verifier.audits.probability import run_specification
from verifier.errors import CertgateInputError
from verifier.network import Layer, Network
from verifier.population import PopulationModel, population_from_json
from verifier.pv import PVSettings
from verifier.spec import Names, atoms_of, evaluate_event, specification_from_dict

GRIDS = [(0.75, -0.5), (3.0, -7.0), (1e-3 * 2.0**-3, 0.0), (0.5, -1.25), (3.0, 0.0),
         (0.375, 0.0), (1e-3, -2.0)]
INPUTS = ["a", "u", "v"]
CODES = range(4)


def _population(rng: np.random.Generator, grids: list[tuple[float, float]]) -> PopulationModel:
    """``a`` binary; ``u`` and ``v`` coded on ``grids``, codes 0..3; dyadic tables."""
    def table(size: int) -> list[float]:
        weights = rng.integers(1, 8, size=size).astype(float)
        return (weights / weights.sum()).tolist()

    features = [{"name": "a", "kind": "binary"}]
    factors = [{"columns": ["a"], "distribution": {
        "kind": "discrete", "values": [0, 1], "probabilities": table(2)}}]
    for name, (step, offset) in zip(INPUTS[1:], grids, strict=True):
        features.append({"name": name, "kind": "integer", "domain": [0, 3], "step": step,
                         **({"offset": offset} if offset else {})})
        factors.append({"columns": [name], "distribution": {
            "kind": "discrete", "values": list(CODES), "probabilities": table(4)}})
    return population_from_json({"format": "certgate.population/v1", "features": features,
                                 "distribution": {"kind": "product", "factors": factors}})


def _network(rng: np.random.Generator, tie_at: Fraction | None) -> Network:
    """A 3-6-4-2 ReLU net; with ``tie_at`` its logit difference is exactly ``x.u − tie_at``
    (two ReLUs of ±(x.u − tie_at)), so the classes tie at that real point."""
    if tie_at is None:
        return Network([Layer(rng.normal(size=(6, 3)), rng.normal(size=6), "relu"),
                        Layer(rng.normal(size=(4, 6)), rng.normal(size=4), "relu"),
                        Layer(rng.normal(size=(2, 4)), rng.normal(size=2))],
                       INPUTS, ["no", "yes"])
    first = np.zeros((2, 3))
    first[0, 1], first[1, 1] = 1.0, -1.0
    bias = np.array([-float(tie_at), float(tie_at)])
    return Network([Layer(first, bias, "relu"),
                    Layer(np.array([[0.0, 1.0], [1.0, 0.0]]), np.zeros(2))],
                   INPUTS, ["no", "yes"])


def _exact(network: Network, point: tuple[Fraction, ...]) -> list[Fraction]:
    h = list(point)
    for layer in network.layers:
        h = [sum((Fraction(float(w)) * x for w, x in zip(row, h, strict=True)),
                 Fraction(float(b))) for row, b in zip(layer.weight, layer.bias, strict=True)]
        if layer.activation == "relu":
            h = [max(x, Fraction(0)) for x in h]
    return h


def _holds(event, point: tuple[Fraction, ...], outputs: list[Fraction]) -> bool:
    truth = {}
    for atom in atoms_of(event):
        value = sum((Fraction(c) * x for c, x in zip(atom.input_coeffs, point, strict=True)),
                    Fraction(atom.constant))
        value += sum((Fraction(c) * y for c, y in zip(atom.output_coeffs, outputs,
                                                      strict=True)), Fraction(0))
        truth[atom] = np.array([value > 0 if atom.strict else value >= 0])
    return bool(evaluate_event(event, truth)[0])


def _oracle(network: Network, population: PopulationModel, spec) -> Fraction:
    step, offset = population.feature_schema.column_codes()
    [term] = spec.probabilities.values()
    tables = [[(int(v), Fraction(p)) for v, p in zip(f.distribution.values,
                                                     f.distribution.probabilities, strict=True)]
              for f in population.distribution.factors]
    joint = given = Fraction(0)
    for combo in itertools.product(*tables):
        weight = Fraction(1)
        for _, p in combo:
            weight *= p
        point = tuple(Fraction(float(o)) + Fraction(float(s)) * k
                      for s, o, (k, _) in zip(step, offset, combo, strict=True))
        outputs = _exact(network, point)
        if term.condition is not None and not _holds(term.condition, point, outputs):
            continue
        given += weight
        joint += weight * _holds(term.event, point, outputs)
    return joint / given


@pytest.mark.parametrize("seed", range(16))
def test_probabilities_over_coded_columns_equal_enumeration(seed: int) -> None:
    rng = np.random.default_rng(seed)
    grids = [GRIDS[int(i)] for i in rng.choice(len(GRIDS), size=2, replace=False)]
    population = _population(rng, grids)
    (step_u, offset_u), (step_v, offset_v) = grids
    tie = seed % 2 == 0
    tie_value = Fraction(offset_u) + Fraction(step_u) * int(rng.integers(0, 4))
    original = _network(rng, tie_value if tie else None)
    network, bound = bind(original, population, None, "probe")
    names = Names.of(INPUTS, ["no", "yes"])
    threshold_v = float(Fraction(offset_v) + Fraction(step_v) * int(rng.integers(0, 4)))
    events = ["y.yes >= y.no", "y.yes > y.no"] if tie else ["y.yes > y.no"]
    checked = 0
    for event in events:
        spec = specification_from_dict({
            "probabilities": {"p": {"event": event,
                                    "given": f"x.v <= {threshold_v!r} or x.a >= 1"}},
            "expression": "p", "comparison": ">=", "threshold": 0.5}, names)
        truth = _oracle(original, population, spec)
        try:
            certificate = run_specification(network, bound, spec, PVSettings(timeout_s=20.0))
        except CertgateInputError as error:          # a threshold not on the codes' floats
            assert "coded column" in str(error)
            continue
        low, high = certificate.bounds["value"]
        assert Fraction(low) <= truth <= Fraction(high), (grids, event, low, float(truth), high)
        if certificate.verdict == "satisfied":
            assert truth >= Fraction(1, 2)
        elif certificate.verdict == "violated":
            assert truth < Fraction(1, 2)
        checked += 1
    assert checked

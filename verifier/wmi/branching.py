"""A WMI property as a certified interval by branching over the input space, for priors whose
discrete values cannot be enumerated one combination at a time.

Exact WMI (:mod:`verifier.wmi.engine`) enumerates a network's regions once per combination of
the discrete values the model reads; a fitted population with many-valued integer histograms
(Adult's capital gain: 99 887 values) has far too many. Such a property is the probability of
a linear event over the joint space of its copies, and PV's branch and bound
(:mod:`verifier.pv`) bounds exactly that: the copies are stacked into one network
(:func:`stacked`, exact: block-diagonal layers behind a 0/1 input selection), the prior and
the extra independent draws form a product measure (:mod:`verifier.wmi.measures`), and the
violation and the precondition become PV events (class events of each copy, the input order
of monotonicity, the ε-box). PV splits boxes of the joint space (along the histogram's bins
and integers), credits a box's probability enclosure wherever its bound propagation proves
the violation true or false on the whole box, and decides boxes of single points exactly in
rational arithmetic. The result is a certified interval (``exact`` false) that tightens with
time: it stops once the violation share is proven ``>= stop_at`` or below it, at
``tolerance`` width, or at the deadline with the bounds reached (``timed_out``).
"""

from __future__ import annotations

import time
from concurrent.futures import Executor
from typing import TYPE_CHECKING

import numpy as np

from verifier.executor import InProcessExecutor, default_workers
from verifier.network import Layer, Network, NetworkError, compose, head_error
from verifier.numerics import down, up
from verifier.spec import (
    And,
    Atom,
    Event,
    Names,
    Not,
    Or,
    ProbabilityTerm,
    Ref,
    Specification,
    class_event,
)
from verifier.wmi.encode import WMIInputError
from verifier.wmi.engine import WMIResult
from verifier.wmi.measures import JointMeasure

if TYPE_CHECKING:
    from verifier.pv.engine import Refuter

ENUMERATE_POINTS = 64
"""A box with at most this many points on its discrete axes is finished by deciding every
point exactly (PV's ``enumerate_points``)."""


def _padded(network: Network, depth: int) -> list[Layer]:
    """``network``'s layers followed by identity layers (no activation) up to ``depth``."""
    width = network.output_size
    extra = [Layer(np.eye(width), np.zeros(width)) for _ in range(depth - len(network.layers))]
    return [*network.layers, *extra]


def _block(layers: list[Layer]) -> Layer:
    """The layers side by side: block-diagonal weights, each neuron keeping its activation
    (a per-neuron slope: 0 for ReLU, its leak, 1 for no activation)."""
    from scipy.linalg import block_diag

    slopes = np.concatenate([layer.negative_slope_effective for layer in layers])
    kinds = {layer.activation for layer in layers}
    if kinds == {"relu"}:
        activation, slope = "relu", 0.01
    elif kinds == {"none"}:
        activation, slope = "none", 0.01
    else:
        activation, slope = "leaky_relu", tuple(float(s) for s in slopes)
    return Layer(block_diag(*(layer.weight for layer in layers)),
                 np.concatenate([layer.bias for layer in layers]), activation,  # type: ignore[arg-type]
                 negative_slope=slope,
                 weight_magnitude=block_diag(*(layer.weight_magnitude for layer in layers)),
                 bias_magnitude=np.concatenate([layer.bias_magnitude for layer in layers]),
                 fold_roundings=_largest_count([layer.fold_count for layer in layers]))


def _largest_count(counts: list[int | None]) -> int | None:
    """The count of layers set side by side: each coefficient keeps its own layer's terms,
    and a term within ``θ_a`` is within ``θ_b`` for ``b ≥ a`` (``None`` if one is not
    counted)."""
    return None if any(count is None for count in counts) else max(
        count for count in counts if count is not None)


def stacked(networks: list[Network], maps: list[np.ndarray], input_names: list[str]) -> Network:
    """One network computing every ``networks[k]`` (piecewise linear, no head) at
    ``maps[k] @ z``, their outputs concatenated in order. ``maps`` are 0/1 matrices with at
    most one 1 per row (each copy's column is one coordinate of ``z``), so the composition is
    exact in float64: every coefficient is one of the networks' own."""
    for network in networks:
        if network.head != "none" or any(layer.activation == "hardtanh"
                                          for layer in network.layers):
            raise NetworkError("stack the lowered, headless views of the networks")
    depth = max(len(network.layers) for network in networks)
    columns = [_padded(network, depth) for network in networks]
    layers = [_block([column[k] for column in columns]) for k in range(depth)]
    outputs = [f"copy{k}.{name}" for k, network in enumerate(networks)
               for name in network.output_names]
    body = Network(layers, [f"in{j}" for j in range(layers[0].in_features)], outputs)
    selection = np.vstack(maps)
    front = Network([Layer(selection, np.zeros(selection.shape[0]))], list(input_names),
                    [f"in{j}" for j in range(selection.shape[0])])
    return compose(front, body)


def _embedded(event: Event, offset: int, total: int, inputs: int) -> Event:
    """``event`` over one copy's outputs moved to outputs ``offset…`` of ``total``."""
    if isinstance(event, Atom):
        coefficients = np.zeros(total)
        coefficients[offset:offset + len(event.output_coeffs)] = event.output_coeffs
        return Atom(tuple(coefficients.tolist()), (0.0,) * inputs, event.constant, event.strict)
    if isinstance(event, Not):
        return Not(_embedded(event.part, offset, total, inputs))
    if isinstance(event, And | Or):
        parts = tuple(_embedded(part, offset, total, inputs) for part in event.parts)
        return And(parts) if isinstance(event, And) else Or(parts)
    return event


def _view(network: Network, values: bool) -> Network:
    """The classifier view (the README's class rule), or with ``values`` the logits, which
    keep the order of the outputs under no head or a sigmoid head (another head is refused)."""
    if not values:
        return network.as_classifier().lowered()
    if network.head not in ("none", "sigmoid"):
        raise head_error(network.head, "the output-value form of monotonicity")
    return network.logits().lowered()


class Copies:
    """The stacked network of some copies of classifiers (or, with ``values``, of their
    logits) and the events over each copy's outputs."""

    def __init__(self, networks: list[Network], maps: list[np.ndarray],
                 input_names: list[str], *, values: bool = False) -> None:
        self.views = [_view(network, values) for network in networks]
        self.network = stacked(self.views, maps, input_names)
        self.offsets = np.concatenate([[0], np.cumsum([v.output_size for v in self.views])])
        self.inputs = len(input_names)

    def is_class(self, copy: int, cls: int) -> Event:
        """``class(copy) == cls`` (argmax, ties to the lowest index)."""
        view = self.views[copy]
        if not 0 <= cls < view.output_size:
            raise WMIInputError(f"class {cls} is out of range for a classifier with "
                                f"{view.output_size} classes")
        own = class_event(cls, Names.of(view.input_names, view.output_names))
        return _embedded(own, int(self.offsets[copy]), int(self.offsets[-1]), self.inputs)

    def decrease(self, output: int) -> Event:
        """Output ``output`` of copy 0 exceeds that of copy 1 (``f(x) > f(x′)``)."""
        total = int(self.offsets[-1])
        if not 0 <= output < self.views[0].output_size:
            raise WMIInputError(f"output {output} is out of range for a model with "
                                f"{self.views[0].output_size} outputs")
        coefficients = np.zeros(total)
        coefficients[int(self.offsets[0]) + output] = 1.0
        coefficients[int(self.offsets[1]) + output] = -1.0
        return Atom(tuple(coefficients.tolist()), (0.0,) * self.inputs, 0.0, True)

    def disagree(self, first: int, second: int) -> Event:
        """The two copies' classes differ."""
        theirs = self.views[second].output_size
        parts = tuple(And((self.is_class(first, c), Not(self.is_class(second, c))))
                      if c < theirs else self.is_class(first, c)
                      for c in range(self.views[first].output_size))
        return Or(parts) if len(parts) > 1 else parts[0]


def input_atom(coefficients: dict[int, float], constant: float, width: int,
               strict: bool, outputs: int) -> Atom:
    """``Σ coefficients[j]·z_j + constant > 0`` (``>= 0`` unless ``strict``)."""
    row = np.zeros(width)
    for j, c in coefficients.items():
        row[j] = c
    return Atom((0.0,) * outputs, tuple(row.tolist()), constant, strict)


def branch(name: str, copies: Copies, measure: JointMeasure, event: Event,
           normaliser: tuple[float, float], *, stop_at: float | None,
           deadline: float, tolerance: float, executor: Executor | None,
           bound_method: str, refute: Refuter | None = None) -> WMIResult:
    """``P(no violation | precondition)`` by PV on the stacked copies (module docstring).

    ``event`` is the violation together with the precondition's part that is not a box,
    ``measure`` is already restricted to the precondition's box, and ``normaliser``
    encloses the precondition's probability: the violation share is ``P(event) /
    normaliser``, enclosed by dividing the ends (a normaliser whose lower end is 0 leaves the
    share's upper end at 1 and is named in ``extra["precondition_mass"]``: the precondition
    may have probability too small to certify, e.g. a value of mass 5e-324). A certified
    interval, ``timed_out`` when the
    deadline ended it; with ``stop_at`` it stops once the share is proven ``>= stop_at`` (a
    failure, ``stopped_early``) or below it. ``deadline`` is a ``time.perf_counter()``
    instant. PV runs in-process without ``executor`` (or with an in-process one), else on a
    process pool of its own with the executor's number of workers. ``refute``: PV's second
    reading of ``event`` on open boxes (:data:`verifier.pv.engine.Refuter`)."""
    from verifier.pv import PVSettings, population_domain, verify

    started = time.perf_counter()
    timeout_s = None if deadline == np.inf else max(0.0, deadline - started)
    low_norm, high_norm = normaliser
    if not high_norm > 0:
        raise WMIInputError("the precondition has probability zero under the prior")
    term = ProbabilityTerm(event, None, "violation and precondition", "")
    # a normaliser whose lower end is 0 still bounds the share from below (a failure is
    # proven once P(event) >= stop_at · high_norm), never from above, so PV then aims at
    # that threshold and has no width to stop at
    scale = low_norm if low_norm > 0 else high_norm
    threshold = None if stop_at is None else float(stop_at) * scale
    spec = Specification({"p_violation": term}, Ref("p_violation"), "p_violation",
                         None if threshold is None else ">=", threshold, name=name)
    local = executor is None or isinstance(executor, InProcessExecutor)
    workers = None if local else getattr(executor, "_max_workers", None) or default_workers()
    settings = PVSettings(
        method="ibp" if bound_method == "none" else bound_method, timeout_s=timeout_s,
        precision=tolerance * low_norm if low_norm > 0 else None,
        enumerate_points=ENUMERATE_POINTS,
        executor="local" if local else "process", workers=workers)
    result = verify(copies.network, spec, measure.prob_boxes_interval,
                    population_domain(measure)[1], settings, excess=measure.prob_excess_lower,
                    refute=refute)
    joint_low, joint_high = result.value
    low = max(0.0, down(joint_low / high_norm))
    high = min(1.0, up(joint_high / low_norm)) if low_norm > 0 else 1.0
    failed = stop_at is not None and low >= stop_at
    late = result.stopped_by in ("timeout", "interrupted") or (
        result.stopped_by != "decided" and time.perf_counter() >= deadline)
    probability_lower = max(0.0, down(1.0 - high))
    probability_upper = min(1.0, up(1.0 - low))
    return WMIResult(
        probability=probability_upper if failed else probability_lower,
        violation_probability=low if failed else high,
        total_mass=float(low_norm), violation_mass=float(joint_low), regions=0, integrals=0,
        lps=0, elapsed_s=time.perf_counter() - started, stopped_early=failed,
        probability_lower=probability_lower, probability_upper=probability_upper,
        exact=False, timed_out=late, refinements=0, proven=True,
        extra={"method": "box branching (PV)", "boxes": int(result.boxes),
               "branching_stopped_by": result.stopped_by,
               **({} if low_norm > 0 else {"precondition_mass": [0.0, float(high_norm)]})})


def timed_out_before_branching(started: float) -> WMIResult:
    """The result of a branching whose deadline passed before PV began (while its measure
    was being set up, ``started`` a ``time.perf_counter()`` instant): no box bounded, so
    the probability is only known to lie in ``[0, 1]``, which is proven; ``timed_out``."""
    return WMIResult(
        probability=0.0, violation_probability=1.0, total_mass=0.0, violation_mass=0.0,
        regions=0, integrals=0, lps=0, elapsed_s=time.perf_counter() - started,
        stopped_early=False, probability_lower=0.0, probability_upper=1.0, exact=False,
        timed_out=True, refinements=0, proven=True,
        extra={"method": "box branching (PV)", "boxes": 0, "branching_stopped_by": "timeout",
               "setup_timed_out": "the deadline passed while the uniform measure listed "
                                  "the values of positive probability"})


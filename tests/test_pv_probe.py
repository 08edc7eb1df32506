"""Split probes (:mod:`verifier.pv.probe`): the children a probe weighs are the split's own,
its estimate of them encloses the network's values (it is an estimate, not a bound, so only
to float32 rounding), its first-layer update from the parent equals the estimate of the
child computed from scratch, and PV with probes on a network whose last hidden layer is fed
by a far wider one reports intervals that hold the exactly enumerated value.

Oracles: every lattice point of each child evaluated by the network in float64; the
estimate recomputed on the child as a whole box; exact enumeration of the population.
"""

from __future__ import annotations

import numpy as np
import pytest
from adult_engine import assert_reports_hold_the_exact_value, needs_census, parity_engine

from benchmarks.adult_instances import build_instance
from verifier.pv import PVSettings
from verifier.pv.probe import NO_PROBE, SplitProbe, one_sided
from verifier.pv.splitting import Splitter

FLOAT32_SLACK = 1e-4
"""The estimate is float32 interval arithmetic: relative to the magnitude of the values."""


def test_one_sided_marks_open_atoms_with_exactly_one_wanted_side() -> None:
    low = np.array([[-1.0, -1.0, 0.5, -1.0, 0.0]])
    high = np.array([[1.0, 1.0, 2.0, 1.0, 1.0]])
    strict = np.array([False, False, False, False, True])
    sides = np.array([[[True, False], [False, True], [True, False], [True, True],
                       [True, False]]])
    # proving only, refuting only, decided (0.5 > 0), both sides, strict atom open at 0
    assert one_sided(low, high, strict, sides).tolist() == [[1, -1, 0, 0, 1]]


def _network_values(probe: SplitProbe, points: np.ndarray) -> np.ndarray:
    """The output atoms that read no input at every point, in float64."""
    atoms = probe.atoms
    values = points
    for layer in atoms.network.lowered().layers:
        z = values @ np.asarray(layer.weight).T + np.asarray(layer.bias)
        values = z if layer.activation == "none" else np.where(
            z < 0, z * layer.negative_slope_effective, z)
    rows = atoms.output_rows[probe.outputs]
    return values @ rows.T + atoms.constants[probe.outputs]


def _boxes(splitter: Splitter, rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray,
           depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Boxes reached from the root by ``depth`` random splits each."""
    order = rng.normal(size=lo.shape)
    for _ in range(depth):
        candidates = splitter.candidates(lo, hi)
        open_rows = candidates.any(axis=1)
        lo, hi, order = lo[open_rows], hi[open_rows], order[open_rows]
        dims = np.array([rng.choice(np.flatnonzero(row)) for row in candidates[open_rows]])
        left_lo, left_hi, right_lo, right_hi = splitter.children(lo, hi, dims, order)
        pick = rng.integers(0, 2, size=dims.size).astype(bool)
        lo = np.where(pick[:, None], left_lo, right_lo)
        hi = np.where(pick[:, None], left_hi, right_hi)
        splitter.snap(lo, hi)
    return lo, hi


@needs_census
@pytest.mark.parametrize(("k", "hidden", "depth"), [(4, (16, 4), 2), (5, (24, 4), 3)])
def test_the_estimate_of_each_child_encloses_the_network_and_equals_the_direct_one(
        k: int, hidden: tuple[int, ...], depth: int) -> None:
    _, engine = parity_engine(k, hidden)
    probe = SplitProbe(engine.network, engine.splitter, engine.atoms)
    splitter = engine.splitter
    rng = np.random.default_rng(k)
    root_lo = np.repeat(engine.domain.lower[None, :], 6, axis=0)
    root_hi = np.repeat(engine.domain.upper[None, :], 6, axis=0)
    splitter.snap(root_lo, root_hi)
    lo, hi = _boxes(splitter, rng, root_lo, root_hi, depth)
    order = rng.normal(size=lo.shape)
    box, dims = np.nonzero(splitter.candidates(lo, hi))
    child_lo, child_hi, low, high = probe.estimate_children(lo, hi, box, dims, order)
    # the children are the split's own
    left_lo, left_hi, right_lo, right_hi = splitter.children(lo[box], hi[box], dims, order[box])
    both_lo, both_hi = np.concatenate([left_lo, right_lo]), np.concatenate([left_hi, right_hi])
    splitter.snap(both_lo, both_hi)
    assert np.array_equal(child_lo, both_lo) and np.array_equal(child_hi, both_hi)
    direct_low, direct_high = probe.estimate(child_lo, child_hi)
    scale = 1.0 + np.abs(direct_low) + np.abs(direct_high)
    assert np.all(np.abs(low - direct_low) <= FLOAT32_SLACK * scale)
    assert np.all(np.abs(high - direct_high) <= FLOAT32_SLACK * scale)
    points, _, parent = splitter.enumerate(child_lo, child_hi)
    values = _network_values(probe, points)
    slack = FLOAT32_SLACK * scale[parent]
    assert np.all(values >= low[parent] - slack)
    assert np.all(values <= high[parent] + slack)


@needs_census
def test_pv_with_probes_keeps_the_exact_value_in_every_interval(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Adult-5 with a 64-8 network (a last hidden layer fed by one 8 times wider, so the
    probes run): every interval PV reports holds the exactly enumerated value, and splits
    did follow probes."""
    followed: list[int] = []
    choose = Splitter.choose_dims

    def spy(self: Splitter, *args, **kwargs):  # type: ignore[no-untyped-def]
        dims = choose(self, *args, **kwargs)
        probe = kwargs.get("probe", args[6] if len(args) > 6 else None)
        if probe is not None:
            followed.append(int(((probe != NO_PROBE) & (dims == probe)).sum()))
        return dims

    monkeypatch.setattr(Splitter, "choose_dims", spy)
    instance = build_instance(5, (64, 8), 7, epochs=1, cache_dir=None)
    assert_reports_hold_the_exact_value(instance, PVSettings(
        timeout_s=30.0, max_boxes=3000, batch_size=128))
    assert sum(followed) > 0

"""CROWN that tightens the last hidden layer of some boxes only (``tighten`` of
:func:`verifier.bounds.compute_bounds`; the others get CROWN over IBP's bounds there)
against exact and sampled oracles.

Oracles: the network evaluated in rational arithmetic at the corners of every box and at
sampled points (every bound must contain the exact value), and dense sampling of the
pre-activations (every sign reported holds there).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import assert_status_holds_at, networks

from tests.bound_oracles import exact_spec
from verifier.bounds import compute_bounds
from verifier.network import Network


def _corners(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    grids = np.meshgrid(*[[a, b] for a, b in zip(lo, hi, strict=True)], indexing="ij")
    return np.stack([g.reshape(-1) for g in grids], axis=1)


@settings(max_examples=60, deadline=None)
@given(network=networks(), seed=st.integers(0, 2**31 - 1),
       scale=st.sampled_from([1e-3, 0.3, 2.0]), method=st.sampled_from(["crown",
                                                                         "alpha-crown"]))
def test_bounds_hold_whichever_boxes_are_tightened(
        network: Network, seed: int, scale: float, method: str) -> None:
    rng = np.random.default_rng(seed)
    lo = rng.normal(size=(5, network.input_size))
    hi = lo + rng.uniform(0.0, scale, size=lo.shape)
    tighten = rng.integers(0, 2, size=5).astype(bool)
    spec = rng.normal(size=(2, network.output_size))
    result = compute_bounds(network, lo, hi, spec, method,  # type: ignore[arg-type]
                            alpha_steps=3, tighten=tighten)
    for box in range(5):
        unit = rng.uniform(size=(3, network.input_size))
        points = np.vstack([_corners(lo[box], hi[box]), lo[box] + (hi[box] - lo[box]) * unit])
        for point in points:
            for row, value in enumerate(exact_spec(network, spec, point)):
                assert Fraction(result.lower[box, row]) <= value <= Fraction(
                    result.upper[box, row]), (box, row, tighten[box])
    unit = rng.uniform(size=(5, 200, network.input_size))
    assert_status_holds_at(result, lo[:, None] + (hi - lo)[:, None] * unit)
    if method == "crown" and network.output_size and not tighten.all():
        # every box keeps CROWN's linear bounds on the spec rows (only the last hidden layer
        # of the others is left to IBP)
        assert result.linear is not None
        assert np.all(np.isfinite(result.linear.lower_value[~tighten]))

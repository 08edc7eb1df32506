"""CROWN starts from the IBP chain's own bounds of the first two layers
(:func:`verifier.bounds.intermediate._crown_finite`'s ``ibp``) instead of recomputing the
second layer's interval: every bound is the same, bit for bit, as when CROWN recomputes it.

Oracle: the same call with CROWN given the first layer only (so it recomputes the second
layer's interval from the first layer's activation, as it did before), compared with
``np.array_equal`` on every output array, with known signs, carried bounds, ``tighten``,
one-hot groups and a box with an infinite coordinate in the batch (so CROWN runs on a
subset of the boxes IBP bounded)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import networks

import verifier.bounds as bounds
from verifier.bounds import BoundsResult, carried_bounds, compute_bounds
from verifier.network import Network


def _arrays(result: BoundsResult) -> dict[str, np.ndarray]:
    """Every array a result carries, by name."""
    arrays = {"lower": result.lower, "upper": result.upper}
    arrays.update({f"pre_lower{k}": v for k, v in result.pre_lower.items()})
    arrays.update({f"pre_upper{k}": v for k, v in result.pre_upper.items()})
    if result.sensitivity is not None:
        arrays["sensitivity"] = result.sensitivity
    if result.linear is not None:
        for name in ("lower_coefficients", "lower_value", "upper_coefficients", "upper_value"):
            arrays[name] = getattr(result.linear, name)
    return arrays


def _recomputing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make CROWN recompute every layer's interval but the first's (the previous code)."""
    original = bounds._crown_finite

    def first_layer_only(*args: Any, **kwargs: Any) -> Any:
        ibp = args[7]
        return original(*args[:7], (ibp[0][:1], ibp[1][:1]), *args[8:], **kwargs)

    monkeypatch.setattr(bounds, "_crown_finite", first_layer_only)


@settings(max_examples=80, deadline=None)
@given(network=networks(max_inputs=4, max_width=8), seed=st.integers(0, 2**31 - 1),
       backend=st.sampled_from(["numpy", "torch"]), method=st.sampled_from(["crown",
                                                                          "alpha-crown"]),
       known=st.booleans(), infinite=st.booleans())
def test_crown_from_the_ibp_chains_second_layer_gives_the_same_bits(
        network: Network, seed: int, backend: str, method: str, known: bool,
        infinite: bool) -> None:
    rng = np.random.default_rng(seed)
    count, inputs = 6, network.input_size
    parent_lo = rng.normal(size=(count, inputs))
    parent_hi = parent_lo + rng.uniform(0.0, 2.0, size=parent_lo.shape)
    cut = np.sort(rng.uniform(size=(2, count, inputs)), axis=0)
    lo = parent_lo + (parent_hi - parent_lo) * cut[0]
    hi = parent_lo + (parent_hi - parent_lo) * cut[1]
    if infinite:
        lo[0, 0] = -np.inf
    groups = [[0, 1]] if inputs >= 2 and rng.uniform() < 0.5 else []
    backend = "torch" if method == "alpha-crown" else backend  # alpha-CROWN: autograd
    options: dict[str, Any] = {"backend": backend, "groups": groups,
                               "tighten": rng.integers(0, 2, size=count).astype(bool),
                               "alpha_steps": 2}
    if known:
        parent = compute_bounds(network, parent_lo, parent_hi, None, "crown", backend=backend,
                                groups=groups)
        options.update(known_signs=parent.signs(), carried=carried_bounds(parent))
    reused = _arrays(compute_bounds(network, lo, hi, None, method, **options))
    with pytest.MonkeyPatch.context() as monkeypatch:
        _recomputing(monkeypatch)
        recomputed = _arrays(compute_bounds(network, lo, hi, None, method, **options))
    assert reused.keys() == recomputed.keys()
    for name, array in reused.items():
        assert np.array_equal(array, recomputed[name], equal_nan=True), name

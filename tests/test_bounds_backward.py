"""CROWN's back-substitution on paired rows equals the straightforward computation bit for bit.

The pass (``verifier.bounds.backward``) keeps a pre-activation's lower row and negated upper
row as one pair, gathers each box's relaxation and midpoints once per pair and broadcasts
them to both rows, and reuses its buffers. The oracle here is the plain flat form: every row
on its own, every per-box tensor gathered per row, no buffer reused, rows dropped by a
boolean mask. Both must give the same floats (``torch.equal``, signs of zeros included), so
that no bound, and no certificate, depends on the restructuring.
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st
from strategies import networks

from verifier.bounds.activation import _activate_interval, _relax, _Relaxation, _through_relaxation
from verifier.bounds.affine import _Affine, _halves, _prepare
from verifier.bounds.backward import _backsubstitute, _concretise_halves
from verifier.bounds.intervals import _interval_affine
from verifier.bounds.onehot import _group_extreme, _input_halves, _OneHot, _onehot
from verifier.network import Network

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 1e308, -1e308, np.inf, -np.inf, 1e-310, -3.0]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal floats and equal signs of zero (NaN equal to NaN)."""
    return (a.shape == b.shape and a.dtype == b.dtype
            and bool(torch.equal(a.isnan(), b.isnan()))
            and bool(torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0)))
            and bool(torch.equal(a.signbit(), b.signbit())))


def _tensor(rng: np.random.Generator, shape: tuple[int, ...]) -> torch.Tensor:
    """Normal values with special ones (signed zeros, huge, infinite, subnormal) mixed in."""
    values = rng.normal(size=shape)
    special = rng.uniform(size=shape) < 0.2
    values[special] = rng.choice(SPECIAL, size=int(special.sum()))
    return torch.from_numpy(values)


@given(seed=st.integers(0, 2**31 - 1), rows=st.integers(1, 9), width=st.integers(1, 7))
def test_in_place_relaxation_step_equals_the_plain_one(seed: int, rows: int, width: int) -> None:
    rng = np.random.default_rng(seed)
    coeffs, const = _tensor(rng, (2, rows, width)), _tensor(rng, (2, rows))
    stacked = _tensor(rng, (rows, 3, width))  # gathered parts are views of one tensor
    parts = (stacked[:, 0], stacked[:, 1], stacked[:, 2])
    plain = _through_relaxation(coeffs.clone(), const, *parts)
    fast = _through_relaxation(coeffs.clone(), const, *parts, in_place=True)
    assert _same(plain[0], fast[0]) and _same(plain[1], fast[1])


@given(seed=st.integers(0, 2**31 - 1), rows=st.integers(1, 9), width=st.integers(1, 7))
def test_pair_concretisation_equals_rows_gathered_one_by_one(
    seed: int, rows: int, width: int
) -> None:
    rng = np.random.default_rng(seed)
    coeffs = _tensor(rng, (2, rows, width))
    const, margin = _tensor(rng, (2, rows)), _tensor(rng, (rows,)).abs()
    mid, rad = _tensor(rng, (rows, width)), _tensor(rng, (rows, width)).abs()
    flat = coeffs.reshape(2 * rows, width)
    twice = torch.cat([mid, mid]), torch.cat([rad, rad])
    plain = ((flat * twice[0]).sum(dim=1) - (flat.abs() * twice[1]).sum(dim=1)
             + const.reshape(-1) - torch.cat([margin, margin]))
    plain = plain.nan_to_num(nan=-np.inf, posinf=-np.inf, neginf=-np.inf)
    assert _same(_concretise_halves(coeffs, const, margin, mid, rad).reshape(-1), plain)


def _flat_backsubstitute(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], layer: int,
    coeffs: torch.Tensor, const: torch.Tensor, margin: torch.Tensor, box: torch.Tensor,
    inputs_lo: list[torch.Tensor], inputs_hi: list[torch.Tensor], stop_early: bool,
    onehot: _OneHot | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The oracle: rows ``[+w; −w]`` flat, everything gathered per row."""
    result = torch.empty(coeffs.shape[0], dtype=coeffs.dtype)
    row_ids = torch.arange(coeffs.shape[0])
    for index in range(layer - 1, -1, -1):
        relaxation = relaxations.get(index)
        if relaxation is not None:
            coeffs, const = _through_relaxation(
                coeffs, const, relaxation.lower_slope[box], relaxation.upper_slope[box],
                relaxation.upper_intercept[box])
        const = const + coeffs @ affines[index].bias
        coeffs = coeffs @ affines[index].weight
        if not stop_early or index == 0:
            continue
        mid, rad = _halves(inputs_lo[index], inputs_hi[index])
        partial = ((coeffs * mid[box]).sum(dim=1) - (coeffs.abs() * rad[box]).sum(dim=1)
                   + const - margin).nan_to_num(nan=-np.inf, posinf=-np.inf, neginf=-np.inf)
        half = partial.shape[0] // 2
        decided_neuron = (partial[:half] >= 0.0) | (partial[half:] >= 0.0)
        decided = torch.cat([decided_neuron, decided_neuron])
        result[row_ids[decided]] = partial[decided]
        keep = ~decided
        coeffs, const, margin, box, row_ids = (
            coeffs[keep], const[keep], margin[keep], box[keep], row_ids[keep])
        if row_ids.numel() == 0:
            return result, coeffs
    mid, rad = _input_halves(inputs_lo[0], inputs_hi[0], onehot)
    value = ((coeffs * mid[box]).sum(dim=1) - (coeffs.abs() * rad[box]).sum(dim=1)
             + const - margin).nan_to_num(nan=-np.inf, posinf=-np.inf, neginf=-np.inf)
    if onehot is not None:
        value = (value + _group_extreme(coeffs[:, None, :], onehot, rows=box)[:, 0]).nan_to_num(
            nan=-np.inf, posinf=-np.inf, neginf=-np.inf)
    result[row_ids] = value
    return result, coeffs


def _relaxed(
    network: Network, lo: torch.Tensor, hi: torch.Tensor
) -> tuple[list[_Affine], dict[int, _Relaxation], list[torch.Tensor], list[torch.Tensor]]:
    """Affine maps, IBP relaxations and layer inputs of ``network`` on the boxes."""
    _, affines = _prepare(network)
    relaxations: dict[int, _Relaxation] = {}
    inputs_lo, inputs_hi = [lo], [hi]
    for index, affine in enumerate(affines[:-1]):
        z_lo, z_hi = _interval_affine(affine, inputs_lo[-1], inputs_hi[-1])
        if affine.slope is not None:
            relaxations[index] = _relax(z_lo, z_hi, affine.slope)
        h_lo, h_hi = _activate_interval(z_lo, z_hi, affine.slope)
        inputs_lo.append(h_lo)
        inputs_hi.append(h_hi)
    return affines, relaxations, inputs_lo, inputs_hi


@given(network=networks(), seed=st.integers(0, 2**31 - 1), stop_early=st.booleans(),
       grouped=st.booleans(), boxes=st.integers(1, 5), pairs=st.integers(1, 12))
def test_paired_backsubstitution_equals_the_flat_computation(
    network: Network, seed: int, stop_early: bool, grouped: bool, boxes: int, pairs: int
) -> None:
    rng = np.random.default_rng(seed)
    width = network.input_size
    lo = rng.normal(size=(boxes, width)) - rng.uniform(0, 1, size=(boxes, width))
    hi = lo + rng.uniform(0, 2, size=(boxes, width))
    groups: tuple[tuple[int, ...], ...] = ()
    if grouped and width >= 2:
        groups = ((0, 1),)
        lo[:, :2] = 0.0
        hi[:, :2] = rng.choice([0.0, 1.0], size=(boxes, 2))
    lo_t, hi_t = torch.from_numpy(lo), torch.from_numpy(hi)
    onehot = _onehot(groups, lo_t, hi_t)
    affines, relaxations, inputs_lo, inputs_hi = _relaxed(network, lo_t, hi_t)
    layer = int(rng.integers(0, len(affines)))
    rows = affines[layer].weight
    box = torch.from_numpy(np.sort(rng.integers(0, boxes, size=pairs)))
    neuron = torch.from_numpy(rng.integers(0, rows.shape[0], size=pairs))
    w, b = rows.index_select(0, neuron), affines[layer].bias.index_select(0, neuron)
    margin = torch.from_numpy(rng.uniform(0, 1e-9, size=pairs))
    paired, coeffs = _backsubstitute(
        affines, relaxations, layer, w, b, margin, box, inputs_lo, inputs_hi,
        stop_early=stop_early, onehot=onehot)
    flat, flat_coeffs = _flat_backsubstitute(
        affines, relaxations, layer, torch.cat([w, -w]), torch.cat([b, -b]),
        torch.cat([margin, margin]), torch.cat([box, box]), inputs_lo, inputs_hi, stop_early,
        onehot)
    assert _same(paired.reshape(-1), flat)
    assert _same(coeffs.reshape(-1, coeffs.shape[-1]), flat_coeffs)

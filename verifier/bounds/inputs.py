"""The caller's arguments checked and turned into arrays of the chosen backend (numpy arrays,
or torch tensors with ``use_torch``): boxes, specification, one-hot groups, known signs and
the ``needed`` mask. Every bad argument raises
:class:`~verifier.errors.CertgateInputError` naming what is wrong."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from verifier.arrays import Array, from_numpy, namespace
from verifier.bounds.affine import _Affine
from verifier.bounds.carried import _carried_index
from verifier.errors import CertgateInputError
from verifier.network import Network


def _as_boxes(
    network: Network, lower: np.ndarray, upper: np.ndarray, use_torch: bool,
    read: np.ndarray | None = None,
) -> tuple[Array, Array]:
    """The boxes as float64 ``(B, inputs)`` arrays, checked (shapes, NaN, ``lower <= upper``,
    no ``+∞`` lower or ``−∞`` upper side); columns the network does not read (``read``: its
    :meth:`~verifier.network.Network.read_inputs`, computed here when None) are set to 0."""
    lo = np.atleast_2d(np.asarray(lower, dtype=np.float64))
    hi = np.atleast_2d(np.asarray(upper, dtype=np.float64))
    if lo.shape != hi.shape:
        raise CertgateInputError(f"box bounds differ in shape: {lo.shape} vs {hi.shape}")
    if lo.shape[1] != network.input_size:
        raise CertgateInputError(
            f"boxes have {lo.shape[1]} coordinates, the network has {network.input_size} inputs"
        )
    if np.isnan(lo).any() or np.isnan(hi).any():
        raise CertgateInputError("box bounds contain NaN")
    if (lo > hi).any():
        row, col = np.argwhere(lo > hi)[0]
        raise CertgateInputError(
            f"empty box: lower > upper at box {row}, input {network.input_names[col]!r}"
        )
    if (lo == np.inf).any() or (hi == -np.inf).any():
        raise CertgateInputError("a box's lower bound is +inf or its upper bound is -inf")
    unread = ~(network.read_inputs() if read is None else read)
    if unread.any():
        lo = lo.copy()
        hi = hi.copy()
        lo[:, unread] = 0.0
        hi[:, unread] = 0.0
    return from_numpy(lo, use_torch), from_numpy(hi, use_torch)


def _checked_signs(
    signs: np.ndarray | None, affines: list[_Affine], batch: int, use_torch: bool
) -> Array | None:
    """Known signs as an int8 ``(B, N)`` array, checked against the kink neuron count."""
    if signs is None:
        return None
    neurons = sum(a.weight.shape[0] for a in affines[:-1] if a.slope is not None)
    array = np.asarray(signs)
    if array.shape != (batch, neurons):
        raise CertgateInputError(
            f"known signs must have shape ({batch}, {neurons}), got {array.shape}"
        )
    if not np.isin(array, (-1, 0, 1)).all():
        raise CertgateInputError("known signs must be -1, 0 or 1")
    return from_numpy(np.ascontiguousarray(array, dtype=np.int8), use_torch)


def _checked_carried(
    carried: np.ndarray | None, affines: list[_Affine], batch: int, use_torch: bool
) -> Array | None:
    """Carried bounds as a float64 ``(B, 2, n)`` array, checked against the carried layer's
    width (:func:`verifier.bounds.carried.carried_width`; none carried: only an empty
    ``n = 0`` is accepted, and ignored)."""
    if carried is None:
        return None
    index = _carried_index(affines)
    width = 0 if index is None else affines[index].weight.shape[0]
    array = np.asarray(carried)
    if array.shape != (batch, 2, width):
        raise CertgateInputError(
            f"carried bounds must have shape ({batch}, 2, {width}), got {array.shape}"
        )
    if width == 0:
        return None
    array = np.ascontiguousarray(array, dtype=np.float64)
    if np.isnan(array).any():
        raise CertgateInputError("carried bounds must not hold NaN")
    return from_numpy(array, use_torch)


def _checked_needed(needed: np.ndarray, batch: int, rows: int, use_torch: bool) -> Array:
    """The ``needed`` mask as a bool ``(B, S)`` array, checked."""
    array = np.asarray(needed)
    if array.shape != (batch, rows) or array.dtype != np.bool_:
        raise CertgateInputError(
            f"needed must be a boolean array of shape ({batch}, {rows}), got "
            f"{array.dtype} {array.shape}"
        )
    return from_numpy(np.ascontiguousarray(array), use_torch)


def _checked_groups(groups: Sequence[Sequence[int]], width: int) -> list[list[int]]:
    """The one-hot groups as lists of column indices, checked: at least two columns each,
    within the input, no column in two groups."""
    checked = [[int(c) for c in group] for group in groups]
    seen: set[int] = set()
    for group in checked:
        if len(group) < 2 or any(not 0 <= c < width for c in group):
            raise CertgateInputError(
                f"one-hot group {group} must name at least 2 of the {width} input columns"
            )
        if seen & set(group) or len(set(group)) != len(group):
            raise CertgateInputError(f"one-hot group {group} repeats a column")
        seen |= set(group)
    return checked


def _as_spec(spec: np.ndarray | None, outputs: int, batch: int, use_torch: bool) -> Array:
    """The spec as a ``(B, S, outputs)`` array (a broadcast view when shared)."""
    if spec is None:
        return _shared(from_numpy(np.eye(outputs), use_torch), batch)
    matrix = np.asarray(spec, dtype=np.float64)
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    if matrix.shape[-1] != outputs:
        raise CertgateInputError(
            f"specification rows have {matrix.shape[-1]} entries, the network has {outputs} outputs"
        )
    if not np.isfinite(matrix).all():
        raise CertgateInputError("specification matrix must be finite")
    if matrix.ndim == 2:
        return _shared(from_numpy(np.ascontiguousarray(matrix), use_torch), batch)
    if matrix.ndim == 3 and matrix.shape[0] == batch:
        return from_numpy(matrix, use_torch)
    raise CertgateInputError(
        f"specification must have shape (S, {outputs}) or ({batch}, S, {outputs}), "
        f"got {tuple(matrix.shape)}"
    )


def _shared(matrix: Array, batch: int) -> Array:
    """``matrix`` ``(S, outputs)`` as a ``(batch, S, outputs)`` broadcast view (stride 0)."""
    return namespace(matrix).broadcast_to(matrix, (batch, *matrix.shape))

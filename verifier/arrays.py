"""One array namespace for numpy and torch: the operations whose spelling differs.

Code that runs on either backend calls the common spellings on the namespace of its arrays
(:func:`namespace`: the ``numpy`` or ``torch`` module, which share ``abs``, ``where``,
``maximum``, ``clip(min=, max=)``, ``sum(axis=, keepdims=)``, ``amax``, ``stack(axis=)``,
``multiply(out=)``, ``nan_to_num``, ``nextafter``, ``full_like`` and the dtype names), and the
few operations spelled differently through the functions here. Every function does on both
backends the same IEEE operations on the same values (a copy, a gather, a cast, a mask), so
an elementwise computation gives the same bits on both; only matrix products may sum in a
different order.

Torch is imported only when a torch tensor is met (or asked for, :func:`torch_module`), so
code handed numpy arrays never loads it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

if TYPE_CHECKING:
    import torch

    Array: TypeAlias = np.ndarray | torch.Tensor
else:
    Array: TypeAlias = Any


def torch_module() -> ModuleType:
    """The torch module (imported on first use)."""
    import torch

    return torch


def torch_loaded() -> bool:
    """Whether torch is already imported in this process (using it then costs nothing)."""
    return "torch" in sys.modules


def is_numpy(array: Array) -> bool:
    """Whether ``array`` is a numpy array (else a torch tensor)."""
    return isinstance(array, np.ndarray | np.generic)


def namespace(array: Array) -> ModuleType:
    """The module whose functions compute on ``array``: ``numpy`` or ``torch``."""
    return np if is_numpy(array) else torch_module()


def from_numpy(array: np.ndarray, like: Array | bool) -> Array:
    """``array`` on the backend of ``like`` (an array, or ``True`` for torch): itself for
    numpy, a tensor sharing its memory for torch."""
    if like is False or (like is not True and is_numpy(like)):
        return array
    return torch_module().from_numpy(array)


def to_numpy(array: Array) -> np.ndarray:
    """``array`` as a numpy array (sharing memory where it can)."""
    return array if isinstance(array, np.ndarray) else array.numpy()


def astype(array: Array, dtype: Any) -> Array:
    """``array`` converted to ``dtype`` (of its own namespace; itself when it has it)."""
    if is_numpy(array):
        return array.astype(dtype, copy=False)
    return array.to(dtype)


def copy(array: Array) -> Array:
    """A fresh copy of ``array``."""
    return array.copy() if is_numpy(array) else array.clone()


def take(array: Array, index: Array, axis: int = 0) -> Array:
    """The entries of ``array`` at ``index`` along ``axis`` (a gather)."""
    if is_numpy(array):
        return np.take(array, index, axis=axis)
    return array.index_select(axis, index)


def replace_nonfinite(array: Array, nan: float, posinf: float, neginf: float) -> Array:
    """``array`` with NaN, ``+∞`` and ``−∞`` replaced by the given values, in place."""
    if is_numpy(array):
        return np.nan_to_num(array, copy=False, nan=nan, posinf=posinf, neginf=neginf)
    return array.nan_to_num_(nan=nan, posinf=posinf, neginf=neginf)


def nonzero(mask: Array) -> tuple[Array, ...]:
    """The indices of the true entries of ``mask``, one index array per axis (row-major)."""
    return np.nonzero(mask) if is_numpy(mask) else mask.nonzero(as_tuple=True)


def size(array: Array) -> int:
    """The number of entries of ``array``."""
    return int(array.size) if is_numpy(array) else array.numel()


def repeat(array: Array, times: int) -> Array:
    """Each entry of a 1-D ``array`` repeated ``times`` times in place (``0 0 1 1 …``)."""
    return np.repeat(array, times) if is_numpy(array) else array.repeat_interleave(times)


def unique_rows(array: Array) -> tuple[Array, Array]:
    """The distinct rows of a 2-D ``array`` (sorted) and each row's index among them."""
    if is_numpy(array):
        rows, inverse = np.unique(array, axis=0, return_inverse=True)
        return rows, inverse.reshape(-1)
    return torch_module().unique(array, dim=0, return_inverse=True)


def unique_values(array: Array) -> tuple[Array, Array]:
    """The distinct entries of a 1-D ``array`` (sorted) and each entry's index among them."""
    if is_numpy(array):
        values, inverse = np.unique(array, return_inverse=True)
        return values, inverse.reshape(-1)
    return torch_module().unique(array, return_inverse=True)


def shared_rows(array: Array) -> bool:
    """Whether ``array`` repeats one block along its first axis as a broadcast view (stride
    0), so that the block itself stands for every row."""
    return (array.strides[0] if is_numpy(array) else array.stride(0)) == 0


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """A context in which torch, if this process has imported it, runs its operations on one
    thread (the caller's setting restored after); without torch there is nothing to set."""
    if not torch_loaded():
        yield
        return
    torch = torch_module()
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def no_grad(array: Array) -> contextlib.AbstractContextManager[Any]:
    """The context bounds are computed in on ``array``'s backend: torch records no autograd
    graph; numpy raises no floating-point warnings (an overflow, ``∞ − ∞`` or ``0·∞`` is a
    value the propagators handle, as torch computes it silently)."""
    if is_numpy(array):
        return np.errstate(all="ignore")
    return torch_module().no_grad()

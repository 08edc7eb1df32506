"""Split probes for one-sided boxes: the column whose split moves the wanted end of a box's
output atoms furthest, judged on the children themselves.

On a box where only one side of an output atom is wanted (directed selection: on the
103-787-69-2 net a woman's box must prove the favourable logit difference negative, a man's
positive; the other side never moves the deciding end), every candidate split is tried: both
children are built exactly as :meth:`~verifier.pv.splitting.Splitter.split` builds them,
their output atoms estimated by interval arithmetic, and the column whose children's
estimates on the wanted side, weighted by the children's shares of the parent's marginal
mass, are best becomes the box's probe. CROWN's input coefficients (the smear rule) see an
input's share of the linear bound, not of the relaxation error, which is most of the gap
behind a wide unstable layer; the children's intervals see both.

The estimate is **not a bound**: plain float interval arithmetic without the rounding margin
(:mod:`verifier.bounds` gives the bounds), the first layer's ranges updated from the parent's
by the one input the split narrows. A probe only chooses a column and never touches a bound:
every split is sound whatever column it cuts.
"""

from __future__ import annotations

import numpy as np
import torch

from verifier.network import Network
from verifier.pv.atoms import AtomBounds
from verifier.pv.splitting import Splitter

NO_PROBE = -1
"""The probe of a box that was not probed (the split rule decides)."""
PROBED_COLUMNS = 3
"""How many of a box's candidate columns, those the smear rule scores highest, are tried."""
PROBED_SHARE = 0.5
"""The share of a round's chosen boxes probed before they are split, the heaviest."""


def one_sided(low: np.ndarray, high: np.ndarray, strict: np.ndarray,
              sides: np.ndarray) -> np.ndarray:
    """Per box and atom, ``(B, S)`` in ``{-1, 0, 1}``: ``1`` where the atom is open and only
    proving it (raising its lower end past 0) is wanted, ``-1`` where only refuting it
    (lowering its upper end), 0 elsewhere. ``low``/``high``: the atoms' bounds ``(B, S)``;
    ``strict``: ``(S,)``; ``sides``: ``(B, S, 2)`` wanted sides (proving, refuting), as
    :meth:`~verifier.pv.atoms.AtomBounds.wanted_sides` gives them."""
    with np.errstate(invalid="ignore"):
        open_atom = np.where(strict, (low <= 0.0) & (high > 0.0), (low < 0.0) & (high >= 0.0))
    prove, refute = sides[..., 0], sides[..., 1]
    return np.where(open_atom & prove & ~refute, 1,
                    np.where(open_atom & refute & ~prove, -1, 0)).astype(np.int8)


class SplitProbe:
    """The probes of one PV run (see the module): its network as float32 tensors (an
    estimate, half the memory traffic of float64), its splitter and its atoms."""

    def __init__(self, network: Network, splitter: Splitter, atoms: AtomBounds) -> None:
        layers = network.lowered().layers
        self.splitter = splitter
        self.atoms = atoms
        self.weights = [_single(layer.weight) for layer in layers]
        self.biases = [_single(layer.bias) for layer in layers]
        self.slopes = [None if layer.activation == "none"
                       else _single(layer.negative_slope_effective) for layer in layers]
        outputs = atoms.reads_outputs & ~(atoms.input_rows != 0.0).any(axis=1)
        self.outputs = outputs
        self.rows = _single(atoms.output_rows[outputs])
        self.constants = atoms.constants[outputs]

    def __call__(self, lo: np.ndarray, hi: np.ndarray, drive: np.ndarray, order: np.ndarray,
                 undecided: np.ndarray, direction: np.ndarray) -> np.ndarray:
        """Per box, the split column whose two children's estimates on the wanted sides
        (``direction`` ``(B, atoms)``, see :func:`one_sided`: the sum over the output atoms
        that read no input of ``−lower`` where proving is wanted, ``upper`` where refuting
        is), weighted by their marginal mass shares, are least, among the columns
        :meth:`Splitter.candidates` allows; ``order``: each box's category order
        (:meth:`AtomBounds.leading_drive`), as its split uses it; ``undecided``: its open
        atoms ``(B, atoms)``. :data:`NO_PROBE` for boxes without such an atom, with an
        input-atom threshold cut pending (the split takes that cut), or without a finite
        estimate."""
        splitter = self.splitter
        probe = np.full(lo.shape[0], NO_PROBE, dtype=np.int64)
        sign = direction[:, self.outputs]
        wanted = (sign != 0).any(axis=1) & ~splitter.threshold_cuts(lo, hi, undecided)[0]
        rows = np.flatnonzero(wanted)
        if rows.size == 0:
            return probe
        candidates = splitter.candidates(lo[rows], hi[rows])
        score = splitter.smear_scores(lo[rows], hi[rows], drive[rows], order[rows], candidates)
        tried = np.zeros_like(candidates)
        top = np.argsort(-score, axis=1, kind="stable")[:, :PROBED_COLUMNS]
        np.put_along_axis(tried, top, True, axis=1)
        box, dims = np.nonzero(tried & candidates)
        if box.size == 0:
            return probe
        parent = rows[box]
        child_lo, child_hi, out_lo, out_hi = self.estimate_children(
            lo[rows], hi[rows], box, dims, order[rows])
        pairs = box.size
        wanted_sign = np.tile(sign[parent], (2, 1))
        side = np.where(wanted_sign > 0, -out_lo, np.where(wanted_sign < 0, out_hi, 0.0))
        side = side.sum(axis=1)
        left_share = self._left_share(child_lo[:pairs], child_hi[:pairs], child_lo[pairs:],
                                      child_hi[pairs:], dims)
        with np.errstate(invalid="ignore"):
            score = left_share * side[:pairs] + (1.0 - left_share) * side[pairs:]
        score = np.where(np.isfinite(score), score, np.inf)
        best = np.full(rows.size, np.inf)
        np.minimum.at(best, box, score)
        hits = np.flatnonzero((score == best[box]) & np.isfinite(score))
        first_hit = hits[np.unique(box[hits], return_index=True)[1]]
        probe[rows[box[first_hit]]] = dims[first_hit]
        return probe

    def estimate_children(
        self, lo: np.ndarray, hi: np.ndarray, box: np.ndarray, dims: np.ndarray,
        order: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The two children of splitting box ``box[i]`` of ``lo``/``hi`` along column
        ``dims[i]`` (``order``: the boxes' category orders), built as
        :meth:`Splitter.split` builds them, left ones first, and per child an estimate
        (**not a bound**: float32 interval arithmetic without margin) of the output atoms that
        read no input: ``(child_lo, child_hi, low, high)``, ``low``/``high`` ``(2P, S)``."""
        splitter = self.splitter
        left_lo, left_hi, right_lo, right_hi = splitter.children(
            lo[box], hi[box], dims, order[box])
        child_lo = np.concatenate([left_lo, right_lo])
        child_hi = np.concatenate([left_hi, right_hi])
        splitter.snap(child_lo, child_hi)
        with torch.no_grad():
            first_lo, first_hi = self._first_layer(lo, hi)
            z_lo, z_hi = self._children_first_layer(
                first_lo[box], first_hi[box], lo[box], hi[box], child_lo, child_hi,
                np.concatenate([dims, dims]))
            out_lo, out_hi = self._rest(z_lo, z_hi)
        return (child_lo, child_hi, out_lo.numpy() + self.constants,
                out_hi.numpy() + self.constants)

    def estimate(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The same estimate of the output atoms that read no input on whole boxes."""
        with torch.no_grad():
            out_lo, out_hi = self._rest(*self._first_layer(lo, hi))
        return out_lo.numpy() + self.constants, out_hi.numpy() + self.constants

    def _first_layer(self, lo: np.ndarray, hi: np.ndarray
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """The first layer's pre-activation ranges over the boxes (one-hot groups over their
        allowed categories), in float without margin."""
        weight, bias = self.weights[0], self.biases[0]
        splitter = self.splitter
        free = torch.from_numpy(splitter.group_of < 0)
        lo_t, hi_t = _single(lo), _single(hi)
        mid = torch.where(free, (lo_t + hi_t) * 0.5, 0.0)
        rad = torch.where(free, (hi_t - lo_t) * 0.5, 0.0)
        center = mid @ weight.T + bias
        radius = rad @ weight.abs().T
        low, high = center - radius, center + radius
        for group in range(splitter.group_index.shape[0]):
            g_lo, g_hi = self._group_range(group, splitter.group_allowed(lo, hi, group))
            low += g_lo
            high += g_hi
        return low, high

    def _group_range(self, group: int, allowed: np.ndarray
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per box, the smallest and largest first-layer weights over the group's allowed
        categories (0 where none is allowed), computed once per distinct allowed set."""
        patterns, inverse = np.unique(allowed, axis=0, return_inverse=True)
        columns = self.splitter.group_index[group]
        values = self.weights[0][:, columns]  # (neurons, slots)
        mask = torch.from_numpy(patterns)[:, None, :]
        smallest = torch.where(mask, values[None], np.inf).amin(dim=2)
        largest = torch.where(mask, values[None], -np.inf).amax(dim=2)
        some = mask.any(dim=2)
        smallest = torch.where(some, smallest, 0.0)
        largest = torch.where(some, largest, 0.0)
        index = torch.from_numpy(inverse.reshape(-1))
        return smallest[index], largest[index]

    def _children_first_layer(
        self, parent_lo: torch.Tensor, parent_hi: torch.Tensor, lo: np.ndarray, hi: np.ndarray,
        child_lo: np.ndarray, child_hi: np.ndarray, dims: np.ndarray,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The children's first-layer ranges: each parent's (``parent_lo``/``parent_hi`` per
        pair, repeated for both children) with the contribution of the one input (column or
        one-hot group) its split narrows replaced by the child's."""
        splitter = self.splitter
        weight = self.weights[0]
        z_lo = torch.cat([parent_lo, parent_lo])
        z_hi = torch.cat([parent_hi, parent_hi])
        both_lo, both_hi = np.concatenate([lo, lo]), np.concatenate([hi, hi])
        groups = splitter.group_of[dims]
        plain = np.flatnonzero(groups < 0)
        if plain.size:
            column = weight[:, dims[plain]].T  # (pairs, neurons)
            for corners, sign in (((both_lo, both_hi), -1.0), ((child_lo, child_hi), 1.0)):
                at_lo = column * _single(corners[0][plain, dims[plain]])[:, None]
                at_hi = column * _single(corners[1][plain, dims[plain]])[:, None]
                z_lo[plain] += sign * torch.minimum(at_lo, at_hi)
                z_hi[plain] += sign * torch.maximum(at_lo, at_hi)
        for group in np.unique(groups[groups >= 0]):
            chosen = np.flatnonzero(groups == group)
            before = splitter.group_allowed(both_lo[chosen], both_hi[chosen], int(group))
            after = splitter.group_allowed(child_lo[chosen], child_hi[chosen], int(group))
            b_lo, b_hi = self._group_range(int(group), before)
            a_lo, a_hi = self._group_range(int(group), after)
            z_lo[chosen] += a_lo - b_lo
            z_hi[chosen] += a_hi - b_hi
        return z_lo, z_hi

    def _rest(self, z_lo: torch.Tensor, z_hi: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor]:
        """Interval arithmetic from the first layer's pre-activations to the output atoms'
        rows (without their constants)."""
        count = len(self.weights)
        folded = False
        for index in range(count):
            slope = self.slopes[index]
            if slope is not None:
                z_lo = torch.where(z_lo < 0, z_lo * slope, z_lo)
                z_hi = torch.where(z_hi < 0, z_hi * slope, z_hi)
            if index + 1 == count:
                break
            weight, bias = self.weights[index + 1], self.biases[index + 1]
            if index + 2 == count and self.slopes[-1] is None:
                weight, bias = self.rows @ weight, self.rows @ bias
                folded = True
            mid, rad = (z_lo + z_hi) * 0.5, (z_hi - z_lo) * 0.5
            center, radius = mid @ weight.T + bias, rad @ weight.abs().T
            z_lo, z_hi = center - radius, center + radius
        if not folded:
            mid, rad = (z_lo + z_hi) * 0.5, (z_hi - z_lo) * 0.5
            center, radius = mid @ self.rows.T, rad @ self.rows.abs().T
            z_lo, z_hi = center - radius, center + radius
        return z_lo, z_hi

    def _left_share(self, left_lo: np.ndarray, left_hi: np.ndarray, right_lo: np.ndarray,
                    right_hi: np.ndarray, dims: np.ndarray) -> np.ndarray:
        """Per pair, the left child's share of the two children's marginal mass along the
        split input: a one-hot group's categories, a value set's values (the population's
        marginals, :class:`Splitter`'s), otherwise the widths (integer values counted)."""
        splitter = self.splitter
        left = np.zeros(dims.size)
        right = np.zeros(dims.size)
        rows = np.arange(dims.size)
        groups = splitter.group_of[dims]
        for group in np.unique(groups[groups >= 0]):
            chosen = np.flatnonzero(groups == group)
            mass = splitter.category_mass[group]
            left[chosen] = splitter.group_allowed(
                left_lo[chosen], left_hi[chosen], int(group)) @ mass
            right[chosen] = splitter.group_allowed(
                right_lo[chosen], right_hi[chosen], int(group)) @ mass
        valued = np.zeros(dims.size, dtype=bool)
        for column, values in splitter.atom_columns:
            chosen = np.flatnonzero(dims == column)
            if chosen.size == 0:
                continue
            valued[chosen] = True
            prefix = splitter.atom_prefix[column]
            for side, (c_lo, c_hi) in ((left, (left_lo, left_hi)), (right, (right_lo, right_hi))):
                first = np.searchsorted(values, c_lo[chosen, column], side="left")
                last = np.searchsorted(values, c_hi[chosen, column], side="right")
                side[chosen] = prefix[last] - prefix[first]
        other = (groups < 0) & ~valued
        if other.any():
            d = dims[other]
            count = splitter.domain.integer[d].astype(np.float64)
            left[other] = left_hi[rows[other], d] - left_lo[rows[other], d] + count
            right[other] = right_hi[rows[other], d] - right_lo[rows[other], d] + count
        total = left + right
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where((total > 0.0) & np.isfinite(total), left / total, 0.5)


def _single(values: np.ndarray) -> torch.Tensor:
    """``values`` as a float32 tensor (infinite sides stay infinite)."""
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))

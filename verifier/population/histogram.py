"""A histogram on the integers: bins of consecutive integers, uniform within each bin.

JSON form::

    {"kind": "integer_histogram", "bins": [[0, 0], [114, 2000], [2001, 99999]],
     "probabilities": [0.92, 0.05, 0.03]}

``bins`` are closed integer ranges ``[first, last]`` (``first <= last``), sorted and
disjoint; bin ``i`` holds probability ``p_i`` spread evenly over its ``last − first + 1``
integers. A one-integer bin is an atom (e.g. the 92 % zeros of a capital-gain column). The
probabilities are validated and normalised as every other kind's
(:func:`verifier.population.distributions.check_probabilities`).

Exact box probability: ``P(a <= X <= b) = Σ_i p_i · |[a, b] ∩ bin_i ∩ ℤ| / |bin_i ∩ ℤ|``.
The integer counts are exact in float64 (ranges below ``2**53``); each term takes one
division and one product, and the sum ``k`` additions, so the float value is within a
relative ``(2k + 6)·eps`` of the exact sum of the normalised probabilities' terms; the
enclosure widens it by ``FUNCTION_REL_MARGIN + 4 (k + 3) eps`` relative (outward, clipped to
[0, 1]).
A box that meets no charged integer has the exact probability 0.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Literal

import numpy as np
from pydantic import model_validator

from verifier.numerics import EPS, FUNCTION_REL_MARGIN
from verifier.population.distributions import Marginal, check_probabilities, renormalisation
from verifier.population.rounding import Enclosure

MAX_INTEGER = 2**52
LISTED_ATOMS = 4096


class IntegerHistogram(Marginal):
    """Probability ``p_i`` spread evenly over the integers of each bin (module docstring)."""

    kind: Literal["integer_histogram"] = "integer_histogram"
    bins: list[tuple[int, int]]
    probabilities: list[float]

    @model_validator(mode="after")
    def _check_bins(self) -> IntegerHistogram:
        if len(self.bins) != len(self.probabilities):
            raise ValueError(
                f"{len(self.bins)} bins but {len(self.probabilities)} probabilities"
            )
        check_probabilities(self.probabilities, "probabilities")
        previous = None
        for index, (first, last) in enumerate(self.bins):
            if first > last:
                raise ValueError(f"bin {index} [{first}, {last}] is empty (first > last)")
            if max(abs(first), abs(last)) > MAX_INTEGER:
                raise ValueError(f"bin {index} [{first}, {last}] leaves ±2**52")
            if previous is not None and first <= previous:
                raise ValueError(
                    f"bin {index} [{first}, {last}] overlaps or precedes the bin before it "
                    "(bins must be sorted and disjoint)"
                )
            previous = last
        return self

    @cached_property
    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """First and last integer, size and normalised probability of every charged bin."""
        probabilities = check_probabilities(self.probabilities, "probabilities")
        charged = probabilities > 0
        ends = np.asarray(self.bins, dtype=np.float64).reshape(-1, 2)[charged]
        first, last = ends[:, 0], ends[:, 1]
        return first, last, last - first + 1.0, probabilities[charged]

    @property
    def margin(self) -> float:
        """Relative error bound of a box probability (module docstring)."""
        return FUNCTION_REL_MARGIN + 4.0 * (len(self.bins) + 3) * EPS

    def interval(self, a: np.ndarray, b: np.ndarray) -> Enclosure:
        a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
        first, last, size, probability = self._arrays
        start = np.maximum(np.ceil(a)[..., None], first)
        stop = np.minimum(np.floor(b)[..., None], last)
        count = np.maximum(stop - start + 1.0, 0.0)
        value = (probability * (count / size)).sum(axis=-1)
        return Enclosure.from_error(value, self.margin * value)

    def _charged_integers_in(self, lo: float, hi: float) -> tuple[float, float] | None:
        first, last, _, _ = self._arrays
        start = np.maximum(math.ceil(lo) if math.isfinite(lo) else lo, first)
        stop = np.minimum(math.floor(hi) if math.isfinite(hi) else hi, last)
        keep = start <= stop
        if not keep.any():
            return None
        return float(start[keep].min()), float(stop[keep].max())

    def has_atom(self, t: float) -> bool:
        return float(t).is_integer() and self._charged_integers_in(t, t) is not None

    def mass_inside(self, s: float, t: float) -> bool:
        low = math.floor(s) + 1.0 if math.isfinite(s) else s
        high = math.ceil(t) - 1.0 if math.isfinite(t) else t
        return low <= high and self._charged_integers_in(low, high) is not None

    def support_in(self, lo: float, hi: float) -> tuple[float, float] | None:
        return self._charged_integers_in(lo, hi)

    @property
    def atomless(self) -> bool:
        return False

    @property
    def integer_valued(self) -> bool:
        return True

    def renormalised(self) -> list[str]:
        return renormalisation(self.probabilities, "probabilities")

    def integer_count(self) -> int:
        """How many integers the charged bins hold."""
        return int(self._arrays[2].sum())

    def charged_integers(self) -> np.ndarray:
        """Every integer of positive probability, sorted."""
        first, last, _, _ = self._arrays
        return np.concatenate([np.arange(a, b + 1.0) for a, b in zip(first, last, strict=True)])

    def column_atoms(self) -> list[np.ndarray | None]:
        if self.integer_count() > LISTED_ATOMS:
            return [None]
        return [self.charged_integers()]

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        first, _, size, probability = self._arrays
        chosen = rng.choice(first.size, size=n, p=probability / probability.sum())
        offset = np.floor(rng.random(n) * size[chosen])
        return (first[chosen] + np.minimum(offset, size[chosen] - 1.0)).reshape(n, 1)

    def summary(self) -> str:
        parts = ", ".join(
            (f"{a}: {p:.6g}" if a == b else f"[{a}, {b}]: {p:.6g}")
            for (a, b), p in zip(self.bins, self.probabilities, strict=True)
        )
        return f"IntegerHistogram({{{parts}}})"

"""The mass of a prior term's continuous factors (:class:`~verifier.wmi.terms.Term`) without
integrating a region: :func:`factor_masses` multiplies its 1-D densities' certified totals
(:meth:`~verifier.wmi.marginals.Density1D.total`) and its polynomial factors' closed-form
integrals (:func:`~verifier.wmi.polynomial.box_integral`), each product widened by the
relative ``FUNCTION_REL_MARGIN``; :func:`factor_mass` is its upper end, and
:class:`SkippedMass` adds those upper ends up for the terms a query builder leaves out, whose
mass then enters as ``lost`` (counted as possibly violating).
"""

from __future__ import annotations

from verifier.numerics import FUNCTION_REL_MARGIN, scaled_down, scaled_up
from verifier.wmi.polynomial import box_integral
from verifier.wmi.terms import Term, TermSet


def factor_masses(term: Term, skip: int | None = None) -> tuple[float, float]:
    """Enclosure of the mass of the term's continuous factors other than column ``skip``
    (polynomial pieces integrated in float64, widened by the relative
    ``FUNCTION_REL_MARGIN``)."""
    low = high = 1.0
    for j, density in term.densities.items():
        if j != skip:
            total = density.total()
            low, high = low * total[0], high * total[1]
    for factor in term.poly:
        if skip not in factor.positions:
            mass = sum(box_integral(piece.polynomial, piece.lower, piece.upper)
                       for piece in factor.pieces)
            low = scaled_down(low * mass, FUNCTION_REL_MARGIN)
            high = scaled_up(high * mass, FUNCTION_REL_MARGIN)
    return low, high


def factor_mass(term: Term, skip: int | None = None) -> float:
    """Upper bound on the mass of the term's continuous factors other than column ``skip``."""
    return factor_masses(term, skip)[1]


class SkippedMass:
    """Running upper bound of the mass of the terms a builder leaves out at its deadline;
    terms sharing their continuous part (:meth:`Term.continuous_key`) share one bound of its
    mass, so leaving out thousands of terms stays cheap."""

    def __init__(self) -> None:
        self.total = 0.0
        self.masses: dict[tuple, float] = {}

    def add(self, term: Term, factor: float = 1.0) -> None:
        key = term.continuous_key()
        if key not in self.masses:
            self.masses[key] = factor_mass(term)
        self.total += term.coefficient[2] * self.masses[key] * factor


def termset_mass(termset: TermSet) -> float:
    """Upper bound of the total mass of the terms (1 up to rounding)."""
    skipped = SkippedMass()
    for term in termset.terms:
        skipped.add(term)
    return skipped.total

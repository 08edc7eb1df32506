"""The values ``offset + step·k`` of integer codes ``k`` on a grid, correctly rounded: a
population's coded columns (``verifier.population.schema``) meet the data's units here."""

from __future__ import annotations

from fractions import Fraction

import numpy as np


def grid_values(codes: np.ndarray, step: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """float64 of ``codes``' shape (``(..., d)``): the values ``offset + step·k`` of codes ``k``
    of columns with steps and offsets ``(d,)``, each the float nearest to the real value, so
    exact whenever that value is a float (as every fitted grid's values are; ``offset +
    step * k`` in float arithmetic rounds twice and can miss them by an ulp). Steps are
    positive, so an infinite code stays as it is (the infinite value of its sign); columns
    with step 1 and offset 0 pass unchanged."""
    values = np.array(codes, dtype=np.float64)
    for column in np.flatnonzero((step != 1.0) | (offset != 0.0)):
        ends = values[..., column]
        finite = np.isfinite(ends)
        distinct, inverse = np.unique(ends[finite], return_inverse=True)
        if distinct.size:
            exact = np.array([float(Fraction(float(offset[column]))
                                    + Fraction(float(step[column])) * Fraction(code))
                              for code in distinct.tolist()], dtype=np.float64)
            ends[finite] = exact[inverse.reshape(-1)]
    return values

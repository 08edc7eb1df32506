"""The income data of paper 002 §V (Table IV): who earns more than 35 000 a year.

Every row is one worker, drawn independently (the generator of the paper, with the min/max
typos of its table corrected as in the released code):

* ``female`` ~ Bernoulli(0.5);
* ``hpw`` (hours per week) = 5 · clip(N(7, 1), 2, 12);
* ``yexp`` (years of experience) = clip(N(20, 7), 0, 55);
* ``hw`` (hourly wage) = N(1, 0.02) · (500 · yexp + 30000) / 1920;
* biased variant only: ``hw`` ← hw + hw · N(0.1, 0.02) · (1 − 2 · female) (men earn about
  10 % more, women about 10 % less);
* ``income`` = 48 · hpw · hw and the label ``y`` = income > 35000.

The classifier of the paper reads (hpw, yexp, hw); ``female`` is the protected attribute.
Generation is seeded: the same arguments always give the same frame, and both variants
draw the same random numbers, so with one seed they describe the same workers (the biased
variant only applies the wage gap).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from verifier.errors import CertgateInputError

Variant = Literal["biased", "unbiased"]
VARIANTS: tuple[str, ...] = ("biased", "unbiased")
FEATURES: tuple[str, ...] = ("hpw", "yexp", "hw")
PROTECTED = "female"
INCOME_THRESHOLD = 35000.0
HPW_BOUNDS = (10.0, 60.0)
YEXP_BOUNDS = (0.0, 55.0)
WEEKS_PER_YEAR = 48.0
HOURS_PER_YEAR = 1920.0
WAGE_GAP_MEAN = 0.1
WAGE_GAP_STD = 0.02


def generate_income_data(rows: int, *, variant: Variant, seed: int = 0) -> pd.DataFrame:
    """``rows`` workers of the Table IV generator: columns ``female`` (0/1 int), ``hpw``,
    ``yexp``, ``hw``, ``income`` (floats) and ``y`` (0/1 int).

    Raises:
        CertgateInputError: ``rows`` < 1 or an unknown ``variant``.
    """
    if rows < 1:
        raise CertgateInputError(f"rows must be at least 1, got {rows}")
    if variant not in VARIANTS:
        raise CertgateInputError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    rng = np.random.default_rng(seed)
    female = rng.binomial(1, 0.5, rows)
    hpw = 5.0 * np.clip(rng.normal(7.0, 1.0, rows), 2.0, 12.0)
    yexp = np.clip(rng.normal(20.0, 7.0, rows), *YEXP_BOUNDS)
    hw = rng.normal(1.0, 0.02, rows) * (500.0 * yexp + 30000.0) / HOURS_PER_YEAR
    gap = rng.normal(WAGE_GAP_MEAN, WAGE_GAP_STD, rows)
    if variant == "biased":
        hw = hw + hw * gap * (1.0 - 2.0 * female)
    income = WEEKS_PER_YEAR * hpw * hw
    return pd.DataFrame({
        PROTECTED: female.astype(np.int64),
        "hpw": hpw,
        "yexp": yexp,
        "hw": hw,
        "income": income,
        "y": (income > INCOME_THRESHOLD).astype(np.int64),
    })

"""A population with a known dependence, for the population-fidelity tests.

``sex`` ~ Bernoulli(1/2); ``proxy`` is a noisy copy of ``sex`` (the same value with
probability ``agreement``, else the other); ``income`` ~ Uniform(0, 1), independent. The model
reads only ``proxy``: its logit is ``10·proxy − 5``, so it predicts class 1 exactly when
``proxy = 1``. Hence, in closed form, ``P(class 1 | sex = 0) = 1 − agreement`` and
``P(class 1 | sex = 1) = agreement``: the parity ratio is ``(1 − agreement) / agreement``.
An independent product fitted to such data cuts the dependence and gives the ratio 1.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

COLUMNS = ["sex", "proxy", "income"]
PARITY = {"kind": "demographic_parity", "protected": "sex", "privileged": 1,
          "favorable_class": 1, "gamma": 0.8, "timeout_s": 30}


def proxy_model() -> torch.nn.Sequential:
    """The single-logit model ``10·proxy − 5`` (reads only ``proxy``)."""
    layer = torch.nn.Linear(3, 1)
    with torch.no_grad():
        layer.weight[:] = torch.tensor([[0.0, 10.0, 0.0]])
        layer.bias[:] = torch.tensor([-5.0])
    return torch.nn.Sequential(layer).double().eval()


def proxy_frame(rows: int, agreement: float, seed: int) -> pd.DataFrame:
    """``rows`` seeded draws of the module's distribution."""
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, rows)
    proxy = np.where(rng.random(rows) < agreement, sex, 1 - sex)
    return pd.DataFrame({"sex": sex, "proxy": proxy, "income": rng.random(rows)})


def true_ratio(agreement: float) -> float:
    """The closed-form parity ratio of the module docstring."""
    return (1.0 - agreement) / agreement


def true_difference(agreement: float) -> float:
    """The closed-form ``|P(1 | sex = 0) − P(1 | sex = 1)|``."""
    return abs(2.0 * agreement - 1.0)

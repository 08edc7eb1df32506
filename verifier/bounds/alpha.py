"""alpha-CROWN: the lower slopes of the final bound's relaxations optimised by Adam, every
iterate sound (any slope in the activation's range gives a sound relaxation), the best
bound over the iterations kept."""

from __future__ import annotations

import numpy as np
import torch

from verifier.bounds.activation import _alpha_slopes, _Relaxation, _through_relaxation
from verifier.bounds.affine import _Affine
from verifier.bounds.onehot import _group_extreme, _input_halves, _OneHot


def _alpha_optimise(
    affines: list[_Affine], relaxations: dict[int, _Relaxation], spec: torch.Tensor,
    spec_margin: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, steps: int,
    learning_rate: float, onehot: _OneHot | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Best lower/upper spec bounds over ``steps`` Adam steps on the lower slopes.

    Every lower slope in ``[slope, 1]`` gives a sound relaxation, so every iterate's bound is
    sound and the best one over the iterations is returned (starting from CROWN's slopes).
    The margins are CROWN's: their magnitudes already allow any slope in that range.
    """
    batch, rows, _ = spec.shape
    both = torch.cat([spec, -spec], dim=1)  # lower bounds of both signs: (B, 2S, out)
    margin = torch.cat([spec_margin, spec_margin], dim=1)
    kink = sorted(relaxations)
    minimum = {k: affines[k].slope for k in kink}
    params = {
        k: relaxations[k].lower_slope.unsqueeze(1).expand(batch, 2 * rows, -1).clone()
        .requires_grad_(True)
        for k in kink
    }
    optimiser = torch.optim.Adam(list(params.values()), lr=learning_rate)
    best = torch.full((batch, 2 * rows), -np.inf, dtype=torch.float64)
    mid, rad = _input_halves(lo, hi, onehot)
    mid, rad = mid.unsqueeze(1), rad.unsqueeze(1)
    for _ in range(steps + 1):
        coeffs = both @ affines[-1].weight
        const = both @ affines[-1].bias
        for index in range(len(affines) - 2, -1, -1):
            if index in params:
                relaxation = relaxations[index]
                coeffs, const = _through_relaxation(
                    coeffs, const, params[index], relaxation.upper_slope.unsqueeze(1),
                    relaxation.upper_intercept.unsqueeze(1),
                )
            const = const + coeffs @ affines[index].bias
            coeffs = coeffs @ affines[index].weight
        bound = (coeffs * mid).sum(-1) - (coeffs.abs() * rad).sum(-1) + const - margin
        if onehot is not None:
            bound = bound + _group_extreme(coeffs, onehot)
        usable = bound.detach()
        best = torch.maximum(best, torch.where(torch.isnan(usable), -np.inf, usable))
        if steps == 0:
            break
        optimiser.zero_grad()
        (-bound.sum()).backward()
        optimiser.step()
        with torch.no_grad():
            for k, param in params.items():
                param.copy_(_alpha_slopes(param, minimum[k]))
    best = torch.where(best == np.inf, -np.inf, best)
    return best[:, :rows], -best[:, rows:]

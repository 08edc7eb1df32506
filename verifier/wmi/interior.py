"""Proofs about the interior of a polytope ``{z : A z <= b}`` (float data read as exact
rationals), so that no solver tolerance decides whether a WMI cell has mass.

* :func:`strictly_inside` proves ``A z < b`` row by row at a point: the float residual
  ``b − A z`` must exceed its rounding error bound ``γ_{D+2} (|b| + |A| |z|)`` (Higham's
  ``γ_n = n u / (1 − n u)``), an error relative to the magnitudes involved, never an absolute
  threshold. A point strictly inside every row proves a positive volume.
* :func:`volume_bound` bounds the volume of the polytope from multipliers ``y >= 0`` (an LP's
  duals). With slacks ``s_i = b_i − a_i·z >= 0``, every point of the polytope inside a box
  ``B`` holding it has ``Σ y_i s_i = yᵀb − (Aᵀy)ᵀz <= E := yᵀb − min_{z ∈ B} (Aᵀy)ᵀz``.
  ``E <= 0`` proves that no point has every slack positive: the polytope is empty or of
  measure zero. Otherwise ``s_i <= E / y_i``: the polytope lies in thin slabs, whose volume
  in ``B`` is bounded (Fubini). ``E`` is bounded in float with every rounding error bounded,
  and exactly (rational arithmetic) on a minimal dependent set of rows (a *circuit*: the
  exact null vector of ``A_Sᵀ``, which a measure-zero cell such as ``{a·z <= c, −a·z <= −c}``
  has and float duals only approximate).

Gordan–Motzkin: ``A z < b`` has no solution iff such ``y`` exists with ``Aᵀy = 0`` and
``bᵀy <= 0``; the box form above is the same certificate with the residual ``Aᵀy`` bounded over
``B`` (Neumaier & Shcherbina, Math. Program. 99, 2004). A cell that float rounding of the
model's composed affine maps makes a sliver of relative width ``1e-16`` is neither: its mass is
then bounded through the slab, not dropped.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from verifier.numerics import gamma, scaled_up


def strictly_inside(A: np.ndarray, b: np.ndarray, point: np.ndarray) -> np.ndarray:
    """Per row, whether ``a_i·point < b_i`` holds in real arithmetic (proven; ``False`` says
    nothing)."""
    slack = b - A @ point
    error = gamma(A.shape[1] + 2) * (np.abs(b) + np.abs(A) @ np.abs(point))
    return slack > error


def _float_excess(A: np.ndarray, b: np.ndarray, y: np.ndarray, lower: np.ndarray,
                  upper: np.ndarray) -> float:
    """An upper bound on ``Σ_i y_i (b_i − a_i·z) = bᵀy − (Aᵀy)ᵀz`` over ``z`` in the box,
    every float error bounded."""
    rows, dimension = A.shape
    residual = A.T @ y
    residual_error = gamma(rows + 1) * (np.abs(A.T) @ y)
    ends = np.stack([residual * lower, residual * upper])
    reach = np.maximum(np.abs(lower), np.abs(upper))
    least = ends.min(axis=0) - residual_error * reach
    least_sum = least.sum()
    least_low = least_sum - gamma(dimension + 2) * (np.abs(least).sum() + np.abs(least_sum))
    rhs = float(b @ y)
    rhs_high = rhs + gamma(rows + 1) * float(np.abs(b) @ y)
    excess = rhs_high - least_low
    return excess + gamma(2) * abs(excess)


def _slab_volume(A: np.ndarray, y: np.ndarray, excess: float, lower: np.ndarray,
                 upper: np.ndarray) -> float:
    """An upper bound on the volume of ``P ∩ [lower, upper]`` when every point of ``P`` has
    ``Σ_i y_i s_i <= excess`` with slacks ``s_i = b_i − a_i·z >= 0``: then ``s_i <= excess /
    y_i``, so along coordinate ``j`` (the others fixed) ``z_j`` ranges over at most
    ``excess / (y_i |a_ij|)`` and the volume is at most ``vol(box) · excess / (y_i |a_ij|
    h_j)`` for every row ``i`` and column ``j`` (Fubini; ``h`` the box's side lengths)."""
    sides = upper - lower
    volume = float(np.prod(sides))
    reach = float((y * (np.abs(A) * sides[None, :]).max(axis=1)).max())
    if not reach > 0:
        return volume
    return min(volume, scaled_up(volume * excess / reach, gamma(A.shape[1] + 8)))


def safe_box(A: np.ndarray, b: np.ndarray, duals: np.ndarray, lower: np.ndarray,
             upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A box proven to hold ``{z ∈ [lower, upper] : A z <= b}`` from approximate LP
    multipliers ``duals (D, 2, rows)`` of ``min z_j`` / ``max z_j``: for ``c = ±e_j`` and
    ``y >= 0``, every such ``z`` has ``c·z >= −yᵀb + min_{[lower, upper]} (c + Aᵀy)·z``
    (weak duality with the residual bounded over the box, every float error bounded),
    intersected with ``[lower, upper]`` (which must be finite); a side whose sums overflow
    keeps the box's end."""
    dimension, rows = A.shape[1], A.shape[0]
    y = np.where(np.isfinite(duals), np.maximum(duals, 0.0), 0.0).reshape(2 * dimension, rows)
    costs = np.zeros((dimension, 2, dimension))
    costs[np.arange(dimension), 0, np.arange(dimension)] = 1.0
    costs[np.arange(dimension), 1, np.arange(dimension)] = -1.0
    costs = costs.reshape(2 * dimension, dimension)
    with np.errstate(invalid="ignore", over="ignore"):
        residual = costs + y @ A
        residual_error = gamma(rows + 2) * (np.abs(costs) + y @ np.abs(A))
        reach = np.maximum(np.abs(lower), np.abs(upper))
        least = np.minimum(residual * lower, residual * upper) - residual_error * reach
        least_sum = least.sum(axis=1)
        least_low = least_sum - gamma(dimension + 2) * (np.abs(least).sum(axis=1)
                                                        + np.abs(least_sum))
        rhs = y @ b
        rhs_high = rhs + gamma(rows + 1) * (y @ np.abs(b)) + gamma(2) * np.abs(rhs)
        bound = (least_low - rhs_high).reshape(dimension, 2)
        bound_low = bound - gamma(2) * np.abs(bound)
    # an overflow (inf − inf, inf·0) proves nothing: that side keeps the box's end
    bound_low = np.where(np.isnan(bound_low), -np.inf, bound_low)
    return (np.maximum(bound_low[:, 0], lower), np.minimum(-bound_low[:, 1], upper))


def _null_vector(columns: list[list[Fraction]]) -> list[Fraction] | None:
    """A non-zero ``y`` with ``Σ_k y_k columns[k] = 0`` when the columns are dependent and
    every proper subset is independent (a circuit), by exact Gaussian elimination."""
    count = len(columns)
    size = len(columns[0])
    # rows of the system M y = 0 with M[j][k] = columns[k][j]
    matrix = [[columns[k][j] for k in range(count)] for j in range(size)]
    pivots: list[int] = []
    row = 0
    for col in range(count):
        found = next((r for r in range(row, size) if matrix[r][col] != 0), None)
        if found is None:
            continue
        matrix[row], matrix[found] = matrix[found], matrix[row]
        pivot = matrix[row][col]
        matrix[row] = [value / pivot for value in matrix[row]]
        for r in range(size):
            if r != row and matrix[r][col] != 0:
                factor = matrix[r][col]
                matrix[r] = [a - factor * c for a, c in zip(matrix[r], matrix[row],
                                                            strict=True)]
        pivots.append(col)
        row += 1
        if row == size:
            break
    free = [col for col in range(count) if col not in pivots]
    if len(free) != 1:
        return None
    vector = [Fraction(0)] * count
    vector[free[0]] = Fraction(1)
    for r, col in enumerate(pivots):
        vector[col] = -matrix[r][free[0]]
    return vector


def _exact_circuit(A: np.ndarray, y: np.ndarray) -> tuple[list[int], list[Fraction]] | None:
    """Rows taken by decreasing multiplier until they become dependent, and that circuit's
    exact null vector with the sign making it ``>= 0``; ``None`` when it has mixed signs."""
    order = [int(i) for i in np.argsort(-y) if y[i] > 0]
    chosen: list[int] = []
    columns: list[list[Fraction]] = []
    for i in order:
        column = [Fraction(float(value)) for value in A[i]]
        vector = _null_vector([*columns, column])
        if vector is None:
            chosen.append(i)
            columns.append(column)
            continue
        if sum(vector) < 0:
            vector = [-value for value in vector]
        if any(value < 0 for value in vector):
            return None
        return [*chosen, i], vector
    return None


def volume_bound(A: np.ndarray, b: np.ndarray, y: np.ndarray, lower: np.ndarray,
                 upper: np.ndarray) -> float:
    """An upper bound on the volume of ``{z : A z <= b}``, which the finite box
    ``[lower, upper]`` must hold (infinite: only the exact circuit is tried), from LP
    multipliers ``y`` (negative entries read as 0):
    ``0.0`` only when the polytope is proven to have no interior (module docstring), else at
    most the box's volume, and tiny for a sliver the multipliers pin down."""
    y = np.where(np.isfinite(y), np.maximum(y, 0.0), 0.0)
    volume = float(np.prod(upper - lower))
    if not np.any(y > 0):
        return volume
    bound = volume
    if np.isfinite(volume):
        excess = _float_excess(A, b, y, lower, upper)
        if excess <= 0:
            return 0.0
        bound = _slab_volume(A, y, excess, lower, upper)
    circuit = _exact_circuit(A, y)
    if circuit is not None:
        rows, vector = circuit
        exact = sum(v * Fraction(float(b[r])) for v, r in zip(vector, rows, strict=True))
        if exact <= 0:
            return 0.0
        if not np.isfinite(volume):
            return volume
        multipliers = np.zeros_like(y)
        multipliers[rows] = [float(v) for v in vector]
        scale = 1.0 + gamma(2 * len(rows) + 4)
        bound = min(bound, _slab_volume(A, multipliers / scale, float(exact) * scale, lower,
                                        upper))
    return bound

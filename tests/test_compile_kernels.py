"""The install compiles the excess bound's kernels for the one signature each that every
audit calls: compiling reaches all four, and random networks' boxes (broadcast, sliced and
transposed tables along the way) never make a kernel compile a second version."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_population_bayesnet import enumerated_points, random_discrete_network

from verifier.population.compile_kernels import compile_kernels
from verifier.population.excess_kernels import KERNELS


def test_compiling_reaches_every_kernel_once() -> None:
    assert compile_kernels() == {kernel.__name__: 1 for kernel in KERNELS}


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_every_network_calls_the_kernels_with_the_compiled_signature(seed: int) -> None:
    compile_kernels()
    network, specs = random_discrete_network(seed)
    points, _ = enumerated_points(specs)
    rng = np.random.default_rng(seed)
    first = points[rng.integers(0, points.shape[0], 12)]
    second = points[rng.integers(0, points.shape[0], 12)]
    lo, hi = np.minimum(first, second), np.maximum(first, second)
    hi[::3] = points.max(axis=0)
    lo[::3] = points.min(axis=0)
    coefficients = rng.normal(size=lo.shape)
    threshold = rng.random(12) * np.abs(coefficients).sum(axis=1) * (hi - lo).max()
    network.excess_lower(lo, hi, coefficients, threshold)
    assert {kernel.__name__: len(kernel.signatures) for kernel in KERNELS} == {
        kernel.__name__: 1 for kernel in KERNELS}

"""Compile the excess bound's numba kernels (:mod:`verifier.population.excess_kernels`) into
their on-disk cache ahead of the first audit: ``python -m verifier.population.compile_kernels``.

Why: a process that finds the cache empty compiles them on first use, about 3 CPU s in each
process that bounds boxes (BENCHMARKS.md: on a 30-s PV budget on two workers a first run
bounded 238,122 boxes cold against 306,512 warm). The install (``make install``, the Docker
image) runs this module once, so that audits load the kernels instead.

The kernels are compiled by running the real excess bound on a small Bayesian network whose
shape reaches every kernel (a categorical root, integer nodes that take it in, an independent
integer node), so the cached signatures are the ones audits call.
"""

from __future__ import annotations

import numpy as np

from verifier.population.bayesnet import BayesianNetwork, BayesNode, CPTRow
from verifier.population.distributions import Categorical, Discrete
from verifier.population.excess_kernels import KERNELS


def _row(condition: dict[str, tuple[float, float]], values: int, seed: int) -> CPTRow:
    probabilities = np.random.default_rng(seed).dirichlet(np.ones(values)).tolist()
    return CPTRow(condition=condition,
                  distribution=Discrete(values=list(range(values)), probabilities=probabilities))


def _network() -> BayesianNetwork:
    """A categorical root ``kind``, an integer ``level`` whose rows are per category, an
    integer ``hours`` whose rows are per category and level, and an independent ``age``."""
    kind = BayesNode(name="kind", columns=["kind_a", "kind_b", "kind_c"],
                     cpt=[CPTRow(distribution=Categorical(probabilities=[0.5, 0.3, 0.2]))])
    level = BayesNode(name="level", parents=["kind"],
                      cpt=[_row({"kind": (c, c)}, 4, int(c)) for c in (0.0, 1.0, 2.0)])
    hours = BayesNode(name="hours", parents=["kind", "level"],
                      cpt=[_row({"kind": (c, c), "level": (v, v)}, 5, int(3 * c + v))
                           for c in (0.0, 1.0, 2.0) for v in (0.0, 1.0, 2.0, 3.0)])
    age = BayesNode(name="age", cpt=[_row({}, 6, 99)])
    return BayesianNetwork(nodes=[kind, level, hours, age])


def compile_kernels() -> dict[str, int]:
    """Run the excess bound once on :func:`_network` over whole and partial boxes; returns
    the number of compiled signatures of each kernel (each at least one: a kernel left
    uncompiled raises)."""
    network = _network()
    rng = np.random.default_rng(0)
    columns = 6
    lo = np.zeros((8, columns))
    hi = np.tile(np.array([1.0, 1.0, 1.0, 3.0, 4.0, 5.0]), (8, 1))
    hi[1::2, 1] = 0.0
    lo[2::4, 3] = 1.0
    coefficients = rng.normal(size=(8, columns))
    network.excess_lower(lo, hi, coefficients, np.full(8, 0.5))
    compiled = {kernel.__name__: len(kernel.signatures) for kernel in KERNELS}
    missing = [name for name, count in compiled.items() if count == 0]
    if missing:
        raise RuntimeError(f"the excess bound did not reach the kernels {missing}")
    return compiled


if __name__ == "__main__":
    print(", ".join(f"{name}: {count}" for name, count in compile_kernels().items()))

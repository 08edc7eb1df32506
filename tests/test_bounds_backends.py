"""The bound propagators on both backends (``compute_bounds(backend=…)``: numpy arrays or
torch tensors, one implementation through :mod:`verifier.arrays`).

Oracles: the network in exact rational arithmetic at the corners of every box, at sampled
points and at every allowed category of a one-hot group (the numpy backend's bounds must
contain each value, with every option the causal engine passes); the torch backend's bounds,
which must be the same bits where every operation is exact (dyadic networks and boxes: IBP's
sums and products are then exact in float64 whatever the summation order, and the margins
and relaxations are the same elementwise IEEE operations on both backends), and otherwise
within the counted rounding margin of each other (the two evaluations are the same sums
in different orders, each within ``γ_r·M`` of one real value, and the margin each subtracts
is ``2·γ_r·M``). And a fresh causal-fairness run that ends without torch in ``sys.modules``
and with the certificate of a run on torch.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import random_network

from tests.bound_oracles import contains, exact_spec
from verifier.bounds import compute_bounds, pairwise_difference_spec
from verifier.bounds.affine import _network_rel_margin
from verifier.convert import save_network
from verifier.network import Layer, Network

ROOT = Path(__file__).resolve().parents[1]
GROUP = (1, 2, 3)  # one one-hot group among 5 inputs; columns 0 and 4 are intervals


def _boxes(rng: np.random.Generator, count: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Boxes over 5 inputs whose group columns are each excluded (0), fixed (1) or open."""
    lo = rng.normal(size=(count, 5)) * scale
    hi = lo + rng.uniform(0.0, 1.0, size=(count, 5)) * scale
    patterns = np.array([(0.0, 0.0), (1.0, 1.0), (0.0, 1.0)])
    for column in GROUP:
        chosen = patterns[rng.integers(0, 3, size=count)]
        lo[:, column], hi[:, column] = chosen[:, 0], chosen[:, 1]
    return lo, hi


def _points(rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray) -> list[list[float]]:
    """Every allowed category of the group with the interval columns at their four corners
    and at two random points (none when the box holds no one-hot point)."""
    allowed = [c for c in GROUP if lo[c] <= 1.0 <= hi[c]
               and all(lo[j] <= 0.0 <= hi[j] for j in GROUP if j != c)]
    points = []
    for category in allowed:
        corners = itertools.product((lo[0], hi[0]), (lo[4], hi[4]))
        randoms = [(float(rng.uniform(lo[0], hi[0])), float(rng.uniform(lo[4], hi[4])))
                   for _ in range(2)]
        for first, last in [*corners, *randoms]:
            x = [float(first), 0.0, 0.0, 0.0, float(last)]
            x[category] = 1.0
            points.append(x)
    return points


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), depth=st.integers(1, 3),
       activation=st.sampled_from(["relu", "leaky_relu", "mixed"]),
       method=st.sampled_from(["ibp", "crown"]), slopes=st.sampled_from(["adaptive", "left"]),
       give_up=st.booleans(), scale=st.sampled_from([0.1, 1.0, 4.0]), with_signs=st.booleans())
def test_numpy_bounds_contain_the_exact_values(
    seed: int, depth: int, activation: str, method: str, slopes: str, give_up: bool,
    scale: float, with_signs: bool,
) -> None:
    """Every option the causal engine passes (one-hot groups, known signs proven on an
    enclosing box, ``needed``, ``give_up_saturated``, ``tighten``, lower slopes)."""
    rng = np.random.default_rng(seed)
    widths = [int(w) for w in rng.integers(2, 7, size=depth)]
    network = random_network(rng, [5, *widths, 3], activation)
    spec = pairwise_difference_spec(3)
    lo, hi = _boxes(rng, 6, scale)
    signs = None
    if with_signs:
        outer = compute_bounds(network, lo - 0.25 * scale, hi + 0.25 * scale, spec, method,
                               groups=[GROUP], backend="numpy")
        signs = outer.signs()
    needed = rng.uniform(size=(6, spec.shape[0])) < 0.7
    tighten = rng.uniform(size=6) < 0.5
    result = compute_bounds(
        network, lo, hi, spec, method, groups=[GROUP], known_signs=signs, needed=needed,
        give_up_saturated=give_up, tighten=tighten, lower_slopes=slopes, backend="numpy")
    assert isinstance(result.lower, np.ndarray)
    for b in range(6):
        for point in _points(rng, lo[b], hi[b]):
            for row, value in enumerate(exact_spec(network, spec, point)):
                assert contains(result.lower[b, row], result.upper[b, row], value)


def _dyadic_network(rng: np.random.Generator, sizes: list[int], activation: str) -> Network:
    """Weights and biases that are multiples of 1/4 in [-2, 2]: with small dyadic boxes every
    product and sum of an interval evaluation is exact in float64."""
    layers = []
    for index, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        last = index == len(sizes) - 2
        layers.append(Layer(rng.integers(-8, 9, size=(fan_out, fan_in)) / 4.0,
                            rng.integers(-8, 9, size=fan_out) / 4.0,
                            "none" if last else activation, negative_slope=0.125))
    return Network(layers)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), depth=st.integers(0, 3),
       activation=st.sampled_from(["relu", "leaky_relu"]), with_groups=st.booleans())
def test_ibp_is_the_same_bits_on_both_backends_where_every_operation_is_exact(
    seed: int, depth: int, activation: str, with_groups: bool,
) -> None:
    """The first map's interval image (the first hidden layer's pre-activations, or the
    outputs of an affine network): its sums and products are exact on dyadic boxes, its
    margin the same elementwise operations. (Later layers start from bounds already widened
    by a margin, which is not dyadic, so their sums round, in each backend's order.)"""
    rng = np.random.default_rng(seed)
    network = _dyadic_network(rng, [5, *[int(w) for w in rng.integers(2, 7, size=depth)], 3],
                              activation)
    lo, hi = _boxes(rng, 8, 1.0)
    lo, hi = np.floor(lo * 4.0) / 4.0, np.ceil(hi * 4.0) / 4.0
    groups = [GROUP] if with_groups else []
    spec = pairwise_difference_spec(3)
    on_numpy = compute_bounds(network, lo, hi, spec, "ibp", groups=groups, backend="numpy")
    on_torch = compute_bounds(network, lo, hi, spec, "ibp", groups=groups, backend="torch")
    if depth == 0:
        assert on_numpy.lower.tobytes() == on_torch.lower.tobytes()
        assert on_numpy.upper.tobytes() == on_torch.upper.tobytes()
    else:
        assert on_numpy.pre_lower[0].tobytes() == on_torch.pre_lower[0].tobytes()
        assert on_numpy.pre_upper[0].tobytes() == on_torch.pre_upper[0].tobytes()


def _magnitude(network: Network, spec: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """An upper bound of the real terms' absolute sum of every spec row on a one-hidden-layer
    network (``(B, S)``): the network in absolute values from ``max(|lo|, |hi|)``, a relaxed
    neuron counted twice (a slope of at most 1 and an intercept at most its upper bound)."""
    first, last = network.layers
    hidden = np.maximum(np.abs(lo), np.abs(hi)) @ np.abs(first.weight).T + np.abs(first.bias)
    return (2.0 * hidden @ np.abs(last.weight).T + np.abs(last.bias)) @ np.abs(spec).T


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), activation=st.sampled_from(["relu", "leaky_relu"]),
       slopes=st.sampled_from(["adaptive", "left"]), method=st.sampled_from(["ibp", "crown"]))
def test_bounds_differ_between_backends_by_at_most_the_rounding_margin(
    seed: int, activation: str, slopes: str, method: str,
) -> None:
    """One hidden layer: its bounds come from the first layer's interval image, the same on
    both backends up to summation order, so the relaxations agree to a few units in the last
    place and the final sums differ by their order; each backend's sum lies within
    ``γ_r·M`` of the real value and the counted margin is ``2·γ_r·M``."""
    rng = np.random.default_rng(seed)
    network = random_network(rng, [5, int(rng.integers(2, 9)), 3], activation)
    spec = pairwise_difference_spec(3)
    lo, hi = _boxes(rng, 8, 1.0)
    kwargs = {"groups": [GROUP], "lower_slopes": slopes}
    on_numpy = compute_bounds(network, lo, hi, spec, method, backend="numpy", **kwargs)
    on_torch = compute_bounds(network, lo, hi, spec, method, backend="torch", **kwargs)
    allowed = 2.0 * _network_rel_margin(network) * _magnitude(network, spec, lo, hi)
    assert np.all(np.abs(on_numpy.lower - on_torch.lower) <= allowed)
    assert np.all(np.abs(on_numpy.upper - on_torch.upper) <= allowed)


def _causal_run(model: Path, preload_torch: bool) -> tuple[dict, list[str]]:
    """``verify causal-fairness --json`` in a fresh interpreter (torch imported first when
    ``preload_torch``, so the bounds run on it): the certificate's JSON and the heavy
    modules loaded by the end."""
    argv = ["pipeline_steps", "verify", "causal-fairness", "--model", str(model),
            "--protected", "x2", "--domain", "x0=-2:2,x1=-2:2,x2=0:1",
            "--protected-values", "0,1", "--target-width", "0.02", "--timeout", "120",
            "--json"]
    code = ("import runpy, sys\n"
            + ("import torch\n" if preload_torch else "")
            + f"sys.argv = {argv!r}\n"
            "try:\n    runpy.run_module('pipeline_steps', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print(sorted(n for n in ('torch', 'verifier.causal.analysis') "
            "if n in sys.modules), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300,
                            check=False)
    start = result.stdout.index("{")
    return json.loads(result.stdout[start:]), json.loads(
        result.stderr.strip().splitlines()[-1].replace("'", '"'))


def test_the_causal_command_bounds_without_torch_and_certifies_as_on_torch(
    tmp_path: Path,
) -> None:
    """A continuous query (partitioned, so bounded by CROWN): the run never imports torch,
    and its certificate is that of the same run on torch: verdict, shares, regions,
    witnesses, partitions and MILPs. Not compared: the elapsed time, and how many LPs the
    exact proofs of biased regions solved (they start from the partitions' neuron bounds,
    whose last bits follow each backend's summation order: 28 LPs here on numpy, 30 on
    torch, the same two regions proven)."""
    rng = np.random.default_rng(1)
    network = Network([Layer(rng.normal(size=(8, 3)), rng.normal(size=8), "relu"),
                       Layer(rng.normal(size=(6, 8)) / 2.0, rng.normal(size=6), "relu"),
                       Layer(rng.normal(size=(1, 6)), np.zeros(1), "none")])
    model = tmp_path / "net.json"
    save_network(network, model)
    on_numpy, loaded = _causal_run(model, preload_torch=False)
    assert loaded == ["verifier.causal.analysis"]
    on_torch, loaded_torch = _causal_run(model, preload_torch=True)
    assert loaded_torch == ["torch", "verifier.causal.analysis"]
    assert on_numpy["partitions"] > 100 and on_numpy["certified_shares"]["undecided"] == 0.0
    for key in ("elapsed_s", "proofs"):
        on_numpy.pop(key)
        on_torch.pop(key)
    assert on_numpy == on_torch


@pytest.mark.parametrize("backend", ["numpy", "torch", "auto"])
def test_every_backend_returns_numpy_results(backend: str) -> None:
    network = random_network(np.random.default_rng(2), [5, 4, 3])
    lo, hi = _boxes(np.random.default_rng(3), 4, 1.0)
    result = compute_bounds(network, lo, hi, None, "crown", groups=[GROUP], backend=backend)
    assert isinstance(result.lower, np.ndarray) and isinstance(result.upper, np.ndarray)
    assert result.linear is not None and np.all(result.lower <= result.upper)

"""The order of pending causal partitions (:func:`verifier.causal.certify._priority`): their
share times a factor that favours partitions whose parent proved most kink signs. The order
decides only which partitions a budget reaches; run to the end, every order must give the
brute-force share, and each round must take its partitions highest key first."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verifier.causal.certify as certify_module
from tests.causal_nets import random_network
from tests.test_causal_signs import _SignRecorder
from tests.test_causal_split import _deep_grid, _deep_one_hot_network
from verifier.bounds import kink_neurons, pack_signs, unpack_signs
from verifier.causal import CausalSettings, build_problem, certify_causal_fairness
from verifier.causal.partition import initial_partition, uniform_share


def _problem(seed: int):
    network = _deep_one_hot_network(seed)
    return network, build_problem(network, ["s"], onehot_groups=[["a0", "a1", "a2", "a3"]],
                                  integer_inputs=["k", "s"], domain={"k": (0, 4), "s": (0, 1)})


def test_priority_is_the_share_discounted_by_the_unknown_signs() -> None:
    """Against the key computed by hand from the unpacked signs: equal shares rank by known
    signs; with nothing known the order is the share order; only the first cell counts."""
    _, problem = _problem(1)
    kinks = kink_neurons(problem.network)
    rng = np.random.default_rng(0)
    root_lo, root_hi = initial_partition(problem)
    lower = np.repeat(root_lo, 6, axis=0)
    upper = np.repeat(root_hi, 6, axis=0)
    upper[:, 0] = [4, 4, 2, 1, 4, 0]
    signs = rng.integers(-1, 2, size=(6, 2, kinks)).astype(np.int8)
    signs[0, 0] = 0
    signs[1, 0] = 1
    packed = pack_signs(signs.reshape(12, kinks)).reshape(6, 2, -1)
    slope = certify_module.PRIORITY_SLOPE
    key = certify_module._priority(problem, lower, upper, packed, kinks, slope)
    share = uniform_share(problem, lower, upper)
    for b in range(6):
        unknown = int((unpack_signs(packed[b, :1], kinks) == 0).sum())
        expected = share[b] * math.exp(-slope * unknown / kinks)
        assert key[b] == pytest.approx(expected, rel=1e-12)
    assert key[1] > key[0]
    other = packed.copy()
    other[:, 1] = 0
    assert np.array_equal(certify_module._priority(problem, lower, upper, other, kinks, slope),
                          key)
    nothing = np.zeros_like(packed)
    plain = certify_module._priority(problem, lower, upper, nothing, kinks, slope)
    assert np.array_equal(np.argsort(-plain, kind="stable"), np.argsort(-share, kind="stable"))
    flat = certify_module._priority(problem, lower, upper, packed, kinks, 0.0)
    assert np.array_equal(flat, share)


def test_shallow_networks_keep_largest_first() -> None:
    """The discount applies where CROWN gives saturated boxes up (deep networks); a
    two-layer network keeps the share order."""
    _, deep = _problem(1)
    shallow = build_problem(random_network(3, [8, 8], 0), ["x2"], split_values=[0.5])
    assert certify_module._order_slope(deep) == certify_module.PRIORITY_SLOPE
    assert certify_module._order_slope(shallow) == 0.0


@pytest.mark.parametrize("slope", [0.0, 4.0, 40.0])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_order_gives_the_brute_force_share(seed: int, slope: float,
                                                 monkeypatch) -> None:
    """On the saturating nine-layer network, run to the end with mass-first order (slope 0),
    the default and a steep slope: the certified share is the brute-force one (every
    ``k`` × category with both protected values, by ``Network.classify``), and within every
    chunk the partitions come highest key first."""
    network, problem = _problem(seed)
    classes = network.classify(_deep_grid()).reshape(-1, 2)
    exact = float((classes[:, 0] != classes[:, 1]).mean())
    monkeypatch.setattr(certify_module, "PRIORITY_SLOPE", slope)
    recorder = _SignRecorder()
    certificate = certify_causal_fairness(problem, CausalSettings(
        timeout_s=60.0, target_width=0.0, enumeration_work=0, chunk_size=4), recorder)
    lower, upper = certificate.bounds["biased_share"]
    assert lower == pytest.approx(exact, abs=1e-12) and upper == pytest.approx(exact, abs=1e-12)
    kinks = kink_neurons(problem.network)
    for lo, hi, signs in recorder.chunks:
        key = certify_module._priority(problem, lo, hi, signs, kinks, slope)
        assert (np.diff(key) <= 0.0).all()

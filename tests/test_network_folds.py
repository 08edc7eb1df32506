"""``Network.folded`` flags every fold that rounded, cancelling or not.

A fold's float coefficient that is not its real value makes the IR a rounded stand-in: points
must then not be decided on it exactly, and bounds add the fold's counted roundings to their
margin (``Layer.fold_roundings``; tests/test_fold_count.py holds that margin's oracle).
Oracle: every folded coefficient in rational
arithmetic from the operands (``Fraction``), by hypothesis over small layers whose entries
are exact dyadics (folds that may be exact) or decimals (folds that round).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_grid_columns import _grid_population, _network
from verifier.audits.binding import bind
from verifier.bounds import affine
from verifier.convert.torch_module import from_torch
from verifier.network import Layer, Network, fold_affine
from verifier.numerics import SOUNDNESS_REL_MARGIN, network_rel_margin, network_roundings

ENTRIES = st.sampled_from([0.0, 1.0, -1.0, 0.5, -2.0, 0.25, 3.0, 0.1, -0.7, 1.3, 1e-3, 2.0 ** 60])


def _layer(data: st.DataObject, rows: int, columns: int) -> Layer:
    weight = np.array(data.draw(st.lists(ENTRIES, min_size=rows * columns,
                                         max_size=rows * columns))).reshape(rows, columns)
    bias = np.array(data.draw(st.lists(ENTRIES, min_size=rows, max_size=rows)))
    return Layer(weight, bias)


@settings(max_examples=300, deadline=None)
@given(st.data(), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3))
def test_a_coefficient_left_unflagged_is_its_real_value(data: st.DataObject, rows: int,
                                                        middle: int, columns: int) -> None:
    inner, outer = _layer(data, middle, columns), _layer(data, rows, middle)
    folded = Layer(**fold_affine(outer, inner))
    real_w = [[sum((Fraction(outer.weight[i, k]) * Fraction(inner.weight[k, j])
                    for k in range(middle)), Fraction(0)) for j in range(columns)]
              for i in range(rows)]
    real_b = [sum((Fraction(outer.weight[i, k]) * Fraction(inner.bias[k])
                   for k in range(middle)), Fraction(outer.bias[i])) for i in range(rows)]
    for i in range(rows):
        for j in range(columns):
            if folded.weight_magnitude[i, j] == abs(folded.weight[i, j]):
                assert Fraction(folded.weight[i, j]) == real_w[i][j]
            else:
                assert folded.weight_magnitude[i, j] > abs(folded.weight[i, j])
        if folded.bias_magnitude[i] == abs(folded.bias[i]):
            assert Fraction(folded.bias[i]) == real_b[i]
    network = Network([folded])
    exact = all(Fraction(folded.weight[i, j]) == real_w[i][j] for i in range(rows)
                for j in range(columns)) and all(Fraction(folded.bias[i]) == real_b[i]
                                                 for i in range(rows))
    if not exact:
        assert network.folded


def test_an_inexact_grid_coding_without_cancellation_is_flagged() -> None:
    """step 0.7 (not a dyadic), offset 0: every folded weight is one rounded product and no
    term cancels, which the magnitudes alone did not show; step 0.5 is exact and unflagged."""
    for step, folded in ((0.7, True), (0.5, False), (2.0, False)):
        network, _ = bind(_network(0), _grid_population(step, 0.0), None, "test")
        assert network.folded is folded
        margin = affine._network_rel_margin(network.lowered())
        if folded:   # the diagonal coding: one product per coefficient, counted
            assert network.fold_roundings == 0 + 0 + 1 + 1
            fan_ins = [layer.in_features for layer in network.layers] + [2]
            assert margin == network_rel_margin(network_roundings(fan_ins, 3, 1) + 2)
        assert margin < SOUNDNESS_REL_MARGIN


def test_a_batch_norm_folded_into_a_linear_layer_takes_the_counted_margin() -> None:
    """Six roundings in the batch norm's scale and shift, one product per coefficient and
    its bias in the fold into the Linear layer (tests/test_fold_count.py holds the oracle)."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4),
                                 torch.nn.ReLU(), torch.nn.Linear(4, 2)).eval()
    with torch.no_grad():
        module[1].running_var.uniform_(0.5, 2.0)
        module[1].running_mean.uniform_(-1.0, 1.0)
    network = from_torch(module.double())
    assert network.folded and network.fold_roundings == 6 + 0 + 1 + 1
    assert affine._network_rel_margin(network.lowered()) < 1e-13


def test_exact_folds_leave_no_trace() -> None:
    """An identity (torch's Flatten) and a permutation fold exactly: the network is unfolded
    and keeps the counted margin."""
    torch.manual_seed(1)
    module = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3, 4), torch.nn.ReLU(),
                                 torch.nn.Linear(4, 2)).eval()
    network = from_torch(module.double())
    assert not network.folded
    inner = Layer(np.eye(3)[[2, 0, 1]], np.zeros(3))
    outer = Layer(np.array([[0.1, -0.7, 1.3]]), np.array([0.3]))
    assert not Network([Layer(**fold_affine(outer, inner))]).folded


def test_points_of_a_folded_network_are_read_by_their_certified_classes() -> None:
    """A coded population with step 0.7 and offset 0.3 folds its input map into the network
    (rounded); WMI's finite sum over its points (a tree surrogate: nothing to branch) reads
    the network by certified classes, not by the rounded IR's exact value, and its interval
    holds the enumeration of the original network and the tree at the real points."""
    from fractions import Fraction as F

    from sklearn.tree import DecisionTreeClassifier

    from tests.test_causal_ties import _oracle_class
    from tests.test_grid_columns import _points, _real_point
    from verifier.audits.exact_probability import model_on_codes
    from verifier.wmi import equivalence

    population = _grid_population(0.7, 0.3)
    original = _network(0)
    network, bound = bind(original, population, None, "test")
    assert network.folded
    values = np.array([[float(v) for v in _real_point(population, codes)]
                       for codes, _ in _points(population)])
    tree = DecisionTreeClassifier(max_depth=2, random_state=0).fit(values,
                                                                   original.classify(values))
    result = equivalence(network, model_on_codes(tree, bound), bound)
    agree = F(0)
    for (codes, weight), row in zip(_points(population), values, strict=True):
        same = _oracle_class(original, _real_point(population, codes)) == tree.predict(row[None])[0]
        agree += weight * same
    assert 0 < agree < 1
    assert result.probability_lower - 1e-9 <= float(agree) <= result.probability_upper + 1e-9

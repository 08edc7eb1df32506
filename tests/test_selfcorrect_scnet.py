"""SelfCorrectingNetwork: composition, ⊥ handling, pickling, TorchScript and ONNX export."""

from __future__ import annotations

import itertools
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from verifier.selfcorrect import (
    ConstraintError,
    SelfCorrectingNetwork,
    UnsatisfiableConstraintsError,
    parse_constraints,
)
from verifier.selfcorrect.export import (
    OnnxExportError,
    export_onnx,
    load_torchscript,
    save_torchscript,
    script_module,
)

CONSTRAINTS = {
    "classes": ["a", "b", "c", "d"],
    "input_size": 2,
    "constraints": [
        {
            "name": "left",
            "precondition": {"kind": "box", "lower": [None, None], "upper": [0.0, None]},
            "postcondition": [["a < b", "a < c"], ["d < a"]],
        },
        {
            "name": "top",
            "precondition": {"kind": "linear", "a": [0.0, 1.0], "b": 0.5, "strict": True},
            "postcondition": [["c < d"], ["b < d"]],
        },
        {
            "name": "predicted_b",
            "precondition": {"kind": "predicted_in", "classes": ["b"]},
            "postcondition": [["c < a", "d < a"], ["c < d"]],
        },
        # cyclic (a < d < a): unsatisfiable wherever it is active, i.e. on the line x0 == 0
        {
            "name": "edge",
            "precondition": {"kind": "box", "lower": [0.0, None], "upper": [0.0, None]},
            "postcondition": [["b < a", "c < a", "d < a", "a < d"]],
        },
    ],
}


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(2, 16, dtype=torch.float64),
        torch.nn.ReLU(),
        torch.nn.Linear(16, 4, dtype=torch.float64),
    ).eval()


def _inputs(rows: int = 400, seed: int = 1) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, size=(rows, 2))
    x[::7, 0] = 0.0  # on the ⊥ strip
    return torch.from_numpy(x)


def test_forward_is_the_layer_applied_to_the_model() -> None:
    model = _model()
    net = SelfCorrectingNetwork(model, parse_constraints(CONSTRAINTS))
    x = _inputs()
    with torch.no_grad():
        expected, bottom = net.layer(x, model(x))
        got = net(x)
    assert torch.equal(got, expected)
    assert torch.equal(net.last_bottom, bottom)
    assert bottom.any() and (~bottom).any()
    predicted = model(x).argmax(dim=1)
    assert net.layer.satisfied(x, got, predicted)[~bottom].all()


def test_on_bottom_raise_names_the_rows() -> None:
    net = SelfCorrectingNetwork(_model(), parse_constraints(CONSTRAINTS), on_bottom="raise")
    with pytest.raises(UnsatisfiableConstraintsError, match=r"unsatisfiable \(bottom\) at input"):
        net(_inputs())
    safe_rows = _inputs()[1:7]
    assert net(safe_rows).shape == (6, 4)


def test_abstain_column_is_top_exactly_on_bottom_rows() -> None:
    net = SelfCorrectingNetwork(_model(), parse_constraints(CONSTRAINTS), on_bottom="abstain")
    assert net.num_outputs == 5
    x = _inputs()
    with torch.no_grad():
        out, bottom = net.forward_with_bottom(x)
        corrected, _ = net.layer(x, net.model(x))
    assert out.shape == (400, 5)
    assert torch.equal(out[:, :4], corrected)
    assert torch.equal(out.argmax(dim=1) == 4, bottom)
    assert torch.isfinite(out).all()
    assert (torch.softmax(out, dim=1)[~bottom, 4] == 0.0).all()


def test_abstain_class_by_name_goes_on_top_of_bottom_rows() -> None:
    net = SelfCorrectingNetwork(
        _model(), parse_constraints(CONSTRAINTS), on_bottom="abstain", abstain_class="c"
    )
    assert net.num_outputs == 4
    x = _inputs()
    with torch.no_grad():
        out, bottom = net.forward_with_bottom(x)
        corrected, _ = net.layer(x, net.model(x))
    assert (out.argmax(dim=1)[bottom] == 2).all()
    assert torch.equal(out[~bottom], corrected[~bottom])
    assert torch.equal(out[bottom][:, [0, 1, 3]], corrected[bottom][:, [0, 1, 3]])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"on_bottom": "ignore"}, "on_bottom must be one of mark, raise, abstain"),
        ({"abstain_class": "c"}, "only used with on_bottom='abstain'"),
        ({"on_bottom": "abstain", "abstain_class": "z"}, "unknown class 'z'"),
        ({"num_classes": 3}, "over 4 classes but the layer has 3"),
    ],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ConstraintError, match=message):
        SelfCorrectingNetwork(_model(), parse_constraints(CONSTRAINTS), **kwargs)


@pytest.mark.parametrize("on_bottom", ["mark", "abstain"])
def test_torchscript_gives_identical_outputs(tmp_path: Path, on_bottom: str) -> None:
    net = SelfCorrectingNetwork(_model(), parse_constraints(CONSTRAINTS), on_bottom=on_bottom)
    path = save_torchscript(net, tmp_path / "model.pt")
    loaded = load_torchscript(path)
    for seed in range(3):
        x = _inputs(300, seed)
        with torch.no_grad():
            expected, expected_bottom = net.forward_with_bottom(x)
            got, got_bottom = loaded.forward_with_bottom(x)
            assert torch.equal(loaded(x), expected)
        assert torch.equal(got, expected)
        assert torch.equal(got_bottom, expected_bottom)
        assert torch.equal(loaded.last_bottom, expected_bottom)


def test_torchscript_layer_methods() -> None:
    layer = SelfCorrectingNetwork(_model(), parse_constraints(CONSTRAINTS)).layer
    scripted = script_module(layer)
    x = _inputs()
    logits = _model()(x).detach()
    predicted = logits.argmax(dim=1)
    corrected, _ = layer(x, logits)
    for method in ("satisfied", "active_constraints"):
        for args in ((x, logits), (x, corrected, predicted)):
            assert torch.equal(getattr(scripted, method)(*args), getattr(layer, method)(*args))


def test_a_plain_sequence_of_constraints() -> None:
    constraints = parse_constraints(CONSTRAINTS).constraints
    net = SelfCorrectingNetwork(_model(), constraints, num_classes=4)
    reference = SelfCorrectingNetwork(_model(), parse_constraints(CONSTRAINTS))
    with torch.no_grad():
        assert torch.equal(net(_inputs()), reference(_inputs()))
    assert net.layer.input_size == 2
    with pytest.raises(ConstraintError, match="num_classes is required"):
        SelfCorrectingNetwork(_model(), constraints)


def test_torchscript_raise_mode_still_raises() -> None:
    scripted = script_module(
        SelfCorrectingNetwork(_model(), parse_constraints(CONSTRAINTS), on_bottom="raise")
    )
    with pytest.raises(torch.jit.Error, match="unsatisfiable"):
        scripted(_inputs())


def test_pickle_round_trip() -> None:
    net = SelfCorrectingNetwork(_model(), parse_constraints(CONSTRAINTS))
    x = _inputs()
    with torch.no_grad():
        expected = net(x)
        restored = pickle.loads(pickle.dumps(net))
        assert torch.equal(restored(x), expected)
    assert restored.layer.describe() == net.layer.describe()


def test_onnx_export_of_an_scnet_is_refused_with_the_reason(tmp_path: Path) -> None:
    net = SelfCorrectingNetwork(_model(), parse_constraints(CONSTRAINTS))
    target = tmp_path / "model.onnx"
    with pytest.raises(OnnxExportError, match=r"torch\.onnx\.export cannot express this module"):
        export_onnx(net, target, _inputs(8))
    assert not target.exists()


def test_onnx_export_of_a_plain_model_is_checked_with_onnxruntime(tmp_path: Path) -> None:
    model = _model().float()
    path = export_onnx(model, tmp_path / "plain.onnx", _inputs(8).float())
    assert path.exists() and path.stat().st_size > 0


class _Constant(torch.nn.Module):
    """A model whose logits are ``logits`` whatever the input."""

    def __init__(self, logits: list[float], dtype: torch.dtype) -> None:
        super().__init__()
        self.register_buffer("logits", torch.tensor(logits, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits.expand(x.shape[0], -1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("abstain_class", [None, "c"])
def test_abstaining_at_the_largest_float_stays_finite(dtype: torch.dtype,
                                                      abstain_class: str | None) -> None:
    """On ⊥ rows (x0 == 0) whose top logit is the largest float, nothing finite lies above it:
    the abstain logit is that float, the others there step down one float, the abstain logit
    is the strict argmax and a softmax is a distribution (it was ``+inf``, softmax NaN)."""
    largest = torch.finfo(dtype).max
    model = _Constant([largest, largest, 1.0, largest], dtype)
    net = SelfCorrectingNetwork(model, parse_constraints(CONSTRAINTS), on_bottom="abstain",
                                abstain_class=abstain_class)
    x = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]], dtype=dtype)
    with torch.no_grad():
        out, bottom = net.forward_with_bottom(x)
        corrected, _ = net.layer(x, model(x))
    assert bottom.tolist() == [True, True, False]
    assert torch.isfinite(out).all()
    abstain = 4 if abstain_class is None else 2
    top = out[bottom].max(dim=1).values
    assert (out[bottom, abstain] == largest).all()
    assert ((out[bottom] == top.unsqueeze(1)).sum(dim=1) == 1).all()  # strict argmax
    assert not torch.softmax(out, dim=1).isnan().any()
    assert torch.equal(out[~bottom, :4], corrected[~bottom])
    others = [k for k in range(4) if k != abstain]
    stepped = torch.nextafter(torch.tensor(largest, dtype=dtype), torch.tensor(0.0, dtype=dtype))
    for k in others:
        expected = stepped if model.logits[k] == largest else model.logits[k]
        assert (out[bottom, k] == expected).all()
    scripted = script_module(net)
    assert torch.equal(scripted(x), out)


def _orders_satisfying(dnfs: list[list[list[tuple[int, int]]]], m: int) -> bool:
    """Oracle: some strict order of the m classes satisfies every DNF."""
    for ranks in itertools.permutations(range(m)):
        if all(any(all(ranks[a] < ranks[b] for a, b in conj) for conj in dnf) for dnf in dnfs):
            return True
    return False


def test_constraints_unsatisfiable_at_every_input_are_refused() -> None:
    """Always-active constraints ``0 < 1``, ``1 < 2``, ``2 < 0`` (each satisfiable alone) used
    to wrap silently into a model whose every output is ⊥. Random sets of constraints active
    everywhere (``always``, an unbounded box, ``predicted_in`` every class) plus ones active
    somewhere: refused exactly when no strict order satisfies the everywhere-active ones
    (oracle: every permutation of m ≤ 4 classes)."""
    rng = np.random.default_rng(7)
    everywhere = [{"kind": "always"}, {"kind": "box", "lower": [None], "upper": [None]},
                  {"kind": "predicted_in", "classes": [0, 1, 2, 3]}]
    refused = accepted = 0
    for _ in range(300):
        m = int(rng.integers(2, 5))
        items, dnfs = [], []
        for index in range(int(rng.integers(1, 4))):
            dnf = [[tuple(int(c) for c in rng.choice(m, 2, replace=False))
                    for _ in range(int(rng.integers(1, 3)))]
                   for _ in range(int(rng.integers(1, 3)))]
            somewhere = rng.random() < 0.3
            precondition = ({"kind": "box", "lower": [0.0], "upper": [None]} if somewhere
                            else dict(everywhere[int(rng.integers(0, 3))]))
            if precondition["kind"] == "predicted_in":
                precondition["classes"] = list(range(m))
            items.append({"name": f"c{index}", "precondition": precondition,
                          "postcondition": [[list(literal) for literal in conj]
                                            for conj in dnf]})
            if not somewhere:
                dnfs.append(dnf)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            constraints = parse_constraints({"num_classes": m, "input_size": 1,
                                             "constraints": items})
        model = torch.nn.Linear(1, m, dtype=torch.float64)
        if dnfs and not _orders_satisfying(dnfs, m):
            with pytest.raises(ConstraintError, match="every output would be bottom"):
                SelfCorrectingNetwork(model, constraints)
            refused += 1
        else:
            net = SelfCorrectingNetwork(model, constraints)
            x = torch.linspace(-2, 2, 41, dtype=torch.float64).unsqueeze(1)
            assert not bool(net.forward_with_bottom(x)[1][x[:, 0] < 0].any())
            accepted += 1
    assert refused > 20 and accepted > 100


def test_a_float32_model_reads_float32_rows_and_keeps_its_logits_where_they_comply() -> None:
    """A float32 model reads float64 rows rounded to float32 (as MLflow's PyTorch flavour
    feeds it a DataFrame), the layer orders its float32 logits in float32, and its
    preconditions read the rows as given. Logits tie at ±the largest float32: every active
    constraint holds strictly on finite float32 outputs, and rows whose model logits already
    comply leave with them bit for bit (oracle: the literals and the box test written out)."""
    largest = torch.finfo(torch.float32).max
    model = torch.nn.Linear(2, 3)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[largest, 0.0], [largest, 0.0], [-largest, 1.0]]))
        model.bias.zero_()
    threshold = 1.0 + 2.0 ** -40          # a float64 the rows' float32 cannot hold
    constraints = parse_constraints({"num_classes": 3, "input_size": 2, "constraints": [
        {"name": "one_below_zero", "precondition": {"kind": "always"},
         "postcondition": [["1 < 0"]]},
        {"name": "past_one", "precondition": {"kind": "box", "lower": [threshold, None],
                                              "upper": [None, None]},
         "postcondition": [["0 < 2"]]},
    ]})
    net = SelfCorrectingNetwork(model, constraints).eval()
    x = torch.tensor(list(itertools.product([-1.0, 0.0, 0.5, 1.0, threshold],
                                            [-2.0, 0.0, 3.0])), dtype=torch.float64)
    with torch.no_grad():
        out, bottom = net.forward_with_bottom(x)
        logits = model(x.to(torch.float32))
    assert out.dtype == torch.float32 and torch.isfinite(out).all() and not bottom.any()
    assert (logits[:, 0] == logits[:, 1]).all() and (logits.abs() == largest).any()
    past = x[:, 0] >= threshold
    assert past.sum() == 3 and (x[past, 0].to(torch.float32) == 1.0).all()
    assert (out[:, 1] < out[:, 0]).all()
    assert (out[past, 0] < out[past, 2]).all()
    complies = (logits[:, 1] < logits[:, 0]) & (~past | (logits[:, 0] < logits[:, 2]))
    assert torch.equal(out[complies], logits[complies])
    assert torch.equal(script_module(net).forward_with_bottom(x)[0], out)
    with torch.no_grad():      # the same rows sent as float32: only the preconditions differ
        narrowed = net(x.to(torch.float32))
    assert torch.equal(narrowed[~past], out[~past])
    assert not (narrowed[past, 0] < narrowed[past, 2]).any()


def test_the_scored_module_computes_the_models_own_logits() -> None:
    """``scored_module`` is the classifier view computed with the model's own layers: a
    float32 single-logit model's ``z`` bit for bit (the view's two-row last layer rounded it
    differently on thousands of rows) and ``0`` beside it; a multi-logit model's logits bit
    for bit; negated outputs exactly negated; TorchScript compiles it."""
    from verifier.convert.torch_module import from_torch
    from verifier.selfcorrect import scored_module, scored_network

    torch.manual_seed(1)
    x = torch.from_numpy(np.random.default_rng(0).normal(size=(20000, 6)).astype(np.float32))
    single = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(),
                                 torch.nn.Linear(16, 1)).eval()
    several = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(),
                                  torch.nn.Linear(16, 4)).eval()
    with torch.no_grad():
        z = single(x)
        pair = scored_module(from_torch(single), dtype=torch.float32)(x)
        view = scored_network(from_torch(single)).to_torch(torch.float32)(x)
        logits = several(x)
        module = scored_module(from_torch(several), dtype=torch.float32)
        negated = scored_module(from_torch(several), negate=True, dtype=torch.float32)(x)
    assert pair.dtype == torch.float32 and pair.shape == (20000, 2)
    assert torch.equal(pair[:, 1:], z) and (pair[:, 0] == 0).all()
    assert (view[:, 1:] != z).any()          # what the two-row view computed
    assert torch.equal(module(x), logits) and torch.equal(negated, -logits)
    assert torch.equal(script_module(scored_module(from_torch(single),
                                                   dtype=torch.float32))(x), pair)


def _box(lower: list[float | None], upper: list[float | None], **sides: object) -> dict:
    return {"kind": "box", "lower": lower, "upper": upper, **sides}


LEFT, RIGHT = _box([None, None], [0.0, None]), _box([0.0, None], [None, None])
EVERYWHERE_BY_FORM = {
    # every input is predicted 0 or predicted 1 or 2: one of A, B is active with C
    "predicted classes split across constraints": [
        ("A", {"kind": "predicted_in", "classes": [0]}, [[[0, 1]]]),
        ("B", {"kind": "predicted_in", "classes": [1, 2]}, [[[0, 1]]]),
        ("C", {"kind": "always"}, [[[1, 0]]])],
    "a chain per predicted class closed by an always-active literal": [
        ("A", {"kind": "predicted_in", "classes": [0]}, [[[0, 1], [1, 2]]]),
        ("B", {"kind": "predicted_in", "classes": [1, 2]}, [[[0, 1], [1, 2]]]),
        ("C", {"kind": "always"}, [[[2, 0]]])],
    "two closed half-planes covering the plane": [
        ("A", {"kind": "union", "boxes": [LEFT, RIGHT]}, [[[0, 1]]]),
        ("B", {"kind": "always"}, [[[1, 0]]])],
    "four quadrants (one side open each) covering the plane": [
        ("A", {"kind": "union", "boxes": [
            _box([None, None], [0.0, 0.0]), _box([0.0, None], [None, 0.0], lower_closed=False),
            _box([None, 0.0], [0.0, None], lower_closed=[True, False]),
            _box([0.0, 0.0], [None, None], lower_closed=False)]}, [[[0, 1]]]),
        ("B", {"kind": "always"}, [[[1, 0]]])],
    "a linear row with zero coefficients (0 <= 0)": [
        ("A", {"kind": "linear", "a": [0.0, 0.0], "b": 0.0}, [[[0, 1]]]),
        ("B", {"kind": "always"}, [[[1, 0]]])],
    "two closed half-planes of two constraints covering the plane": [
        ("A", LEFT, [[[0, 1]]]),
        ("B", RIGHT, [[[0, 1]]]),
        ("C", {"kind": "always"}, [[[1, 0]]])],
    "three boxes of three constraints covering the plane, one only for some classes": [
        ("A", {"kind": "all", "conditions": [LEFT, {"kind": "predicted_in", "classes": [0, 1, 2]}]},
         [[[0, 1]]]),
        ("B", _box([0.0, None], [None, 0.0]), [[[0, 1]]]),
        ("D", _box([None, 0.0], [None, None]), [[[0, 1]]]),
        ("C", {"kind": "always"}, [[[1, 0]]])],
}
SOMEWHERE_ONLY = {
    # the line x0 = 0 is in neither open half-plane: there B alone is active and satisfiable
    "two open half-planes": [
        ("A", {"kind": "union", "boxes": [_box([None, None], [0.0, None], upper_closed=False),
                                          _box([0.0, None], [None, None], lower_closed=False)]},
         [[[0, 1]]]),
        ("B", {"kind": "always"}, [[[1, 0]]])],
    # a model predicting 2 has only C active: satisfiable
    "predicted classes 0 and 1 only": [
        ("A", {"kind": "predicted_in", "classes": [0]}, [[[0, 1]]]),
        ("B", {"kind": "predicted_in", "classes": [1]}, [[[0, 1]]]),
        ("C", {"kind": "always"}, [[[1, 0]]])],
    "a linear row with zero coefficients (0 < 0, never active)": [
        ("A", {"kind": "linear", "a": [0.0, 0.0], "b": 0.0, "strict": True}, [[[0, 1]]]),
        ("B", {"kind": "always"}, [[[1, 0]]])],
    # the line x0 = 0 is in neither constraint's open half-plane
    "two open half-planes of two constraints": [
        ("A", _box([None, None], [0.0, None], upper_closed=False), [[[0, 1]]]),
        ("B", _box([0.0, None], [None, None], lower_closed=False), [[[0, 1]]]),
        ("C", {"kind": "always"}, [[[1, 0]]])],
}


def _set(items: list[tuple[str, dict, list]]) -> object:
    return parse_constraints({"num_classes": 3, "input_size": 2, "constraints": [
        {"name": name, "precondition": pre, "postcondition": post} for name, pre, post in items]})


def _probe_rows() -> torch.Tensor:
    """Random rows, rows on the axes (0.0 and -0.0) and at huge magnitudes."""
    rng = np.random.default_rng(0)
    special = [0.0, -0.0, 5e-324, -5e-324, 1.0, -1.0, 1e300, -1e300]
    grid = [[a, b] for a in special for b in special]
    return torch.tensor([*grid, *rng.normal(size=(500, 2)).tolist()], dtype=torch.float64)


@pytest.mark.parametrize("case", sorted(EVERYWHERE_BY_FORM))
def test_constraints_active_everywhere_by_a_form_spread_over_them_are_refused(case: str) -> None:
    """Each set is ⊥ at every input (the docstrings of ``EVERYWHERE_BY_FORM`` say why: the
    preconditions together cover every input, or every predicted class): the layer marks ⊥ on
    every probed row whatever the model predicts, and the wrapped model is refused, naming
    the constraints, instead of being written to answer ⊥ always."""
    from verifier.selfcorrect import SelfCorrectingLayer

    constraints = _set(EVERYWHERE_BY_FORM[case])
    x = _probe_rows()
    for column in range(3):  # a model predicting each class in turn
        logits = torch.zeros(len(x), 3, dtype=torch.float64)
        logits[:, column] = 1.0
        assert bool(SelfCorrectingLayer(constraints, 3)(x, logits)[1].all())
    with pytest.raises(ConstraintError, match="every output would be bottom"):
        SelfCorrectingNetwork(torch.nn.Linear(2, 3, dtype=torch.float64), constraints)


@pytest.mark.parametrize("case", sorted(SOMEWHERE_ONLY))
def test_constraints_not_active_everywhere_together_are_kept(case: str) -> None:
    """The near misses: some input or some predicted class leaves a satisfiable set active,
    so the wrapped model is built and answers there."""
    network = SelfCorrectingNetwork(torch.nn.Linear(2, 3, dtype=torch.float64), _set(
        SOMEWHERE_ONLY[case]))
    x = _probe_rows()
    with torch.no_grad():
        network.model.weight.zero_()
        for column in range(3):
            network.model.bias.zero_()
            network.model.bias[column] = 1.0
            bottom = network.forward_with_bottom(x)[1]
            if not bool(bottom.all()):
                return
    raise AssertionError(f"{case}: every probed row is ⊥ for every predicted class")


def _in_union(boxes: list, point: tuple[float, ...]) -> bool:
    return any(all(
        (box.lower[i] is None or point[i] > box.lower[i]
         or (point[i] == box.lower[i] and box.lower_closed[i]))
        and (box.upper[i] is None or point[i] < box.upper[i]
             or (point[i] == box.upper[i] and box.upper_closed[i]))
        for i in range(len(point))) for box in boxes)


def test_a_union_covers_the_space_exactly_when_every_representative_point_is_in_it() -> None:
    """``active_sets_everywhere`` of one union against the points that represent every
    piece: with sides in {−1, 0, 1} (or unbounded), every cell of the cut space holds one of
    −2, −1, −½, 0, ½, 1, 2 per coordinate, so the union covers the space (no piece without
    it) iff it holds all of them (800 random unions of 1–4 boxes in 1–3 dimensions, open and
    closed sides)."""
    from verifier.selfcorrect.preconditions import active_sets_everywhere
    from verifier.selfcorrect.schema import BoxPrecondition, UnionPrecondition

    rng = np.random.default_rng(11)
    covering = 0
    for _ in range(800):
        size = int(rng.integers(1, 4))
        boxes = [BoxPrecondition(kind="box", **_random_sides(rng, size))
                 for _ in range(int(rng.integers(1, 5)))]
        truth = all(_in_union(boxes, point)
                    for point in itertools.product(REPRESENTATIVES, repeat=size))
        pieces = list(active_sets_everywhere([UnionPrecondition(kind="union", boxes=boxes)], 0))
        assert None not in pieces
        assert (frozenset() not in pieces) == truth, boxes
        covering += truth
    assert 50 < covering < 750


REPRESENTATIVES = [-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0]


def _random_sides(rng: np.random.Generator, size: int) -> dict:
    """A box's sides in {−1, 0, 1} or unbounded, each open or closed (a point side closed)."""
    sides = [sorted(rng.choice([-1.0, 0.0, 1.0], 2).tolist()) for _ in range(size)]
    lower = [None if rng.random() < 0.4 else low for low, _ in sides]
    upper = [None if rng.random() < 0.4 else high for _, high in sides]
    lower_closed = [bool(rng.random() < 0.5) for _ in range(size)]
    upper_closed = [bool(rng.random() < 0.5) for _ in range(size)]
    for axis in range(size):
        if lower[axis] is not None and lower[axis] == upper[axis]:
            lower_closed[axis] = upper_closed[axis] = True
    return {"lower": lower, "upper": upper, "lower_closed": lower_closed,
            "upper_closed": upper_closed}


def _random_precondition(rng: np.random.Generator, size: int) -> dict:
    draw = rng.random()
    if draw < 0.15:
        return {"kind": "always"}
    if draw < 0.55:
        return {"kind": "box", **_random_sides(rng, size)}
    if draw < 0.75:
        return {"kind": "union", "boxes": [{"kind": "box", **_random_sides(rng, size)}
                                           for _ in range(2)]}
    classes = sorted(rng.choice(3, int(rng.integers(1, 3)), replace=False).tolist())
    if draw < 0.85:
        return {"kind": "predicted_in", "classes": classes}
    return {"kind": "all", "conditions": [{"kind": "box", **_random_sides(rng, size)},
                                          {"kind": "predicted_in", "classes": classes}]}


def _holds(precondition: dict, point: tuple[float, ...], predicted: int) -> bool:
    """The precondition at a point, read from its dictionary (independent of the layer)."""
    kind = precondition["kind"]
    if kind == "always":
        return True
    if kind == "box":
        return all(
            (low is None or point[i] > low or (point[i] == low and lc))
            and (high is None or point[i] < high or (point[i] == high and hc))
            for i, (low, high, lc, hc) in enumerate(zip(
                precondition["lower"], precondition["upper"], precondition["lower_closed"],
                precondition["upper_closed"], strict=True)))
    if kind == "union":
        return any(_holds(box, point, predicted) for box in precondition["boxes"])
    if kind == "predicted_in":
        return predicted in precondition["classes"]
    return all(_holds(part, point, predicted) for part in precondition["conditions"])


def _some_order_satisfies(postconditions: list[list[list[list[int]]]]) -> bool:
    """Some strict order of three classes satisfies every DNF (``[a, b]``: ``a`` below ``b``)."""
    return any(all(any(all(rank[a] < rank[b] for a, b in disjunct) for disjunct in dnf)
                   for dnf in postconditions)
               for rank in itertools.permutations(range(3)))


def test_constraints_refused_exactly_when_bottom_at_every_representative_point() -> None:
    """Sets of 2–4 constraints whose preconditions are boxes, unions, ``always``,
    ``predicted_in`` and ``all`` of a box and ``predicted_in``, in 1–2 dimensions with sides
    in {−1, 0, 1}: the layer reports ⊥ everywhere iff, at every representative point of the
    cut space and for every predicted class, no order of the three classes satisfies the
    constraints active there (the preconditions and the orders checked by brute force).
    Boxes of several constraints covering the space together were once missed."""
    from verifier.selfcorrect import SelfCorrectingLayer

    rng = np.random.default_rng(14)
    refused = 0
    for _ in range(400):
        size = int(rng.integers(1, 3))
        items = []
        for index in range(int(rng.integers(2, 5))):
            postcondition = [[rng.choice(3, 2, replace=False).tolist()
                              for _ in range(int(rng.integers(1, 3)))]
                             for _ in range(int(rng.integers(1, 3)))]
            items.append((f"c{index}", _random_precondition(rng, size), postcondition))
        constraints = parse_constraints({"num_classes": 3, "input_size": size, "constraints": [
            {"name": name, "precondition": pre, "postcondition": post}
            for name, pre, post in items]})
        truth = all(
            not _some_order_satisfies([post for _, pre, post in items
                                       if _holds(pre, point, predicted)])
            for point in itertools.product(REPRESENTATIVES, repeat=size)
            for predicted in range(3))
        named = SelfCorrectingLayer(constraints, 3).unsatisfiable_everywhere()
        assert bool(named) == truth, items
        refused += truth
    assert 20 < refused < 380


def test_constraints_bottom_everywhere_beside_many_boxes_are_refused_at_once() -> None:
    """Two ``always`` constraints that contradict each other give ⊥ at every input whatever
    40 boxes of other constraints cut the space into (more pieces than are listed): the
    region holding only the contradiction is not cut, so the set is refused, naming the two;
    without the contradiction the set is kept."""
    from verifier.selfcorrect import SelfCorrectingLayer

    rng = np.random.default_rng(3)
    boxes = [{"name": f"box{index}", "precondition": {"kind": "box", **_random_sides(rng, 7)},
              "postcondition": [[[0, 1]]]} for index in range(40)]
    contradiction = [
        {"name": "up", "precondition": {"kind": "always"}, "postcondition": [[[1, 0]]]},
        {"name": "down", "precondition": {"kind": "always"}, "postcondition": [[[0, 1]]]}]
    refused = SelfCorrectingLayer(parse_constraints(
        {"num_classes": 4, "input_size": 7, "constraints": boxes + contradiction}), 4)
    kept = SelfCorrectingLayer(parse_constraints(
        {"num_classes": 4, "input_size": 7, "constraints": boxes + contradiction[:1]}), 4)
    assert refused.unsatisfiable_everywhere() == ["up", "down"]
    assert kept.unsatisfiable_everywhere() == []

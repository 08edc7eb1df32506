"""torch models to the IR, checked against torch's own forward pass in float64.

Oracle: the source module evaluated by torch (a float64 copy) on fresh random inputs that the
converter's self-check never saw; outputs must agree to ``1e-9 · max(1, |y|)`` (both sides
compute in float64, so this only allows for different summation orders).
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.bounds import compute_bounds
from verifier.convert import load_network
from verifier.convert.torch_files import network_from_state_dict
from verifier.convert.torch_fx import from_graph_module
from verifier.convert.torch_module import from_torch
from verifier.network import Network, NetworkError

TOLERANCE = 1e-9


def _at_kernel_scalars(module: torch.nn.Module) -> torch.nn.Module:
    """A float64 copy of ``module`` computing what ``module`` computes in real arithmetic:
    a float32 module's kernels apply its LeakyReLU slopes and Hardtanh bounds rounded to
    float32, so the copy holds those rounded values."""
    double = copy.deepcopy(module).to(torch.float64)
    if next(module.parameters()).dtype != torch.float32:
        return double
    for child in double.modules():
        if isinstance(child, torch.nn.LeakyReLU):
            child.negative_slope = float(np.float32(child.negative_slope))
        if isinstance(child, torch.nn.Hardtanh):
            child.min_val = float(np.float32(child.min_val))
            child.max_val = float(np.float32(child.max_val))
    return double


def _assert_matches(
    network: Network, module: torch.nn.Module, input_shape: tuple[int, ...]
) -> None:
    double = _at_kernel_scalars(module)
    x = np.random.default_rng(7).normal(scale=2.0, size=(50, *input_shape))
    with torch.no_grad():
        expected = double(torch.from_numpy(x)).reshape(50, -1).numpy()
    actual = network.evaluate(x.reshape(50, -1))
    scale = np.maximum(1.0, np.abs(expected))
    assert np.all(np.abs(actual - expected) <= TOLERANCE * scale), np.abs(actual - expected).max()


def _batch_norm(rng: np.random.Generator, width: int) -> torch.nn.BatchNorm1d:
    norm = torch.nn.BatchNorm1d(width, eps=float(rng.choice([1e-5, 1e-3])))
    with torch.no_grad():
        norm.running_mean.copy_(torch.from_numpy(rng.normal(size=width)))
        norm.running_var.copy_(torch.from_numpy(rng.uniform(0.2, 3.0, size=width)))
        norm.weight.copy_(torch.from_numpy(rng.normal(size=width)))
        norm.bias.copy_(torch.from_numpy(rng.normal(size=width)))
    return norm


def _activation(rng: np.random.Generator, kind: str) -> torch.nn.Module | None:
    if kind == "relu":
        return torch.nn.ReLU()
    if kind == "leaky_relu":
        return torch.nn.LeakyReLU(float(rng.uniform(0.0, 1.0)))
    if kind == "hardtanh":
        low = float(rng.uniform(-2.0, 0.0))
        return torch.nn.Hardtanh(low, low + float(rng.uniform(0.1, 3.0)))
    if kind == "relu6":
        return torch.nn.ReLU6()
    if kind == "identity":
        return torch.nn.Identity()
    return None


@st.composite
def sequentials(draw: st.DrawFn) -> tuple[torch.nn.Sequential, int]:
    """Random eval-mode Sequentials of every supported module type (nested sometimes)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    inputs = draw(st.integers(1, 5))
    blocks = draw(
        st.lists(
            st.tuples(
                st.integers(1, 6),
                st.sampled_from(["relu", "leaky_relu", "hardtanh", "relu6", "identity", "none"]),
                st.sampled_from(["none", "before", "after"]),
                st.booleans(),
                st.booleans(),
            ),
            min_size=1,
            max_size=4,
        )
    )
    modules: list[torch.nn.Module] = [torch.nn.Flatten()] if draw(st.booleans()) else []
    width = inputs
    for out, kind, norm, dropout, nest in blocks:
        block: list[torch.nn.Module] = []
        if norm == "before":
            block.append(_batch_norm(rng, width))
        block.append(torch.nn.Linear(width, out))
        if norm == "after":
            block.append(_batch_norm(rng, out))
        activation = _activation(rng, kind)
        if activation is not None:
            block.append(activation)
        if dropout:
            block.append(torch.nn.Dropout(0.3))
        modules += [torch.nn.Sequential(*block)] if nest else block
        width = out
    return torch.nn.Sequential(*modules).eval(), inputs


@settings(max_examples=40)
@given(case=sequentials())
def test_random_sequentials_match_torch(case: tuple[torch.nn.Sequential, int]) -> None:
    module, inputs = case
    network = from_torch(module)
    assert network.input_size == inputs
    linears = sum(isinstance(child, torch.nn.Linear) for child in module.modules())
    activations = sum(
        isinstance(child, torch.nn.ReLU | torch.nn.LeakyReLU | torch.nn.Hardtanh)
        for child in module.modules()
    )
    assert len(network.layers) <= min(linears, activations) + 1 + activations
    _assert_matches(network, module, (inputs,))


def test_affine_maps_merge_and_activations_attach() -> None:
    """Linear→BatchNorm→Linear is one layer; ReLU→Hardtanh composes into one activation;
    an activation first gets an identity layer."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.Linear(3, 4),
        torch.nn.BatchNorm1d(4),
        torch.nn.Linear(4, 5),
        torch.nn.ReLU(),
        torch.nn.Hardtanh(-1.0, 2.0),
        torch.nn.Linear(5, 2),
    ).eval()
    network = from_torch(module)
    assert [layer.activation for layer in network.layers] == ["hardtanh", "none"]
    assert (network.layers[0].min_val, network.layers[0].max_val) == (0.0, 2.0)
    _assert_matches(network, module, (3,))
    leading = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(3, 2))
    with pytest.raises(NetworkError, match="input_shape"):
        from_torch(leading)
    network = from_torch(leading, input_shape=3)
    assert np.array_equal(network.layers[0].weight, np.eye(3))
    _assert_matches(network, leading, (3,))


def test_input_names_and_output_names() -> None:
    module = torch.nn.Sequential(torch.nn.Linear(2, 2))
    network = from_torch(module, ["age", "income"], ["no", "yes"])
    assert network.input_names == ["age", "income"]
    assert network.output_names == ["no", "yes"]


class _Normalised(torch.nn.Module):
    """Custom forward with buffers, functional ops, view by batch size and addmm. Its
    scalars are float32 values, so the float64 copy the oracle runs applies the same ones
    (a float32 kernel rounds a Python float slope such as 0.1 to float32)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor([1.0, -2.0, 0.5, 3.0]))
        self.register_buffer("std", torch.tensor([2.0, 0.5, 1.5, 4.0]))
        self.fc = torch.nn.Linear(4, 6)
        self.norm = torch.nn.BatchNorm1d(6)
        self.weight = torch.nn.Parameter(torch.randn(6, 3))
        self.out = torch.nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = (x - self.mean) / self.std
        h = torch.clamp(self.norm(self.fc(h)), min=-0.5)
        h = h.view(h.size(0), -1)
        h = torch.addmm(torch.full((3,), 0.25, dtype=h.dtype), h, self.weight)
        h = torch.nn.functional.leaky_relu(h.reshape(-1, 3), 0.125) * 2.0 + 1.0
        h = torch.clamp(h, max=4.0)
        h = torch.nn.functional.dropout(h, 0.2, training=False)
        return -self.out(torch.nn.functional.relu6(h))


def _custom() -> torch.nn.Module:
    torch.manual_seed(1)
    module = _Normalised()
    with torch.no_grad():
        module.norm.running_mean.uniform_(-1.0, 1.0)
        module.norm.running_var.uniform_(0.5, 2.0)
    return module.eval()


@pytest.mark.parametrize("dynamic", [False, True])
def test_exported_graph_module(dynamic: bool) -> None:
    """``torch.export`` (static or dynamic batch) of a custom module: aten ops."""
    module = _custom()
    shapes = ({0: torch.export.Dim.AUTO},) if dynamic else None
    exported = torch.export.export(module, (torch.randn(3, 4),), dynamic_shapes=shapes).module()
    network = from_torch(exported)
    _assert_matches(network, module, (4,))


def test_symbolic_trace_and_export_through_input_shape() -> None:
    module = _custom()
    traced = torch.fx.symbolic_trace(module)
    _assert_matches(from_torch(traced), module, (4,))
    _assert_matches(from_torch(module, input_shape=(4,)), module, (4,))
    with pytest.raises(NetworkError, match=r"_Normalised.*input_shape"):
        from_torch(module)


def test_exported_sequential_with_every_module_type() -> None:
    torch.manual_seed(2)
    module = torch.nn.Sequential(
        torch.nn.Flatten(),
        torch.nn.Linear(6, 5),
        torch.nn.BatchNorm1d(5),
        torch.nn.LeakyReLU(0.2),
        torch.nn.Dropout(0.5),
        torch.nn.Linear(5, 4),
        torch.nn.Hardtanh(-0.5, 1.5),
        torch.nn.Identity(),
        torch.nn.Linear(4, 3),
        torch.nn.ReLU6(),
        torch.nn.Linear(3, 2),
    ).eval()
    exported = torch.export.export(module, (torch.randn(2, 2, 3),)).module()
    network = from_torch(exported)
    assert network.input_size == 6
    _assert_matches(network, module, (2, 3))
    _assert_matches(from_torch(module, input_shape=(2, 3)), module, (2, 3))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("mode", ["script", "trace"])
def test_torchscript_modules_and_files(mode: str, tmp_path) -> None:
    torch.manual_seed(3)
    module = torch.nn.Sequential(
        torch.nn.Linear(4, 5),
        torch.nn.LeakyReLU(0.3),
        torch.nn.Sequential(torch.nn.BatchNorm1d(5), torch.nn.Hardtanh(-1.0, 2.0)),
        torch.nn.Flatten(),
        torch.nn.Linear(5, 3),
        torch.nn.ReLU6(),
        torch.nn.Dropout(0.1),
        torch.nn.Linear(3, 2),
    ).eval()
    with torch.no_grad():
        module[2][0].running_var.uniform_(0.5, 2.0)
    script = (
        torch.jit.script(module) if mode == "script" else torch.jit.trace(module, torch.randn(3, 4))
    )
    _assert_matches(from_torch(script), module, (4,))
    for name in ("model.pt", "model.ts"):  # .ts: TorchScript's common name
        path = tmp_path / name
        torch.jit.save(script, str(path))
        _assert_matches(load_network(path), module, (4,))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("mode", ["script", "trace"])
@pytest.mark.parametrize("activation", [torch.nn.ReLU(), torch.nn.LeakyReLU(0.1)])
def test_torchscript_batch_norm_without_affine_keeps_its_eps(mode: str,
                                                             activation: torch.nn.Module) -> None:
    """A traced ``BatchNorm1d(affine=False)`` passes ``weight`` and ``bias`` to
    ``aten::batch_norm`` as the constant ``None``: its ``eps`` is the call's argument 7, not
    the third constant (``training``, False). Read as ``eps = 0``, the float64 self-check
    refused the ReLU model, and the float32 one (a LeakyReLU slope rounded to float32) let the
    LeakyReLU model through 3.5e-6 away from torch: a misread model."""
    torch.manual_seed(3)
    module = torch.nn.Sequential(
        torch.nn.BatchNorm1d(4, affine=False), torch.nn.Linear(4, 6), activation,
        torch.nn.Linear(6, 2)).eval()
    with torch.no_grad():
        module[0].running_mean.normal_()
        module[0].running_var.fill_(0.8)
    script = (torch.jit.script(module) if mode == "script"
              else torch.jit.trace(module, torch.randn(3, 4)))
    _assert_matches(from_torch(script), module, (4,))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("layer", [torch.nn.BatchNorm1d(5), torch.nn.Dropout(0.2)])
def test_a_module_traced_in_training_mode_is_refused_by_name(layer: torch.nn.Module) -> None:
    """Tracing freezes ``training=True`` into the ``aten`` call; ``.eval()`` on the traced
    module does not undo it. The refusal names the layer and the fix (the self-check refused
    such models too, as an unexplained disagreement)."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 5), layer, torch.nn.ReLU(),
                                 torch.nn.Linear(5, 2)).train()
    traced = torch.jit.trace(module, torch.randn(8, 4), check_trace=False).eval()
    with pytest.raises(NetworkError, match=r"at '1' was traced in training mode.*model\.eval\(\)"):
        from_torch(traced)
    _assert_matches(from_torch(torch.jit.trace(module.eval(), torch.randn(8, 4))), module, (4,))


class _MixedDtypes(torch.nn.Module):
    """A module that cannot run: a float32 constant added inside a float64 ``addmm``."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(2, 3, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(torch.ones(2), x, self.weight.t())


def test_a_module_that_fails_on_the_check_inputs_is_refused_in_one_line() -> None:
    """torch's own error on the check inputs becomes a refusal naming it (it escaped as a raw
    RuntimeError)."""
    with pytest.raises(NetworkError, match=r"fails on the check inputs: RuntimeError: .*dtype"):
        from_torch(_MixedDtypes().eval(), input_shape=(3,))


class _ChannelPReLU(torch.nn.Module):
    """A PReLU over the channels of a (2, 3) per-sample tensor (slopes along dimension 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.prelu = torch.nn.PReLU(2)
        self.out = torch.nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.prelu(x.view(x.shape[0], 2, 3)).flatten(1))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_prelu_in_every_torch_reader() -> None:
    """``torch.nn.PReLU`` (one slope, one per feature, one per channel) is a LeakyReLU with
    the stored slopes: the module, TorchScript (scripted, traced) and torch.export readers give
    the network torch computes; a slope outside [0, 1] is refused naming the layer."""
    torch.manual_seed(8)
    module = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.PReLU(5), torch.nn.Linear(5, 3),
                                 torch.nn.PReLU(), torch.nn.Linear(3, 2)).eval()
    with torch.no_grad():
        module[1].weight.uniform_(0.0, 1.0)
        module[3].weight.fill_(0.3)
    example = torch.randn(3, 4)
    for source in (module, torch.jit.script(module), torch.jit.trace(module, example),
                   torch.export.export(module, (example,)).module()):
        _assert_matches(from_torch(source), module, (4,))
    channels = _ChannelPReLU().eval()
    with torch.no_grad():
        channels.prelu.weight.copy_(torch.tensor([0.25, 0.75]))
    _assert_matches(from_torch(channels, input_shape=(6,)), channels, (6,))
    with torch.no_grad():
        module[1].weight[0] = -0.5
    with pytest.raises(NetworkError, match=r"module '1'.*PReLU slopes must lie in \[0, 1\]"):
        from_torch(module)


class _BatchBranch(torch.nn.Module):
    """A forward that computes another function when the batch is one row, or ``rows`` or more."""

    def __init__(self, rows: int | None) -> None:
        super().__init__()
        self.rows = rows
        self.deep = torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.ReLU(),
                                        torch.nn.Linear(6, 2))
        self.shallow = torch.nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (x.shape[0] == 1) if self.rows is None else (x.shape[0] >= self.rows):
            return self.shallow(x)
        return self.deep(x)


@pytest.mark.parametrize(("rows", "message"), [
    (None, r"run one row at a time: the converted network disagrees"),
    (100, r"depends on the batch size: torch.export traced it for batch sizes 2 to 99 only"),
])
def test_a_forward_that_branches_on_the_batch_size_is_refused(rows: int | None,
                                                              message: str) -> None:
    """A pickled module's forward may branch on ``x.shape[0]``: torch.export traces the branch
    of its example batch, and the 64-row self-check ran the other. Both read one of the two
    functions while the served module computes the other on single rows (or batches of 100):
    torch itself is the oracle that the row's output depends on its batch."""
    torch.manual_seed(4)
    module = _BatchBranch(rows).eval()
    row = torch.randn(1, 3)
    with torch.no_grad():
        assert not torch.allclose(module(row.repeat(rows or 1, 1))[0], module(row.repeat(2, 1))[0])
    with pytest.raises(NetworkError, match=message):
        from_torch(module, input_shape=(3,))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_scripted_ts_file_through_the_uri_parser_and_the_cli(tmp_path, capsys) -> None:
    """A ``.ts`` TorchScript file is a model file wherever a model is named: the URI parser
    takes it as a local file, and ``certgate bounds`` bounds it (the bounds hold the scripted
    module's outputs at the box's corners and centre)."""
    import json

    from pipeline_steps.cli import main
    from registry_hooks.uris import parse_model_uri

    torch.manual_seed(5)
    module = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.ReLU(),
                                 torch.nn.Linear(4, 2)).eval()
    path = tmp_path / "net.ts"
    torch.jit.save(torch.jit.script(module), str(path))
    assert parse_model_uri(str(path)).kind == "local_file"
    capsys.readouterr()
    assert main(["bounds", "--model", str(path), "--lower=-1,0", "--upper", "1,2",
                 "--method", "crown", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    lower, upper = np.array(payload["lower"]).reshape(-1), np.array(payload["upper"]).reshape(-1)
    points = torch.tensor([[-1.0, 0.0], [-1.0, 2.0], [1.0, 0.0], [1.0, 2.0], [0.0, 1.0]],
                          dtype=torch.float64)
    with torch.no_grad():
        outputs = module.double()(points).numpy()
    assert np.all(lower <= outputs) and np.all(outputs <= upper)


def test_state_dict_files(tmp_path) -> None:
    torch.manual_seed(4)
    module = torch.nn.Sequential(
        torch.nn.Linear(3, 4),
        torch.nn.ReLU(),
        torch.nn.Linear(4, 4),
        torch.nn.ReLU(),
        torch.nn.Linear(4, 2),
    )
    path = tmp_path / "weights.pth"
    torch.save(module.state_dict(), path)
    _assert_matches(load_network(path, activation="relu"), module, (3,))
    with pytest.raises(NetworkError, match="activation='relu'"):
        load_network(path)
    leaky = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.LeakyReLU(0.2), torch.nn.Linear(4, 1)
    )
    network = network_from_state_dict(
        leaky.state_dict(), activation="leaky_relu", negative_slope=0.2
    )
    _assert_matches(network, leaky, (3,))
    normed = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    with pytest.raises(NetworkError, match="running_mean"):
        network_from_state_dict(normed.state_dict(), activation="relu")
    with pytest.raises(NetworkError, match="'sigmoid' is not supported"):
        network_from_state_dict(module.state_dict(), activation="sigmoid")


class _OutputFirst(torch.nn.Module):
    """Registers its output layer before its hidden one: a state dict lists them that way."""

    def __init__(self, inputs: int, hidden: int, outputs: int) -> None:
        super().__init__()
        self.out = torch.nn.Linear(hidden, outputs)
        self.hidden = torch.nn.Linear(inputs, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(x)))


def test_state_dict_layers_are_read_in_the_one_order_their_shapes_chain() -> None:
    torch.manual_seed(3)
    module = _OutputFirst(5, 8, 2).double()
    assert next(iter(module.state_dict())) == "out.weight"
    network = network_from_state_dict(module.state_dict(), activation="relu")
    _assert_matches(network, module, (5,))


def test_state_dict_layers_whose_shapes_chain_either_way_are_refused() -> None:
    torch.manual_seed(3)
    module = _OutputFirst(4, 4, 4).double()
    with pytest.raises(NetworkError, match=r"more than one order .*out → hidden; hidden → out"):
        network_from_state_dict(module.state_dict(), activation="relu")


def test_state_dict_orders_too_many_to_search_are_refused() -> None:
    state = {f"square{i}.weight": torch.zeros(4, 4, dtype=torch.float64) for i in range(12)}
    state["odd.weight"] = torch.zeros(3, 7, dtype=torch.float64)
    with pytest.raises(NetworkError, match="too many orders"):
        network_from_state_dict(state, activation="relu")


def test_pickled_module_is_refused_not_unpickled(tmp_path) -> None:
    path = tmp_path / "whole.pt"
    torch.save(torch.nn.Sequential(torch.nn.Linear(2, 1)), path)
    with pytest.raises(NetworkError, match="pickled Python objects"):
        load_network(path)


def test_exported_program_archive(tmp_path) -> None:
    module = _custom()
    program = torch.export.export(
        module, (torch.randn(3, 4),), dynamic_shapes=({0: torch.export.Dim.AUTO},)
    )
    path = tmp_path / "model.pt2"
    torch.export.save(program, str(path))
    _assert_matches(load_network(path), module, (4,))


def test_unsupported_modules_and_ops_are_named() -> None:
    module = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Sequential(torch.nn.Tanh()))
    with pytest.raises(NetworkError, match=r"unsupported module Tanh at '1\.0'.*Linear"):
        from_torch(module)
    exported = torch.export.export(module, (torch.randn(2, 3),)).module()
    with pytest.raises(NetworkError, match=r"'tanh' at node 'tanh'.*relu"):
        from_torch(exported)
    conv = torch.nn.Sequential(torch.nn.Conv1d(1, 2, 3))
    with pytest.raises(NetworkError, match="Conv1d"):
        from_torch(conv)


def test_training_mode_is_refused() -> None:
    dropout = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5))
    with pytest.raises(NetworkError, match="training mode"):
        from_torch(dropout)
    norm = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    with pytest.raises(NetworkError, match=r"model\.eval"):
        from_torch(norm)


class _Residual(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(self.fc(x))


def test_branching_graphs_are_refused() -> None:
    traced = torch.fx.symbolic_trace(_Residual())
    with pytest.raises(NetworkError, match="branches"):
        from_graph_module(traced)


def _weight_graph(transform: object) -> torch.fx.GraphModule:
    """``linear(x, transform(w))`` with ``w`` a buffer of ones."""
    root = torch.nn.Module()
    root.register_buffer("w", torch.ones(2, 2))
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    weight = graph.call_function(transform, (graph.get_attr("w"),))
    graph.output(graph.call_function(torch.nn.functional.linear, (x, weight)))
    return torch.fx.GraphModule(root, graph)


def _double(value: torch.Tensor) -> torch.Tensor:
    return value * 2


def test_fx_constant_folding_only_runs_torch_and_operator_functions() -> None:
    network = from_graph_module(_weight_graph(operator.neg))
    assert np.array_equal(network.layers[0].weight, -np.ones((2, 2)))
    network = from_graph_module(_weight_graph(torch.t))
    assert np.array_equal(network.layers[0].weight, np.ones((2, 2)))
    with pytest.raises(NetworkError, match="cannot evaluate"):
        from_graph_module(_weight_graph(_double))


def _tie_at_a_float32_slope() -> torch.nn.Sequential:
    """``−leaky(−x) − s·x`` with ``s = float32(0.01)``, the weight torch stores: on x > 0 the
    logit is exactly 0 for the slope a float32 kernel applies (float32(0.01)), and
    ``(0.01 − s)·x > 0`` for the Python float 0.01 the module holds."""
    module = torch.nn.Sequential(torch.nn.Linear(1, 2), torch.nn.LeakyReLU(0.01),
                                 torch.nn.Linear(2, 1)).eval()
    with torch.no_grad():
        module[0].weight.copy_(torch.tensor([[-1.0], [1.0]]))
        module[0].bias.zero_()
        module[2].weight.copy_(torch.tensor([[-1.0, -0.01]]))
        module[2].bias.zero_()
    return module


@pytest.mark.parametrize("path", ["sequential", "export", "script"])
def test_a_float32_leaky_relu_uses_the_slope_its_kernel_applies(path: str) -> None:
    """A float32 LeakyReLU(0.01) multiplies by float32(0.01) (torch converts the scalar to the
    tensor's type). Read as 0.01, the network above has logit ``2.2e-10·x > 0`` (class 1 on
    every x > 0) where the model's logit is exactly 0 (class 0): a local-robustness audit
    certified P(class 1) in [0.99999999999, 1] for a model that never predicts class 1.
    Oracle: torch's own float32 outputs (exact zeros) and exact rational evaluation. The
    inputs are powers of two, so ``x·float32(0.01)`` is exact in float32 and torch's zeros do
    not depend on whether its kernel fuses the last multiply-add: at ``x = 1.25`` a fused
    kernel (AVX-512 Xeons) returns the product's rounding error, −4.7e-10, and an unfused one
    0, while the real-arithmetic logit is 0 on either."""
    module = _tie_at_a_float32_slope()
    if path == "export":
        module = torch.export.export(module, (torch.ones(3, 1),),
                                     dynamic_shapes=({0: torch.export.Dim.AUTO},)).module()
    elif path == "script":
        module = torch.jit.script(module)
    network = from_torch(module, ["x"], ["logit"])
    slope = Fraction(float(np.float32(0.01)))
    assert network.layers[0].negative_slope == slope
    xs = 2.0 ** np.arange(-3, 4)
    with torch.no_grad():
        runtime = module(torch.tensor(xs, dtype=torch.float32).reshape(-1, 1))
    assert (runtime == 0).all()
    exact = [slope * Fraction(x) - Fraction(float(np.float32(0.01))) * Fraction(x) for x in xs]
    assert all(value == 0 for value in exact)
    assert (network.evaluate_numpy(xs.reshape(-1, 1)) == 0).all()


@pytest.mark.parametrize(("dtype", "slope"), [
    (torch.float64, 0.01), (torch.float32, float(np.float32(0.01)))])
def test_the_slope_follows_the_kernels_type(dtype: torch.dtype, slope: float) -> None:
    """float64 kernels apply the Python float itself, float32 ones its float32 rounding."""
    network = from_torch(_tie_at_a_float32_slope().to(dtype), ["x"], ["logit"])
    assert network.layers[0].negative_slope == slope


def _reduced_precision_readers(dtype: torch.dtype) -> Iterator[tuple[str, object]]:
    """A small classifier in ``dtype`` through every torch reader, lazily."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(),
                                 torch.nn.Linear(3, 2)).to(dtype).eval()
    yield "Sequential", lambda: from_torch(module)
    yield "TorchScript", lambda: from_torch(torch.jit.script(module))
    yield "torch.export", lambda: from_graph_module(
        torch.export.export(module, (torch.zeros(2, 2, dtype=dtype),)).module())
    yield "state dict", lambda: network_from_state_dict(module.state_dict(), activation="relu")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_precision_models_are_refused_naming_the_fix(dtype: torch.dtype) -> None:
    """certgate certifies the real-arithmetic network of the weights; a float16 or bfloat16
    model's kernels round each layer to 11 or 8 bits, so the model as deployed is not that
    network: here its outputs miss the exact ones by more than any float32 rounding would."""
    torch.manual_seed(1)
    module = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(),
                                 torch.nn.Linear(16, 2)).to(dtype).eval()
    points = torch.rand(256, 2).to(dtype)
    with torch.no_grad():
        deployed = module(points).double()
        exact = module.double()(points.double())
    assert float((deployed - exact).abs().max()) > 2.0**-20
    for reader, read in _reduced_precision_readers(dtype):
        with pytest.raises(NetworkError, match=r"model\.float\(\)") as refused:
            read()
        assert str(dtype) in str(refused.value), reader


@settings(max_examples=30, deadline=None)
@given(slope=st.floats(0.0, 1.0), seed=st.integers(0, 2**32 - 1),
       method=st.sampled_from(["ibp", "crown"]))
def test_bounds_of_a_float32_leaky_network_hold_at_its_kernel_slope(
        slope: float, seed: int, method: str) -> None:
    """Bounds on a box of a float32 ``Linear → LeakyReLU(slope) → Linear`` hold the network
    evaluated exactly (``Fraction``) with its float32 weights and the float32 slope the
    kernel multiplies by, at the box's corners and at random points in it."""
    torch.manual_seed(seed % 2**31)
    module = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.LeakyReLU(slope),
                                 torch.nn.Linear(4, 1)).eval()
    network = from_torch(module)
    kernel = Fraction(float(np.float32(slope)))
    weights = [(layer.weight.detach().double().numpy(), layer.bias.detach().double().numpy())
               for layer in (module[0], module[2])]
    rng = np.random.default_rng(seed)
    lower = rng.normal(size=2)
    upper = lower + rng.uniform(0.01, 2.0, size=2)
    bounds = compute_bounds(network, lower[None, :], upper[None, :], method=method)
    points = [np.array([a, b]) for a in (lower[0], upper[0]) for b in (lower[1], upper[1])]
    points += list(rng.uniform(lower, upper, size=(16, 2)))
    for point in points:
        hidden = [sum((Fraction(float(w)) * Fraction(float(x)) for w, x in zip(row, point,
                                                                               strict=True)),
                      Fraction(float(b))) for row, b in zip(*weights[0], strict=True)]
        hidden = [h if h >= 0 else kernel * h for h in hidden]
        (row,), (bias,) = weights[1]
        value = sum((Fraction(float(w)) * h for w, h in zip(row, hidden, strict=True)),
                    Fraction(float(bias)))
        assert Fraction(float(bounds.lower[0, 0])) <= value <= Fraction(float(bounds.upper[0, 0]))


_C32 = float(np.float32(0.1))
_TIE_BREAK = -(2.0**-40)


class _ScalarForward(torch.nn.Module):
    """``fc(op(x))`` where ``op`` applies a Python float (or a float64 tensor without
    dimensions) to the data, and ``fc`` gives the logits ``(w·h + b, −2⁻⁴⁰)``."""

    def __init__(self, op: str, weight: float, bias: float) -> None:
        super().__init__()
        self.op = op
        self.register_buffer("tenth", torch.tensor(0.1, dtype=torch.float64))
        self.fc = torch.nn.Linear(1, 2)
        with torch.no_grad():
            self.fc.weight.copy_(torch.tensor([[weight], [0.0]]))
            self.fc.bias.copy_(torch.tensor([bias, _TIE_BREAK]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.op == "mul":
            h = x * 0.1
        elif self.op == "add":
            h = x + 0.1
        elif self.op == "sub":
            h = x - 0.1
        elif self.op == "rsub":
            h = 0.1 - x
        elif self.op == "alpha":
            h = torch.add(x, 1.0, alpha=0.1)
        elif self.op == "buffer":
            h = x * self.tenth
        else:
            h = x / 2.9
        return self.fc(h)


_SCALAR_CASES = {
    # op: (x, w, b, h as read from the Python float 0.1 or 2.9 in real arithmetic)
    "mul": (1.0, 1.0, -_C32, Fraction(1, 10)),
    "add": (0.0, 1.0, -_C32, Fraction(1, 10)),
    "sub": (0.0, -1.0, -_C32, Fraction(-1, 10)),
    "rsub": (0.0, 1.0, -_C32, Fraction(1, 10)),
    "alpha": (0.0, 1.0, -_C32, Fraction(1, 10)),
    "buffer": (1.0, 1.0, -_C32, Fraction(1, 10)),
    "div": (float(np.float32(2.9)), -1.0, 1.0, Fraction(float(np.float32(2.9))) / Fraction(29, 10)),
}


@pytest.mark.parametrize("path", ["export", "symbolic_trace"])
@pytest.mark.parametrize("op", sorted(_SCALAR_CASES))
def test_a_float32_forwards_scalars_are_the_values_its_kernels_apply(op: str, path: str) -> None:
    """A float32 ``forward`` computing ``x * 0.1`` multiplies by float32(0.1) (torch converts
    a Python number, and a tensor without dimensions, to the type it computes in), and
    ``x / 2.9`` divides by float32(2.9). At the chosen row torch computes ``w·h + b`` exactly,
    and it is 0: class 0 against the tie-break logit −2⁻⁴⁰. Read as the Python float, the
    first logit is about −1.5e-9 (−3.3e-8 for the division), class 1: a model that runs
    class 0 was certified as class 1 there. Oracle: torch's own float32 outputs (bit for bit;
    the division, held as a marked reciprocal, inside the network's bounds at the row, which
    leave out the Python float's reading), and that reading in ``Fraction``."""
    x, weight, bias, literal = _SCALAR_CASES[op]
    module = _ScalarForward(op, weight, bias).eval()
    if path == "symbolic_trace":
        network = from_graph_module(torch.fx.symbolic_trace(module), input_shape=(1,))
    else:
        network = from_torch(module, input_shape=(1,))
    row = np.array([[x]])
    with torch.no_grad():
        runtime = module(torch.tensor(row, dtype=torch.float32)).double().numpy()
    assert runtime[0, 0] == 0.0 and runtime.argmax(1).tolist() == [0]
    as_literal = Fraction(weight) * literal + Fraction(bias)
    assert as_literal < Fraction(_TIE_BREAK)
    bounds = compute_bounds(network, row, row, method="crown")
    assert (bounds.lower <= runtime).all() and (runtime <= bounds.upper).all()
    assert Fraction(float(bounds.lower[0, 0])) > as_literal
    if op != "div":
        assert np.array_equal(network.evaluate_numpy(row), runtime)
        assert network.as_classifier().classify(row).tolist() == [0]


@pytest.mark.parametrize("op", sorted(_SCALAR_CASES))
def test_a_float64_forwards_scalars_are_the_python_floats(op: str) -> None:
    """In float64 the kernels apply the Python float itself: certgate's logits are torch's
    float64 ones to rounding, on rows around the chosen one."""
    x, weight, bias, _ = _SCALAR_CASES[op]
    module = _ScalarForward(op, weight, bias).double().eval()
    network = from_torch(module, input_shape=(1,))
    rows = x + np.linspace(-3.0, 3.0, 13).reshape(-1, 1)
    with torch.no_grad():
        runtime = module(torch.from_numpy(rows)).numpy()
    assert np.allclose(network.evaluate_numpy(rows), runtime, rtol=1e-15, atol=1e-15)
    if op == "mul":
        assert network.layers[0].weight[0, 0] == 0.1


class ReLU(torch.nn.Module):
    """A user's own ``ReLU``: torch's, except on a narrow band where it flips the sign."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where((x > 3.1) & (x < 3.2), -x, torch.relu(x))


class Sequential(torch.nn.Sequential):
    """A user's own ``Sequential`` adding a skip of its input to the output."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x
        for layer in self:
            y = layer(y)
        return y + x[:, :2]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("mode", ["script", "trace", "file"])
@pytest.mark.parametrize("own", ["ReLU", "Sequential"])
def test_a_users_class_named_like_a_torch_layer_is_refused(mode: str, own: str,
                                                           tmp_path) -> None:
    """TorchScript keeps a user's class name as ``original_name``; read by that name alone, a
    ``ReLU`` of the user's own was converted as torch's and passed the self-check on random
    inputs, which never hit the band where the two differ: every certificate would then be
    about a network the model is not. The reader now requires torch.nn's own class."""
    torch.manual_seed(0)
    layers = (torch.nn.Linear(2, 3), ReLU() if own == "ReLU" else torch.nn.ReLU(),
              torch.nn.Linear(3, 2))
    module = (torch.nn.Sequential(*layers) if own == "ReLU" else Sequential(*layers)).eval()
    band = torch.tensor([[3.15]])
    assert ReLU()(band).item() != torch.relu(band).item()
    if mode == "trace":
        script = torch.jit.trace(module, torch.randn(3, 2))
    else:
        script = torch.jit.script(module)
    if mode == "file":
        path = tmp_path / "model.pt"
        torch.jit.save(script, str(path))
        script = torch.jit.load(str(path))
    with pytest.raises(NetworkError, match=rf"module {own} at '.*' is the class .*{own}, not "
                                           r"torch\.nn's own"):
        from_torch(script)

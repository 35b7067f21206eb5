"""nn.Module and nn.Parameter: registration, traversal, modes, state dicts, hooks and repr, checked against
PyTorch's behaviour (torch is used as the reference for names, orders and printing)."""
import numpy as np
import pytest
import torch

import metajit as mj
from metajit import nn


class Leaf(nn.Module):
    def __init__(self, rows=2, columns=3):
        super().__init__()
        self.weight = nn.Parameter(mj.array(np.arange(rows * columns, dtype=np.float32).reshape(rows, columns)))
        self.bias = nn.Parameter(mj.zeros(rows))
        self.register_buffer("count", mj.zeros([], dtype="int64"))
        self.register_buffer("scratch", mj.zeros(rows), persistent=False)

    def forward(self, x):
        return x * 2


class Tree(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Leaf()
        self.inner = nn.Sequential(Leaf(), nn.Identity())
        self.scale = nn.Parameter(mj.ones(1))


class TorchLeaf(torch.nn.Module):
    def __init__(self, rows=2, columns=3):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(rows, columns))
        self.bias = torch.nn.Parameter(torch.zeros(rows))
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))
        self.register_buffer("scratch", torch.zeros(rows), persistent=False)


class TorchTree(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = TorchLeaf()
        self.inner = torch.nn.Sequential(TorchLeaf(), torch.nn.Identity())
        self.scale = torch.nn.Parameter(torch.ones(1))


def test_parameter_is_a_marked_leaf_var():
    p = nn.Parameter(mj.ones(2, 2))
    assert isinstance(p, mj.Var) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf
    assert not isinstance(mj.ones(2), nn.Parameter)
    assert not isinstance(p * 2, nn.Parameter)
    p.assign(mj.full([2, 2], 3.0))
    assert isinstance(p, nn.Parameter)
    frozen = nn.Parameter(np.zeros(3, dtype=np.float32), requires_grad=False)
    assert isinstance(frozen, nn.Parameter) and not frozen.requires_grad
    assert tuple(nn.Parameter().shape) == (0,)
    with pytest.raises(TypeError, match="floating-point"):
        nn.Parameter(mj.zeros(2, dtype="int64"))
    assert not isinstance(np.zeros(2), nn.Parameter)


def test_names_and_order_match_torch():
    ours, theirs = Tree(), TorchTree()
    assert [name for name, _ in ours.named_parameters()] == [name for name, _ in theirs.named_parameters()]
    assert [name for name, _ in ours.named_buffers()] == [name for name, _ in theirs.named_buffers()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [name for name, _ in ours.named_modules()] == [name for name, _ in theirs.named_modules()]
    assert [name for name, _ in ours.named_children()] == [name for name, _ in theirs.named_children()]
    assert [name for name, _ in ours.named_parameters(recurse=False)] == ["scale"]
    assert len(list(ours.parameters())) == 5 and len(list(ours.modules())) == 5
    assert ours.get_submodule("inner.0") is ours.inner[0]
    with pytest.raises(AttributeError, match="no submodule 'missing'"):
        ours.get_submodule("inner.missing")


def test_repr_matches_torch():
    class Net(nn.Module):
        def __init__(self, module):
            super().__init__()
            self.body = module.Sequential(module.Identity(), module.Sequential(module.Identity()))
            self.head = module.Identity()

    class TorchNet(torch.nn.Module):
        def __init__(self, module):
            super().__init__()
            self.body = module.Sequential(module.Identity(), module.Sequential(module.Identity()))
            self.head = module.Identity()

    ours, theirs = repr(Net(nn)), repr(TorchNet(torch.nn))
    assert ours.replace("Net(", "X(") == theirs.replace("TorchNet(", "X(")


def test_shared_parameters_are_listed_once():
    tied = Leaf()
    model = nn.Sequential(tied, tied)
    torch_tied = TorchLeaf()
    reference = torch.nn.Sequential(torch_tied, torch_tied)
    assert len(list(model.parameters())) == 2
    assert list(model.state_dict()) == list(reference.state_dict())  # state dicts list every path, as torch
    assert [name for name, _ in model.named_modules()] == [name for name, _ in reference.named_modules()]
    model.add_module("2", nn.Identity())
    model.get_submodule("2").shared = tied.weight  # the same Parameter registered again
    assert len(list(model.parameters())) == 2
    assert [name for name, _ in model.named_parameters(remove_duplicate=False)][-1] == "2.shared"


def test_assignment_rules():
    module = Leaf()
    with pytest.raises(TypeError, match="parameter 'weight'"):
        module.weight = mj.ones(2, 3)
    module.bias = None
    assert module.bias is None and "bias" not in dict(module.named_parameters())
    module.count = mj.ones([], dtype="int64")
    assert module.state_dict()["count"].item() == 1
    with pytest.raises(TypeError, match="buffer 'count'"):
        module.count = 3
    module.plain = mj.ones(2)  # a Var that is not a Parameter is an ordinary attribute
    assert "plain" not in dict(module.named_parameters()) and "plain" not in dict(module.named_buffers())
    module.child = nn.Identity()
    with pytest.raises(TypeError, match="child module 'child'"):
        module.child = 5
    del module.child
    assert "child" not in dict(module.named_children())
    with pytest.raises(KeyError, match="already exists"):
        module.register_buffer("plain", mj.ones(1))
    with pytest.raises(KeyError, match=r"contain '\.'"):
        module.register_parameter("a.b", nn.Parameter(mj.ones(1)))
    with pytest.raises(TypeError, match="nn.Parameter or None"):
        module.register_parameter("extra", mj.ones(1))
    with pytest.raises(TypeError, match="not a Module"):
        module.add_module("x", 3)

    class Early(nn.Module):
        def __init__(self):
            self.weight = nn.Parameter(mj.ones(1))
            super().__init__()

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


def test_train_eval_and_apply():
    model = Tree()
    assert all(module.training for module in model.modules())
    assert model.eval() is model
    assert not any(module.training for module in model.modules())
    model.train()
    assert all(module.training for module in model.modules())
    with pytest.raises(ValueError, match="bool"):
        model.train("yes")
    visited = []
    model.apply(lambda module: visited.append(type(module).__name__))
    theirs = []
    TorchTree().apply(lambda module: theirs.append(type(module).__name__.replace("Torch", "")))
    assert visited == theirs
    model.requires_grad_(False)
    assert not any(p.requires_grad for p in model.parameters())


def test_zero_grad():
    model = Leaf()
    (model.weight * model.weight).sum().backward()
    np.testing.assert_array_equal(model.weight.grad.numpy(), 2 * np.arange(6).reshape(2, 3))
    model.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(model.weight.grad.numpy(), np.zeros((2, 3)))
    model.zero_grad()
    assert model.weight.grad is None
    mj._autograd.take_pending_outputs()


def test_state_dict_round_trip_and_errors():
    source, target = Tree(), Tree()
    values = {name: np.random.default_rng(index).standard_normal(tuple(var.shape)).astype(np.float32)
              for index, (name, var) in enumerate(source.named_parameters())}
    state = dict(source.state_dict())
    state.update(values)  # numpy values are accepted
    state["first.count"] = np.array(7)
    result = target.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []
    loaded = target.state_dict()
    for name, value in values.items():
        np.testing.assert_array_equal(loaded[name].numpy(), value)
    assert loaded["first.count"].dtype == "int64" and loaded["first.count"].item() == 7
    assert isinstance(target.first.weight, nn.Parameter)  # loaded in place: same objects

    missing = dict(state)
    del missing["scale"]
    missing["extra.weight"] = np.zeros(1, dtype=np.float32)
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "scale"') as error:
        target.load_state_dict(missing)
    assert 'Unexpected key(s) in state_dict: "extra.weight"' in str(error.value)
    result = target.load_state_dict(missing, strict=False)
    assert result.missing_keys == ["scale"] and result.unexpected_keys == ["extra.weight"]

    wrong = dict(state)
    wrong["first.weight"] = np.zeros((3, 2), dtype=np.float32)
    with pytest.raises(RuntimeError, match=r"size mismatch for first.weight: copying a param with shape \(3, 2\)"):
        target.load_state_dict(wrong, strict=False)
    with pytest.raises(TypeError, match="'scale' is a str"):
        target.load_state_dict(dict(state, scale="x"))


def test_load_state_dict_from_torch():
    theirs = TorchTree()
    with torch.no_grad():
        for parameter in theirs.parameters():
            parameter.copy_(torch.randn_like(parameter))
    ours = Tree()
    ours.load_state_dict({name: value.numpy() for name, value in theirs.state_dict().items()})
    for (name, mine), (_, reference) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_array_equal(mine.numpy(), reference.detach().numpy(), err_msg=name)


def test_state_dict_keep_vars_and_dtype_conversion():
    model = Leaf()
    assert model.state_dict(keep_vars=True)["weight"] is model.weight
    model.double()
    assert model.weight.dtype == "float64" and model.count.dtype == "int64"
    assert isinstance(model.weight, nn.Parameter) and model.weight.requires_grad
    np.testing.assert_array_equal(model.weight.numpy(), np.arange(6).reshape(2, 3))
    with pytest.raises(TypeError, match="floating-point"):
        model.to("int32")


def test_call_forward_and_hooks():
    model = Leaf()
    assert model(mj.array([1.0, 2.0])).numpy().tolist() == [2.0, 4.0]
    calls = []
    handle = model.register_forward_hook(lambda module, args, output: output + 1)
    model.register_forward_pre_hook(lambda module, args: calls.append(len(args)))
    assert model(mj.array([1.0])).numpy().tolist() == [3.0]
    handle.remove()
    assert model(mj.array([1.0])).numpy().tolist() == [2.0]
    assert calls == [1, 1]

    class NoForward(nn.Module):
        pass

    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        NoForward()(mj.ones(1))

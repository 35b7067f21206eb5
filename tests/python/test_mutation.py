"""Mutation with PyTorch's semantics (meta_ops/var.h, docs/mutation.md): in-place methods, writes through views,
detach() and .data, and autograd across them. Each program is written once against the shared PyTorch/metajit
names and run on both; metajit must give PyTorch's values and gradients (float32, rtol 1e-6) and PyTorch's
errors."""
import numpy as np
import pytest

import metajit as mj
from metajit import nn

torch = pytest.importorskip("torch")


def numpy_of(value):
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return value.detach().numpy()
    return np.asarray(value.numpy())


def run_both(program):
    """program(lib) returns a dict of tensors (or None); both libraries must give the same values."""
    expected = {name: numpy_of(value) for name, value in program(torch).items()}
    got = {name: numpy_of(value) for name, value in program(mj).items()}
    assert got.keys() == expected.keys()
    for name in expected:
        if expected[name] is None:
            assert got[name] is None, f"{name}: PyTorch gives None, metajit {got[name]}"
            continue
        assert got[name] is not None, f"{name}: PyTorch gives {expected[name]}, metajit None"
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-6, atol=1e-6, err_msg=name)
    return got


def raises_in_both(program, match):
    with pytest.raises(RuntimeError):
        program(torch)
    with pytest.raises((RuntimeError, ValueError), match=match):
        program(mj)


# ------------------------------------------------------------------------------------ the cases

def test_detach_of_a_lazy_value_is_a_new_leaf():
    def program(lib):
        a = lib.ones(3, requires_grad=True)
        c = (a * 2).detach().requires_grad_()
        (c * 3).sum().backward()
        return {"c.grad": c.grad, "a.grad": a.grad}
    run_both(program)


def test_manual_parameter_update_under_no_grad_changes_the_parameter():
    torch.manual_seed(0)
    reference = torch.nn.Linear(2, 1)
    model = nn.Linear(2, 1)
    model.weight.assign(reference.weight.detach().numpy())
    model.bias.assign(reference.bias.detach().numpy())
    for lib, layer in ((torch, reference), (mj, model)):
        weight = layer.weight
        layer(lib.ones(4, 2)).sum().backward()
        with lib.no_grad():
            for parameter in layer.parameters():
                parameter -= 0.1 * parameter.grad
        assert layer.weight is weight and weight.is_leaf and weight.requires_grad
    np.testing.assert_allclose(model.weight.numpy(), numpy_of(reference.weight), rtol=1e-6)
    np.testing.assert_allclose(model.bias.numpy(), numpy_of(reference.bias), rtol=1e-6)


def test_writes_through_views_and_aliases_reach_the_base():
    def program(lib):
        x = lib.zeros(2, 3)
        x.view(-1)[0] = 100
        row = x[0]
        row[1] = 9
        y = x
        y += 1
        return {"x": x, "row": row, "y": y}
    run_both(program)


# ------------------------------------------------------------------------------------ views alias their base

@pytest.mark.parametrize("make_view", [
    lambda x: x[1], lambda x: x[:, 1:3], lambda x: x[::2, ::-1] if False else x[::2], lambda x: x.t(),
    lambda x: x.transpose(0, 1)[1:], lambda x: x.permute(1, 0), lambda x: x.select(1, 2), lambda x: x.narrow(0, 1, 2),
    lambda x: x.reshape(12), lambda x: x.view(2, 2, 3), lambda x: x.unsqueeze(0)[0], lambda x: x.flatten(),
    lambda x: x.unflatten(1, (2, 2)), lambda x: x.chunk(2, dim=1)[1], lambda x: x.split(1)[2],
    lambda x: x.unbind(1)[3], lambda x: x.T[2:, :2], lambda x: x[1:, 1:][1:, 2:],
], ids=["select", "slice", "step", "t", "transpose_slice", "permute", "select_method", "narrow", "reshape", "view",
        "unsqueeze", "flatten", "unflatten", "chunk", "split", "unbind", "T_slice", "view_of_view"])
def test_every_live_view_sees_a_write_through_any_of_them(make_view):
    def program(lib):
        x = lib.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
        view = make_view(x)
        other = x[1:]  # another live view, taken before the write
        view.mul_(10)
        view.add_(lib.ones(view.shape) * 0.5)
        after = x * 1  # recorded after the write
        return {"x": x, "view": view, "other": other, "after": after}
    run_both(program)


def test_ops_recorded_before_a_write_keep_the_old_value():
    def program(lib):
        x = lib.tensor(np.arange(4, dtype=np.float32))
        before = x * 2
        view = x[1:3]
        x.add_(100)
        return {"before": before, "view": view, "x": x}
    run_both(program)


def test_reshape_of_a_transpose_is_a_copy_and_view_of_it_fails():
    def program(lib):
        x = lib.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
        flat = x.t().reshape(-1)  # PyTorch copies: writes do not reach x
        flat[0] = 50
        contiguous = x.t().contiguous()
        contiguous[0, 0] = 7
        return {"x": x, "flat": flat, "contiguous": contiguous}
    run_both(program)
    raises_in_both(lambda lib: lib.tensor(np.ones((2, 3), dtype=np.float32)).t().view(-1),
                   "view size is not compatible")


def test_strides_and_contiguity_follow_pytorch():
    base = np.zeros((4, 5, 6), dtype=np.float32)
    for make in (lambda x: x, lambda x: x.transpose(0, 2), lambda x: x[1:3, ::2], lambda x: x[:, 2],
                 lambda x: x.permute(2, 0, 1).reshape(6, 20), lambda x: x.unsqueeze(1).expand(4, 3, 5, 6)):
        ours, theirs = make(mj.tensor(base)), make(torch.tensor(base))
        assert ours.stride() == theirs.stride()
        assert ours.storage_offset() == theirs.storage_offset()
        assert ours.is_contiguous() == theirs.is_contiguous()


def test_writing_through_an_expanded_view_fails():
    raises_in_both(lambda lib: lib.zeros(3).expand(2, 3).add_(1), "more than one element")


def test_copying_a_var_onto_itself_still_counts_as_a_write():
    def program(lib):
        a = lib.tensor([0.5, -1.0, 2.0, 0.25], requires_grad=True)
        y = (a * 2).exp()  # exp saves its output
        part = y[1:3]
        part.copy_(part)
        (y * y).sum().backward()
    raises_in_both(program, "modified by an inplace operation")


def test_writing_one_element_of_an_expanded_view_through_a_squeeze():
    """A narrow of an expanded dim to one element may be written (PyTorch allows it); a squeeze between the
    expand and the narrow used to split the path, so the expand alone looked written."""
    def program(lib):
        a = lib.tensor([[[0.5], [-1.0], [2.0]]], requires_grad=True)
        b = a * 2.0
        view = b.expand(1, 1, 3, 2).squeeze(0).transpose(2, 0).narrow(0, 0, 1)
        view[:] = 1.5
        (b * b).sum().backward()
        return {"b": b, "a.grad": a.grad}
    run_both(program)


@pytest.mark.parametrize("alias", ["data", "detach"])
def test_writing_one_element_of_an_expanded_alias_through_an_unsqueeze(alias):
    """The same through a .data or detach() alias of the expanded view (mutation fuzz seed 304981): the write
    reaches the base along the alias's parent path, where the unsqueeze, a reshape, split the path too."""
    def program(lib):
        base = lib.tensor(np.arange(10, dtype=np.float32).reshape(2, 5, 1))
        expanded = base.expand(2, 5, 3)
        aliased = expanded.data if alias == "data" else expanded.detach()
        aliased.unsqueeze(0)[:, :, 4:, 0] = lib.tensor([-1.15])
        aliased.unsqueeze(-1)[1, 2:4, 0, 0] = lib.tensor([7.0, 8.0])
        return {"base": base, "expanded": expanded}
    run_both(program)


# ------------------------------------------------------------------------------------ in-place methods

def test_in_place_methods_match_pytorch():
    data = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)

    def program(lib):
        x = lib.tensor(data)
        results = {}
        steps = [
            ("add_", lambda t: t.add_(lib.ones(4), alpha=2)), ("sub_", lambda t: t.sub_(0.5)),
            ("mul_", lambda t: t.mul_(lib.tensor(data))), ("div_", lambda t: t.div_(3)),
            ("clamp_", lambda t: t.clamp_(-1, 1)), ("exp_", lambda t: t.exp_()), ("neg_", lambda t: t.neg_()),
            ("abs_", lambda t: t.abs_()), ("sqrt_", lambda t: t.sqrt_()), ("pow_", lambda t: t.pow_(2)),
            ("masked_fill_", lambda t: t.masked_fill_(lib.tensor(data) > 0, -3.0)),
            ("relu_", lambda t: t.relu_()), ("fill_", lambda t: t[0].fill_(7)),
            ("zero_", lambda t: t[:, 1].zero_()), ("copy_", lambda t: t[2].copy_(lib.tensor(data[0]))),
            ("clamp_min_", lambda t: t.clamp_min_(0.5)), ("addcmul_", lambda t: t.addcmul_(t, t, value=0.5)),
            ("lerp_", lambda t: t.lerp_(lib.zeros(3, 4), 0.25)), ("tanh_", lambda t: t.tanh_()),
            ("sigmoid_", lambda t: t.sigmoid_()), ("floor_div", lambda t: t.__ifloordiv__(0.25)),
            ("imul", lambda t: t.__imul__(2)), ("itruediv", lambda t: t.__itruediv__(lib.tensor(data) + 3)),
        ]
        for name, step in steps:
            returned = step(x)
            results[name] = x * 1
            results[name + " returns"] = returned * 1
        return results
    run_both(program)


def test_in_place_results_must_fit_the_var():
    raises_in_both(lambda lib: lib.zeros(3).add_(lib.ones(2, 3)), "doesn't match the broadcast shape")
    raises_in_both(lambda lib: lib.zeros(3, dtype=lib.int64).add_(1.5), "can't be cast")


def test_leaves_that_require_grad_refuse_in_place_ops_in_grad_mode():
    raises_in_both(lambda lib: lib.ones(3, requires_grad=True).mul_(2),
                   "a leaf Variable that requires grad is being used in an in-place operation")
    raises_in_both(lambda lib: lib.ones(3, requires_grad=True)[1:].mul_(2),
                   "a view of a leaf Variable that requires grad")

    def program(lib):  # allowed under no_grad and through .data; the leaf stays a leaf with its grad
        p = lib.ones(3, requires_grad=True)
        (p * p).sum().backward()
        with lib.no_grad():
            p.mul_(3)
            p[0] = 5
        p.data.add_(1)
        p.data[2] = -1
        (p * 2).sum().backward()
        return {"p": p, "p.grad": p.grad}
    run_both(program)


# ------------------------------------------------------------------------------------ autograd under mutation

def test_gradients_flow_through_in_place_ops_on_computed_values():
    def program(lib):
        a = lib.tensor(np.array([1.0, 2.0, 3.0], dtype=np.float32), requires_grad=True)
        b = lib.tensor(np.array([4.0, 5.0, 6.0], dtype=np.float32), requires_grad=True)
        y = a * 2
        y.add_(b)
        y[1:].mul_(b[1:])
        z = y.clone()
        z.exp_()
        (z.sum() + y.sum()).backward()
        return {"y": y, "z": z, "a.grad": a.grad, "b.grad": b.grad}
    run_both(program)


def test_in_place_under_no_grad_keeps_the_history_of_a_computed_value():
    def program(lib):
        a = lib.tensor(np.array([1.0, -2.0, 3.0], dtype=np.float32), requires_grad=True)
        y = a * 3
        with lib.no_grad():
            y.clamp_(min=0)
        y.data.mul_(2)
        (y * y).sum().backward()
        return {"y": y, "a.grad": a.grad, "requires_grad": lib.tensor(float(y.requires_grad))}
    run_both(program)


def test_a_value_saved_for_backward_then_modified_makes_backward_fail_naming_the_line():
    def program(lib):
        a = lib.ones(3, requires_grad=True)
        y = a.exp()  # exp saves its output
        z = y * a
        y.add_(1)
        z.sum().backward()
    raises_in_both(program, r"modified by an inplace operation: .* changed by add_ at .*test_mutation.py:\d+")

    def through_a_view(lib):
        a = lib.ones(2, 3, requires_grad=True)
        b = a * 1
        y = b.t() * a.t()  # mul saves both transposes: views of b and a
        b[0, 0] = 2
        y.sum().backward()
    raises_in_both(through_a_view, "modified by an inplace operation")

    def after_a_write_through_data(lib):  # the .data write replaced the leaf's value; the counter is still shared
        a = lib.tensor([[1.0, 2.0, 3.0, 4.0]], requires_grad=True)
        flat = a.reshape(4)
        y = flat * flat  # saves the view
        a.data[0, :2] = 1.5
        with lib.no_grad():
            flat.reshape(2, 2)[0].copy_(lib.tensor([0.5, 0.5]))
        y.sum().backward()
    raises_in_both(after_a_write_through_data, "modified by an inplace operation")

    def result_of_an_in_place_op_through_a_view(lib):  # sigmoid_ saves its result, the view's new value
        a = lib.tensor([[0.5], [-1.0], [2.0]], requires_grad=True)
        b = a * 2.0
        flat = b.squeeze()
        flat.sigmoid_()
        flat[1:2] = lib.tensor([0.25])
        b.sum().backward()
    raises_in_both(result_of_an_in_place_op_through_a_view, "modified by an inplace operation")

    def unaffected(lib):  # a sum saves nothing, and .data writes are not counted
        a = lib.ones(3, requires_grad=True)
        y = a * 2
        total = y.sum()
        y.add_(1)
        b = lib.ones(3, requires_grad=True)
        w = b * 2 + b
        w.data.mul_(0)
        (total + w.sum()).backward()
        return {"a.grad": a.grad, "b.grad": b.grad}
    run_both(unaffected)


DETACHED_ALIAS_WRITES = ["the base", "a view of the base", "another detach()", "a detach() of a detach()",
                         "the base under no_grad"]


def write_what_a_detached_alias_shares(lib, write, base):
    if write == "the base":
        base[0, :] = -1.78
    elif write == "a view of the base":
        base[1].mul_(2)
    elif write == "another detach()":
        base.detach()[0, 1] = 3.0
    elif write == "a detach() of a detach()":
        base.detach().detach()[1].add_(1)
    elif write == "the base under no_grad":
        with lib.no_grad():
            base.add_(1)


def detached_alias_program(write, computed, write_after_backward=False):
    """Mutation fuzz seed 91555: detach() shares its source's version counter. A computed source's detach() holds
    the values apart from the source's node, which a later write of the source replaces and frees: the write
    must mark the alias itself, or backward silently used the recorded values where PyTorch raises. (No view of
    the base may outlive the write here: it would keep the replaced node alive and hide that.)"""
    def program(lib):
        base = lib.tensor([[-0.45, 0.25, 1.95, -1.25], [-0.58, -1.46, -1.88, -1.25]]) * 2.0
        if computed and lib is mj:
            base.numpy()
        leaf = base.detach().requires_grad_()
        view = leaf[:]
        square = view * view  # saves the view of the alias
        loss = (leaf * -0.47).sum() + (view * 1.06).sum() + (square * square).sum()
        if write_after_backward:
            loss.backward()
        write_what_a_detached_alias_shares(lib, write, base)
        if computed and lib is mj:
            base.numpy()  # the new value stops reading the replaced one
        if not write_after_backward:
            loss.backward()
        return {"leaf.grad": leaf.grad, "base": base}
    return program


@pytest.mark.parametrize("computed", [False, True], ids=["pending", "computed"])
@pytest.mark.parametrize("write", DETACHED_ALIAS_WRITES)
def test_a_write_through_what_a_detached_alias_shares_makes_backward_fail(write, computed):
    raises_in_both(detached_alias_program(write, computed), "modified by an inplace operation: .* changed by")


@pytest.mark.parametrize("computed", [False, True], ids=["pending", "computed"])
@pytest.mark.parametrize("write", [None, "the base", "another detach()"], ids=["no write", "base", "sibling"])
def test_a_detached_alias_keeps_its_gradient_where_pytorch_does_not_raise(write, computed):
    """No write, or the write after backward(): the same program, no error, PyTorch's gradient."""
    run_both(detached_alias_program(write, computed, write_after_backward=True))


@pytest.mark.parametrize("computed", [False, True], ids=["pending", "computed"])
def test_a_write_of_a_detached_alias_s_base_is_allowed_when_nothing_saved_the_alias(computed):
    def program(lib):
        base = lib.tensor([[0.5, -1.5], [2.0, 0.25]]) * 2.0
        if computed and lib is mj:
            base.numpy()
        leaf = base.detach().requires_grad_()
        loss = (leaf[1:] * 3.0).sum() + leaf.sum()  # a product with a constant saves nothing
        base[0, :] = -1.78
        loss.backward()
        return {"leaf.grad": leaf.grad, "leaf": leaf}
    run_both(program)


@pytest.mark.parametrize("computed", [False, True], ids=["pending", "computed"])
def test_a_write_of_the_parent_reaches_a_detached_alias_with_history(computed):
    """The alias was written a value with history, so it keeps a grad_fn of its own; the parent's write still
    moves their shared counter."""
    def program(lib):
        a = lib.tensor([0.5, -1.5, 2.0], requires_grad=True)
        parent = lib.tensor([1.0, 2.0, 3.0]) * 2.0
        if computed and lib is mj:
            parent.numpy()
        alias = parent.detach()
        alias[0] = (a * 3.0)[0]
        square = alias * alias
        parent[1] = 5.0
        square.sum().backward()
    raises_in_both(program, "modified by an inplace operation")


# .data has a version counter of its own (PyTorch): a value saved through it (or a view of it) is not checked
# against writes that move only its source's counter, and its own writes still count for it.
DATA_SAVES = {"data": lambda data: data, "a view of data": lambda data: data[1:]}
SOURCE_WRITES = ["the source", "a view of the source", "a detach() of the source", "the source under no_grad"]


def write_a_data_alias_s_source(lib, write, source, value):
    """Writes `value` to source[0], which source * 2.0 of [1, 2, 3] already holds when value is 2.0."""
    if write == "the source":
        source[0] = value
    elif write == "a view of the source":
        source[:2].mul_(lib.tensor([value / 2.0, 1.0]))
    elif write == "a detach() of the source":
        source.detach()[0] = value
    elif write == "the source under no_grad":
        with lib.no_grad():
            source[0:1].fill_(value)


def data_alias_program(saved, write, computed, value=2.0, then_write_the_alias=False):
    """Mutation false positive: the check followed the .data alias's node to its source's, which the write
    marked. `other` holds the source's node past the write, as any pending reader of it would."""
    def program(lib):
        weight = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
        source = lib.tensor([1.0, 2.0, 3.0]) * 2.0
        if computed and lib is mj:
            source.numpy()
        other = source * 3.0
        data = source.data
        saved_value = DATA_SAVES[saved](data)
        product = saved_value * weight[:saved_value.shape[0]]  # saves saved_value for weight's gradient
        write_a_data_alias_s_source(lib, write, source, value)
        if then_write_the_alias:
            data[2] = 9.0
        if computed and lib is mj:
            source.numpy()
        product.sum().backward()
        return {"weight.grad": weight.grad, "source": source, "data": data, "other": other}
    return program


@pytest.mark.parametrize("computed", [False, True], ids=["pending", "computed"])
@pytest.mark.parametrize("write", SOURCE_WRITES)
@pytest.mark.parametrize("saved", list(DATA_SAVES))
def test_a_write_of_a_data_alias_s_source_does_not_fail_backward_through_the_alias(saved, write, computed):
    """PyTorch reads the storage at backward: the write gives source[0] the value it had (2.0), so both give the
    gradient of the same values (a change of values the saved alias reads is the difference docs/mutation.md
    lists)."""
    program = data_alias_program(saved, write, computed)
    expected = {name: numpy_of(value) for name, value in program(torch).items()}
    got = {name: numpy_of(value) for name, value in program(mj).items()}
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("computed", [False, True], ids=["pending", "computed"])
@pytest.mark.parametrize("write", SOURCE_WRITES)
def test_a_view_of_a_data_alias_keeps_its_gradient_when_its_source_s_other_elements_change(write, computed):
    """The view reads source[1:]; the write changes source[0] only, so PyTorch's gradient is the recorded one."""
    program = data_alias_program("a view of data", write, computed, value=-7.5)
    expected = {name: numpy_of(value) for name, value in program(torch).items()}
    got = {name: numpy_of(value) for name, value in program(mj).items()}
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("computed", [False, True], ids=["pending", "computed"])
@pytest.mark.parametrize("saved", list(DATA_SAVES))
def test_a_write_of_a_data_alias_still_fails_backward_through_it(saved, computed):
    """Its own counter still moves: a write to the alias after its source's (which re-derived it) fails a
    backward that saved the alias, or a view of it, before both."""
    program = data_alias_program(saved, "the source", computed, then_write_the_alias=True)
    raises_in_both(program, "modified by an inplace operation: .* changed by")


@pytest.mark.parametrize("computed", [False, True], ids=["pending", "computed"])
def test_a_view_of_a_data_alias_shares_the_alias_s_counter(computed):
    """A view of a pending value's .data is not composed into a view of the value itself, which would lose the
    alias (and with it the alias's own writes)."""
    def program(lib):
        weight = lib.tensor([0.5, -1.0], requires_grad=True)
        source = lib.tensor([1.0, 2.0, 3.0]) * 2.0
        if computed and lib is mj:
            source.numpy()
        data = source.data
        product = data[1:] * weight
        data[0] = 5.0
        product.sum().backward()
    raises_in_both(program, "modified by an inplace operation: .* changed by")


def test_a_value_saved_through_data_keeps_its_recorded_values_where_pytorch_reads_the_changed_storage():
    """The difference docs/mutation.md lists: no error in either, but PyTorch's backward reads the storage as
    the source's write left it; metajit's node is immutable and gives the gradient of the recorded values."""
    program = data_alias_program("data", "the source", computed=False, value=1.0)
    np.testing.assert_allclose(numpy_of(program(torch)["weight.grad"]), [1.0, 4.0, 6.0], rtol=1e-6)
    np.testing.assert_allclose(numpy_of(program(mj)["weight.grad"]), [2.0, 4.0, 6.0], rtol=1e-6)


# copy_ and x[k] = v copy: the written tensor's storage is its own, so a later write of the tensor copied from
# changes nothing it saved (mutation fuzz seed 303818: the check followed the copy's node to its source's).
COPY_WRITES = ["copy_", "copy_ broadcast", "setitem"]
COPIED_SOURCE_WRITES = ["the source", "a view of the source", "a detach() of the source", "the source's .data"]


@pytest.mark.parametrize("computed", [False, True], ids=["pending", "computed"])
@pytest.mark.parametrize("source_write", COPIED_SOURCE_WRITES)
@pytest.mark.parametrize("copy", COPY_WRITES)
def test_a_write_of_what_was_copied_from_does_not_fail_backward_through_the_copy(copy, source_write, computed):
    def program(lib):
        weight = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
        source = lib.tensor([1.0, 2.0, 3.0]) * 2.0
        if computed and lib is mj:
            source.numpy()
        target = lib.zeros(3)
        if copy == "copy_":
            target.copy_(source)
        elif copy == "copy_ broadcast":
            target.copy_(source[1:2])
        else:
            target[:] = source
        product = target * weight  # saves target for weight's gradient
        view_product = target[1:] * weight[1:]  # saves a view of target
        if source_write == "the source":
            source.mul_(3.0)
        elif source_write == "a view of the source":
            source.reshape(-1)[1:].add_(1.0)
        elif source_write == "a detach() of the source":
            source.detach().clamp_(5.0, 6.0)
        else:
            source.data[0] = 7.0
        (product.sum() + view_product.sum()).backward()
        return {"weight.grad": weight.grad, "target": target, "source": source}
    run_both(program)


def test_module_conversion_keeps_parameters_as_the_same_leaves():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))  # every parameter gets a gradient
    parameters = list(model.parameters())
    optimizer = mj.optim.SGD(model.parameters(), lr=0.1)
    model.double()
    assert all(p is q for p, q in zip(model.parameters(), parameters))
    assert all(p.dtype == "float64" and p.is_leaf and p.requires_grad for p in parameters)
    before = [p.numpy().copy() for p in parameters]
    loss = model(mj.ones(5, 3, dtype="float64")).sum()
    loss.backward()
    assert all(p.grad.dtype == "float64" for p in parameters)
    optimizer.step()
    assert all(not np.array_equal(p.numpy(), old) for p, old in zip(parameters, before))
    model.float()
    assert all(p.dtype == "float32" and p.is_leaf for p in model.parameters())


@pytest.mark.parametrize("name, states", [("SGD", 0), ("Adam", 2), ("AdamW", 2)])
def test_optimizers_update_the_parameter_objects_in_place(name, states):
    import gc
    gc.collect()
    alive_before = mj.stats()["bytes_allocated"]  # what other tests keep alive stays so: count from here
    model = nn.Linear(8, 8)
    weight = model.weight
    optimizer = getattr(mj.optim, name)(model.parameters(), lr=0.01)
    data = mj.randn(4, 8)
    for _ in range(3):
        optimizer.zero_grad()
        model(data).sum().backward()
        optimizer.step()
    assert model.weight is weight and weight.is_leaf and weight.requires_grad
    mj.sync(weight)
    mj.reset_stats()
    optimizer.zero_grad()
    model(data).sum().backward()
    optimizer.step()
    # A step allocates the gradients, the new values and new optimizer state (8x8 weight + 8 bias in float32 is
    # 288 bytes each) and the activations ([4, 8] and the loss, under 280 bytes), never another copy of them.
    parameter_bytes = 288
    assert mj.stats()["bytes_allocated"] - alive_before <= (2 + states) * parameter_bytes + 280


def test_a_manual_update_loop_keeps_no_graphs_alive():
    """The classic loop without an optimizer: backward(), then p -= lr * p.grad under no_grad. Each step's graph
    must go (backward() used to keep every loss for a next optimizer step that never came)."""
    import gc
    model = nn.Linear(16, 4)
    data = mj.randn(8, 16)

    def step():
        loss = (model(data) ** 2).mean()
        loss.backward()
        with mj.no_grad():
            for parameter in model.parameters():
                parameter -= 0.01 * parameter.grad
                parameter.grad = None
        return loss.item()

    losses = [step() for _ in range(20)]
    gc.collect()
    live = mj.stats()["vars_live"]
    losses += [step() for _ in range(200)]
    gc.collect()
    assert mj.stats()["vars_live"] <= live + 16
    assert losses[-1] < losses[0]


def test_in_place_changes_of_grad_are_the_gradient():
    """p.grad is a tensor like any other: clipping it in place, writing a slice of it or through .data, or
    assigning a tensor and then changing that tensor, all change what the optimizer steps with."""
    def program(lib):
        weight = lib.tensor([[1.0, -2.0, 3.0], [0.5, 0.25, -1.0]], requires_grad=True)
        bias = lib.tensor([0.1, -0.2], requires_grad=True)
        inputs = lib.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
        ((inputs @ weight.T + bias) ** 2).sum().backward()
        first = weight.grad
        with lib.no_grad():
            weight.grad.mul_(0.5)
            weight.grad[1] = 0.0
            weight.grad.data.clamp_(-4.0, 4.0)
            bias.grad.zero_()
        same_handle = weight.grad is first
        replacement = lib.ones(2)
        bias.grad = replacement
        replacement += 2.0
        with lib.no_grad():
            weight -= 0.1 * weight.grad
            bias -= 0.1 * bias.grad
        return {"weight": weight, "bias": bias, "first": first, "same": lib.tensor(float(same_handle))}
    run_both(program)


def test_writing_history_into_a_view_made_under_no_grad_is_refused_as_in_pytorch():
    """A view made under no_grad of a tensor that needs no grad, written in grad mode with a value that
    requires grad (fuzz seed 2918): PyTorch refuses; writing a value without history there is allowed."""
    def program(lib):
        weight = lib.tensor([0.5, 1.5], requires_grad=True)
        base = lib.tensor([1.0, 2.0, 3.0])
        with lib.no_grad():
            view = base[:2]
            nested = view[1:]
        nested.add_(1.0)  # no history written: allowed
        view += weight * 2
    raises_in_both(program, "A view was created in no_grad mode and is being modified inplace")

    def allowed(lib):
        base = lib.tensor([1.0, 2.0, 3.0])
        with lib.no_grad():
            view = base[:2]
        view += lib.tensor([1.0, 1.0])
        return {"base": base}
    run_both(allowed)


IN_PLACE_OPS = {
    "mul_(x)": lambda x: x.mul_(x), "div_(x)": lambda x: x.div_(x), "x *= x[:]": lambda x: x.__imul__(x[:]),
    "addcmul_(x, x)": lambda x: x.addcmul_(x, x), "add_(x)": lambda x: x.add_(x), "mul_(2)": lambda x: x.mul_(2),
    "pow_(2)": lambda x: x.pow_(2), "log_()": lambda x: x.log_(), "abs_()": lambda x: x.abs_(),
    "exp_()": lambda x: x.exp_(), "sigmoid_()": lambda x: x.sigmoid_(), "relu_()": lambda x: x.relu_(),
}


@pytest.mark.parametrize("operation", sorted(IN_PLACE_OPS))
@pytest.mark.parametrize("written_after", [False, True])
def test_an_in_place_op_reading_itself_as_an_operand_saves_what_pytorch_saves(operation, written_after):
    """x.mul_(x) saves its operand, x itself, which the op then writes: PyTorch's backward refuses, and so must
    metajit's. An op reading only self (pow_, log_) keeps its own copy of the old value; one whose gradient
    reads its result (exp_, relu_) refuses only after a later write."""
    def program(lib):
        weight = lib.tensor([0.5, 1.5, 2.0], requires_grad=True)
        x = weight * 2
        IN_PLACE_OPS[operation](x)
        if written_after:
            x.neg_()
        x.sum().backward()
        return {"grad": weight.grad}
    try:
        program(torch)
    except RuntimeError:
        raises_in_both(program, "modified by an inplace operation")
        return
    run_both(program)


def test_a_second_backward_through_a_clone_computed_in_between():
    """clone() saves nothing, so PyTorch backpropagates through it again after its value was read; the node,
    computed after the first backward, used to drop its edges and raise here."""
    def program(lib):
        a = lib.tensor([1.0, 0.5, -2.0], requires_grad=True)
        b = a.clone()
        ((a * 0.5).sum() + (b * -0.25).sum()).backward()
        read = b * 1  # a copy of the value read in between
        b.detach().numpy() if lib is torch else b.numpy()
        ((b * b).sum() + (a * 2.0).sum()).backward()
        return {"read": read, "a.grad": a.grad}
    run_both(program)


@pytest.mark.parametrize("write", ["fill_", "add_", "view add_", "view fill_", "whole view add_", "setitem",
                                   "copy_ into a view"])
def test_a_second_backward_after_a_write_raises_where_pytorch_does(write):
    """PyTorch refuses a second backward through a value written through a view (its CopySlices) and allows it
    after a plain in-place op that saves nothing."""
    writes = {
        "fill_": lambda lib, y: y.fill_(2),
        "add_": lambda lib, y: y.add_(1),
        "view add_": lambda lib, y: y[1:].add_(1),
        "view fill_": lambda lib, y: y[1:].fill_(1),
        "whole view add_": lambda lib, y: y[:].add_(1),
        "setitem": lambda lib, y: y.__setitem__(0, 5.0),
        "copy_ into a view": lambda lib, y: y[:2].copy_(lib.zeros(2)),
    }

    def second_backward_raises(lib):
        y = lib.ones(3, requires_grad=True) + 1
        writes[write](lib, y)
        y.sum().backward()
        try:
            y.sum().backward()
        except RuntimeError:
            return True
        return False
    assert second_backward_raises(mj) == second_backward_raises(torch)


def test_a_view_made_under_no_grad_refuses_new_views_after_a_tracked_write_to_its_base():
    def program(lib):
        base = lib.zeros(2, 3)
        row = base[0]
        with lib.no_grad():
            flat = base.view(-1)
        row.mul_(lib.ones(3, requires_grad=True))  # grad mode: the storage now has history
        flat[:2]
    raises_in_both(program, "A view was created in no_grad mode and its base")


def test_a_view_made_under_no_grad_refuses_ops_in_grad_mode_after_a_tracked_write_to_its_base():
    """Mutation fuzz seed 31094: PyTorch refuses to record an op on the view (its history would be ambiguous);
    metajit computed it, and the gradient through the view was silently missing."""
    def program(lib):
        base = lib.tensor([[-0.32], [-0.56], [-1.22]])
        addend = lib.tensor([-0.73], requires_grad=True)
        with lib.no_grad():
            row = base.select(0, -2)
        base.add_(addend)
        (row * 1.02).sum()
    raises_in_both(program, "A view was created in no_grad mode and its base")


def test_an_identity_view_made_under_no_grad_refuses_ops_after_a_tracked_write_to_its_base():
    """Mutation fuzz seed 302917: expand() to the tensor's own shape is a view in PyTorch too, though its values are
    the base's own; it refuses an op in grad mode as any other view made under no_grad does."""
    def program(lib):
        base = lib.tensor([1.31, -1.66, -0.54])
        with lib.no_grad():
            same = base.expand(3)
        base.mul_(lib.tensor([2.0], requires_grad=True))
        same * same
    raises_in_both(program, "A view was created in no_grad mode and its base")


@pytest.mark.parametrize("use", ["read", "under no_grad", "write under no_grad", "write without history"])
def test_a_view_made_under_no_grad_stays_usable_where_pytorch_allows_it(use):
    def program(lib):
        base = lib.tensor([[1.0], [2.0], [3.0]])
        with lib.no_grad():
            row = base.select(0, 1)
        if use == "write under no_grad":
            with lib.no_grad():
                base.add_(lib.tensor([0.5], requires_grad=True))
        elif use == "write without history":
            base.add_(lib.tensor([0.5]))
        else:
            base.add_(lib.tensor([0.5], requires_grad=True))
        if use == "under no_grad":
            with lib.no_grad():
                return (row * 2).sum().item()
        if use == "read":
            return row.detach().numpy().tolist() if lib is torch else row.numpy().tolist()
        return (row * 2).sum().item()
    assert program(mj) == pytest.approx(program(torch))

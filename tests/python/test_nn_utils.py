"""nn.utils against PyTorch (clip_grad_norm_ / get_total_norm / clip_grads_with_norm_ / clip_grad_value_: the
returned norms and the clipped gradients, and that an optimizer steps with the clipped ones;
parameters_to_vector / vector_to_parameters; nn.utils.rnn's pad_sequence and the NotImplementedError of the
packing names), and the nn.init additions: orthogonal_ (orthogonality, gain, shapes), dirac_, sparse_, and
every PyTorch initialiser present with PyTorch's parameter names. Expected values always come from torch."""
import inspect
import math
import warnings

import numpy as np
import pytest

import metajit as mj
from metajit import nn
from metajit.nn import init

torch = pytest.importorskip("torch")

SHAPES = [(3, 4), (5,), (), (2, 3, 2)]


def gradient_pairs(rng, scale=1.0, shapes=SHAPES):
    """Parameters of both libraries holding the same random gradients."""
    gradients = [np.asarray(scale * rng.standard_normal(shape), dtype=np.float32) for shape in shapes]
    ours = [nn.Parameter(mj.zeros(*shape)) for shape in shapes]
    theirs = [torch.zeros(shape, requires_grad=True) for shape in shapes]
    for mine, reference, gradient in zip(ours, theirs, gradients):
        mine.grad = mj.array(gradient)
        reference.grad = torch.from_numpy(gradient.copy())
    return ours, theirs


def assert_grads_match(ours, theirs, rtol=1e-5, atol=1e-6):
    for mine, reference in zip(ours, theirs):
        np.testing.assert_allclose(mine.grad.numpy(), reference.grad.numpy(), rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------------- imports

def test_import_forms():
    import metajit.nn.utils
    from metajit.nn.utils import clip_grad_norm_
    assert mj.nn.utils.clip_grad_norm_ is clip_grad_norm_ is metajit.nn.utils.clip_grad_norm_
    assert mj.nn.utils.rnn.pad_sequence is not None


@pytest.mark.parametrize("name", ["pack_padded_sequence", "pad_packed_sequence", "pack_sequence",
                                  "unpack_sequence", "PackedSequence"])
def test_packing_names_raise_not_implemented_naming_them(name):
    with pytest.raises(NotImplementedError, match=name):
        getattr(nn.utils.rnn, name)
    with pytest.raises(NotImplementedError, match=name):
        exec(f"from metajit.nn.utils.rnn import {name}")
    with pytest.raises(AttributeError):
        nn.utils.rnn.no_such_name  # noqa: B018
    with pytest.raises(NotImplementedError, match="weight_norm"):
        nn.utils.weight_norm  # noqa: B018


# ---------------------------------------------------------------------------------------------- clipping

@pytest.mark.parametrize("norm_type", [2.0, 1, 3.0, 0.5, float("inf"), "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 1e4])
def test_clip_grad_norm_matches_pytorch(rng, norm_type, max_norm):
    ours, theirs = gradient_pairs(rng)
    total = nn.utils.clip_grad_norm_(ours, max_norm, norm_type=norm_type, foreach=True)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    assert tuple(total.shape) == ()
    np.testing.assert_allclose(total.numpy(), expected.numpy(), rtol=1e-5)
    assert_grads_match(ours, theirs)


def test_clip_grad_norm_skips_missing_grads_takes_a_single_var_and_none(rng):
    ours, theirs = gradient_pairs(rng)
    ours.append(nn.Parameter(mj.ones(3)))
    theirs.append(torch.ones(3, requires_grad=True))
    total = nn.utils.clip_grad_norm_(iter(ours), 1.0)  # a generator, as model.parameters()
    np.testing.assert_allclose(total.numpy(), torch.nn.utils.clip_grad_norm_(theirs, 1.0).numpy(), rtol=1e-5)
    assert ours[-1].grad is None
    assert_grads_match(ours[:-1], theirs[:-1])
    single, reference = gradient_pairs(rng, shapes=[(4, 4)])
    np.testing.assert_allclose(nn.utils.clip_grad_norm_(single[0], 0.1).numpy(),
                               torch.nn.utils.clip_grad_norm_(reference[0], 0.1).numpy(), rtol=1e-5)
    assert_grads_match(single, reference)
    empty = nn.utils.clip_grad_norm_([nn.Parameter(mj.ones(2))], 1.0)
    assert float(empty.numpy()) == float(torch.nn.utils.clip_grad_norm_([torch.ones(2, requires_grad=True)], 1.0))


def test_clip_grad_norm_nonfinite(rng):
    ours, theirs = gradient_pairs(rng)
    bad = np.array([1.0, np.nan], dtype=np.float32)
    ours[1].grad, theirs[1].grad = mj.array(np.resize(bad, 5)), torch.from_numpy(np.resize(bad, 5))
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.nn.utils.clip_grad_norm_(theirs, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(ours, 1.0, error_if_nonfinite=True)
    total = nn.utils.clip_grad_norm_(ours, 1.0)
    expected = torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    assert np.isnan(total.numpy()) and np.isnan(expected.numpy())
    for mine, reference in zip(ours, theirs):
        np.testing.assert_array_equal(np.isnan(mine.grad.numpy()), np.isnan(reference.grad.numpy()))


def test_get_total_norm_and_clip_grads_with_norm_match_pytorch(rng):
    ours, theirs = gradient_pairs(rng, scale=3.0)
    total = nn.utils.get_total_norm([p.grad for p in ours], norm_type=3)
    expected = torch.nn.utils.get_total_norm([p.grad for p in theirs], norm_type=3)
    np.testing.assert_allclose(total.numpy(), expected.numpy(), rtol=1e-5)
    nn.utils.clip_grads_with_norm_(ours, 2.0, total)
    torch.nn.utils.clip_grads_with_norm_(theirs, 2.0, expected)
    assert_grads_match(ours, theirs)


def test_clip_grad_value_matches_pytorch(rng):
    ours, theirs = gradient_pairs(rng)
    assert nn.utils.clip_grad_value_(ours, 0.3) is None
    torch.nn.utils.clip_grad_value_(theirs, 0.3)
    assert_grads_match(ours, theirs)


@pytest.mark.parametrize("clip", ["norm", "value"])
def test_optimizer_steps_with_the_clipped_gradients(rng, clip):
    """backward, clip, SGD step (momentum): the updated weights equal PyTorch's over two steps."""
    torch.manual_seed(0)
    theirs = torch.nn.Linear(6, 3)
    ours = nn.Linear(6, 3)
    ours.load_state_dict({key: mj.array(value.detach().numpy()) for key, value in theirs.state_dict().items()})
    ours_optimizer = mj.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    theirs_optimizer = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        data = (10 * rng.standard_normal((5, 6))).astype(np.float32)
        for module, optimizer, library, make in ((ours, ours_optimizer, mj.nn.utils, mj.array),
                                                 (theirs, theirs_optimizer, torch.nn.utils, torch.from_numpy)):
            optimizer.zero_grad()
            (module(make(data)) ** 2).sum().backward()
            if clip == "norm":
                library.clip_grad_norm_(module.parameters(), 1.0)
            else:
                library.clip_grad_value_(module.parameters(), 0.05)
            optimizer.step()
        for name, parameter in theirs.named_parameters():
            np.testing.assert_allclose(getattr(ours, name).numpy(), parameter.detach().numpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=name)


# ---------------------------------------------------------------------------------------------- vectors

def test_parameters_to_vector_and_back_match_pytorch(rng):
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    ours = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    ours.load_state_dict({key: mj.array(value.detach().numpy()) for key, value in theirs.state_dict().items()})
    vector = nn.utils.parameters_to_vector(ours.parameters())
    np.testing.assert_array_equal(vector.numpy(), torch.nn.utils.parameters_to_vector(theirs.parameters())
                                  .detach().numpy())
    new = rng.standard_normal(vector.shape[0]).astype(np.float32)
    before = list(ours.parameters())
    nn.utils.vector_to_parameters(mj.array(new), ours.parameters())
    torch.nn.utils.vector_to_parameters(torch.from_numpy(new), theirs.parameters())
    after = list(ours.parameters())
    assert all(old is current for old, current in zip(before, after))  # the same leaves an optimizer holds
    for (name, parameter), (_, reference) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_array_equal(parameter.numpy(), reference.detach().numpy(), err_msg=name)
        assert parameter.requires_grad and parameter.is_leaf
    with pytest.raises(TypeError):
        nn.utils.vector_to_parameters(new, ours.parameters())
    with pytest.raises(RuntimeError):
        nn.utils.vector_to_parameters(mj.array(new[:-1]), ours.parameters())


# ---------------------------------------------------------------------------------------------- rnn padding

@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence_matches_pytorch(rng, batch_first, padding_side):
    sequences = [rng.standard_normal((length, 3)).astype(np.float32) for length in (4, 1, 6)]
    got = nn.utils.rnn.pad_sequence([mj.array(value) for value in sequences], batch_first=batch_first,
                                    padding_value=-2.0, padding_side=padding_side)
    expected = torch.nn.utils.rnn.pad_sequence([torch.from_numpy(value) for value in sequences],
                                               batch_first=batch_first, padding_value=-2.0,
                                               padding_side=padding_side)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    if padding_side == "right":
        pieces = nn.utils.rnn.unpad_sequence(got, mj.array(np.array([4, 1, 6])), batch_first=batch_first)
        for piece, value in zip(pieces, sequences):
            np.testing.assert_array_equal(piece.numpy(), value)


# ---------------------------------------------------------------------------------------------- init

@pytest.mark.parametrize("shape", [(5, 5), (3, 8), (8, 3), (4, 2, 3), (6, 1, 2, 2)])
@pytest.mark.parametrize("gain", [1.0, 2.5])
def test_orthogonal_rows_or_columns_are_orthonormal_times_gain(shape, gain):
    tensor = mj.zeros(*shape)
    assert init.orthogonal_(tensor, gain=gain) is tensor
    matrix = tensor.numpy().reshape(shape[0], -1).astype(np.float64)
    rows, columns = matrix.shape
    if rows <= columns:
        np.testing.assert_allclose(matrix @ matrix.T, gain ** 2 * np.eye(rows), atol=1e-5)
    else:
        np.testing.assert_allclose(matrix.T @ matrix, gain ** 2 * np.eye(columns), atol=1e-5)
    # The same checks hold for torch's (what the assertions above mean is PyTorch's contract).
    reference = torch.nn.init.orthogonal_(torch.zeros(shape), gain=gain).reshape(shape[0], -1).double()
    small = min(rows, columns)
    product = reference @ reference.T if rows <= columns else reference.T @ reference
    np.testing.assert_allclose(product.numpy(), gain ** 2 * np.eye(small), atol=1e-5)


def test_orthogonal_seeding_spread_and_errors():
    mj.seed(3)
    first = init.orthogonal_(mj.zeros(4, 4)).numpy()
    mj.seed(3)
    np.testing.assert_array_equal(init.orthogonal_(mj.zeros(4, 4)).numpy(), first)
    # Haar-distributed: entries of a large orthogonal matrix have variance 1 / n.
    large = init.orthogonal_(mj.zeros(200, 200)).numpy()
    assert abs(large.var() - 1 / 200) < 0.1 / 200
    assert init.orthogonal_(mj.zeros(0, 3)).shape == (0, 3)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        torch.nn.init.orthogonal_(torch.zeros(4))
    with pytest.raises(ValueError, match="2 or more dimensions"):
        init.orthogonal_(mj.zeros(4))
    parameter = nn.Parameter(mj.zeros(3, 3))
    init.orthogonal_(parameter)
    assert isinstance(parameter, nn.Parameter) and parameter.requires_grad


@pytest.mark.parametrize("shape,groups", [((4, 2, 3), 1), ((4, 2, 3, 3), 2), ((6, 3, 1, 3, 2), 3), ((2, 5, 3, 3), 1)])
def test_dirac_matches_pytorch(shape, groups):
    expected = torch.nn.init.dirac_(torch.empty(shape), groups).numpy()
    np.testing.assert_array_equal(init.dirac_(mj.ones(*shape), groups).numpy(), expected)


def test_dirac_sparse_and_eye_errors_match_pytorch():
    for function, arguments in ((init.dirac_, ((4, 2),)), (init.dirac_, ((3, 2, 3), 2)),
                                (init.sparse_, ((3, 2, 2), 0.5)), (init.eye_, ((2, 2, 2),))):
        shape, rest = arguments[0], arguments[1:]
        with pytest.raises(ValueError):
            getattr(torch.nn.init, function.__name__)(torch.zeros(shape), *rest)
        with pytest.raises(ValueError):
            function(mj.zeros(*shape), *rest)


def test_sparse_zeroes_the_same_count_per_column():
    tensor = init.sparse_(mj.zeros(50, 20), sparsity=0.3, std=0.5)
    values = tensor.numpy()
    expected = torch.nn.init.sparse_(torch.zeros(50, 20), sparsity=0.3, std=0.5).numpy()
    np.testing.assert_array_equal((values == 0).sum(axis=0), (expected == 0).sum(axis=0))
    assert abs(values[values != 0].std() - 0.5) < 0.05


def test_every_pytorch_initialiser_exists_with_its_parameter_names():
    names = [name for name, value in vars(torch.nn.init).items()
             if callable(value) and not name.startswith("_") and getattr(value, "__module__", "") == "torch.nn.init"]
    assert {"orthogonal_", "dirac_", "sparse_", "trunc_normal_", "calculate_gain"} <= set(names)
    for name in names:
        ours = getattr(init, name)
        theirs = getattr(torch.nn.init, name)
        if name.endswith("_") or name == "calculate_gain":
            assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters), name
            for parameter_name, parameter in inspect.signature(theirs).parameters.items():
                assert inspect.signature(ours).parameters[parameter_name].default == parameter.default, (
                    name, parameter_name)


def test_deprecated_names_warn_and_initialise():
    tensor = mj.zeros(3, 3)
    with pytest.warns(FutureWarning, match="orthogonal_"):
        init.orthogonal(tensor)
    np.testing.assert_allclose(tensor.numpy() @ tensor.numpy().T, np.eye(3), atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        init.constant(tensor, 2.0)
    assert np.all(tensor.numpy() == 2.0)
    assert math.isclose(init.calculate_gain("tanh"), torch.nn.init.calculate_gain("tanh"))

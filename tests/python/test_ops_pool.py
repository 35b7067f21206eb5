"""Pooling (metajit.ops.pool): max, average, adaptive average and adaptive max pooling against PyTorch (float64
value and input gradient) with strides, padding, dilation, ceil_mode, count_include_pad, divisor_override and
return_indices; max pooling's gradient with tied maxima, NaN and -inf windows against PyTorch's rule (all of a
window's gradient to the element return_indices names); finite differences; errors."""
import numpy as np
import pytest

import metajit as mj
import metajit.nn.functional as F
from conftest import assert_close, launched
from gradient_check import check_gradients

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def assert_matches_torch(function, torch_function, array, rtol=1e-12, atol=1e-12, seed=0):
    """function (metajit) and torch_function agree on the value and the input gradient (float64). Returns the
    metajit output (or the tuple of outputs when indices are returned) for further checks."""
    input = mj.array(array, requires_grad=True)
    tensor = torch.tensor(array, requires_grad=True)
    result, expected = function(input), torch_function(tensor)
    output, expected_output = (result[0], expected[0]) if isinstance(result, tuple) else (result, expected)
    assert_close(output, expected_output.detach().numpy(), rtol=rtol, atol=atol)
    if isinstance(result, tuple):
        assert_close(result[1], expected[1].numpy(), dtype=np.int64)
    weights = np.random.default_rng(seed).standard_normal(tuple(expected_output.shape))
    (expected_output * torch.tensor(weights)).sum().backward()
    gradient = mj.grad((output * mj.array(weights)).sum(), input)
    assert_close(gradient, tensor.grad.numpy(), rtol=rtol, atol=atol)
    return result


MAX_POOL2D_CASES = [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": (3, 2), "stride": (1, 2), "padding": (1, 0)},
    {"kernel_size": 3, "stride": 2, "dilation": 2, "padding": 1},
    {"kernel_size": 2, "ceil_mode": True},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": 2, "stride": 1, "return_indices": True},
    {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": (1, 2), "ceil_mode": True, "return_indices": True},
]


@pytest.mark.parametrize("options", MAX_POOL2D_CASES, ids=str)
def test_max_pool2d_matches_torch(rng, options):
    image = rng.standard_normal((2, 3, 7, 8))
    assert_matches_torch(lambda x: F.max_pool2d(x, **options), lambda x: TF.max_pool2d(x, **options), image)


def test_max_pool2d_padding_reads_minus_infinity(rng):
    # All values negative: zero padding would win the max at the border, -inf padding never does.
    image = -rng.uniform(1, 2, size=(1, 2, 4, 4))
    expected = TF.max_pool2d(torch.tensor(image), 3, stride=1, padding=1).numpy()
    assert (expected < 0).all()
    assert_close(F.max_pool2d(mj.array(image), 3, stride=1, padding=1), expected, rtol=0)


def test_max_pool2d_integer_input(rng):
    image = rng.integers(-50, 50, size=(1, 2, 6, 6)).astype(np.int32)
    expected = TF.max_pool2d(torch.tensor(image).double(), 3, stride=2, padding=1).numpy().astype(np.int32)
    assert_close(F.max_pool2d(mj.array(image), 3, stride=2, padding=1), expected, dtype=np.int32)


TIED_CASES = [
    ("max_pool2d", {"kernel_size": 2}),  # windows that tile the input: the gradient is gathered back
    ("max_pool2d", {"kernel_size": 3, "stride": 2, "padding": 1}),  # overlapping windows: scattered back
    ("max_pool2d", {"kernel_size": 2, "stride": 1, "dilation": 2, "ceil_mode": True}),
    ("max_pool1d", {"kernel_size": 3, "stride": 1, "padding": 1}),
    ("max_pool3d", {"kernel_size": 2, "stride": (1, 2, 2)}),
    ("adaptive_max_pool2d", {"output_size": (3, 2)}),  # windows of unequal lengths
    ("adaptive_max_pool2d", {"output_size": 1}),
]


@pytest.mark.parametrize("name, options", TIED_CASES, ids=str)
def test_max_pool_gradient_goes_to_one_tied_maximum_as_torch(rng, name, options):
    """Integer-valued inputs tie in most windows; a window's gradient goes to its first maximum, as in PyTorch
    (the gradient of amax would split it), and the returned indices name that element."""
    spatial = 3 if name.endswith("3d") else 1 if name.endswith("1d") else 2
    image = rng.integers(0, 3, size=(2, 3) + (6, 7, 5)[:spatial]).astype(np.float64)
    assert_matches_torch(lambda x: getattr(F, name)(x, return_indices=True, **options),
                         lambda x: getattr(TF, name)(x, return_indices=True, **options), image)
    assert_matches_torch(lambda x: getattr(F, name)(x, **options), lambda x: getattr(TF, name)(x, **options), image)


def test_max_pool2d_gradient_of_nan_and_infinite_windows_as_torch():
    """A window holding NaNs passes NaN and gives its gradient to its last NaN (PyTorch's CPU rule); a window of
    -inf only gives it to its first element inside the input, never to the padding."""
    nan, inf = float("nan"), float("inf")
    image = np.array([[[[nan, 1.0, -inf, -inf, 2.0],
                        [nan, 2.0, -inf, -inf, 2.0],
                        [0.0, nan, 1.0, 5.0, 5.0],
                        [3.0, 4.0, nan, 5.0, inf]]]])
    for options in ({"kernel_size": 2}, {"kernel_size": 2, "stride": 1, "padding": 1},
                    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}):
        input = mj.array(image, requires_grad=True)
        tensor = torch.tensor(image, requires_grad=True)
        output, indices = F.max_pool2d(input, return_indices=True, **options)
        expected, expected_indices = TF.max_pool2d(tensor, return_indices=True, **options)
        assert_close(output, expected.detach().numpy(), rtol=0, equal_nan=True)
        assert_close(indices, expected_indices.numpy(), dtype=np.int64)
        weights = np.arange(1.0, 1.0 + expected.numel()).reshape(tuple(expected.shape))
        (expected * torch.tensor(weights)).sum().backward()
        assert_close(mj.grad((output * mj.array(weights)).sum(), input), tensor.grad.numpy(), rtol=0)


def test_max_pool2d_gradient_ignores_later_writes_to_its_input():
    """The backward finds each window's maximum from the values pooled, not from what the input holds later."""
    base = mj.array(np.array([[[[1.0, 3.0], [2.0, 0.0]]]]), requires_grad=True)
    input = base * 1.0
    output = F.max_pool2d(input, 2)
    input[0, 0, 0, 0] = 10.0  # would win the window now
    assert_close(mj.grad(output.sum(), base), np.array([[[[0.0, 1.0], [0.0, 0.0]]]]), rtol=0)


def test_max_pool2d_second_order_gradient(rng):
    """The backward is made of ops: the gradient of a function of the input gradient matches PyTorch's."""
    image = rng.integers(0, 3, size=(1, 2, 4, 6)).astype(np.float64)
    input = mj.array(image, requires_grad=True)
    tensor = torch.tensor(image, requires_grad=True)
    weights = rng.standard_normal((1, 2, 3, 5))
    output = (F.max_pool2d(input, 2, stride=1) ** 2 * mj.array(weights)).sum()
    expected = (TF.max_pool2d(tensor, 2, stride=1) ** 2 * torch.tensor(weights)).sum()
    expected_first, = torch.autograd.grad(expected, [tensor], create_graph=True)
    (expected_first ** 2).sum().backward()
    first = mj.grad(output, input)
    assert_close(first, expected_first.detach().numpy())
    assert_close(mj.grad((first ** 2).sum(), input), tensor.grad.numpy())


def test_max_pool2d_is_one_kernel(rng):
    image = mj.array(rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
    result, kernels = launched(lambda: F.max_pool2d(image, 3, stride=2, padding=1).numpy())
    assert kernels == 1
    assert result.shape == (2, 3, 4, 4)


def test_max_pool1d_and_3d_match_torch(rng):
    options = {"kernel_size": 3, "stride": 2, "padding": 1}
    assert_matches_torch(lambda x: F.max_pool1d(x, **options), lambda x: TF.max_pool1d(x, **options),
                         rng.standard_normal((2, 3, 9)))
    options = {"kernel_size": 2, "stride": (1, 2, 2), "return_indices": True}
    assert_matches_torch(lambda x: F.max_pool3d(x, **options), lambda x: TF.max_pool3d(x, **options),
                         rng.standard_normal((1, 2, 3, 4, 5)))


def test_max_pool2d_unbatched(rng):
    assert_matches_torch(lambda x: F.max_pool2d(x, 2), lambda x: TF.max_pool2d(x, 2), rng.standard_normal((3, 4, 6)))


AVG_POOL2D_CASES = [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
    {"kernel_size": 2, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": (2, 3), "stride": (3, 1), "padding": (1, 1)},
    {"kernel_size": 3, "padding": 1, "divisor_override": 4},
]


@pytest.mark.parametrize("options", AVG_POOL2D_CASES, ids=str)
def test_avg_pool2d_matches_torch(rng, options):
    image = rng.standard_normal((2, 3, 7, 8))
    assert_matches_torch(lambda x: F.avg_pool2d(x, **options), lambda x: TF.avg_pool2d(x, **options), image)


def test_avg_pool1d_and_3d_match_torch(rng):
    options = {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}
    assert_matches_torch(lambda x: F.avg_pool1d(x, **options), lambda x: TF.avg_pool1d(x, **options),
                         rng.standard_normal((2, 3, 10)))
    options = {"kernel_size": 2, "padding": 1}
    assert_matches_torch(lambda x: F.avg_pool3d(x, **options), lambda x: TF.avg_pool3d(x, **options),
                         rng.standard_normal((1, 2, 3, 4, 5)))


def test_avg_pool2d_float32(rng):
    image = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    expected = TF.avg_pool2d(torch.tensor(image), 3, stride=2, padding=1, count_include_pad=False).numpy()
    assert_close(F.avg_pool2d(mj.array(image), 3, stride=2, padding=1, count_include_pad=False), expected,
                 rtol=1e-6, atol=1e-6, dtype=np.float32)


@pytest.mark.parametrize("output_size", [1, 3, (4, 5), (7, 8), (None, 3), (5, 2)], ids=str)
def test_adaptive_avg_pool2d_matches_torch(rng, output_size):
    image = rng.standard_normal((2, 3, 7, 8))
    assert_matches_torch(lambda x: F.adaptive_avg_pool2d(x, output_size),
                         lambda x: TF.adaptive_avg_pool2d(x, output_size), image)


@pytest.mark.parametrize("output_size", [1, (3, 5), (7, 3)], ids=str)
def test_adaptive_max_pool2d_matches_torch(rng, output_size):
    image = rng.standard_normal((2, 3, 7, 8))
    assert_matches_torch(lambda x: F.adaptive_max_pool2d(x, output_size, return_indices=True),
                         lambda x: TF.adaptive_max_pool2d(x, output_size, return_indices=True), image)


@pytest.mark.parametrize("output_size", [1, 4, (2, 8), (1, 4)], ids=str)
def test_adaptive_pools_with_equal_windows_match_torch(rng, output_size):
    """Sizes that divide the input evenly take plain strided windows (no guard): values and gradients as torch,
    max-pool indices included."""
    image = rng.standard_normal((2, 3, 8, 16))
    assert_matches_torch(lambda x: F.adaptive_avg_pool2d(x, output_size),
                         lambda x: TF.adaptive_avg_pool2d(x, output_size), image)
    assert_matches_torch(lambda x: F.adaptive_max_pool2d(x, output_size, return_indices=True),
                         lambda x: TF.adaptive_max_pool2d(x, output_size, return_indices=True), image)


def test_global_average_pool_is_one_loop_over_each_plane(rng):
    image = rng.standard_normal((4, 8, 28, 28)).astype(np.float32)
    pooled = F.adaptive_avg_pool2d(mj.array(image), 1)
    kernel, = mj.inspect(pooled, device="cpu")
    assert "<= 784;" in kernel.source and ">=" not in kernel.source, kernel.source  # 28 x 28 (a vector loop), no guard
    assert_close(pooled, image.astype(np.float64).mean((2, 3), keepdims=True), rtol=1e-5, atol=1e-6,
                 dtype=np.float32)


@pytest.mark.parametrize("spatial", [1, 2, 3])
@pytest.mark.parametrize("batched", [True, False])
def test_global_average_pools_match_torch(rng, spatial, batched):
    """Output size 1 everywhere is a mean over the map (its own path): batched or not, in 1, 2 and 3 dims."""
    pool = {1: (F.adaptive_avg_pool1d, TF.adaptive_avg_pool1d), 2: (F.adaptive_avg_pool2d, TF.adaptive_avg_pool2d),
            3: (F.adaptive_avg_pool3d, TF.adaptive_avg_pool3d)}[spatial]
    shape = ((2,) if batched else ()) + (3,) + (5, 4, 6)[:spatial]
    assert_matches_torch(lambda x: pool[0](x, 1), lambda x: pool[1](x, 1), rng.standard_normal(shape))


def test_adaptive_pools_1d_and_3d_match_torch(rng):
    assert_matches_torch(lambda x: F.adaptive_avg_pool1d(x, 4), lambda x: TF.adaptive_avg_pool1d(x, 4),
                         rng.standard_normal((2, 3, 9)))
    assert_matches_torch(lambda x: F.adaptive_max_pool1d(x, 4), lambda x: TF.adaptive_max_pool1d(x, 4),
                         rng.standard_normal((2, 3, 9)))
    assert_matches_torch(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), lambda x: TF.adaptive_avg_pool3d(x, (2, 3, 2)),
                         rng.standard_normal((1, 2, 3, 5, 4)))


def test_pool_finite_differences(rng):
    check_gradients(lambda x: F.max_pool2d(x, 2, stride=1, padding=1), rng.standard_normal((1, 2, 3, 3)))
    check_gradients(lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
                    rng.standard_normal((1, 2, 4, 5)))
    check_gradients(lambda x: F.adaptive_avg_pool2d(x, (2, 3)), rng.standard_normal((1, 1, 5, 4)))


def test_pool_errors():
    image = mj.zeros(1, 2, 6, 6)
    with pytest.raises(ValueError, match="pad should be at most half of kernel size"):
        F.max_pool2d(image, 3, padding=2)
    with pytest.raises(ValueError, match="pad should be at most half of kernel size"):
        F.avg_pool2d(image, 2, padding=-1)
    with pytest.raises(ValueError, match="output would be empty"):
        F.max_pool2d(mj.zeros(1, 1, 2, 2), 3)
    with pytest.raises(ValueError, match="3-D .unbatched. or 4-D"):
        F.max_pool2d(mj.zeros(6, 6), 2)
    with pytest.raises(ValueError, match="kernel_size, stride and dilation must be positive"):
        F.max_pool2d(image, 0)
    with pytest.raises(ValueError, match="kernel_size must be an int or a tuple of 2 ints"):
        F.avg_pool2d(image, (2, 2, 2))
    with pytest.raises(ValueError, match="divisor_override must be a non-zero int"):
        F.avg_pool2d(image, 2, divisor_override=0)
    with pytest.raises(ValueError, match="output_size entries must be positive"):
        F.adaptive_avg_pool2d(image, (0, 2))
    with pytest.raises(ValueError, match="output_size must have 2 entries"):
        F.adaptive_avg_pool2d(image, (1, 2, 3))
    with pytest.raises(TypeError, match="input must be a metajit Var"):
        F.max_pool2d(np.zeros((1, 1, 4, 4)), 2)

"""Convolutions (metajit.ops.conv): conv1d/2d/3d and conv_transpose1d/2d against PyTorch in float64 (value and the
gradients of input, weight and bias) for strides, padding (ints, tuples, 'same', 'valid'), dilation, groups, 1x1
and depthwise kernels and output_padding; float32 forward; finite differences on tiny cases; argument errors."""
import numpy as np
import pytest

import metajit as mj
import metajit.nn.functional as F
from conftest import CUDA_EXECUTION, assert_close, launched
from gradient_check import assert_matches_torch, check_gradients

torch = pytest.importorskip("torch")
TF = torch.nn.functional


# (input shape, weight shape, keyword arguments)
CONV2D_CASES = {
    "plain": ((2, 3, 6, 5), (4, 3, 3, 3), {}),
    "padding": ((2, 3, 6, 5), (4, 3, 3, 3), {"padding": 1}),
    "stride2": ((2, 3, 7, 6), (4, 3, 3, 3), {"stride": 2, "padding": 1}),
    "dilation2": ((1, 2, 8, 7), (3, 2, 3, 3), {"dilation": 2, "padding": 2}),
    "tuples": ((1, 2, 9, 8), (3, 2, 3, 2), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2)}),
    "groups": ((2, 4, 5, 5), (6, 2, 3, 3), {"groups": 2, "padding": 1}),
    "1x1": ((2, 5, 4, 4), (3, 5, 1, 1), {}),
    "depthwise": ((2, 4, 6, 6), (4, 1, 3, 3), {"groups": 4, "padding": 1, "stride": 2}),
    "depthwise_multiplier": ((1, 3, 5, 5), (6, 1, 3, 3), {"groups": 3}),
    "same_even_kernel": ((1, 2, 6, 5), (3, 2, 4, 2), {"padding": "same"}),
    "same_dilated": ((1, 2, 7, 6), (2, 2, 3, 3), {"padding": "same", "dilation": 2}),
    "valid": ((1, 2, 5, 5), (2, 2, 3, 3), {"padding": "valid"}),
    "everything": ((2, 4, 9, 8), (6, 2, 3, 3), {"stride": 2, "padding": 2, "dilation": 2, "groups": 2}),
}


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # PyTorch's note about its own zero-padded copy
@pytest.mark.parametrize("case", list(CONV2D_CASES))
def test_conv2d_matches_torch(rng, case):
    input_shape, weight_shape, options = CONV2D_CASES[case]
    arrays = [rng.standard_normal(input_shape), rng.standard_normal(weight_shape),
              rng.standard_normal(weight_shape[0])]
    assert_matches_torch(lambda x, w, b: F.conv2d(x, w, b, **options),
                         lambda x, w, b: TF.conv2d(x, w, b, **options), arrays)


def test_conv2d_without_bias_and_float32(rng):
    image = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    weight = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    result = mj.conv2d(mj.array(image), mj.array(weight), stride=2, padding=1)
    expected = TF.conv2d(torch.tensor(image), torch.tensor(weight), stride=2, padding=1).numpy()
    assert_close(result, expected, rtol=1e-5, atol=1e-5, dtype=np.float32)


def test_conv2d_unbatched_input(rng):
    image, weight = rng.standard_normal((3, 5, 5)), rng.standard_normal((2, 3, 3, 3))
    assert_matches_torch(lambda x, w: F.conv2d(x, w, padding=1), lambda x, w: TF.conv2d(x, w, padding=1),
                         [image, weight])


def test_conv2d_forward_is_one_kernel(rng):
    image = mj.array(rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
    weight = mj.array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    bias = mj.array(rng.standard_normal(4).astype(np.float32))
    previous = mj.flags.lowering
    mj.flags.lowering = False  # generated: patches, product, sum, bias and the relu epilogue fuse
    try:
        _, kernels = launched(lambda: F.conv2d(image, weight, bias, padding=1).relu().numpy())
    finally:
        mj.flags.lowering = previous
    assert kernels == 1
    if mj.flags.lowering and not CUDA_EXECUTION:  # lowered: one oneDNN call with the bias and relu as post-ops
        _, kernels = launched(lambda: F.conv2d(image, weight, bias, padding=1).relu().numpy())
        assert kernels == 0 and mj.stats()["library_calls"] == 1


def test_conv2d_finite_differences(rng):
    check_gradients(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2),
                    rng.standard_normal((1, 2, 5, 4)), rng.standard_normal((2, 1, 3, 3)), rng.standard_normal(2))


CONV1D_CASES = {
    "plain": ((2, 3, 9), (4, 3, 3), {}),
    "stride_padding_dilation": ((2, 3, 11), (4, 3, 3), {"stride": 2, "padding": 2, "dilation": 2}),
    "depthwise": ((2, 4, 8), (4, 1, 5), {"groups": 4, "padding": "same"}),
}


@pytest.mark.parametrize("case", list(CONV1D_CASES))
def test_conv1d_matches_torch(rng, case):
    input_shape, weight_shape, options = CONV1D_CASES[case]
    arrays = [rng.standard_normal(input_shape), rng.standard_normal(weight_shape),
              rng.standard_normal(weight_shape[0])]
    assert_matches_torch(lambda x, w, b: F.conv1d(x, w, b, **options),
                         lambda x, w, b: TF.conv1d(x, w, b, **options), arrays)


def test_conv3d_matches_torch(rng):
    arrays = [rng.standard_normal((1, 2, 4, 5, 4)), rng.standard_normal((4, 1, 2, 3, 2)), rng.standard_normal(4)]
    options = {"stride": (1, 2, 1), "padding": 1, "groups": 2}
    assert_matches_torch(lambda x, w, b: F.conv3d(x, w, b, **options),
                         lambda x, w, b: TF.conv3d(x, w, b, **options), arrays)


# (input shape, weight shape [C_in, C_out/groups, k...], keyword arguments)
CONV_TRANSPOSE2D_CASES = {
    "plain": ((2, 3, 4, 5), (3, 2, 3, 3), {}),
    "stride2_output_padding": ((2, 3, 4, 4), (3, 2, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    "tuples": ((1, 2, 3, 4), (2, 3, 2, 3), {"stride": (3, 2), "padding": (1, 0), "output_padding": (2, 1)}),
    "groups": ((2, 4, 3, 3), (4, 3, 3, 3), {"stride": 2, "groups": 2}),
    "dilation": ((1, 2, 4, 3), (2, 2, 3, 2), {"dilation": 2, "padding": 1, "stride": 2, "output_padding": 1}),
    "1x1": ((2, 3, 3, 3), (3, 4, 1, 1), {}),
}


@pytest.mark.parametrize("case", list(CONV_TRANSPOSE2D_CASES))
def test_conv_transpose2d_matches_torch(rng, case):
    input_shape, weight_shape, options = CONV_TRANSPOSE2D_CASES[case]
    groups = options.get("groups", 1)
    arrays = [rng.standard_normal(input_shape), rng.standard_normal(weight_shape),
              rng.standard_normal(weight_shape[1] * groups)]
    assert_matches_torch(lambda x, w, b: F.conv_transpose2d(x, w, b, **options),
                         lambda x, w, b: TF.conv_transpose2d(x, w, b, **options), arrays)


def test_conv_transpose2d_is_the_gradient_of_conv2d(rng):
    # <conv2d(x, w), y> = <x, conv_transpose2d(y, w)> for matching stride/padding: checks the adjoint relation.
    image, weight = rng.standard_normal((1, 2, 7, 7)), rng.standard_normal((3, 2, 3, 3))
    output = rng.standard_normal((1, 3, 4, 4))
    forward = (F.conv2d(mj.array(image), mj.array(weight), stride=2, padding=1) * mj.array(output)).sum().item()
    adjoint = (mj.array(image) * F.conv_transpose2d(mj.array(output), mj.array(weight), stride=2, padding=1)).sum()
    np.testing.assert_allclose(forward, adjoint.item(), rtol=1e-10)


def test_conv_transpose1d_matches_torch(rng):
    arrays = [rng.standard_normal((2, 4, 5)), rng.standard_normal((4, 3, 3)), rng.standard_normal(6)]
    options = {"stride": 3, "padding": 1, "output_padding": 2, "groups": 2}
    assert_matches_torch(lambda x, w, b: F.conv_transpose1d(x, w, b, **options),
                         lambda x, w, b: TF.conv_transpose1d(x, w, b, **options), arrays)


def test_conv_transpose2d_finite_differences(rng):
    check_gradients(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
                    rng.standard_normal((1, 2, 3, 2)), rng.standard_normal((2, 2, 3, 3)), rng.standard_normal(2))


def test_conv2d_errors():
    image, weight = mj.zeros(1, 4, 6, 6), mj.zeros(6, 2, 3, 3)
    with pytest.raises(ValueError, match="3-D .unbatched. or 4-D"):
        F.conv2d(mj.zeros(6, 6), weight)
    with pytest.raises(ValueError, match="weight must be 4-D"):
        F.conv2d(image, mj.zeros(6, 2, 3))
    with pytest.raises(ValueError, match="expected input with 2 channels"):
        F.conv2d(image, weight)  # groups=1: the weight wants 2 input channels
    with pytest.raises(ValueError, match="divisible by groups"):
        F.conv2d(image, mj.zeros(5, 1, 3, 3), groups=4)
    with pytest.raises(ValueError, match="groups must be a positive int"):
        F.conv2d(image, weight, groups=0)
    with pytest.raises(ValueError, match="bias must have shape .6,."):
        F.conv2d(image, weight, mj.zeros(4), groups=2)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        F.conv2d(image, weight, stride=2, padding="same", groups=2)
    with pytest.raises(ValueError, match="larger than the padded input"):
        F.conv2d(mj.zeros(1, 2, 2, 2), mj.zeros(1, 2, 3, 3))
    with pytest.raises(ValueError, match="padding must be"):
        F.conv2d(image, weight, padding="full", groups=2)
    with pytest.raises(ValueError, match="stride and dilation must be positive"):
        F.conv2d(image, weight, stride=0, groups=2)
    with pytest.raises(ValueError, match="stride must be an int or a tuple of 2 ints"):
        F.conv2d(image, weight, stride=(1, 2, 3), groups=2)
    with pytest.raises(TypeError, match="weight must be a metajit Var"):
        F.conv2d(image, np.zeros((6, 2, 3, 3)))


def test_conv_transpose2d_errors():
    image = mj.zeros(1, 4, 3, 3)
    with pytest.raises(ValueError, match="expects 3 input channels, got 4"):
        F.conv_transpose2d(image, mj.zeros(3, 2, 3, 3))
    with pytest.raises(ValueError, match="output_padding .* must be smaller than either stride"):
        F.conv_transpose2d(image, mj.zeros(4, 2, 3, 3), stride=2, output_padding=2)
    with pytest.raises(ValueError, match="divisible by groups"):
        F.conv_transpose2d(image, mj.zeros(4, 2, 3, 3), groups=3)
    with pytest.raises(ValueError, match="bias must have shape .4,."):
        F.conv_transpose2d(image, mj.zeros(4, 2, 3, 3), mj.zeros(2), groups=2)
    with pytest.raises(ValueError, match="output would be empty"):
        F.conv_transpose2d(mj.zeros(1, 4, 1, 1), mj.zeros(4, 2, 1, 1), padding=1)


def test_conv2d_second_derivatives_match_torch(rng):
    # A gradient penalty: d/d(x, w) of |d(sum conv(x, w)^2)/dx|^2, through the gradient's own meta-ops.
    image, weight = rng.standard_normal((2, 4, 5, 5)), rng.standard_normal((4, 2, 3, 3))
    inputs = [mj.array(image, requires_grad=True), mj.array(weight, requires_grad=True)]
    first = mj.grad((F.conv2d(*inputs, stride=2, padding=1, groups=2) ** 2).sum(), inputs[0])
    second = mj.grad((first * first).sum(), inputs)
    tensors = [torch.tensor(image, requires_grad=True), torch.tensor(weight, requires_grad=True)]
    expected_first, = torch.autograd.grad((TF.conv2d(*tensors, stride=2, padding=1, groups=2) ** 2).sum(), tensors[0],
                                          create_graph=True)
    expected_second = torch.autograd.grad((expected_first * expected_first).sum(), tensors)
    for gradient, expected in zip(second, expected_second):
        assert_close(gradient, expected.numpy(), rtol=1e-10, atol=1e-10)

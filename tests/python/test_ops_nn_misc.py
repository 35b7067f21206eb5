"""dropout, embedding and interpolate (metajit.ops.dropout / embedding / interpolate): dropout's rate, scale, mask
gradient and identities; embedding lookups and their scatter-add gradient (repeated indices, padding_idx) against
PyTorch; interpolate in every mode and coordinate convention against PyTorch (float32 forward, float64 value and
gradient); finite differences; errors."""
import re

import numpy as np
import pytest

import metajit as mj
import metajit.nn.functional as F
from conftest import assert_close
from gradient_check import assert_matches_torch, check_gradients

torch = pytest.importorskip("torch")
TF = torch.nn.functional


# ------------------------------------------------------------------------------------------------------------ dropout
def test_dropout_rate_and_scale():
    mj.seed(7)
    output = F.dropout(mj.ones(200, 100), p=0.3).numpy()
    dropped = (output == 0).mean()
    assert abs(dropped - 0.3) < 0.02, dropped  # 20000 draws: the standard deviation of the rate is 0.003
    np.testing.assert_array_equal(np.unique(output), np.array([0, 1 / 0.7], dtype=np.float32))


def test_dropout_gradient_is_the_scaled_mask(rng):
    data = rng.uniform(1, 2, size=(6, 7))  # no zeros, so the output's zeros are exactly the dropped elements
    input = mj.array(data, requires_grad=True)
    output = F.dropout(input, p=0.4)
    weights = rng.standard_normal((6, 7))
    gradient = mj.grad((output * mj.array(weights)).sum(), input)
    kept = output.numpy() != 0
    assert_close(output, np.where(kept, data / 0.6, 0), rtol=1e-12)
    assert_close(gradient, np.where(kept, weights / 0.6, 0), rtol=1e-12)


def test_dropout_is_reproducible_with_seed():
    mj.seed(3)
    first = F.dropout(mj.ones(50), p=0.5).numpy()
    mj.seed(3)
    second = F.dropout(mj.ones(50), p=0.5).numpy()
    np.testing.assert_array_equal(first, second)
    assert 0 < (first == 0).sum() < 50


def test_dropout_identities_and_extremes():
    input = mj.ones(4, 5)
    assert F.dropout(input, p=0.5, training=False) is input
    assert F.dropout(input, p=0.0) is input
    assert_close(F.dropout(input, p=1.0), np.zeros((4, 5), np.float32))
    leaf = mj.ones(3, requires_grad=True)
    assert_close(mj.grad(F.dropout(leaf, p=1.0).sum(), leaf), np.zeros(3, np.float32))


def test_dropout2d_drops_whole_channels():
    mj.seed(11)
    output = F.dropout2d(mj.ones(8, 16, 3, 4), p=0.5).numpy()
    per_channel = output.reshape(8, 16, -1)
    assert ((per_channel == 0).all(axis=2) | (per_channel == 2).all(axis=2)).all()
    assert 0 < (per_channel[:, :, 0] == 0).sum() < 8 * 16


def test_dropout2d_of_a_3d_input_drops_channels_of_n_c_l_as_pytorch():
    """PyTorch 2.x reads a 3-D input to dropout2d as (N, C, L) with a warning: one draw per (n, c), constant
    along L. As unbatched (C, H, W) it would be constant along both H and W instead."""
    mj.seed(3)
    with pytest.warns(UserWarning, match="interpreted as shape \\(N, C, L\\)"):
        output = F.dropout2d(mj.ones(6, 5, 7), p=0.5).numpy()
    assert ((output == output[:, :, :1]).all(axis=2)).all()
    assert not (output == output[:, :1, :]).all()  # rows of one n differ: not one draw per (C, H, W) channel
    assert 0 < (output[:, :, 0] == 0).sum() < 6 * 5


def test_dropout_errors():
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(mj.ones(3), p=1.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(mj.ones(3), p=-0.1)
    with pytest.raises(TypeError, match="floating-point"):
        F.dropout(mj.ones(3, dtype="int64"), p=0.5)
    with pytest.raises(ValueError, match="3-D .unbatched. or 4-D"):
        F.dropout2d(mj.ones(3, 4), p=0.5)


# ---------------------------------------------------------------------------------------------------------- embedding
def test_embedding_lookup(rng):
    weight = rng.standard_normal((10, 4)).astype(np.float32)
    for dtype in (np.int64, np.int32, np.uint8):
        indices = rng.integers(0, 10, size=(3, 5)).astype(dtype)
        assert_close(F.embedding(mj.array(indices), mj.array(weight)), weight[indices], rtol=0, dtype=np.float32)
    assert_close(F.embedding(mj.array(np.int64(7)), mj.array(weight)), weight[7], rtol=0)  # a 0-d index


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding_gradient_matches_torch(rng, padding_idx):
    weight = rng.standard_normal((6, 3))
    indices = np.array([[0, 2, 2, 5], [1, 2, 0, 5]])  # repeated rows accumulate; row 2 and 5 appear often
    output = F.embedding(mj.array(indices), mj.array(weight, requires_grad=True), padding_idx=padding_idx)
    tensor = torch.tensor(weight, requires_grad=True)
    expected = TF.embedding(torch.tensor(indices), tensor, padding_idx=padding_idx)
    assert_close(output, expected.detach().numpy(), rtol=0)  # the padding row is still read
    weights = rng.standard_normal((2, 4, 3))
    (expected * torch.tensor(weights)).sum().backward()
    leaf = mj.array(weight, requires_grad=True)
    output = F.embedding(mj.array(indices), leaf, padding_idx=padding_idx)
    assert_close(mj.grad((output * mj.array(weights)).sum(), leaf), tensor.grad.numpy(), rtol=1e-12)


def test_embedding_finite_differences(rng):
    indices = mj.array(np.array([3, 0, 3, 1]))
    check_gradients(lambda weight: F.embedding(indices, weight), rng.standard_normal((4, 2)))


def test_embedding_errors():
    weight = mj.zeros(5, 3)
    with pytest.raises(TypeError, match="integer indices"):
        F.embedding(mj.zeros(2), weight)
    with pytest.raises(ValueError, match="weight must be 2-D"):
        F.embedding(mj.array([1]), mj.zeros(5))
    with pytest.raises(ValueError, match="padding_idx must be an int within num_embeddings"):
        F.embedding(mj.array([1]), weight, padding_idx=5)
    with pytest.raises(IndexError, match="index 5 is out of range for 5 embeddings"):
        F.embedding(mj.array([1, 5]), weight)
    with pytest.raises(IndexError, match="index -1 is out of range"):
        F.embedding(mj.array([-1, 2]), weight)
    with pytest.raises(NotImplementedError, match="max_norm"):
        F.embedding(mj.array([1]), weight, max_norm=1.0)


# -------------------------------------------------------------------------------------------------------- interpolate
INTERPOLATE_CASES = [
    {"size": (8, 11)},             # upsample, non-integer ratio
    {"size": (3, 4)},              # downsample
    {"size": (5, 14)},             # one dim unchanged (a copy), the other doubled
    {"scale_factor": 2},
    {"scale_factor": (1.5, 0.7)},  # the scale, not the size ratio, drives the coordinates
    {"scale_factor": 1.7, "recompute_scale_factor": True},
]
MODES = [("nearest", None), ("nearest-exact", None), ("bilinear", False), ("bilinear", True), ("area", None)]


@pytest.mark.parametrize("options", INTERPOLATE_CASES, ids=str)
@pytest.mark.parametrize("mode,align_corners", MODES, ids=str)
def test_interpolate_matches_torch(rng, options, mode, align_corners):
    def metajit_function(x):
        return F.interpolate(x, mode=mode, align_corners=align_corners, **options)

    def torch_function(x):
        return TF.interpolate(x, mode=mode, align_corners=align_corners, **options)

    image = rng.standard_normal((2, 3, 5, 7))
    assert_matches_torch(metajit_function, torch_function, [image])
    # float32: nearest picks the same source pixels as PyTorch's float arithmetic; linear weights agree to rounding
    image = image.astype(np.float32)
    tolerance = 0 if mode.startswith("nearest") else 1e-6
    assert_close(metajit_function(mj.array(image)), torch_function(torch.tensor(image)).numpy(), rtol=tolerance,
                 atol=tolerance, dtype=np.float32)


@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_linear_and_trilinear_match_torch(rng, align_corners):
    assert_matches_torch(lambda x: F.interpolate(x, size=9, mode="linear", align_corners=align_corners),
                         lambda x: TF.interpolate(x, size=9, mode="linear", align_corners=align_corners),
                         [rng.standard_normal((2, 3, 6))])
    assert_matches_torch(
        lambda x: F.interpolate(x, scale_factor=(1.5, 0.5, 2), mode="trilinear", align_corners=align_corners),
        lambda x: TF.interpolate(x, scale_factor=(1.5, 0.5, 2), mode="trilinear", align_corners=align_corners),
        [rng.standard_normal((1, 2, 3, 4, 3))])


def test_interpolate_nearest_3d_and_5d_match_torch(rng):
    assert_matches_torch(lambda x: F.interpolate(x, size=7), lambda x: TF.interpolate(x, size=7),
                         [rng.standard_normal((2, 3, 4))])
    assert_matches_torch(lambda x: F.interpolate(x, scale_factor=(2, 0.5, 1.5)),
                         lambda x: TF.interpolate(x, scale_factor=(2, 0.5, 1.5)),
                         [rng.standard_normal((1, 2, 2, 4, 3))])


def test_nearest_upsampling_by_two_gathers_without_guards(rng):
    """x2 nearest reads source index i // 2 of an arange: the gather's index range [0, extent) is known through the
    let that names it, so the kernel has no clamp and no bounds test (5.9 -> 3.5 ms at [32, 16, 56, 56] on two AVX2
    cores), and its result is PyTorch's exactly."""
    x = rng.standard_normal((2, 3, 10, 12)).astype(np.float32)
    result = F.interpolate(mj.array(x), scale_factor=2)
    source = "\n".join(kernel.source for kernel in mj.inspect(result))
    assert "in_bounds" not in source and "? floor_div" not in source, source
    np.testing.assert_array_equal(result.numpy(), TF.interpolate(torch.from_numpy(x), scale_factor=2).numpy())


def test_bilinear_resampling_is_a_stored_column_pass_then_a_row_pass(rng):
    """Linear modes resample one dim per pass, the last dim first, in PyTorch's order of blending (jit/ir/lowering.cc,
    gathers_again): the column pass is stored, and the row pass reads two whole rows of it per output row with plain
    loads, instead of one kernel gathering all four corners of every output element (2.4x slower at
    [32, 16, 56, 56]). Forward and gradient match PyTorch's."""
    x = rng.standard_normal((2, 4, 40, 48)).astype(np.float32)
    image = mj.array(x, requires_grad=True)
    result = F.interpolate(image, scale_factor=2, mode="bilinear")
    shapes = [re.search(r" over (\[[^\]]*\])", kernel.header.splitlines()[0]).group(1) for kernel in mj.inspect(result)]
    assert shapes[-2:] == ["[2, 4, 40, 96]", "[2, 4, 80, 96]"], shapes
    weights = rng.standard_normal((2, 4, 80, 96)).astype(np.float32)
    (gradient,) = mj.grad((result * mj.array(weights)).sum(), [image])
    torch_image = torch.tensor(x, requires_grad=True)
    expected = TF.interpolate(torch_image, scale_factor=2, mode="bilinear")
    (expected * torch.from_numpy(weights)).sum().backward()
    assert_close(result, expected.detach().numpy(), rtol=1e-6, atol=1e-6)
    assert_close(gradient, torch_image.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_interpolate_finite_differences(rng):
    check_gradients(lambda x: F.interpolate(x, size=(3, 5), mode="bilinear", align_corners=False),
                    rng.standard_normal((1, 1, 2, 3)))
    check_gradients(lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest"), rng.standard_normal((1, 2, 2, 2)))


def test_interpolate_errors():
    image = mj.zeros(1, 2, 4, 4)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(image, size=3, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(image)
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(image, size=3, mode="nearest", align_corners=True)
    with pytest.raises(ValueError, match="bilinear mode needs 4-D input"):
        F.interpolate(mj.zeros(1, 2, 4), size=3, mode="bilinear")
    with pytest.raises(ValueError, match="unsupported mode 'cubic'"):
        F.interpolate(image, size=3, mode="cubic")
    with pytest.raises(ValueError, match="size has 3 entries"):
        F.interpolate(image, size=(3, 3, 3))
    with pytest.raises(ValueError, match="3-D, 4-D or 5-D"):
        F.interpolate(mj.zeros(4, 4), size=3)
    with pytest.raises(ValueError, match="scale_factor entries must be positive"):
        F.interpolate(image, scale_factor=-1.0)

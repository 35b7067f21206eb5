"""F.grid_sample on 5-D volumes (trilinear and nearest) and with reflection padding (4-D and 5-D), and
F.affine_grid for 3-D transforms, against PyTorch: values and the gradients w.r.t. the input and the grid (theta
for affine_grid) of a weighted sum, float32 at rtol 1e-4 / atol 1e-5 and float64 at rtol 1e-9 / atol 1e-10, with
batched inputs of two and PyTorch's argument errors. The 2-D zeros/border cases are in
test_pytorch_surface_pass.py."""
import numpy as np
import pytest

import metajit as mj
from metajit.nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOLERANCES = {"float32": (1e-4, 1e-5), "float64": (1e-9, 1e-10)}


def compare(ours, theirs, arrays, dtype, differentiable):
    rtol, atol = TOLERANCES[dtype]
    our_inputs = [mj.array(a.astype(dtype), requires_grad=index in differentiable) for index, a in enumerate(arrays)]
    their_inputs = [torch.tensor(a.astype(dtype), requires_grad=index in differentiable)
                    for index, a in enumerate(arrays)]
    got, expected = ours(*our_inputs), theirs(*their_inputs)
    assert tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=rtol, atol=atol)
    weight = np.random.default_rng(9).standard_normal(tuple(expected.shape)).astype(dtype)
    (expected * torch.tensor(weight)).sum().backward()
    gradients = mj.grad((got * mj.array(weight)).sum(), [our_inputs[index] for index in differentiable])
    for index, gradient in zip(differentiable, gradients):
        np.testing.assert_allclose(gradient.numpy(), their_inputs[index].grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {index}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_volumes(dtype, mode, padding_mode, align_corners):
    rng = np.random.default_rng(5)
    volume = rng.standard_normal((2, 2, 3, 4, 5))
    # Reaches well past [-1, 1] so every padding mode matters (reflection folds more than once).
    grid = rng.uniform(-2.7, 2.7, (2, 3, 2, 4, 3))
    differentiable = (0, 1) if mode == "bilinear" else (0,)
    compare(lambda x, g: F.grid_sample(x, g, mode, padding_mode, align_corners),
            lambda x, g: TF.grid_sample(x, g, mode, padding_mode, align_corners), [volume, grid], dtype,
            differentiable)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_reflection_padding_of_images(mode, align_corners):
    rng = np.random.default_rng(6)
    image, grid = rng.standard_normal((2, 3, 5, 6)), rng.uniform(-3.1, 3.1, (2, 4, 7, 2))
    compare(lambda x, g: F.grid_sample(x, g, mode, "reflection", align_corners),
            lambda x, g: TF.grid_sample(x, g, mode, "reflection", align_corners), [image, grid], "float64",
            (0, 1) if mode == "bilinear" else (0,))


def test_single_element_dims_reflect_to_their_one_element():
    rng = np.random.default_rng(7)
    volume, grid = rng.standard_normal((1, 1, 1, 3, 1)), rng.uniform(-2, 2, (1, 2, 2, 2, 3))
    for align_corners in (False, True):
        compare(lambda x, g: F.grid_sample(x, g, "bilinear", "reflection", align_corners),
                lambda x, g: TF.grid_sample(x, g, "bilinear", "reflection", align_corners), [volume, grid],
                "float64", (0, 1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_for_volumes_into_grid_sample(dtype, align_corners):
    rng = np.random.default_rng(8)
    theta = np.eye(3, 4)[None] + 0.2 * rng.standard_normal((2, 3, 4))
    size = [2, 1, 3, 4, 2]
    compare(lambda t: F.affine_grid(t, size, align_corners), lambda t: TF.affine_grid(t, size, align_corners),
            [theta], dtype, (0,))
    volume = rng.standard_normal((2, 1, 4, 3, 5))
    compare(lambda t, x: F.grid_sample(x, F.affine_grid(t, size, align_corners), align_corners=align_corners),
            lambda t, x: TF.grid_sample(x, TF.affine_grid(t, size, align_corners), align_corners=align_corners),
            [theta, volume], dtype, (0, 1))


def test_argument_errors_match_pytorch():
    volume, grid = np.zeros((1, 1, 2, 2, 2), np.float32), np.zeros((1, 1, 1, 1, 3), np.float32)
    for mode, padding_mode, exception in [("cubic", "zeros", ValueError), ("bilinear", "wrap", ValueError)]:
        with pytest.raises(exception) as theirs:
            TF.grid_sample(torch.tensor(volume), torch.tensor(grid), mode, padding_mode, False)
        with pytest.raises(exception) as ours:
            F.grid_sample(mj.array(volume), mj.array(grid), mode, padding_mode, False)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError, match="Expected a batch of 3D affine matrices of shape Nx3x4"):
        F.affine_grid(mj.zeros(1, 2, 3), [1, 1, 2, 2, 2], False)
    with pytest.raises(NotImplementedError, match="affine_grid only supports 4D and 5D sizes"):
        F.affine_grid(mj.zeros(1, 2, 3), [1, 1, 2], False)
    with pytest.raises(ValueError, match="Expected theta to have floating point type"):
        F.affine_grid(mj.zeros(1, 3, 4, dtype="int64"), [1, 1, 2, 2, 2], False)

"""Contractions through cuBLAS and cuDNN on the GPU (libraries/cuda_contraction_backend.h): matrix products with every
transpose and broadcast batch, and convolutions forward and both gradients (stride, padding, dilation, groups,
depthwise, 1x1, 1-D, transposed, a user's own reindex convolution). Each case runs with lowering on and off
(mj.flags.lowering) and is compared with PyTorch on the CPU; `library_calls` in mj.stats() counts the calls.
They need a GPU and skip without one; CI checks only what status() says there."""
import numpy as np
import pytest

import metajit as mj
import metajit.nn.functional as F
from lowering_checks import (ATOL, CONVOLUTIONS, RTOL, both_ways, check_forward_and_both_gradients,
                             check_users_reindex_convolution, floats)

torch = pytest.importorskip("torch")

ON_GPU = mj.cuda.is_available()
needs_gpu = pytest.mark.skipif(not ON_GPU, reason="needs an NVIDIA GPU and driver")


def test_status_says_the_libraries_load_with_the_first_gpu_plan():
    if ON_GPU and mj.flags.use_cuda is True:
        pytest.skip("kernels already run on this GPU: the libraries are loaded")
    status = mj.cuda.status()
    for name in ("cublas_reason", "cudnn_reason"):
        assert "load when kernels first run on the GPU" in status[name]


@pytest.fixture
def on_gpu():
    previous_device, previous_lowering = mj.flags.use_cuda, mj.flags.lowering
    mj.flags.use_cuda = True
    yield
    mj.flags.use_cuda, mj.flags.lowering = previous_device, previous_lowering


@needs_gpu
@pytest.mark.parametrize("transpose_left", [False, True])
@pytest.mark.parametrize("transpose_right", [False, True])
def test_matmul_all_transposes_is_one_cublas_call(on_gpu, rng, transpose_left, transpose_right):
    a, b = floats(rng, 96, 64), floats(rng, 64, 80)
    stored_a = np.ascontiguousarray(a.T) if transpose_left else a
    stored_b = np.ascontiguousarray(b.T) if transpose_right else b

    def build(x, y):
        return (x.transpose(0, 1) if transpose_left else x) @ (y.transpose(0, 1) if transpose_right else y)
    (result,), calls = both_ways(build, stored_a, stored_b)
    np.testing.assert_allclose(result, a.astype(np.float64) @ b, rtol=RTOL, atol=ATOL)
    assert calls == 1


@needs_gpu
@pytest.mark.parametrize("left_shape,right_shape", [
    ((6, 20, 24), (6, 24, 16)),       # batched
    ((2, 3, 20, 24), (3, 24, 16)),    # broadcast batch on the right
    ((20, 24), (5, 24, 16)),          # a plain matrix against a stack
    ((5, 20, 24), (24, 16)),          # a stack against a plain matrix
])
def test_batched_and_broadcast_matmul(on_gpu, rng, left_shape, right_shape):
    a, b = floats(rng, *left_shape), floats(rng, *right_shape)
    (result,), calls = both_ways(lambda x, y: x @ y, a, b)
    np.testing.assert_allclose(result, np.matmul(a.astype(np.float64), b), rtol=RTOL, atol=ATOL)
    assert calls == 1


@needs_gpu
def test_linear_layer_with_bias_runs_the_product_in_cublas_and_the_bias_after_it(on_gpu, rng):
    x, w, bias = floats(rng, 32, 48), floats(rng, 24, 48), floats(rng, 24)
    (result,), calls = both_ways(lambda x, w, b: F.relu(F.linear(x, w, b)), x, w, bias)
    np.testing.assert_allclose(result, np.maximum(x.astype(np.float64) @ w.T + bias, 0), rtol=RTOL, atol=ATOL)
    assert calls == 1


GPU_CONVOLUTIONS = CONVOLUTIONS + [dict(stride=1, padding=1, groups=4)]


@needs_gpu
@pytest.mark.parametrize("options", GPU_CONVOLUTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_convolution_forward_and_both_gradients_are_cudnn_calls(on_gpu, rng, options):
    weights = floats(rng, 12, 8 // options.get("groups", 1), 3, 3)
    calls = check_forward_and_both_gradients(F.conv2d, torch.nn.functional.conv2d, floats(rng, 3, 8, 11, 13),
                                             weights, options)
    assert calls == 3, "forward, backward data and backward weights must each be one library call"


@needs_gpu
def test_depthwise_one_by_one_and_one_dimensional_convolutions(on_gpu, rng):
    # Depthwise: one image channel per group.
    check_forward_and_both_gradients(F.conv2d, torch.nn.functional.conv2d, floats(rng, 2, 16, 12, 12),
                                     floats(rng, 16, 1, 3, 3), dict(padding=1, groups=16))
    # 1x1: the forward and data gradient are matrix products, the weight gradient a convolution's.
    calls = check_forward_and_both_gradients(F.conv2d, torch.nn.functional.conv2d, floats(rng, 4, 16, 9, 9),
                                             floats(rng, 24, 16, 1, 1), dict(stride=2))
    assert calls == 3
    calls = check_forward_and_both_gradients(F.conv1d, torch.nn.functional.conv1d, floats(rng, 4, 8, 50),
                                             floats(rng, 16, 8, 5), dict(stride=2, padding=2))
    assert calls == 3


@needs_gpu
def test_transposed_convolution_and_its_gradients(on_gpu, rng):
    """conv_transpose2d is a convolution's data gradient (cuDNN backward data, into a zero-filled output where
    its windows cover only part of it); its gradients are a forward convolution and a weight gradient."""
    calls = check_forward_and_both_gradients(F.conv_transpose2d, torch.nn.functional.conv_transpose2d,
                                             floats(rng, 3, 12, 7, 9), floats(rng, 12, 8, 3, 3),
                                             dict(stride=2, padding=1, output_padding=1))
    assert calls == 3


@needs_gpu
def test_users_own_reindex_convolution_goes_to_cudnn(on_gpu, rng):
    assert check_users_reindex_convolution(rng) == 1


@needs_gpu
def test_small_cnn_training_steps_match_with_and_without_the_libraries(on_gpu):
    losses = {}
    for lowering in (True, False):
        mj.flags.lowering = lowering
        mj.seed(0)
        model = mj.nn.Sequential(mj.nn.Conv2d(3, 16, 3, padding=1), mj.nn.BatchNorm2d(16), mj.nn.ReLU(),
                                 mj.nn.MaxPool2d(2), mj.nn.Conv2d(16, 32, 3, padding=1), mj.nn.ReLU(),
                                 mj.nn.AdaptiveAvgPool2d(1), mj.nn.Flatten(), mj.nn.Linear(32, 10))
        optimizer = mj.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        rng = np.random.default_rng(0)
        images, labels = floats(rng, 16, 3, 16, 16), rng.integers(0, 10, 16)
        mj.reset_stats()
        history = []
        for _ in range(4):
            loss = F.cross_entropy(model(mj.array(images)), mj.array(labels))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            history.append(loss.item())
        losses[lowering] = (history, mj.stats()["library_calls"])
    np.testing.assert_allclose(losses[True][0], losses[False][0], rtol=1e-4, atol=1e-5)
    assert losses[True][0][-1] < losses[True][0][0]
    assert losses[True][1] >= 4 * 6 and losses[False][1] == 0  # two convolutions' three passes, and more

"""Running whole graphs as CUDA kernels (mj.flags.use_cuda): on the GPU when this machine has one, else in the CPU
emulator of CUDA kernels, which runs the same rendered kernels, device buffers and copies (so CI, which has no
GPU, checks everything but the driver calls). Every number is compared with numpy or PyTorch."""
import numpy as np
import pytest

import metajit as mj
import metajit.nn.functional as F
from conftest import assert_close, flag_set, launched

ON_GPU = mj.cuda.is_available()
MODE = True if ON_GPU else "emulator"
needs_nvrtc = pytest.mark.skipif(ON_GPU and not mj.cuda.nvrtc_available(), reason="the GPU needs NVRTC to compile")
needs_gpu = pytest.mark.skipif(not ON_GPU, reason="needs an NVIDIA GPU and driver")
pytestmark = needs_nvrtc


@pytest.fixture(autouse=True)
def cuda_execution():
    previous = mj.flags.use_cuda
    mj.flags.use_cuda = MODE
    yield
    mj.flags.use_cuda = previous


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def copies():
    stats = mj.stats()
    return int(stats["host_to_device_copies"]), int(stats["device_to_host_copies"])


def test_the_flag_reports_where_kernels_run():
    assert mj.flags.use_cuda == MODE
    with pytest.raises(ValueError, match="takes True, False or 'emulator'"):
        mj.flags.use_cuda = "gpu"


def test_values_move_once_each_way():
    a, b = rand(1000), rand(1000, seed=1)
    x, y = mj.array(a), mj.array(b)
    mj.reset_stats()
    result = (x * 2 + y).exp()
    result.sync()
    assert result.is_cuda and x.is_cuda  # the kernel read x, so the GPU holds it now
    assert copies() == (2, 0)  # both inputs up, nothing down yet
    assert_close(result.numpy(), np.exp(a * 2 + b), rtol=1e-5)
    assert copies() == (2, 1)
    result.numpy()
    assert copies() == (2, 1)  # the host copy stays valid: values never change after they are computed


def test_cuda_and_cpu_methods_move_now_and_return_the_same_var():
    x = mj.array(rand(8, 8))
    assert not x.is_cuda
    assert x.cuda() is x and x.is_cuda
    y = (x + 1).cpu()
    mj.reset_stats()
    assert_close(y.numpy(), rand(8, 8) + 1, rtol=1e-6)
    assert copies() == (0, 0)  # cpu() already downloaded it
    assert x.to("cuda:0") is x and x.to("cpu") is x


def test_reductions_softmax_and_layer_norm():
    values = rand(37, 300)
    x = mj.array(values)
    assert_close(x.sum(1), values.sum(1), rtol=1e-4, atol=1e-4)
    assert_close(x.amax(0), values.max(0))
    assert_close(x.argmax(1), values.argmax(1))
    shifted = np.exp(values - values.max(1, keepdims=True))
    assert_close(x.softmax(-1), shifted / shifted.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    mean, variance = values.mean(1, keepdims=True), values.var(1, keepdims=True)
    assert_close(F.layer_norm(x, (300,)), (values - mean) / np.sqrt(variance + 1e-5), rtol=1e-4, atol=1e-4)


def test_matmul_and_convolution_match_pytorch():
    torch = pytest.importorskip("torch")
    a, b = rand(64, 96), rand(96, 48, seed=1)
    assert_close(mj.array(a) @ mj.array(b), a @ b, rtol=1e-4, atol=1e-4)
    image, weight = rand(2, 3, 9, 9, seed=2), rand(4, 3, 3, 3, seed=3)
    expected = torch.nn.functional.conv2d(torch.from_numpy(image), torch.from_numpy(weight), stride=2, padding=1)
    assert_close(F.conv2d(mj.array(image), mj.array(weight), stride=2, padding=1), expected.numpy(), rtol=1e-4,
                 atol=1e-4)


def test_a_training_step_matches_pytorch():
    torch = pytest.importorskip("torch")
    inputs, targets = rand(16, 20), np.random.default_rng(4).integers(0, 5, 16)
    first, second = rand(20, 32, seed=5) * 0.2, rand(32, 5, seed=6) * 0.2
    weights = [mj.array(first, requires_grad=True), mj.array(second, requires_grad=True)]
    reference = [torch.tensor(first, requires_grad=True), torch.tensor(second, requires_grad=True)]
    optimizer = mj.optim.SGD(weights, lr=0.1, momentum=0.9)
    torch_optimizer = torch.optim.SGD(reference, lr=0.1, momentum=0.9)
    for _ in range(3):
        loss = F.cross_entropy((mj.array(inputs) @ weights[0]).relu() @ weights[1], mj.array(targets))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch_loss = torch.nn.functional.cross_entropy(
            (torch.from_numpy(inputs) @ reference[0]).relu() @ reference[1], torch.from_numpy(targets))
        torch_optimizer.zero_grad()
        torch_loss.backward()
        torch_optimizer.step()
        assert abs(loss.item() - torch_loss.item()) < 1e-4
    for ours, theirs in zip(weights, reference):
        assert_close(ours, theirs.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_convolutional_training_steps_match_pytorch():
    """Convolution, max pooling and their gradients (reindex-reduce kernels with atomics), a linear layer and
    SGD with momentum, as CUDA kernels, against PyTorch step by step."""
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    images, labels = rand(4, 2, 10, 10), np.random.default_rng(7).integers(0, 3, 4)
    initial = {"conv": rand(5, 2, 3, 3, seed=8) * 0.3, "bias": rand(5, seed=9) * 0.1,
               "linear": rand(125, 3, seed=10) * 0.1}
    ours = {name: mj.array(value, requires_grad=True) for name, value in initial.items()}
    theirs = {name: torch.tensor(value, requires_grad=True) for name, value in initial.items()}
    optimizer = mj.optim.SGD(list(ours.values()), lr=0.05, momentum=0.9)
    torch_optimizer = torch.optim.SGD(list(theirs.values()), lr=0.05, momentum=0.9)
    for _ in range(2):
        hidden = F.max_pool2d(F.conv2d(mj.array(images), ours["conv"], ours["bias"], padding=1).relu(), 2)
        loss = F.cross_entropy(hidden.reshape(4, 125) @ ours["linear"], mj.array(labels))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch_hidden = tf.max_pool2d(
            tf.conv2d(torch.from_numpy(images), theirs["conv"], theirs["bias"], padding=1).relu(), 2)
        torch_loss = tf.cross_entropy(torch_hidden.reshape(4, 125) @ theirs["linear"], torch.from_numpy(labels))
        torch_optimizer.zero_grad()
        torch_loss.backward()
        torch_optimizer.step()
        assert abs(loss.item() - torch_loss.item()) < 1e-4
    for name in initial:
        assert_close(ours[name], theirs[name].detach().numpy(), rtol=1e-4, atol=1e-5)


def test_code_op_with_cuda_src_and_data():
    values = rand(300)
    value = mj.code([300], "float32", [mj.array(values)], cuda_src="""
        for (int64_t i = thread_index; i < out0_numel; i += thread_count) out0_p[i] = in0_p[i] * data["scale"] + 1;
    """, data={"scale": 3.0})
    assert_close(value, values * 3 + 1, rtol=1e-6, atol=1e-6)  # data is double: computed in double


def test_code_op_with_only_cuda_src_cannot_run_on_the_cpu():
    mj.flags.use_cuda = False
    value = mj.code([4], "float32", [mj.array(rand(4))], cuda_src="out0_p[0] = 1;")
    with pytest.raises(ValueError, match=r"test_cuda_execution\.py.* has no cpu_src, so it cannot run on the CPU"):
        value.numpy()


def test_code_op_reading_an_unknown_data_name_says_so():
    value = mj.code([4], "float32", [mj.array(rand(4))], cuda_src="""
        if (blockIdx.x == 0 && threadIdx.x == 0) out0_p[0] = data["missing"];""", data={"scale": 1.0})
    with pytest.raises(RuntimeError, match=r"test_cuda_execution\.py.*not in its data \(given: scale\)"):
        value.numpy()


def test_code_op_without_cuda_src_runs_on_the_cpu_between_gpu_kernels():
    values = rand(50)
    before = mj.array(values) * 2  # a GPU kernel
    middle = mj.code([50], "float32", [before],
                     cpu_src="for (int i = 0; i < in0_shape0; i++) out0_p[i] = in0_p[i] + 5;")
    after = (middle * 3).exp() * 0.001  # a GPU kernel reading the host's value
    assert_close(after, np.exp((values * 2 + 5) * 3) * 0.001, rtol=1e-5)


def test_check_nan_names_the_gpu_kernel():
    mj.flags.check_nan = True
    try:
        x = mj.array(np.array([1.0, -1.0, 4.0], np.float32))
        with pytest.raises(mj.NonFiniteError, match="test_cuda_execution.py"):
            x.log().numpy()
    finally:
        mj.flags.check_nan = False


def test_profile_lists_each_cuda_kernel():
    x = mj.array(rand(64, 100))
    with mj.profile() as report:
        mj.sync(x.softmax(1), (x * 3).exp().sum(0))
    names = [entry["name"] for entry in report.entries]
    assert len(names) >= 2 and len(set(names)) == len(names), names
    assert all("test_cuda_execution.py" in name for name in names), names


def test_module_cuda_and_cpu_move_parameters():
    layer = mj.nn.Linear(6, 3)
    assert layer.cuda() is layer
    assert all(parameter.is_cuda for parameter in layer.parameters())
    inputs = rand(4, 6)
    expected = inputs @ layer.weight.numpy().T + layer.bias.numpy()
    assert_close(layer(mj.array(inputs)), expected, rtol=1e-5, atol=1e-6)
    assert layer.to("cpu") is layer


def test_switching_to_the_cpu_keeps_values_readable():
    x = mj.array(rand(10))
    y = (x * 4).exp()
    y.sync()
    mj.flags.use_cuda = False
    assert_close((y + 1), np.exp(rand(10) * 4) + 1, rtol=1e-5)  # a CPU kernel reading a GPU value


def test_device_memory_is_counted_with_its_peak():
    mj.gc()
    mj.reset_peak_memory_stats("cuda")
    before = mj.cuda.memory_allocated()
    y = mj.array(rand(1 << 20)) * 2   # 4 MiB on the device
    y.sync()
    assert mj.cuda.memory_allocated() - before >= 4 << 20
    assert mj.cuda.max_memory_allocated() >= mj.cuda.memory_allocated()
    row = mj.cuda.memory_summary().splitlines()[1].split()
    assert row[0] == "cuda" and float(row[1]) >= 4
    del y
    assert mj.cuda.max_memory_allocated() - before >= 4 << 20
    assert mj.cuda.memory_allocated() - before < 1 << 20


@needs_gpu
def test_gpu_memory_is_cached_and_released_by_gc():
    mj.reset_stats()
    for _ in range(3):
        (mj.array(rand(1 << 16)) * 2).sync()
    stats = mj.stats()
    assert int(stats["device_bytes_cached"]) > 0 or int(stats["device_bytes_allocated"]) > 0
    mj.gc()
    assert int(mj.stats()["device_bytes_cached"]) == 0


@needs_gpu
def test_gpu_out_of_memory_names_the_node():
    with pytest.raises(MemoryError, match="test_cuda_execution.py"):
        mj.zeros((1 << 40,)).sync()  # 4 TiB


def test_values_of_one_shape_sharing_inputs_are_one_kernel_with_several_outputs(rng):
    weight, velocity, grad = (rng.standard_normal((300, 200)).astype(np.float32) for _ in range(3))
    results = {}
    for enabled in (True, False):
        with flag_set("multiple_outputs", enabled):
            new_velocity = mj.array(velocity) * 0.9 + mj.array(grad)
            new_weight = mj.array(weight) - new_velocity * 0.1
            _, kernels = launched(lambda: mj.sync(new_weight, new_velocity))
            results[enabled] = (new_weight.numpy(), new_velocity.numpy(), kernels)
    expected_velocity = velocity.astype(np.float64) * 0.9 + grad
    for enabled in (True, False):
        assert_close(results[enabled][1], expected_velocity, rtol=1e-6, atol=1e-6)
        assert_close(results[enabled][0], weight - expected_velocity * 0.1, rtol=1e-6, atol=1e-6)
    assert results[True][2] == 1 and results[False][2] == 2


def test_intermediates_go_back_to_the_device_allocator_after_their_last_reader():
    x, w = rand(64, 32), rand(32, 32, seed=1) / 6
    a, b = mj.array(x).cuda(), mj.array(w).cuda()
    mj.reset_stats()
    y = a
    for _ in range(6):
        y = (y @ b).relu()
    out = y.sum(1)
    mj.sync(out)
    expected = x.astype(np.float64)
    for _ in range(6):
        expected = np.maximum(expected @ w, 0)
    assert_close(out.numpy(), expected.sum(1), rtol=1e-4, atol=1e-4)
    # Each product is read only by the next one: five of the six go back before the run ends.
    assert mj.stats()["buffers_released_early"] >= 5
    held = mj.array(x).cuda()
    kept = (held @ b).relu()
    result = (kept @ b).sum()
    mj.sync(result, kept)
    assert_close(kept.numpy(), np.maximum(x @ w, 0), rtol=1e-4, atol=1e-4)  # a value the user holds stays

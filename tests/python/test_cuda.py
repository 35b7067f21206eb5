"""The CUDA backend without a GPU: clear errors when CUDA is asked for, the CUDA kernels mj.inspect shows,
NVRTC compiling them to CUBIN (or PTX), the binary cache, and their numbers in the CPU emulator of
mj.cuda.emulate, compared with numpy. Tests that need NVRTC skip when it is missing (make test installs it)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import metajit as mj
import metajit.nn.functional as F
from metajit.cache import bundle as bundle_format
from conftest import PACKAGE_ROOT

needs_nvrtc = pytest.mark.skipif(not mj.cuda.nvrtc_available(),
                                 reason="NVRTC (pip install nvidia-cuda-nvrtc) is missing")
no_driver = pytest.mark.skipif(mj.cuda.is_available(), reason="this machine has a usable NVIDIA driver")


def run_python(code, **environment):
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT), **environment)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


# ---- asking for CUDA where there is none ----

@no_driver
def test_status_names_the_missing_driver():
    status = mj.cuda.status()
    assert "libcuda.so.1" in status["driver_reason"]
    assert status["devices"] == []
    assert mj.cuda.device_count() == 0
    assert not mj.cuda.is_available()


@no_driver
def test_use_cuda_raises_an_error_that_says_what_is_missing():
    with pytest.raises(mj.CudaUnavailableError, match=r"libcuda\.so\.1.*runs on the CPU"):
        mj.flags.use_cuda = True
    assert mj.flags.use_cuda is False
    mj.flags.use_cuda = False  # turning it off is always fine


@no_driver
def test_metajit_device_cuda_warns_and_stays_on_the_cpu():
    result = run_python("import metajit as mj, numpy as np; "
                        "print((mj.array(np.ones(3, np.float32)) * 2).numpy().sum())",
                        METAJIT_DEVICE="cuda")
    assert result.returncode == 0, result.stderr
    assert "METAJIT_DEVICE=cuda" in result.stderr and "libcuda.so.1" in result.stderr
    assert result.stdout.strip() == "6.0"


def test_metajit_device_must_name_a_device():
    result = run_python("import metajit", METAJIT_DEVICE="tpu")
    assert result.returncode != 0
    assert "METAJIT_DEVICE='tpu' is not a device" in result.stderr


def test_inspect_rejects_unknown_devices_and_architectures():
    x = mj.array(np.ones((4, 4), np.float32))
    with pytest.raises(ValueError, match="not a device"):
        mj.inspect(x + 1, device="tpu")
    with pytest.raises(ValueError, match="not a CUDA architecture"):
        mj.inspect(x + 1, device="cuda", arch="ampere")
    with pytest.raises(ValueError, match="arch= is for device='cuda'"):
        mj.inspect(x + 1, device="cpu", arch="sm_90")


# ---- the kernels mj.inspect(device="cuda") shows ----

def rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_inspect_shows_cuda_kernels_with_their_schedule():
    x = mj.array(rand(64, 1000))
    cases = {
        "thread per element": (x * 2 + 1).exp(),
        "block per row": x.softmax(-1),
        "thread per row": mj.array(rand(100, 10)).softmax(-1),
        "block per element": x.sum(),
    }
    for schedule, value in cases.items():
        kernels = mj.inspect(value, device="cuda", arch="sm_80")
        assert [kernel.schedule for kernel in kernels] == [schedule]
        kernel = kernels[0]
        assert kernel.device == "cuda" and kernel.architecture == "sm_80"
        assert '__global__ void __launch_bounds__(256) metajit_kernel(' in kernel.source
        assert "CUDA prelude" in kernel.full_source and "CUDA prelude" not in kernel.source
        assert kernel.lines and "test_cuda.py:" in kernel.lines[0]
    # Reductions split over a block combine through warp shuffles and shared memory, not atomics.
    softmax = mj.inspect(x.softmax(-1), device="cuda")[0].source
    assert softmax.count("mj_block_reduce(") == 2 and "atomic" not in softmax


def test_inspect_cuda_keeps_contractions_as_generated_kernels():
    image, weight = mj.array(rand(2, 3, 8, 8)), mj.array(rand(4, 3, 3, 3, seed=1))
    cpu = mj.inspect(F.conv2d(image, weight, padding=1), device="cpu")
    cuda = mj.inspect(F.conv2d(image, weight, padding=1), device="cuda")
    if mj.flags.lowering:
        assert any(kernel.library for kernel in cpu)
    assert all(kernel.library is None and kernel.kind == "generated" for kernel in cuda)


def test_scatter_kernels_initialise_then_accumulate_with_atomics():
    x = mj.array(rand(4, 6))
    x.requires_grad = True
    gradient = mj.grad((F.pad(x, (2, 2), mode="reflect") ** 2).sum(), [x])[0]
    scatter = [kernel for kernel in mj.inspect(gradient, device="cuda") if kernel.schedule == "scatter with atomics"]
    assert scatter, [kernel.schedule for kernel in mj.inspect(gradient, device="cuda")]
    assert [launch[0] for launch in scatter[0].launches] == ["metajit_initialize", "metajit_kernel"]
    assert "mj_atomic_add(" in scatter[0].source


# ---- compiling with NVRTC (no GPU needed) ----

COPY_CPU = "for (int64_t i = 0; i < out0_numel; ++i) out0_p[i] = 0;"


def representative_groups():
    x = mj.array(rand(64, 1000))
    image, weight = mj.array(rand(2, 3, 8, 8)), mj.array(rand(4, 3, 3, 3, seed=1))
    code = mj.code([64, 1000], "float32", [x], cpu_src=COPY_CPU, cuda_src="""
        for (int64_t i = thread_index; i < out0_numel; i += thread_count) out0_p[i] = in0_p[i] * data["scale"];
    """, data={"scale": 3.0})
    return {"elementwise chain": (x * 2 + x.exp()).relu(), "reduction": x.sum(1), "softmax": x.softmax(-1),
            "reindex convolution": F.conv2d(image, weight, stride=2, padding=1), "code op with cuda_src": code,
            "libm functions": mj.erf(x) + mj.log1p(x.abs()) * x.atan() - x.sinh()}


@needs_nvrtc
@pytest.mark.parametrize("name", ["elementwise chain", "reduction", "softmax", "reindex convolution",
                                  "code op with cuda_src", "libm functions"])
def test_representative_groups_compile_to_cubin(name):
    value = representative_groups()[name]
    for kernel in mj.inspect(value, device="cuda", arch="sm_90"):
        compiled = kernel.compile()
        assert compiled.format == "cubin" and compiled.architecture == "sm_90"
        assert bytes(compiled)[:4] == b"\x7fELF" and len(compiled) > 1000
        assert compiled.origin in ("compiled", "memory", "disk")
        again = mj.inspect(value, device="cuda", arch="sm_90")[0]
        assert again.where in ("memory", "disk")


@needs_nvrtc
def test_a_kernel_that_crashed_nvrtc_compiles():
    """NVRTC 13.0 and 13.5 segfault inside nvrtcCompileProgram on this kernel at NVVM's default -O3 (it took the
    GPU test run down); generated kernels are compiled at -O2. In a subprocess, so a crash fails only this test."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_sources", "nvvm_o3_segfault.cu")
    program = ("import sys, metajit as mj\n"
               f"binary = mj.cuda.compile_source(open({path!r}).read(), 'sm_90')\n"
               "print(binary[:4] == b'\\x7fELF', len(binary))\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert result.returncode == 0, f"exit status {result.returncode}: {result.stderr[-2000:]}"
    is_elf, size = result.stdout.split()
    assert is_elf == "True" and int(size) > 1000


@needs_nvrtc
def test_a_compile_error_in_cuda_source_raises_with_nvrtc_log():
    with pytest.raises(mj.CompileError, match="undefined"):
        mj.cuda.compile_source("extern \"C\" __global__ void k(float* out) { out[0] = undefined_name; }", "sm_90")


@needs_nvrtc
def test_keys_depend_on_the_architecture_and_compiles_are_cached():
    x = mj.array(rand(32, 50))
    value = (x * 3.25).tanh()
    sm80 = mj.inspect(value, device="cuda", arch="sm_80")[0]
    sm90 = mj.inspect(value, device="cuda", arch="9.0")[0]
    assert sm80.key != sm90.key and sm80.full_source == sm90.full_source
    assert sm80.compile().architecture == "sm_80"
    assert sm80.compile().origin == "memory"
    # A fresh process finds it in the disk cache instead of compiling it again.
    code = ("import metajit as mj, numpy as np\n"
            "x = mj.array(np.random.default_rng(0).standard_normal((32, 50)).astype(np.float32))\n"
            "kernel = mj.inspect((x * 3.25).tanh(), device='cuda', arch='sm_80')[0]\n"
            "print(kernel.where, kernel.compile().origin)")
    result = run_python(code, METAJIT_CACHE_DIR=mj.flags.cache_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["disk", "disk"]


@needs_nvrtc
def test_precompile_compiles_every_kernel_of_a_graph_at_once_and_leaves_errors_for_the_launch():
    x = mj.array(rand(40, 70))
    unique = 1.0 + np.random.default_rng().random()  # constants no other run compiled, so nothing is cached yet
    outputs = [(x * unique).exp().softmax(-1), (x - unique).abs().sum(0), (x + unique).relu().amax(1)]
    broken = mj.code([4], "float32", [x], cpu_src="out0_p[0] = 0;", cuda_src="out0_p[0] = undefined_name;")
    mj.reset_stats()
    compiled = mj.cuda.precompile(*outputs, broken, arch="sm_80")
    kernels = mj.inspect(*outputs, device="cuda", arch="sm_80")
    assert len(kernels) >= 3 and compiled == len(kernels)  # the broken Code op is not counted
    assert mj.stats()["kernels_compiled"] == len(kernels)
    assert all(kernel.where == "memory" for kernel in kernels)
    assert mj.cuda.precompile(*outputs, arch="sm_80") == 0  # all cached now
    with pytest.raises(mj.CompileError, match=r"cuda_src\(1\).*undefined_name"):
        mj.inspect(broken, device="cuda", arch="sm_80")[0].compile()
    with pytest.raises(TypeError, match="expected metajit Vars"):
        mj.cuda.precompile(np.ones(3))


@needs_nvrtc
def test_a_gpu_bundle_can_be_recorded_on_a_machine_without_a_gpu(tmp_path):
    x = mj.array(rand(8, 30))
    value = (x * (2.0 + np.random.default_rng().random())).softmax(1)
    with mj.cache.record() as recording:
        mj.cuda.precompile(value, arch="sm_90")
    recording.save(str(tmp_path / "gpu.mjb"))
    keys = {kernel.key for kernel in mj.inspect(value, device="cuda", arch="sm_90")}
    manifest, entries = bundle_format.read_bundle(str(tmp_path / "gpu.mjb"))
    assert keys and keys <= {key for key, _ in entries}


@needs_nvrtc
def test_a_gpu_newer_than_nvrtc_gets_ptx_and_an_older_one_a_clear_error():
    x = mj.array(rand(8, 8))
    newest = max(mj.cuda.status()["nvrtc_architectures"])
    compiled = mj.inspect(x + 1, device="cuda", arch=str(newest + 10))[0].compile()
    assert compiled.format == "ptx" and compiled.architecture == f"compute_{newest}"
    assert b".entry metajit_kernel" in bytes(compiled)
    oldest = min(mj.cuda.status()["nvrtc_architectures"])
    with pytest.raises(mj.CudaUnavailableError, match=f"oldest target is sm_{oldest}"):
        mj.inspect(x + 2, device="cuda", arch=str(oldest - 5))[0].compile()


@needs_nvrtc
def test_code_op_cuda_compile_error_points_at_the_users_line():
    x = mj.array(rand(4))
    value = mj.code([4], "float32", [x], cpu_src=COPY_CPU, cuda_src="""
        out0_p[0] = in0_p[0];
        out0_p[1] = undefined_name;
    """)
    with pytest.raises(mj.CompileError) as error:
        mj.inspect(value, device="cuda")[0].compile()
    message = str(error.value)
    assert "cuda_src(3)" in message and "undefined_name" in message
    assert "test_cuda.py" in message and "--- cuda_src ---" in message


def test_code_op_without_cuda_src_says_so():
    value = mj.code([4], "float32", [mj.array(rand(4))], cpu_src="out0_p[0] = 0;")
    with pytest.raises(ValueError, match="has no cuda_src"):
        mj.inspect(value, device="cuda")


def test_cpu_kernels_compile_to_an_object_file():
    x = mj.array(rand(16, 16))
    kernel = mj.inspect((x * 5.5).sin(), device="cpu")[0]
    compiled = kernel.compile()
    assert compiled.format == "elf" and bytes(compiled)[:4] == b"\x7fELF"
    assert mj.inspect((x * 5.5).sin(), device="cpu")[0].where == "memory"


# ---- the CUDA kernels' numbers, in the emulator ----

def emulated(value, max_blocks=3):
    return mj.cuda.emulate(value, max_blocks=max_blocks)[0]


def check_emulated(value, expected, rtol=1e-5, atol=1e-6, max_blocks=3):
    actual = emulated(value, max_blocks)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    if np.issubdtype(expected.dtype, np.floating):
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)


def softmax_reference(values, axis=-1):
    with np.errstate(invalid="ignore"):  # a row of -inf is NaN, as in PyTorch
        shifted = np.exp(values - values.max(axis=axis, keepdims=True))
        return shifted / shifted.sum(axis=axis, keepdims=True)


def test_emulated_elementwise_chain():
    a, b = rand(37, 129), rand(37, 129, seed=1)
    check_emulated((mj.array(a) * 2 + mj.array(b)).exp().relu(), np.maximum(np.exp(a * 2 + b), 0), rtol=1e-5)


def test_emulated_libm_functions():
    import math
    a = rand(7, 33) - 0.5
    expected = np.vectorize(math.erf)(a) + np.log1p(np.abs(a)) * np.arctan(a) - np.sinh(a)
    x = mj.array(a)
    check_emulated(mj.erf(x) + mj.log1p(x.abs()) * x.atan() - x.sinh(), expected.astype(np.float32), rtol=1e-5)


def test_emulated_softmax_block_per_row_and_thread_per_row():
    long_rows, short_rows = rand(9, 1000), rand(300, 10, seed=2)
    check_emulated(mj.array(long_rows).softmax(-1), softmax_reference(long_rows), rtol=1e-5, atol=1e-8)
    check_emulated(mj.array(short_rows).softmax(-1), softmax_reference(short_rows), rtol=1e-5, atol=1e-8)


def test_emulated_layer_norm():
    values = rand(5, 700) * 3 + 1
    mean = values.mean(-1, keepdims=True)
    expected = (values - mean) / np.sqrt(((values - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    check_emulated(F.layer_norm(mj.array(values), (700,)), expected.astype(np.float32), rtol=1e-4, atol=1e-5)


def test_emulated_reductions_split_over_a_block():
    values = rand(64, 1000)
    check_emulated(mj.array(values).sum(), np.float32(values.astype(np.float64).sum()), rtol=1e-4, atol=1e-3)
    check_emulated(mj.array(values).sum(0), values.sum(0), rtol=1e-4, atol=1e-4)
    with_nan = values.copy()
    with_nan[3, 17] = np.nan
    check_emulated(mj.array(with_nan).amax(1), with_nan.max(1))
    check_emulated(mj.array(values).argmax(1), values.argmax(1))
    check_emulated((mj.array(values) > 2.5).amax(1), (values > 2.5).max(1))
    integers = np.random.default_rng(3).integers(-50, 50, (9, 400))
    check_emulated((mj.array(integers) // 3).sum(1), (integers // 3).sum(1))


def test_emulated_float16_softmax():
    values = rand(8, 300).astype(np.float16)
    expected = softmax_reference(values.astype(np.float32)).astype(np.float16)
    check_emulated(mj.array(values).softmax(-1), expected, rtol=2e-3, atol=1e-4)


def test_emulated_convolution_and_its_weight_gradient():
    image, weight = rand(2, 3, 9, 9), rand(4, 3, 3, 3, seed=1)
    torch = pytest.importorskip("torch")
    expected = torch.nn.functional.conv2d(torch.from_numpy(image), torch.from_numpy(weight), stride=2, padding=1)
    check_emulated(F.conv2d(mj.array(image), mj.array(weight), stride=2, padding=1), expected.numpy(), rtol=1e-4,
                   atol=1e-5)
    w = mj.array(weight)
    w.requires_grad = True
    gradient = mj.grad(F.conv2d(mj.array(image), w, padding=1).sum(), [w])[0]
    torch_weight = torch.from_numpy(weight).requires_grad_()
    torch.nn.functional.conv2d(torch.from_numpy(image), torch_weight, padding=1).sum().backward()
    check_emulated(gradient, torch_weight.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_emulated_scatter_gradients():
    values = rand(4, 6)
    x = mj.array(values)
    x.requires_grad = True
    torch = pytest.importorskip("torch")
    gradient = mj.grad((F.pad(x, (2, 2), mode="reflect") ** 2).sum(), [x])[0]
    reference = torch.from_numpy(values).requires_grad_()
    (torch.nn.functional.pad(reference[None], (2, 2), mode="reflect") ** 2).sum().backward()
    check_emulated(gradient, reference.grad.numpy(), rtol=1e-5)
    # Repeated indices accumulate (the atomics path), for float and int64 targets.
    table = rand(5, 3)
    indices = np.array([0, 3, 3, 1, 3, 0])
    t = mj.array(table)
    t.requires_grad = True
    embedding_gradient = mj.grad(F.embedding(mj.array(indices), t).sum(), [t])[0]
    expected = np.zeros_like(table)
    np.add.at(expected, indices, 1.0)
    check_emulated(embedding_gradient, expected)


def test_emulated_cumsum():
    values = rand(6, 200)
    check_emulated(mj.array(values).cumsum(1), np.cumsum(values, 1), rtol=1e-4, atol=1e-4)


def test_emulated_code_op_with_cuda_src():
    values = rand(3, 50)
    value = mj.code([3, 50], "float32", [mj.array(values)], cpu_src=COPY_CPU, cuda_src="""
        for (int64_t i = thread_index; i < out0_numel; i += thread_count) out0_p[i] = in0_p[i] * data["scale"] + 1;
    """, data={"scale": 3.0})
    check_emulated(value, values * 3 + 1, max_blocks=1)


def test_emulator_reports_a_barrier_some_threads_never_reach():
    value = mj.code([256], "float32", [], cpu_src=COPY_CPU, cuda_src="""
        if (threadIdx.x < 7) __syncthreads();
        out0_p[threadIdx.x] = 1;
    """)
    with pytest.raises(RuntimeError, match="never reach"):
        emulated(value, max_blocks=1)


def test_emulate_keeps_its_values_aside_and_the_graph_pending():
    # The emulator runs through the same run loop as a sync, but its values are not published: the CPU computes
    # the same value afterwards from the same graph, so the two can be compared.
    values = rand(5, 40)
    value = (mj.array(values) * 3).exp().sum(1)
    check_emulated(value, np.exp(values * 3).sum(1), rtol=1e-5)
    before = mj.stats()["kernels_launched"]
    np.testing.assert_allclose(value.numpy(), np.exp(values * 3).sum(1), rtol=1e-5)
    assert mj.stats()["kernels_launched"] > before
    check_emulated(value, np.exp(values * 3).sum(1), rtol=1e-5)  # a computed value is read, not emulated


def test_emulated_code_op_names_missing_data():
    value = mj.code([4], "float32", [], cpu_src=COPY_CPU, cuda_src="""
        if (blockIdx.x == 0 && threadIdx.x == 0) out0_p[0] = data["missing"];""", data={"scale": 1.0})
    with pytest.raises(RuntimeError, match=r"test_cuda\.py.*not in its data \(given: scale\)"):
        emulated(value, max_blocks=1)


# ---- unrolled schedules: elements several per thread, rows read once ----

def test_pointwise_kernels_take_four_elements_per_thread_with_their_loads_first():
    kernel = mj.inspect((mj.array(rand(37, 129)) * 2 + mj.array(rand(129, seed=1))).exp(), device="cuda")[0]
    source = kernel.source
    assert [f"flat_u{copy} = base + {copy * 256}" in source for copy in range(4)] == [True] * 4
    unrolled = source[:source.index("} else {")]
    assert unrolled.count("in0[") == 4 and unrolled.count("out0[") == 4
    assert unrolled.rindex("in0[") < unrolled.index("out0[") and unrolled.rindex("in1[") < unrolled.index("out0[")
    assert "(uint32_t)" in source  # under 2^32 items the index divisions are 32-bit
    assert "} else {" in source     # 37 * 129 is not a multiple of 1024: the last step is one element at a time
    whole = mj.inspect(mj.array(rand(8, 128)) + 1, device="cuda")[0].source
    assert "flat_u3" in whole and "} else {" not in whole


@pytest.mark.parametrize("shape", [(37, 129), (4096,), (4097,), (3, 5, 7, 11)])
def test_emulated_unrolled_pointwise_kernels_match_numpy(shape):
    # With 3 blocks of 1024 elements a step, these take several grid steps, whole and partial.
    a, b = rand(*shape), rand(shape[-1], seed=1)
    check_emulated((mj.array(a) * 2 + mj.array(b)).exp().relu(), np.maximum(np.exp(a * 2 + b), 0), rtol=1e-5)
    integers = np.random.default_rng(4).integers(-100, 100, shape)
    reversed_axes = tuple(reversed(range(len(shape))))  # a transposed read: loads through decomposed indices
    transposed = mj.array(np.ascontiguousarray(integers.transpose(reversed_axes))).permute(*reversed_axes)
    check_emulated(mj.array(integers) // 7 - transposed, integers // 7 - integers)
    halves = a.astype(np.float16)
    check_emulated(mj.array(halves) * 3 - 1, halves * np.float16(3) - np.float16(1), rtol=0, atol=0)  # each op rounds


def test_block_per_row_loops_are_unrolled_and_read_the_row_once():
    source = mj.inspect(mj.array(rand(4, 1000)).softmax(-1), device="cuda")[0].source
    assert source.count("#pragma unroll") == 3
    assert source.count("in0[") == 1          # the max pass loads; the exp pass takes the registers
    assert "sum_2_terms[r1_step]" in source  # constant slot indices once unrolled
    long_rows = mj.inspect(mj.array(rand(2, 8193)).softmax(-1), device="cuda")[0].source
    assert "#pragma unroll" not in long_rows and long_rows.count("in0[") == 2


@pytest.mark.parametrize("length", [300, 1000, 1024, 8192, 8193])
def test_emulated_rows_of_every_unrolled_length(length):
    values = rand(5, length) * 4
    values[1, length // 2] = np.nan
    values[2, :] = -np.inf
    values[3, length - 1] = 80
    check_emulated(mj.array(values).softmax(-1), softmax_reference(values), rtol=1e-5, atol=1e-8)
    with np.errstate(invalid="ignore"):
        mean = values.mean(-1, keepdims=True)
        normalised = (values - mean) / np.sqrt(((values - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
        check_emulated(F.layer_norm(mj.array(values), (length,)), normalised.astype(np.float32), rtol=2e-4, atol=2e-4)


@needs_nvrtc
def test_a_kernel_with_several_outputs_is_shown_and_compiles_for_cuda():
    velocity, grad, weight = (mj.array(rand(300, 200, seed=seed)) for seed in range(3))
    new_velocity = velocity * 0.9 + grad
    new_weight = weight - new_velocity * 0.1
    kernel, = mj.inspect(new_weight, new_velocity, device="cuda")
    assert "float* __restrict__ out0" in kernel.source and "float* __restrict__ out1" in kernel.source
    assert kernel.compile().format in ("cubin", "ptx")

"""mj.export, a trace's dump() and mj.load_exported: a traced function written as an artifact and run by the C++
runtime (libmetajit_runtime).

The runtime runs the plan the exporting process ran, with the same compiled kernels and the same oneDNN calls, so
its outputs are compared bit for bit with the Python model's; the Python model itself is compared with numpy or
PyTorch by the model tests. Each refusal is checked to say what is wrong (and, for export, the user's line)."""
import os
import pathlib
import subprocess
import threading

import numpy as np
import pytest

import metajit as mj
from metajit import nn
from conftest import CUDA_EXECUTION, ROOT

pytestmark = pytest.mark.skipif(CUDA_EXECUTION, reason="the C++ runtime runs CPU plans; export refuses GPU ones")

RUNTIME_LIBRARY = ROOT / "build" / "runtime" / "libmetajit_runtime.so"


def outputs_of(model, *inputs):
    model.eval()
    with mj.no_grad():
        result = model(*inputs)
    # A model may return None among its outputs (GPT's loss without targets); only Vars are exported.
    return [value.numpy() for value in (result if isinstance(result, tuple) else (result,)) if value is not None]


def run_exported(path, *inputs):
    result = mj.load_exported(path)(*inputs)
    return [value.numpy() for value in (result if isinstance(result, tuple) else (result,))]


def assert_identical(actual, expected):
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def small_cnn():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(8 * 4 * 4, 10))


def test_a_multilayer_perceptron_runs_bit_for_bit(tmp_path, rng):
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    x = mj.array(rng.standard_normal((8, 16)).astype(np.float32))
    expected = outputs_of(model, x)
    report = mj.export(model, x, tmp_path / "mlp.mjm")
    assert report.bytes == os.path.getsize(tmp_path / "mlp.mjm")
    assert report.weights == 4 and report.weight_bytes == (16 * 32 + 32 + 32 * 4 + 4) * 4
    assert report.library_calls >= 1  # the products go to oneDNN
    loaded = mj.load_exported(tmp_path / "mlp.mjm")
    assert loaded.inputs == [("input", "float32", (8, 16))]
    assert loaded.outputs == [("output0", "float32", (8, 4))]
    assert_identical(run_exported(tmp_path / "mlp.mjm", x), expected)
    other = rng.standard_normal((8, 16)).astype(np.float32)  # new inputs, numpy accepted too
    assert_identical(run_exported(tmp_path / "mlp.mjm", other), outputs_of(model, mj.array(other)))


def test_resnet18_and_the_digits_cnn_run_bit_for_bit(tmp_path, rng):
    mj.seed(3)
    for name, model, shape in [("resnet18", mj.models.resnet18(num_classes=10), (2, 3, 32, 32)),
                               ("digits", mj.models.small_cnn(in_channels=1, num_classes=10, input_size=8,
                                                              channels=(16, 32), hidden=64), (5, 1, 8, 8))]:
        x = mj.array(rng.standard_normal(shape).astype(np.float32))
        expected = outputs_of(model, x)
        report = mj.export(model, x, tmp_path / f"{name}.mjm")
        assert report.library_calls > 0 and report.kernels > 0, report
        assert report.bytes > report.weight_bytes + report.object_bytes
        assert_identical(run_exported(tmp_path / f"{name}.mjm", x), expected)


def test_a_transformer_language_model_runs_bit_for_bit(tmp_path):
    from metajit.models.gpt import GPT, GPTConfig
    mj.seed(1)
    model = GPT(GPTConfig(block_size=16, vocab_size=64, n_layer=2, n_head=2, n_embd=32, dropout=0.0))
    tokens = mj.randint(0, 64, (2, 16))
    expected = outputs_of(model, tokens)
    mj.export(model, tokens, tmp_path / "gpt.mjm", output_names=["logits"])
    loaded = mj.load_exported(tmp_path / "gpt.mjm")
    assert loaded.inputs == [("idx", "int64", (2, 16))] and loaded.outputs[0].name == "logits"
    assert_identical(run_exported(tmp_path / "gpt.mjm", tokens), expected)


def test_only_the_kernels_the_model_uses_are_carried(tmp_path, rng):
    # Other work in the same process compiles other kernels; none of them may ride along.
    (mj.array(rng.standard_normal((64, 64)).astype(np.float32)).exp().sin() * 3).sum().numpy()
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    x = mj.array(rng.standard_normal((4, 8)).astype(np.float32))
    report = mj.export(model, x, tmp_path / "small.mjm")
    assert report.kernel_objects <= report.kernels <= 2, report
    header_and_tables = report.bytes - report.weight_bytes - report.object_bytes
    assert header_and_tables < 4096, report  # plus weights and objects, nothing else of size


def test_the_weights_are_the_values_at_export(tmp_path, rng):
    model = nn.Linear(4, 3)
    x = mj.array(rng.standard_normal((2, 4)).astype(np.float32))
    expected = outputs_of(model, x)
    mj.export(model, x, tmp_path / "linear.mjm")
    with mj.no_grad():
        model.weight.copy_(mj.zeros((3, 4)))
    assert_identical(run_exported(tmp_path / "linear.mjm", x), expected)


def test_dump_writes_the_last_traced_call_with_several_outputs(tmp_path, rng):
    weight = mj.array(rng.standard_normal((6, 5)).astype(np.float32))

    @mj.trace
    def heads(x, y):
        hidden = (x @ weight).relu()
        return hidden.sum(dim=1), hidden * y, x  # the last output is an input given back

    x = mj.array(rng.standard_normal((3, 6)).astype(np.float32))
    y = mj.array(rng.standard_normal((3, 5)).astype(np.float32))
    expected = [value.numpy() for value in heads(x, y)]
    with pytest.raises(mj.jit.TraceError, match="call the traced function once"):
        mj.jit.trace(lambda value: value).dump(tmp_path / "never.mjm")
    heads.dump(tmp_path / "heads.mjm", input_names=["x", "y"], output_names=["total", "scaled", "echo"])
    loaded = mj.load_exported(tmp_path / "heads.mjm")
    assert [info.name for info in loaded.inputs] == ["x", "y"]
    assert [info.name for info in loaded.outputs] == ["total", "scaled", "echo"]
    assert_identical(run_exported(tmp_path / "heads.mjm", x, y), expected)


def test_code_ops_run_once_for_all_their_outputs(tmp_path, rng):
    def custom(x):
        scaled, negated = mj.code([x.shape, x.shape], [x.dtype, x.dtype], [x * 2], cpu_src="""
            for (int i = begin; i < end; ++i) { out0_p[i] = in0_p[i] * data["scale"]; out1_p[i] = -in0_p[i]; }
        """, data={"scale": 3.0}, cpu_parallel=int(x.numel()))
        return negated, scaled.sum()

    def first_output_only(x):  # the other output is written into a buffer nothing reads
        return mj.code([x.shape, (2,)], [x.dtype, "int64"], [x], cpu_src="""
            for (int i = 0; i < in0_numel; ++i) out0_p[i] = in0_p[i] + 1;
            out1_p[0] = 7; out1_p[1] = 8;
        """)[0]

    value = rng.standard_normal((3, 4)).astype(np.float32)
    for name, function in [("custom", custom), ("first", first_output_only)]:
        with mj.no_grad():
            expected = function(mj.array(value))
        expected = [item.numpy() for item in (expected if isinstance(expected, tuple) else (expected,))]
        mj.export(function, mj.array(value), tmp_path / f"{name}.mjm")
        assert_identical(run_exported(tmp_path / f"{name}.mjm", value), expected)
    np.testing.assert_array_equal(run_exported(tmp_path / "custom.mjm", value)[0], -2 * value)  # against numpy


def test_a_wrong_input_names_the_input_and_both_shapes(tmp_path, rng):
    model = nn.Linear(4, 2)
    mj.export(model, mj.zeros((3, 4)), tmp_path / "linear.mjm")
    loaded = mj.load_exported(tmp_path / "linear.mjm")
    with pytest.raises(ValueError, match=r"input 'input' is float32 \[5, 4\], the model takes float32 \[3, 4\]"):
        loaded(mj.zeros((5, 4)))
    with pytest.raises(ValueError, match=r"input 'input' is float64 \[3, 4\], the model takes float32 \[3, 4\]"):
        loaded(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="takes 1 inputs, 2 were given"):
        loaded(mj.zeros((3, 4)), mj.zeros((3, 4)))


@pytest.fixture
def artifact(tmp_path):
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    path = tmp_path / "model.mjm"
    mj.export(model, mj.ones((2, 4)), path)
    return path


def write_changed(path, change):
    data = bytearray(path.read_bytes())
    data = change(data)
    changed = path.with_name("changed.mjm")
    changed.write_bytes(bytes(data))
    return changed


def test_damaged_artifacts_are_refused_saying_how(artifact):
    def flip_last_byte(data):
        data[-1] ^= 0x40
        return data

    def set_format_version(data):
        data[8:12] = (99).to_bytes(4, "little")
        return data

    cases = [
        (lambda data: data[: len(data) // 2], "is truncated"),
        (lambda data: data[:20], "is truncated"),
        (flip_last_byte, "is corrupt or was modified"),
        (set_format_version, "artifact format version 99; this runtime reads version 1"),
        (lambda data: data + b"extra", "bytes after its end"),
        (lambda data: bytearray(b"PK\x03\x04 not a model at all"), "is not a metajit model"),
    ]
    for change, message in cases:
        changed = write_changed(artifact, change)
        with pytest.raises(mj.ArtifactError, match=message) as raised:
            mj.load_exported(changed)
        assert str(changed) in str(raised.value)
    with pytest.raises(mj.ArtifactError, match="cannot open the model"):
        mj.load_exported(artifact.with_name("missing.mjm"))
    assert issubclass(mj.ArtifactError, ValueError)


def test_what_an_inference_artifact_cannot_hold_is_refused_naming_the_line(tmp_path, rng):
    dropout = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    dropout.train()
    with pytest.raises(ValueError, match=r"draws random numbers \(at .*test_export.py:\d+\).*eval\(\) mode"):
        mj.export(dropout, mj.ones((2, 4)), tmp_path / "dropout.mjm")

    norm = nn.BatchNorm1d(4)
    norm.train()
    with pytest.raises(ValueError, match=r"writes a Var in place .*eval\(\) mode"):
        mj.export(norm, mj.ones((3, 4)), tmp_path / "norm.mjm")

    weight = mj.array(rng.standard_normal((4, 4)).astype(np.float32), requires_grad=True)

    @mj.trace
    def step(x):
        loss = (x @ weight).sum()
        loss.backward()
        return loss

    step(mj.ones((2, 4)))
    with pytest.raises(ValueError, match=r"computes gradients \(backward\(\)\)"):
        step.dump(tmp_path / "step.mjm")
    assert not (tmp_path / "dropout.mjm").exists() and not (tmp_path / "step.mjm").exists()


def test_several_threads_run_one_loaded_model_at_once(artifact, rng):
    loaded = mj.load_exported(artifact)
    inputs = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(8)]
    expected = [loaded(value).numpy() for value in inputs]
    results = [None] * len(inputs)
    errors = []

    def worker(index):
        try:
            for _ in range(20):
                results[index] = loaded(inputs[index]).numpy()
        except Exception as error:  # reported below; a thread's exception would otherwise vanish
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(got, want)


def test_runtime_runs_and_jit_syncs_in_other_threads_take_turns(tmp_path, rng):
    """Both use the oneDNN backend's per-run state (its reordered copies are dropped when a run ends): a runtime
    run beside a convolution the JIT runs must not lose the other's copies mid-call."""
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 8, 3, padding=1))
    image = rng.standard_normal((2, 3, 24, 24)).astype(np.float32)
    expected = outputs_of(model, mj.array(image))[0]
    mj.export(model, mj.array(image), tmp_path / "convs.mjm")
    loaded = mj.load_exported(tmp_path / "convs.mjm")
    errors = []

    def exported():
        for _ in range(10):
            np.testing.assert_array_equal(loaded(image).numpy(), expected)

    def jit():
        for _ in range(10):
            with mj.no_grad():
                np.testing.assert_array_equal(model(mj.array(image)).numpy(), expected)

    def guarded(work):
        try:
            work()
        except Exception as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(work,)) for work in (exported, jit, exported, jit)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_the_runtime_library_links_no_python_llvm_or_compiler():
    assert RUNTIME_LIBRARY.exists(), f"{RUNTIME_LIBRARY} was not built"
    dynamic = subprocess.run(["readelf", "-d", str(RUNTIME_LIBRARY)], capture_output=True, text=True, check=True)
    needed = [line.split("[")[1].rstrip("]") for line in dynamic.stdout.splitlines() if "(NEEDED)" in line]
    assert "libdnnl.so.2" in needed  # the library calls
    for forbidden in ("python", "LLVM", "clang", "nvrtc", "cuda"):
        assert not [name for name in needed if forbidden.lower() in name.lower()], needed
    listing = subprocess.run(["nm", "-D", "--undefined-only", str(RUNTIME_LIBRARY)], capture_output=True, text=True,
                             check=True).stdout
    symbols = [line.split()[-1] for line in listing.splitlines() if line.strip()]
    assert symbols and not [name for name in symbols if name.startswith(("Py", "_Py"))], symbols
    assert not [name for name in symbols if "llvm" in name.lower() or "clang" in name.lower()], symbols


@pytest.fixture(scope="module")
def cpp_inference(tmp_path_factory):
    """examples/cpp_inference built as a user would: against the runtime installed with `cmake --install`."""
    assert RUNTIME_LIBRARY.exists(), f"{RUNTIME_LIBRARY} was not built"
    work = tmp_path_factory.mktemp("cpp_inference")
    prefix, build = work / "prefix", work / "build"
    subprocess.run(["cmake", "--install", str(ROOT / "build"), "--component", "runtime", "--prefix", str(prefix)],
                   check=True, capture_output=True)
    assert (prefix / "include" / "metajit" / "runtime.h").exists()
    configure = subprocess.run(["cmake", "-S", str(ROOT / "examples" / "cpp_inference"), "-B", str(build),
                                f"-DCMAKE_PREFIX_PATH={prefix}"], capture_output=True, text=True)
    assert configure.returncode == 0, configure.stdout + configure.stderr
    compile_ = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True)
    assert compile_.returncode == 0, compile_.stdout + compile_.stderr
    return build / "cpp_inference"


def test_the_cpp_example_runs_exported_models_bit_for_bit(cpp_inference, tmp_path, rng):
    mj.seed(5)
    models = [("digits", mj.models.small_cnn(in_channels=1, num_classes=10, input_size=8, channels=(16, 32),
                                              hidden=64), (4, 1, 8, 8)),
              ("resnet18", mj.models.resnet18(num_classes=10), (1, 3, 32, 32))]
    for name, model, shape in models:
        image = rng.standard_normal(shape).astype(np.float32)
        expected = outputs_of(model, mj.array(image))
        mj.export(model, mj.array(image), tmp_path / f"{name}.mjm", output_names=["logits"])
        image.tofile(tmp_path / f"{name}.bin")
        outputs = tmp_path / f"{name}-outputs"
        outputs.mkdir()
        run = subprocess.run([str(cpp_inference), str(tmp_path / f"{name}.mjm"), str(tmp_path / f"{name}.bin"),
                              "--outputs", str(outputs)], capture_output=True, text=True,
                             env={key: value for key, value in os.environ.items() if key != "PYTHONPATH"})
        assert run.returncode == 0, run.stdout + run.stderr
        assert "input  x: float32" in run.stdout and "output logits: float32" in run.stdout
        logits = np.fromfile(outputs / "logits.bin", dtype=np.float32).reshape(expected[0].shape)
        np.testing.assert_array_equal(logits, expected[0])


def test_the_cpp_example_reports_a_wrong_input_file(cpp_inference, artifact, tmp_path):
    short = pathlib.Path(tmp_path / "short.bin")
    short.write_bytes(b"\0" * 12)
    run = subprocess.run([str(cpp_inference), str(artifact), str(short)], capture_output=True, text=True)
    assert run.returncode == 1
    assert "holds 12 bytes; input input: float32 [2, 4] needs 32" in run.stderr

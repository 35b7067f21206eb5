"""mj.load on files PyTorch and safetensors wrote: values compared exactly with numpy, state dicts loaded into
metajit models (forward passes compared with PyTorch's), strided and shared storages, dtypes, the legacy format,
and the restricted unpickler refusing code (the marker file a malicious pickle would create must not appear).

PyTorch and safetensors are test-only references here: metajit reads the files without them. These tests must
not leave files outside pytest's tmp_path.
"""
import argparse
import io
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import metajit as mj
from metajit import nn

torch = pytest.importorskip("torch")


def assert_var_equal(var, expected, dtype=None):
    assert isinstance(var, mj.Var), f"expected a metajit Var, got {type(var).__name__}"
    expected = np.asarray(expected)
    assert tuple(var.shape) == expected.shape
    assert var.dtype == (dtype or expected.dtype.name)
    np.testing.assert_array_equal(var.numpy(), expected)


def small_torch_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 5))
    with torch.no_grad():  # non-trivial running statistics, so loading them matters for the forward pass
        model[1].running_mean.uniform_(-0.5, 0.5)
        model[1].running_var.uniform_(0.5, 2.0)
        model[1].num_batches_tracked.fill_(7)
    return model.eval()


def small_metajit_model():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 4 * 4, 5)).eval()


def test_state_dict_loads_into_a_metajit_model_with_the_same_forward(tmp_path):
    model = small_torch_model()
    path = tmp_path / "model.pth"
    torch.save(model.state_dict(), path)
    loaded = mj.load(path)
    assert isinstance(loaded, OrderedDict) and list(loaded) == list(model.state_dict())
    for key, tensor in model.state_dict().items():
        assert_var_equal(loaded[key], tensor.numpy())
    assert loaded["1.num_batches_tracked"].dtype == "int64" and loaded["1.num_batches_tracked"].item() == 7

    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer, pickle_protocol=4)  # a file object, and STACK_GLOBAL opcodes
    buffer.seek(0)
    from_buffer = mj.load(buffer, map_location="cpu")
    for key, tensor in model.state_dict().items():
        assert_var_equal(from_buffer[key], tensor.numpy())

    ours = small_metajit_model()
    result = ours.load_state_dict(loaded)
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    inputs = np.random.default_rng(1).standard_normal((2, 3, 6, 6)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(inputs)).numpy()
    np.testing.assert_allclose(ours(mj.array(inputs)).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_training_checkpoint_with_optimizer_state_and_plain_values(tmp_path):
    model = small_torch_model().train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.8, 0.99))
    model(torch.randn(2, 3, 6, 6)).sum().backward()
    optimizer.step()
    checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3, "best": 0.25,
                  "name": "run-1", "flags": {1, 2}, "shape": torch.Size([2, 3]), "dtype": torch.float16,
                  "device": torch.device("cpu"), "raw": b"\x00\xffbytes", "numpy_scalar": np.float64(1.5),
                  "numpy_array": np.arange(4, dtype=np.int16), "history": [0.5, None, (1, "a")]}
    path = tmp_path / "checkpoint.pt"
    torch.save(checkpoint, path)
    loaded = mj.load(path)

    assert loaded["epoch"] == 3 and loaded["best"] == 0.25 and loaded["name"] == "run-1"
    assert loaded["flags"] == {1, 2} and loaded["shape"] == (2, 3) and loaded["dtype"] == "float16"
    assert loaded["device"] == "cpu" and loaded["raw"] == b"\x00\xffbytes"
    assert isinstance(loaded["numpy_scalar"], np.float64) and loaded["numpy_scalar"] == 1.5
    np.testing.assert_array_equal(loaded["numpy_array"], np.arange(4, dtype=np.int16))
    assert loaded["numpy_array"].dtype == np.int16
    assert loaded["history"] == [0.5, None, (1, "a")]
    for key, tensor in model.state_dict().items():
        assert_var_equal(loaded["model"][key], tensor.numpy())

    torch_state = optimizer.state_dict()
    assert loaded["optimizer"]["param_groups"] == torch_state["param_groups"]
    assert loaded["optimizer"]["param_groups"][0]["betas"] == (0.8, 0.99)
    assert sorted(loaded["optimizer"]["state"]) == sorted(torch_state["state"])
    for index, state in torch_state["state"].items():
        for name, value in state.items():
            assert_var_equal(loaded["optimizer"]["state"][index][name], value.numpy())


def test_strided_views_share_one_storage(tmp_path):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    views = {"base": base, "transposed": base.t(), "sliced": base[1:3, ::2], "column": base[:, 5],
             "element": base[3, 4], "expanded": base[0, :3].expand(2, 3), "permuted": base.reshape(2, 3, 4)
             .permute(2, 0, 1), "empty": base[2:2]}
    path = tmp_path / "views.pt"
    torch.save(views, path)
    with zipfile.ZipFile(path) as archive:
        storages = [name for name in archive.namelist() if "/data/" in name]
    assert len(storages) == 1  # the views really are offsets and strides into one storage
    loaded = mj.load(path)
    for key, tensor in views.items():
        assert_var_equal(loaded[key], tensor.numpy())
    # The loaded Vars are independent copies, as tensors loaded from a file are.
    loaded["base"].assign(mj.zeros(4, 6))
    np.testing.assert_array_equal(loaded["transposed"].numpy(), base.t().numpy())


def test_dtypes_and_their_metajit_equivalents(tmp_path):
    values = [0, 1, 2, 100, 127]
    tensors = {
        "float64": (torch.tensor([0.1, -2.5e300], dtype=torch.float64), "float64"),
        "float32": (torch.tensor([0.1, -3.5, float("inf")], dtype=torch.float32), "float32"),
        "float16": (torch.tensor([0.1, -3.5, 65504.0], dtype=torch.float16), "float16"),
        "int64": (torch.tensor([-(2 ** 62), 5]), "int64"),
        "int32": (torch.tensor([-(2 ** 30), 5], dtype=torch.int32), "int32"),
        "int8": (torch.tensor([-128, 127], dtype=torch.int8), "int8"),
        "uint8": (torch.tensor([0, 255], dtype=torch.uint8), "uint8"),
        "bool": (torch.tensor([True, False, True]), "bool"),
        # No metajit dtype: widened exactly.
        "int16": (torch.tensor([-32768, 32767], dtype=torch.int16), "int32"),
        "uint16": (torch.tensor(values, dtype=torch.uint16), "int32"),
        "uint32": (torch.tensor(values, dtype=torch.uint32), "int64"),
        "uint64": (torch.tensor(values, dtype=torch.uint64), "int64"),
        "bfloat16": (torch.tensor([0.1, -3.5, 1e30, float("-inf")], dtype=torch.bfloat16), "float32"),
        "float8_e4m3fn": (torch.tensor([0.1, -3.5, 448.0, 0.001953125], dtype=torch.float8_e4m3fn), "float32"),
        "float8_e5m2": (torch.tensor([0.1, -3.5, 57344.0, float("inf")], dtype=torch.float8_e5m2), "float32"),
    }
    path = tmp_path / "dtypes.pt"
    torch.save({key: tensor for key, (tensor, _) in tensors.items()}, path)
    loaded = mj.load(path)
    for key, (tensor, dtype) in tensors.items():
        expected = tensor.to(torch.float32 if dtype == "float32" else getattr(torch, dtype)).numpy()
        assert_var_equal(loaded[key], expected, dtype=dtype)

    torch.save({"complex": torch.ones(2, dtype=torch.complex64)}, path)
    with pytest.raises(ValueError, match="complex64 tensor, which metajit cannot represent"):
        mj.load(path)


def test_parameters_come_back_as_parameters(tmp_path):
    path = tmp_path / "parameter.pt"
    torch.save({"weight": torch.nn.Parameter(torch.ones(2, 3)), "frozen": torch.nn.Parameter(torch.ones(2),
                                                                                           requires_grad=False)},
               path)
    loaded = mj.load(path)
    assert isinstance(loaded["weight"], nn.Parameter) and loaded["weight"].requires_grad
    assert isinstance(loaded["frozen"], nn.Parameter) and not loaded["frozen"].requires_grad


def test_legacy_non_zip_format_and_file_objects(tmp_path):
    base = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    state = {"base": base, "transposed": base.t(), "sliced": base[1:, 1:3], "half": torch.ones(3).half(),
             "epoch": 9}
    path = tmp_path / "legacy.pt"
    torch.save(state, path, _use_new_zipfile_serialization=False)
    assert not zipfile.is_zipfile(path)
    buffer = io.BytesIO(path.read_bytes())
    for source in (path, str(path), buffer):
        loaded = mj.load(source)
        assert loaded["epoch"] == 9
        for key in ("base", "transposed", "sliced", "half"):
            assert_var_equal(loaded[key], state[key].numpy())


def test_safetensors_files_dispatch_on_content(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    tensors = {"weight": torch.randn(3, 4), "bias": torch.arange(4, dtype=torch.int64),
               "low": torch.tensor([1.5, -2.25], dtype=torch.bfloat16), "mask": torch.tensor([True, False])}
    path = tmp_path / "weights.bin"  # the extension says nothing: the header does
    safetensors_torch.save_file(tensors, str(path))
    loaded = mj.load(path)
    assert sorted(loaded) == sorted(tensors)
    for key, tensor in tensors.items():
        expected = tensor.float().numpy() if tensor.dtype == torch.bfloat16 else tensor.numpy()
        assert_var_equal(loaded[key], expected)

    arrays = {"a": np.arange(6, dtype=np.float16).reshape(2, 3), "b": np.array(3, dtype=np.int32)}
    numpy_path = tmp_path / "arrays.safetensors"
    safetensors_numpy.save_file(arrays, str(numpy_path))
    with open(numpy_path, "rb") as handle:
        loaded = mj.load(handle)
    for key, array in arrays.items():
        assert_var_equal(loaded[key], array)


def test_state_dict_values_load_into_metajit_modules_via_safetensors(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    model = small_torch_model()
    path = tmp_path / "model.safetensors"
    safetensors_torch.save_file(model.state_dict(), str(path))
    ours = small_metajit_model()
    ours.load_state_dict(mj.load(path))
    inputs = np.random.default_rng(2).standard_normal((1, 3, 6, 6)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(inputs)).numpy()
    np.testing.assert_allclose(ours(mj.array(inputs)).numpy(), expected, rtol=1e-5, atol=1e-5)


class RunsCommand:
    """Unpickling this calls os.system: what a malicious checkpoint does."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


class CallsEval:
    def __init__(self, expression):
        self.expression = expression

    def __reduce__(self):
        import builtins
        return builtins.eval, (self.expression,)


def test_malicious_pickles_are_refused_before_anything_runs(tmp_path):
    marker = tmp_path / "pwned-xyz"
    path = tmp_path / "malicious.pt"
    torch.save({"weight": torch.ones(2), "payload": RunsCommand(f"touch {marker}")}, path)
    with pytest.raises(pickle.UnpicklingError, match=r"refused the global '(posix|os)\.system'"):
        mj.load(path)
    assert not marker.exists()

    torch.save({"payload": CallsEval(f"open({str(marker)!r}, 'w').close()")}, path)
    with pytest.raises(pickle.UnpicklingError, match=r"refused the global 'builtins\.eval'"):
        mj.load(path)
    assert not marker.exists()

    torch.save([RunsCommand(f"touch {marker}")], path, _use_new_zipfile_serialization=False)
    with pytest.raises(pickle.UnpicklingError, match=r"refused the global '(posix|os)\.system'"):
        mj.load(path)
    assert not marker.exists()

    # The refusal is what stops it: trusting the file runs the command.
    torch.save({"payload": RunsCommand(f"touch {marker}")}, path)
    mj.load(path, weights_only=False)
    assert marker.exists()


def test_other_globals_are_refused_unless_the_file_is_trusted(tmp_path):
    path = tmp_path / "arguments.pt"
    torch.save({"args": argparse.Namespace(lr=0.1), "weight": torch.ones(2)}, path)
    with pytest.raises(pickle.UnpicklingError, match=r"'argparse\.Namespace'.*weights_only=False"):
        mj.load(path)
    loaded = mj.load(path, weights_only=False)
    assert loaded["args"].lr == 0.1
    assert_var_equal(loaded["weight"], np.ones(2, dtype=np.float32))

    torch.save(torch.nn.Linear(2, 2), path)  # a whole PyTorch model: its classes need PyTorch
    with pytest.raises(pickle.UnpicklingError, match=r"'torch\.nn\.modules\.linear\.Linear'"):
        mj.load(path)
    with pytest.raises(pickle.UnpicklingError, match="needs the PyTorch class .*save and load its state_dict"):
        mj.load(path, weights_only=False)


def write_zip_checkpoint(path, data_pickle, storages, byteorder="little"):
    """A hand-built torch.save-style archive: folder/data.pkl, folder/data/<key>, folder/byteorder."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", data_pickle)
        archive.writestr("archive/byteorder", byteorder)
        for key, data in storages.items():
            archive.writestr(f"archive/data/{key}", data)


class StorageReference:
    def __init__(self, key, numel):
        self.key, self.numel = key, numel


class TensorRecord:
    def __init__(self, storage, offset, size, stride):
        self.arguments = (storage, offset, size, stride, False, OrderedDict())

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.arguments


class StoragePickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, StorageReference):
            return ("storage", torch.FloatStorage, obj.key, "cpu", obj.numel)
        return None


def pickled_tensors(value):
    buffer = io.BytesIO()
    StoragePickler(buffer, protocol=2).dump(value)
    return buffer.getvalue()


def test_hand_built_archives_are_checked(tmp_path):
    path = tmp_path / "hand.pt"
    storage = StorageReference("0", 4)
    data = np.arange(4, dtype="<f4").tobytes()
    write_zip_checkpoint(path, pickled_tensors({"x": TensorRecord(storage, 1, (2,), (2,))}), {"0": data})
    assert_var_equal(mj.load(path)["x"], np.array([1, 3], dtype=np.float32))
    big_endian = np.arange(4, dtype=">f4").tobytes()
    write_zip_checkpoint(path, pickled_tensors({"x": TensorRecord(storage, 1, (2,), (2,))}), {"0": big_endian},
                         byteorder="big")
    assert_var_equal(mj.load(path)["x"], np.array([1, 3], dtype=np.float32))

    # Strides that reach past the storage must be an error, never a read of whatever memory lies beyond.
    write_zip_checkpoint(path, pickled_tensors({"x": TensorRecord(storage, 1, (2,), (3,))}), {"0": data})
    with pytest.raises(pickle.UnpicklingError, match="reaches past the end of its storage"):
        mj.load(path)
    write_zip_checkpoint(path, pickled_tensors({"x": TensorRecord(storage, 0, (4,), (1,))}), {"0": data[:8]})
    with pytest.raises(ValueError, match="truncated storage record"):
        mj.load(path)
    write_zip_checkpoint(path, pickled_tensors({"x": TensorRecord(storage, 0, (4,), (1,))}), {})
    with pytest.raises(ValueError, match="no storage record 'archive/data/0'"):
        mj.load(path)

    marker = tmp_path / "pwned-eval"
    write_zip_checkpoint(path, pickled_tensors({"x": CallsEval(f"open({str(marker)!r}, 'w').close()")}), {})
    with pytest.raises(pickle.UnpicklingError, match=r"refused the global 'builtins\.eval'"):
        mj.load(path)
    assert not marker.exists()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit is deprecated, but such files exist
def test_plain_pickles_and_torchscript_archives_are_refused(tmp_path):
    plain = tmp_path / "plain.pkl"
    plain.write_bytes(pickle.dumps({"a": 1}, protocol=2))
    with pytest.raises(ValueError, match="not a metajit save file, a PyTorch checkpoint or a safetensors file"):
        mj.load(plain)
    scripted = tmp_path / "scripted.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), scripted)
    with pytest.raises(ValueError, match="TorchScript archive"):
        mj.load(scripted)

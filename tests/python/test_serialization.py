"""mj.save / mj.load: round trips of nested state dicts, the safe file format (npz, no pickle) and errors."""
import io
import json
import zipfile

import numpy as np
import pytest

import metajit as mj
from metajit import nn


def test_round_trip_of_nested_values(tmp_path):
    state = {
        "weights": {"w": mj.array(np.arange(6, dtype=np.float32).reshape(2, 3)), "flag": mj.array([True, False])},
        "numpy": np.arange(4, dtype=np.int16),
        "scalar": np.float64(2.5),
        "numbers": [1, 2.5, float("inf"), True, None, 2 ** 70],
        "pair": (3, "text"),
        7: "an int key",
        "half": mj.array(np.array([1.5, -2.0], dtype=np.float16)),
    }
    path = tmp_path / "state.mj"
    mj.save(state, path)
    assert path.exists() and not list(tmp_path.glob("*.tmp*"))
    loaded = mj.load(path)
    assert list(loaded) == list(state)
    assert isinstance(loaded["weights"]["w"], mj.Var) and loaded["weights"]["w"].dtype == "float32"
    np.testing.assert_array_equal(loaded["weights"]["w"].numpy(), np.arange(6).reshape(2, 3))
    assert loaded["weights"]["flag"].dtype == "bool"
    assert isinstance(loaded["numpy"], np.ndarray) and loaded["numpy"].dtype == np.int16
    assert isinstance(loaded["scalar"], np.float64) and loaded["scalar"] == 2.5
    assert loaded["numbers"] == [1, 2.5, float("inf"), True, None, 2 ** 70]
    assert isinstance(loaded["numbers"][3], bool)
    assert loaded["pair"] == (3, "text") and loaded[7] == "an int key"
    assert loaded["half"].dtype == "float16"


def test_file_is_a_plain_npz_without_pickles(tmp_path):
    path = tmp_path / "model.npz"
    mj.save({"a": mj.ones(2)}, path)
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == ["__metajit__.npy", "a0.npy"]
    with np.load(path, allow_pickle=False) as archive:
        document = json.loads(archive["__metajit__"].tobytes())
        assert document["format"] == "metajit-npz"


def test_module_state_dict_round_trip_through_a_file_object():
    model = nn.Module()
    model.weight = nn.Parameter(mj.array(np.random.default_rng(0).standard_normal((3, 2)).astype(np.float32)))
    model.register_buffer("steps", mj.full([], 4, dtype="int64"))
    buffer = io.BytesIO()
    mj.save(model.state_dict(), buffer)
    buffer.seek(0)
    other = nn.Module()
    other.weight = nn.Parameter(mj.zeros(3, 2))
    other.register_buffer("steps", mj.zeros([], dtype="int64"))
    other.load_state_dict(mj.load(buffer))
    np.testing.assert_array_equal(other.weight.numpy(), model.weight.numpy())
    assert other.steps.item() == 4


def test_unsupported_values_and_bad_files(tmp_path):
    with pytest.raises(TypeError, match=r"the saved object\['bad'\] is a set"):
        mj.save({"bad": {1, 2}}, tmp_path / "x")
    with pytest.raises(TypeError, match="numpy array of Python objects"):
        mj.save({"bad": np.array([object()])}, tmp_path / "x")
    pickled = tmp_path / "pickled.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="not a metajit save file"):
        mj.load(pickled)
    plain = tmp_path / "plain.npz"
    np.savez(plain, x=np.ones(2))
    with pytest.raises(ValueError, match="without metajit's '__metajit__' entry"):
        mj.load(plain)
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"not a zip file at all")
    with pytest.raises(ValueError, match="not a metajit save file"):
        mj.load(garbage)
    forged = tmp_path / "forged.npz"
    document = {"format": "metajit-npz", "version": 1, "root": {"pickle": "a0"}}
    np.savez(forged, __metajit__=np.frombuffer(json.dumps(document).encode(), dtype=np.uint8))
    with pytest.raises(ValueError, match="unknown entry kind 'pickle'"):
        mj.load(forged)
    missing = tmp_path / "missing.npz"
    document["root"] = {"var": "a9"}
    np.savez(missing, __metajit__=np.frombuffer(json.dumps(document).encode(), dtype=np.uint8))
    with pytest.raises(ValueError, match="missing array entry 'a9'"):
        mj.load(missing)


def test_vars_pickle_with_dtype_requires_grad_and_parameter_marker():
    import pickle
    weight = nn.Parameter(mj.array(np.arange(6, dtype=np.float32).reshape(2, 3)))
    frozen = mj.array(np.array([1.5, -2.0], dtype=np.float16))
    counts = mj.array(np.array([3, 4], dtype=np.int64))
    tied = {"a": weight, "b": weight, "frozen": frozen, "counts": counts}
    loaded = pickle.loads(pickle.dumps(tied))
    assert loaded["a"] is loaded["b"]  # shared Vars stay shared (weight tying)
    assert isinstance(loaded["a"], nn.Parameter) and loaded["a"].requires_grad
    np.testing.assert_array_equal(loaded["a"].numpy(), weight.numpy())
    assert loaded["frozen"].dtype == "float16" and not loaded["frozen"].requires_grad
    assert not isinstance(loaded["frozen"], nn.Parameter)
    np.testing.assert_array_equal(loaded["counts"].numpy(), [3, 4])
    assert loaded["counts"].dtype == "int64"


def test_whole_model_saves_and_loads_only_when_trusted(tmp_path):
    import pickle
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2)).eval()
    path = tmp_path / "model.mj"
    mj.save({"model": model, "epoch": 2}, path)
    with pytest.raises(pickle.UnpicklingError, match="pickled nn.Module.*weights_only=False"):
        mj.load(path)
    loaded = mj.load(path, weights_only=False)
    assert loaded["epoch"] == 2
    copy = loaded["model"]
    assert isinstance(copy, nn.Sequential) and copy is not model
    assert [name for name, _ in copy.named_parameters()] == [name for name, _ in model.named_parameters()]
    assert all(isinstance(parameter, nn.Parameter) for parameter in copy.parameters())
    inputs = mj.array(np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32))
    np.testing.assert_array_equal(copy(inputs).numpy(), model(inputs).numpy())

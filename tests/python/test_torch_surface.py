"""The PyTorch names ported programs stopped on (issue: real PyTorch programs run with their imports changed):
x.size(), devices, dtype and tensor-type objects, f-string formats, new_* constructors, range indices,
torch.equal/isclose, finfo/iinfo, torch.autograd, and the clear error for a name metajit leaves out. Each is
checked against PyTorch on the same inputs."""
import numpy as np
import pytest
import torch

import metajit as mj
from metajit import nn


def test_size_is_the_shape_and_size_of_a_dim_is_an_extent():
    data = np.zeros((2, 3, 4), np.float32)
    x, t = mj.array(data), torch.from_numpy(data)
    assert x.size() == tuple(t.size()) and isinstance(x.size(), tuple)
    for dim in (0, 1, 2, -1, -3):
        assert x.size(dim) == t.size(dim)
    assert x.size().numel() == t.size().numel() == 24
    with pytest.raises(IndexError, match="out of range"):
        x.size(3)
    assert mj.array(np.float32(2)).size() == tuple(torch.tensor(2.0).size()) == ()


def test_format_spec_formats_one_element_vars_as_numbers():
    value = np.float32(0.123456)
    assert f"{mj.array(value):.3f}" == f"{torch.tensor(value):.3f}" == "0.123"
    assert f"{mj.array([2.5]).sum():>8.2f}" == f"{torch.tensor([2.5]).sum():>8.2f}"
    assert f"{mj.array(7):d}" == f"{torch.tensor(7):d}"
    with pytest.raises(TypeError, match="only one-element"):
        f"{mj.ones(3):.2f}"
    assert f"{mj.ones(2)}" == str(mj.ones(2))


def test_dtype_objects_compare_and_cast_as_in_pytorch():
    x = mj.ones(2)
    pairs = [(mj.float, torch.float), (mj.float32, torch.float32), (mj.double, torch.double),
             (mj.long, torch.long), (mj.int, torch.int), (mj.half, torch.half), (mj.bool, torch.bool),
             (mj.uint8, torch.uint8)]
    for ours, theirs in pairs:
        assert x.to(ours).dtype == ours
        assert np.dtype(x.to(ours).numpy().dtype) == torch.ones(2).to(theirs).numpy().dtype
    assert x.dtype == mj.float32 and x.dtype == mj.float and x.dtype != mj.long
    assert x.is_floating_point() and not x.long().is_floating_point()
    assert mj.is_floating_point(x)
    for dtype, theirs in [(mj.float64, torch.float64), (mj.int32, torch.int32), (mj.uint8, torch.uint8)]:
        assert x.to(dtype).element_size() == torch.ones(1, dtype=theirs).element_size()


def test_tensor_type_objects_build_cast_and_name():
    t = torch.ones(2, 3)
    x = mj.ones(2, 3)
    assert x.type() == "metajit.FloatTensor" and t.type() == "torch.FloatTensor"
    assert x.type(mj.LongTensor).dtype == "int64" and t.type(torch.LongTensor).dtype == torch.int64
    assert x.type("torch.DoubleTensor").dtype == "float64"
    assert x.long().type() == "metajit.LongTensor"
    np.testing.assert_array_equal(mj.FloatTensor([1, 2]).numpy(), torch.FloatTensor([1, 2]).numpy())
    assert mj.LongTensor([1, 2]).dtype == "int64"
    assert mj.FloatTensor(2, 3).shape == tuple(torch.FloatTensor(2, 3).shape)
    assert isinstance(x, mj.FloatTensor) and not isinstance(x, mj.LongTensor) and isinstance(x, mj.Tensor)


def test_devices_parse_compare_and_are_reported():
    assert str(mj.device("cuda:0")) == str(torch.device("cuda:0"))
    assert str(mj.device("cuda", 1)) == str(torch.device("cuda", 1))
    assert repr(mj.device("cpu")) == repr(torch.device("cpu"))
    assert mj.device("cpu") == "cpu" and mj.device("cuda:0") == mj.device("cuda", 0)
    assert mj.device("cuda").type == torch.device("cuda").type and mj.device("cuda").index is None
    assert {mj.device("cpu"): 1}[mj.device("cpu")] == 1
    with pytest.raises(ValueError, match="'mps' is not a metajit device"):
        mj.device("mps")
    with pytest.raises(ValueError, match="no device index"):
        mj.device("cuda:x")
    x = mj.array(np.ones(2, np.float32))
    if mj.flags.use_cuda:  # METAJIT_DEVICE=cuda: a value that is not computed yet will be computed on the GPU
        assert (mj.ones(2) + 1).device == mj.device("cuda", 0) and (mj.ones(2) + 1).get_device() == 0
    else:
        assert (mj.ones(2) + 1).device == mj.device("cpu")
    assert x.device == mj.device("cpu") and str(x.device) == str(torch.ones(2).device)
    assert x.get_device() == torch.ones(2).get_device() == -1


def test_device_arguments_on_factories_and_to():
    cpu = mj.device("cpu")
    for made in (mj.zeros(2, 3, device="cpu"), mj.ones(2, 3, device=cpu), mj.randn(2, 3, device=cpu),
                 mj.full((2, 3), 1.0, device=cpu), mj.arange(6, device="cpu").reshape(2, 3),
                 mj.tensor(np.zeros((2, 3)), device=cpu), mj.empty(2, 3, device=cpu)):
        assert made.shape == (2, 3)
    with pytest.raises(ValueError, match="zeros: device: 'xpu'"):
        mj.zeros(2, device="xpu")
    x = mj.ones(3)
    assert x.to(cpu) is x and x.to("cpu").dtype == "float32"  # nothing to move: still the same lazy value
    assert x.to(cpu, mj.float64).dtype == "float64" and x.to(device=cpu, dtype=mj.long).dtype == "int64"
    if not mj.cuda.is_available() and not mj.flags.use_cuda:  # no GPU, and not the emulator standing in for one
        with pytest.raises(mj.CudaUnavailableError):
            mj.zeros(2, device="cuda")
    model = nn.Linear(2, 2)
    assert model.to(cpu) is model and model.to(cpu, mj.float64).weight.dtype == "float64"
    assert model.to(mj.float32).weight.dtype == "float32"


def test_new_constructors_follow_the_source_dtype():
    x, t = mj.ones(2, dtype="float64"), torch.ones(2, dtype=torch.float64)
    for ours, theirs in [(x.new_tensor([1, 2]), t.new_tensor([1, 2])),
                         (x.new_full((2, 3), 7), t.new_full((2, 3), 7)),
                         (x.new_zeros(3), t.new_zeros(3)), (x.new_ones(2, 2), t.new_ones(2, 2))]:
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        assert ours.numpy().dtype == theirs.numpy().dtype
    assert x.new_empty(2, 3).shape == (2, 3)
    copied = x.new_tensor(mj.array([3.0, 4.0]), requires_grad=True)
    assert copied.requires_grad and copied.is_leaf


def test_range_index_and_matrix_transpose():
    data = np.arange(24, dtype=np.float32).reshape(4, 6)
    x, t = mj.array(data), torch.from_numpy(data)
    np.testing.assert_array_equal(x[range(1, 3)].numpy(), t[range(1, 3)].numpy())
    np.testing.assert_array_equal(x[:, range(0, 6, 2)].numpy(), t[:, range(0, 6, 2)].numpy())
    np.testing.assert_array_equal(x.mT.numpy(), t.mT.numpy())
    assert x.ndimension() == t.ndimension()


def test_equal_is_one_bool_and_isclose_elementwise():
    a = np.array([1.0, 2.0, np.inf, np.nan], np.float32)
    b = np.array([1.0, 2.0 + 1e-7, np.inf, np.nan], np.float32)
    assert mj.equal(mj.array(a[:2]), mj.array(a[:2])) is torch.equal(torch.tensor(a[:2]), torch.tensor(a[:2]))
    assert mj.equal(mj.array(a[:2]), mj.array(a[:2] + 1)) is torch.equal(torch.tensor(a[:2]),
                                                                          torch.tensor(a[:2] + 1))
    assert mj.equal(mj.ones(2), mj.ones(3)) is False
    for equal_nan in (False, True):
        np.testing.assert_array_equal(mj.isclose(mj.array(a), mj.array(b), equal_nan=equal_nan).numpy(),
                                      torch.isclose(torch.tensor(a), torch.tensor(b), equal_nan=equal_nan).numpy())


def test_finfo_iinfo_and_default_dtype_match_pytorch():
    for ours, theirs in [(mj.float32, torch.float32), (mj.float16, torch.float16), (mj.float64, torch.float64)]:
        assert mj.finfo(ours).eps == torch.finfo(theirs).eps
        assert mj.finfo(ours).max == torch.finfo(theirs).max and mj.finfo(ours).tiny == torch.finfo(theirs).tiny
    for ours, theirs in [(mj.int32, torch.int32), (mj.int64, torch.int64), (mj.uint8, torch.uint8)]:
        assert (mj.iinfo(ours).min, mj.iinfo(ours).max) == (torch.iinfo(theirs).min, torch.iinfo(theirs).max)
    assert mj.get_default_dtype() == mj.float32 and torch.get_default_dtype() == torch.float32
    with pytest.raises(NotImplementedError, match="float32 only"):
        mj.set_default_dtype(mj.float64)


def test_autograd_grad_matches_pytorch():
    data = np.array([0.5, -1.0, 2.0], np.float32)
    x = mj.array(data, requires_grad=True)
    t = torch.tensor(data, requires_grad=True)
    (ours,) = mj.autograd.grad((x ** 3).sum(), x, create_graph=True)
    (theirs,) = torch.autograd.grad((t ** 3).sum(), t, create_graph=True)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-6)
    (second,) = mj.autograd.grad(ours.sum(), x)
    (their_second,) = torch.autograd.grad(theirs.sum(), t)
    np.testing.assert_allclose(second.numpy(), their_second.numpy(), rtol=1e-6)
    seed = np.array([1.0, 2.0, 3.0], np.float32)
    (seeded,) = mj.autograd.grad(x * x, [x], grad_outputs=mj.array(seed))
    (their_seeded,) = torch.autograd.grad(t * t, [t], grad_outputs=torch.tensor(seed))
    np.testing.assert_allclose(seeded.numpy(), their_seeded.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="one element"):
        mj.autograd.grad(x * x, x)
    assert mj.autograd.Variable(x) is x


def test_process_settings_pytorch_programs_make():
    threads = mj.get_num_threads()
    mj.set_num_threads(1)
    assert mj.get_num_threads() == 1 == mj.flags.num_threads
    mj.set_num_threads(threads)
    mj.backends.cudnn.benchmark = True
    mj.backends.cudnn.deterministic = True
    assert mj.backends.cudnn.benchmark and mj.backends.mps.is_available() is False
    mj.backends.cuda.matmul.allow_tf32 = False
    mj.set_float32_matmul_precision("high")
    assert mj.get_float32_matmul_precision() == "high"
    with pytest.raises(ValueError, match="'fastest'"):
        mj.set_float32_matmul_precision("fastest")
    mj.use_deterministic_algorithms(True)
    assert mj.are_deterministic_algorithms_enabled()
    mj.use_deterministic_algorithms(False)
    assert mj.accelerator.is_available() == mj.cuda.is_available()
    mj.cuda.manual_seed_all(3)
    model = nn.Linear(2, 2)
    assert mj.compile(model) is model and mj.compile(mode="max-autotune")(model) is model


def test_absent_pytorch_names_fail_with_a_message_naming_them():
    with pytest.raises(AttributeError, match=r"metajit.onnx \(PyTorch's torch.onnx\) is not available"):
        mj.onnx.export
    with pytest.raises(AttributeError, match="complex dtypes are not supported"):
        mj.complex64
    with pytest.raises(AttributeError, match="docs/pytorch_surface.md"):
        mj.no_such_function
    assert not hasattr(mj, "onnx") and hasattr(mj, "compile")


def test_tensor_methods_left_out_say_so_and_placement_calls_are_identities():
    x = mj.ones(3)
    with pytest.raises(AttributeError, match=r"Tensor.retain_grad\): gradients of non-leaf Vars are not kept"):
        x.retain_grad()
    with pytest.raises(AttributeError, match="'metajit.Var' object has no attribute 'no_such_method'"):
        x.no_such_method
    assert not hasattr(x, "register_hook") and hasattr(x, "size")
    t = torch.ones(3)
    assert x.pin_memory() is x and x.share_memory_() is x
    assert x.is_pinned() == t.is_pinned() and x.is_shared() == t.is_shared()
    np.testing.assert_array_equal(np.asarray(x), np.ones(3, np.float32))  # numpy's attribute probes still work


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf")])
def test_cdist_matches_pytorch_with_its_gradient(p):
    rng = np.random.default_rng(3)
    first = rng.normal(size=(2, 5, 4)).astype(np.float32)
    second = rng.normal(size=(2, 3, 4)).astype(np.float32)
    second[:, 0] = first[:, 1]  # a zero distance: its gradient is 0 in both, not NaN
    x, y = mj.array(first, requires_grad=True), mj.array(second, requires_grad=True)
    t, u = torch.tensor(first, requires_grad=True), torch.tensor(second, requires_grad=True)
    ours, theirs = mj.cdist(x, y, p=p), torch.cdist(t, u, p=p, compute_mode="donot_use_mm_for_euclid_dist")
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-6)
    weights = rng.normal(size=theirs.shape).astype(np.float32)
    (ours * mj.array(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(y.grad.numpy(), u.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_cdist_broadcasts_batch_dims_and_checks_its_arguments():
    rng = np.random.default_rng(4)
    first, second = rng.normal(size=(6, 3)).astype(np.float32), rng.normal(size=(2, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(mj.cdist(mj.array(first), mj.array(second)).numpy(),
                               torch.cdist(torch.tensor(first), torch.tensor(second)).numpy(), rtol=1e-5, atol=1e-6)
    assert mj.nn.functional.cdist is mj.cdist
    with pytest.raises(ValueError, match="same number of columns"):
        mj.cdist(mj.ones(2, 3), mj.ones(2, 4))
    with pytest.raises(ValueError, match="compute_mode"):
        mj.cdist(mj.ones(2, 3), mj.ones(2, 3), compute_mode="fast")


def test_autocast_runs_disabled_and_refuses_enabled_by_name():
    for ours, theirs in [(mj.autocast(device_type="cpu", enabled=False),
                          torch.autocast(device_type="cpu", enabled=False)),
                         (mj.amp.autocast("cpu", enabled=False), torch.amp.autocast("cpu", enabled=False))]:
        with ours, theirs:
            assert (mj.ones(2, 2) @ mj.ones(2, 2)).dtype == mj.float32
            assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    with pytest.raises(NotImplementedError, match=r"torch\.autocast\) with enabled=True"):
        mj.autocast(device_type="cpu", dtype=mj.float16)
    with pytest.raises(ValueError, match="'tpu' is not a metajit device"):
        mj.autocast(device_type="tpu", enabled=False)
    from metajit.amp import GradScaler
    assert GradScaler is mj.amp.GradScaler


def _scaled_training(framework, scaler, weights, batches):
    """A linear model trained with the AMP recipe's scaler calls; returns the scales seen and the final weights."""
    model = framework.nn.Linear(3, 1)
    model.load_state_dict(weights)
    optimizer = framework.optim.SGD(model.parameters(), lr=0.1)
    scales = []
    for inputs, targets in batches:
        optimizer.zero_grad()
        loss = ((model(framework.tensor(inputs)) - framework.tensor(targets)) ** 2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, {name: value.detach().numpy() for name, value in model.state_dict().items()}


def test_grad_scaler_scales_skips_and_adapts_as_pytorch():
    rng = np.random.default_rng(5)
    batches = [(rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=(4, 1)).astype(np.float32))
               for _ in range(5)]
    batches[2] = (batches[2][0], np.full((4, 1), np.inf, np.float32))  # an overflowing step: skipped, scale halved
    weights = {"weight": rng.normal(size=(1, 3)).astype(np.float32), "bias": np.zeros(1, np.float32)}
    for enabled in (True, False):
        ours = _scaled_training(mj, mj.amp.GradScaler(growth_interval=2, enabled=enabled), weights, batches)
        theirs = _scaled_training(torch, torch.amp.GradScaler("cpu", growth_interval=2, enabled=enabled),
                                  {k: torch.tensor(v) for k, v in weights.items()}, batches)
        assert ours[0] == theirs[0]
        for name in weights:
            np.testing.assert_allclose(ours[1][name], theirs[1][name], rtol=1e-6)
    scaler = mj.amp.GradScaler()
    assert scaler.state_dict()["scale"] == torch.amp.GradScaler("cpu").state_dict()["scale"] == 65536.0
    model = nn.Linear(2, 1)
    optimizer = mj.optim.SGD(model.parameters(), lr=0.1)
    scaler.scale(model(mj.ones(1, 2)).sum()).backward()
    scaler.unscale_(optimizer)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(optimizer)


def test_top_level_functions_are_also_tensor_methods():
    rng = np.random.default_rng(4)
    a, b, c = (rng.standard_normal(shape).astype(np.float32) for shape in [(3, 4), (3, 5), (5, 4)])
    x, t = mj.array(a), torch.tensor(a)
    np.testing.assert_allclose(x.addmm(mj.array(b), mj.array(c), beta=0.5).numpy(),
                               t.addmm(torch.tensor(b), torch.tensor(c), beta=0.5).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x[0].outer(x[1]).numpy(), t[0].outer(t[1]).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(x.true_divide(2.0).numpy(), t.true_divide(2.0).numpy())
    np.testing.assert_array_equal(x.floor_divide(0.5).numpy(), t.floor_divide(0.5).numpy())
    np.testing.assert_array_equal((x > 0).logical_and(x < 1).numpy(), (t > 0).logical_and(t < 1).numpy())
    np.testing.assert_array_equal(x.isclose(x + 1e-9).numpy(), t.isclose(t + 1e-9).numpy())
    assert x.equal(mj.array(a)) is t.equal(torch.tensor(a)) is True

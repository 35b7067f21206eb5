"""Memory accounting (issue 45 part 1): mj.memory_allocated / max_memory_allocated / memory_reserved /
reset_peak_memory_stats / memory_summary with PyTorch's names, and mj.profile()'s memory per kernel and timeline.
Expected sizes come from the arrays the test makes (numpy's nbytes), never from the counters themselves."""
import json

import numpy as np
import pytest

import metajit as mj

MIB = 2**20


def computed(megabytes, value=1.0):
    x = mj.full([megabytes * MIB // 4], value)
    x.sync()
    return x


def test_a_computed_value_is_counted_until_it_is_dropped():
    mj.gc()
    before = mj.memory_allocated()
    x = computed(8)
    held = mj.memory_allocated() - before
    assert 8 * MIB <= held < 8 * MIB * 1.5, held
    del x
    assert mj.memory_allocated() - before < 1 * MIB
    assert mj.memory_reserved() >= mj.memory_allocated()


def test_the_peak_remembers_a_value_that_is_gone_until_it_is_reset():
    mj.gc()
    mj.reset_peak_memory_stats()
    start = mj.max_memory_allocated()
    x = computed(16)
    del x
    assert mj.max_memory_allocated() - start >= 16 * MIB
    assert mj.memory_allocated() < mj.max_memory_allocated()
    mj.reset_peak_memory_stats()
    assert mj.max_memory_allocated() == mj.memory_allocated()


def test_memory_summary_has_a_row_per_device_in_mebibytes():
    x = computed(4)
    summary = mj.memory_summary()
    rows = {line.split()[0]: line.split() for line in summary.splitlines()[1:3]}
    assert set(rows) == {"cpu", "cuda"}
    allocated_mib = float(rows["cpu"][1])
    assert allocated_mib == pytest.approx(mj.memory_allocated() / MIB, abs=0.01)
    assert allocated_mib >= 4
    assert mj.memory_summary("cuda", abbreviated=True).splitlines()[1].split()[0] == "cuda"
    del x


@pytest.mark.parametrize("function", [mj.memory_allocated, mj.max_memory_allocated, mj.memory_reserved,
                                      mj.memory_summary])
def test_an_unknown_device_is_refused_by_name(function):
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda', got 'tpu'"):
        function("tpu")


def test_the_profile_records_each_kernels_memory_and_a_timeline():
    a = mj.array(np.ones((512, 1024), np.float32))   # 2 MiB each
    b = mj.array(np.full((512, 1024), 2.0, np.float32))
    a.sync(), b.sync()
    with mj.profile() as report:
        c = (a * b).exp()
        d = (c + a).sum()
        d.sync()
    launches = sum(entry["launches"] for entry in report.entries)
    assert len(report.timeline) == launches >= 1
    starts = [event["start"] for event in report.timeline]
    assert starts == sorted(starts)
    # At least the two inputs (4 MiB) are held throughout, by this test alone.
    assert all(event["host_bytes"] >= 4 * MIB for event in report.timeline)
    assert report.peak_bytes >= 4 * MIB
    for entry in report.entries:
        assert entry["peak_host_bytes"] >= 4 * MIB
    assert "MiB at the peak" in report.table()
    np.testing.assert_allclose(d.numpy(), (np.exp(2.0) + 1.0) * 512 * 1024, rtol=1e-3)  # float32 sum


def test_the_memory_timeline_is_drawn_as_png_or_written_as_json(tmp_path):
    a = mj.array(np.ones((256, 256), np.float32))
    with mj.profile() as report:
        (a * 3 + 1).sum().sync()
    png, data = tmp_path / "memory.png", tmp_path / "memory.json"
    report.export_memory_timeline(str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report.export_memory_timeline(str(data))
    events = json.loads(data.read_text())
    assert [event["name"] for event in events] == [event["name"] for event in report.timeline]
    with pytest.raises(ValueError, match="must end in .png or .json"):
        report.export_memory_timeline(str(tmp_path / "memory.svg"))


def test_an_empty_profile_has_no_chart_to_draw(tmp_path):
    with mj.profile() as report:
        pass
    with pytest.raises(ValueError, match="no kernel ran"):
        report.export_memory_timeline(str(tmp_path / "memory.png"))


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_an_optimizer_step_never_holds_every_parameter_twice(optimizer):
    """Issue 45 part 4: the parameters take their updates before the step's plan runs, so each old value goes once
    its update has read it, as PyTorch's in-place updates never hold two copies. A step of four 4 MiB layers
    (batch 2: activations are tiny) then peaks at most 2 + (state values per parameter) layers' worth above what it
    held when it began (one update's new weight and state alive with the old ones): seen 3.0 for both. Keeping
    every old parameter and state until the plan ended, it peaked 5.1 (SGD) and 6.1 (Adam) above."""
    from metajit import nn, optim
    layer_bytes = 1024 * 1024 * 4
    mj.seed(0)
    model = nn.Sequential(*[nn.Linear(1024, 1024, bias=False) for _ in range(4)])
    step_options, states = {"SGD": (dict(lr=0.01, momentum=0.9), 1), "Adam": (dict(lr=1e-3), 2)}[optimizer]
    update = getattr(optim, optimizer)(model.parameters(), **step_options)
    x = mj.array(np.random.default_rng(0).standard_normal((2, 1024)).astype(np.float32))

    def step():
        loss = (model(x) ** 2).mean()
        update.zero_grad()
        loss.backward()
        update.step()
        return loss.item()

    for _ in range(3):
        step()
    before = [layer.weight.numpy().copy() for layer in model]
    mj.gc()
    mj.reset_peak_memory_stats()
    start = mj.memory_allocated()
    step()
    held = mj.max_memory_allocated() - start
    assert held <= (2 + states) * layer_bytes, held / layer_bytes
    for layer, old in zip(model, before):  # the updates landed in the parameters
        assert np.abs(layer.weight.numpy() - old).max() > 0


def test_a_relu_networks_backward_keeps_the_relu_outputs_not_also_their_inputs():
    """Issue 45 part 4: ReLU's gradient reads its output (as PyTorch's does), which the next layer keeps for its own
    weight gradient anyway, so the matrix products' outputs before each ReLU go once the ReLU has read them. Eight
    layers of batch 4096 and width 256 (one activation is 4 MiB): the step peaked 12.9 activations above what it
    held when it began, when written; computed from the ReLU's input it held both and peaked at 18.7."""
    from metajit import nn, optim
    activation_bytes = 4096 * 256 * 4
    mj.seed(0)
    model = nn.Sequential(*[module for _ in range(8) for module in (nn.Linear(256, 256), nn.ReLU())])
    update = optim.SGD(model.parameters(), lr=0.01)
    x = mj.array(np.random.default_rng(0).standard_normal((4096, 256)).astype(np.float32))

    def step():
        loss = model(x).sum()
        update.zero_grad()
        loss.backward()
        update.step()
        return loss.item()

    step()
    mj.gc()
    mj.reset_peak_memory_stats()
    start = mj.memory_allocated()
    step()
    added = (mj.max_memory_allocated() - start) / activation_bytes
    assert added <= 15, added


def test_relus_gradient_passes_through_nan_as_pytorchs():
    """ReLU's gradient is zero where its output is at most zero, so a NaN input (NaN output) passes the gradient,
    as in PyTorch; the earlier rule, input > 0, stopped it."""
    torch = pytest.importorskip("torch")
    values = np.array([np.nan, -1.0, 0.0, 2.0, -0.0], np.float32)
    x = mj.array(values, requires_grad=True)
    mj.nn.functional.relu(x).sum().backward()
    reference = torch.tensor(values, requires_grad=True)
    torch.relu(reference).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), reference.grad.numpy())

"""mj.trace (mj.jit.trace): a function recorded once and replayed without its Python.

Replays are compared bit for bit with the same program run untraced (the replay runs the same plan the plan cache
would), and training against PyTorch at rtol 1e-5 (float32 sums over a few steps). Each refusal is checked to name
the user's line."""
import numpy as np
import pytest

import metajit as mj
from metajit import nn

torch = pytest.importorskip("torch")


def torch_state(module):
    return {key: torch.from_numpy(np.array(value.numpy())) for key, value in module.state_dict().items()}


def batches(count, rng, shape=(5, 8), target_shape=(5, 4)):
    return [(rng.standard_normal(shape).astype(np.float32), rng.standard_normal(target_shape).astype(np.float32))
            for _ in range(count)]


def test_inference_replays_without_running_the_function(rng):
    weight = mj.array(rng.standard_normal((8, 3)).astype(np.float32))
    calls = []

    @mj.trace
    def predict(x):
        calls.append(1)
        return (x @ weight).relu() * 2.0 + 1.0

    inputs = [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(5)]
    results = [predict(mj.array(value)).numpy() for value in inputs]
    assert len(calls) == 1 and predict.replays == 4 and predict.variants == 1
    for value, result in zip(inputs, results):
        np.testing.assert_allclose(result, np.maximum(value @ weight.numpy(), 0) * 2 + 1, rtol=1e-5, atol=1e-6)
    mj.reset_stats()
    predict(mj.array(inputs[0])).numpy()
    assert mj.stats()["kernels_compiled"] == 0 and mj.stats()["planned_nodes"] == 0  # nothing recorded or planned
    other = rng.standard_normal((2, 8)).astype(np.float32)  # a new shape traces again
    np.testing.assert_allclose(predict(mj.array(other)).numpy(), np.maximum(other @ weight.numpy(), 0) * 2 + 1,
                               rtol=1e-5, atol=1e-6)
    assert len(calls) == 2 and predict.variants == 2
    weight.assign(mj.zeros(8, 3))  # a Var it reads is read again on every replay
    np.testing.assert_array_equal(predict(mj.array(inputs[1])).numpy(), np.ones((4, 3), np.float32))


def squared_error_step(model, optimizer):
    def step(x, y):
        loss = ((model(x) - y) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss
    return step


def train(traced, steps, data, momentum=0.9, dropout=0.0, batch_norm=False):
    mj.seed(3)
    layers = [nn.Linear(8, 16)] + ([nn.BatchNorm1d(16)] if batch_norm else []) + [nn.ReLU(), nn.Dropout(dropout),
                                                                                   nn.Linear(16, 4)]
    model = nn.Sequential(*layers)
    optimizer = mj.optim.SGD(model.parameters(), lr=0.05, momentum=momentum)

    step = squared_error_step(model, optimizer)
    if traced:
        step = mj.trace(step)
    losses = [step(mj.array(x), mj.array(y)).item() for x, y in data[:steps]]
    return model, losses, step


@pytest.mark.parametrize("options", [{}, {"momentum": 0.0}, {"dropout": 0.3}, {"batch_norm": True}],
                         ids=["momentum", "plain", "dropout", "batch-norm"])
def test_traced_training_matches_untraced_training(rng, options):
    """Bit for bit where the traced plan has the untraced one's kernels; with dropout and batch norm the traced
    graph fuses the random draw's cast and the running statistics' update into other kernels (the untraced run
    stores them by themselves), so there the same numbers summed in another order agree to rtol 1e-6."""
    data = batches(8, rng)
    model, losses, _ = train(False, 8, data, **options)
    traced_model, traced_losses, step = train(True, 8, data, **options)
    assert step.replays >= 5
    if options.get("dropout") or options.get("batch_norm"):
        compare = lambda ours, theirs, name="": np.testing.assert_allclose(  # noqa: E731
            ours, theirs, rtol=1e-6, atol=1e-7, err_msg=name)
    else:
        compare = lambda ours, theirs, name="": np.testing.assert_array_equal(ours, theirs, err_msg=name)  # noqa: E731
    compare(traced_losses, losses)
    for (name, ours), theirs in zip(traced_model.state_dict().items(), model.state_dict().values()):
        compare(ours.numpy(), theirs.numpy(), name)
    for ours, theirs in zip(traced_model.parameters(), model.parameters()):
        compare(ours.grad.numpy(), theirs.grad.numpy())


def test_traced_training_matches_pytorch(rng):
    data = batches(6, rng)
    model, losses, step = train(True, 6, data)
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.0),
                                    torch.nn.Linear(16, 4))
    mj.seed(3)
    initial = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.0), nn.Linear(16, 4))
    reference.load_state_dict(torch_state(initial))
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
    expected = []
    for x, y in data:
        loss = ((reference(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        expected.append(loss.item())
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
    assert step.replays == 4


def test_reading_a_value_inside_a_traced_function_names_the_line(rng):
    @mj.trace
    def function(x):
        y = x * 2
        if y.sum().item() > 0:  # data-dependent Python control flow
            return y
        return -y

    with pytest.raises(RuntimeError, match=r"read back .*inside the function being traced.*test_trace.py:\d+"):
        function(mj.array(np.ones(3, np.float32)))


def test_a_value_kept_elsewhere_is_refused_naming_its_line(rng):
    kept = []

    @mj.trace
    def function(x):
        kept.append(x * 3)
        return x + 1

    with pytest.raises(ValueError, match=r"made at .*test_trace.py:\d+ inside the traced function is still held"):
        function(mj.array(np.ones(3, np.float32)))


scale = 2.0


def test_a_changed_global_number_or_training_flag_traces_again(rng):
    global scale
    module = nn.Dropout(0.5)

    @mj.trace
    def function(x):
        return module(x) * scale

    x = mj.array(np.ones((4, 4), np.float32))
    module.eval()
    np.testing.assert_array_equal(function(x).numpy(), np.full((4, 4), 2.0, np.float32))
    scale = 3.0
    np.testing.assert_array_equal(function(x).numpy(), np.full((4, 4), 3.0, np.float32))
    assert function.variants == 2
    module.train()
    values = function(x).numpy()
    assert set(np.unique(values)) <= {0.0, 6.0} and function.variants == 3
    scale = 2.0


def test_too_many_variants_is_an_error(rng):
    function = mj.trace(lambda x: x + 1, max_variants=2)
    function(mj.zeros(1))
    function(mj.zeros(2))
    with pytest.raises(mj.jit.TraceError, match="max_variants=2"):
        function(mj.zeros(3))


def test_disabled_tracing_runs_the_function_and_matrix_trace_is_unchanged(rng):
    calls = []

    @mj.trace
    def function(x):
        calls.append(1)
        return x + 1

    mj.jit.trace.enabled = False
    try:
        function(mj.zeros(2)).numpy()
        function(mj.zeros(2)).numpy()
    finally:
        mj.jit.trace.enabled = True
    assert len(calls) == 2
    matrix = rng.standard_normal((3, 3)).astype(np.float32)
    np.testing.assert_allclose(mj.trace(mj.array(matrix)).numpy(), np.trace(matrix), rtol=1e-6)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "SGD", "Adagrad", "RMSprop", "Adadelta", "Adamax", "NAdam"])
def test_optimizer_numbers_are_worked_out_again_before_each_replay(rng, name):
    """Adam's step count and bias corrections, and a learning rate changed by a scheduler every step, are Python
    numbers: before each replay the optimizer's update runs over stand-ins to advance them (no re-trace). The
    traced run matches PyTorch's at rtol 1e-5 over 8 steps."""
    data = batches(8, rng)
    mj.seed(3)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    reference.load_state_dict(torch_state(model))
    options = {"SGD": {"lr": 0.05, "momentum": 0.9}, "RMSprop": {"lr": 0.01, "momentum": 0.5, "centered": True},
               "Adadelta": {"lr": 1.0}}.get(name, {"lr": 0.01})
    optimizer = getattr(mj.optim, name)(model.parameters(), **options)
    their_optimizer = getattr(torch.optim, name)(reference.parameters(), **options)
    schedule = mj.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.8)
    their_schedule = torch.optim.lr_scheduler.StepLR(their_optimizer, step_size=1, gamma=0.8)

    step = mj.trace(squared_error_step(model, optimizer))
    losses, expected = [], []
    for x, y in data:
        losses.append(step(mj.array(x), mj.array(y)).item())
        schedule.step()
        loss = ((reference(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).mean()
        their_optimizer.zero_grad()
        loss.backward()
        their_optimizer.step()
        their_schedule.step()
        expected.append(loss.item())
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
    for ours, theirs in zip(model.parameters(), reference.parameters()):
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert step.variants == 2 and step.replays == 6  # the first step's state differs; then replays only


def test_replays_run_on_the_devices_the_trace_ran_on(rng):
    """Under the CUDA emulator the kept plan is the CUDA one and replays run it there too (elementwise work only:
    the emulator is slow for matrix products). Compared with numpy at rtol 1e-6."""
    previous = mj.flags.use_cuda
    mj.flags.use_cuda = "emulator"
    try:
        weight = mj.array(rng.standard_normal(64).astype(np.float32))

        @mj.trace
        def function(x):
            return (x * weight).tanh() + x.sum()

        inputs = [rng.standard_normal(64).astype(np.float32) for _ in range(3)]
        for value in inputs:
            np.testing.assert_allclose(function(mj.array(value)).numpy(),
                                       np.tanh(value * weight.numpy()) + value.sum(), rtol=1e-5, atol=1e-6)
        assert function.replays == 2
        assert "plan on the CUDA emulator" in list(function._variants.values())[0].traced.describe()
    finally:
        mj.flags.use_cuda = previous


def test_inference_with_grad_mode_on_replays_without_a_gradient_graph(rng):
    """nn.LSTM is an autograd Function whose context keeps its gates for backward: those held values do not stop
    the capture, and a replay returns plain values (no gradient graph), bit for bit the untraced outputs."""
    layer = nn.LSTM(8, 16)
    inputs = [mj.array(rng.standard_normal((5, 2, 8)).astype(np.float32)) for _ in range(3)]

    @mj.trace
    def forward(x):
        return layer(x)[0]

    results = [forward(x) for x in inputs]
    assert forward.replays == 2 and [value.requires_grad for value in results] == [True, False, False]
    with mj.no_grad():
        expected = [layer(x)[0].numpy() for x in inputs]
    for value, want in zip(results, expected):
        np.testing.assert_array_equal(value.numpy(), want)
    with pytest.raises(RuntimeError, match="does not require grad"):
        results[2].sum().backward()

"""Issue 43 part 1: in the training steps of the benchmark models, written as their authors write them, every large
contraction runs in the library. The test plans each step (forward, loss, backward and the optimizer's update)
without running it and walks the kernels: a generated kernel whose reduction loop multiplies two values (a matrix
product or convolution as a loop nest) may do at most 10^8 multiply-adds. Before the planner stored the operands
that arrive through views and resamplings, a convolution after ReflectionPad2d or nearest upsampling, and the
gradients of nanoGPT's fused qkv projection, ran as such loop nests at 10-100x the library's time."""
import re

import numpy as np
import pytest

import metajit as mj
import metajit.nn as nn
import metajit.nn.functional as F
from conftest import cpu_backend

pytestmark = cpu_backend

LIMIT = 10**8


def generated_contractions(kernels):
    """(work, kernel) for each generated kernel with a multiplying sum, its work the domain's size times the work
    per point its IR states."""
    found = []
    for kernel in kernels:
        if kernel.kind not in ("generated", "library+epilogue") or not kernel.ir:
            continue
        domain = re.search(r"kernel \w+ over \[([0-9, ]*)\]", kernel.ir)
        work = re.search(r"work per point (\d+)", kernel.ir)
        if not domain or not work or "reduce " not in kernel.ir:
            continue
        reduction = kernel.ir[kernel.ir.index("reduce "):]
        if "mul(" not in reduction and " * " not in reduction:
            continue
        points = int(np.prod([int(extent) for extent in domain.group(1).split(",") if extent.strip()] or [1]))
        found.append((points * int(work.group(1)), kernel))
    return found


def training_step_kernels(model, loss_of, inputs):
    optimizer = mj.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    optimizer.zero_grad()
    loss = loss_of(model(*inputs))
    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    gradients = mj.grad(loss, parameters)
    return mj.inspect(loss, *gradients)


class StyleTransfer(nn.Module):
    """Convolutions after reflection padding and nearest upsampling, instance norm (Johnson et al.'s layout)."""

    def __init__(self):
        super().__init__()
        self.down = nn.Sequential(nn.ReflectionPad2d(4), nn.Conv2d(3, 16, 9), nn.InstanceNorm2d(16, affine=True),
                                  nn.ReLU(), nn.ReflectionPad2d(1), nn.Conv2d(16, 32, 3, stride=2),
                                  nn.InstanceNorm2d(32, affine=True), nn.ReLU())
        self.up = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), nn.ReflectionPad2d(1),
                                nn.Conv2d(32, 16, 3), nn.InstanceNorm2d(16, affine=True), nn.ReLU(),
                                nn.ReflectionPad2d(4), nn.Conv2d(16, 3, 9))

    def forward(self, x):
        return self.up(self.down(x))


def gpt_model():
    from metajit.models import gpt
    return gpt(block_size=64, vocab_size=512, n_layer=2, n_head=4, n_embd=128)


def case(name):
    mj.manual_seed(0)
    rng = np.random.default_rng(0)
    if name == "resnet18":
        from metajit.models import resnet18
        images = mj.array(rng.standard_normal((4, 3, 32, 32)).astype(np.float32))
        labels = mj.array(rng.integers(0, 10, 4))
        return resnet18(num_classes=10), lambda out: F.cross_entropy(out, labels), [images]
    if name == "mobilenet_v2":
        from metajit.models import mobilenet_v2
        images = mj.array(rng.standard_normal((4, 3, 64, 64)).astype(np.float32))
        labels = mj.array(rng.integers(0, 10, 4))
        return mobilenet_v2(num_classes=10), lambda out: F.cross_entropy(out, labels), [images]
    if name == "gpt":
        tokens = mj.array(rng.integers(0, 512, (8, 64)))
        targets = mj.array(rng.integers(0, 512, (8, 64)))
        return gpt_model(), lambda out: out[1], [tokens, targets]
    if name == "style_transfer":
        images = mj.array(rng.standard_normal((4, 3, 128, 128)).astype(np.float32))
        return StyleTransfer(), lambda out: (out - images).square().mean(), [images]
    raise ValueError(name)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "gpt", "style_transfer"])
def test_no_large_contraction_stays_a_generated_loop_nest(name):
    model, loss_of, inputs = case(name)
    kernels = training_step_kernels(model, loss_of, inputs)
    assert any(kernel.kind.startswith("library") for kernel in kernels)
    large = [(work, kernel.ops[:3]) for work, kernel in generated_contractions(kernels) if work > LIMIT]
    assert not large, f"{name}: generated loop nests over 10^8 multiply-adds: {large}"


def test_the_walk_finds_a_contraction_left_to_a_generated_kernel():
    """The check above can fail: with library lowering off the same convolution is a generated loop nest."""
    model, loss_of, inputs = case("style_transfer")
    mj.flags.lowering = False
    try:
        kernels = training_step_kernels(model, loss_of, inputs)
    finally:
        mj.flags.lowering = True
    assert max(work for work, _ in generated_contractions(kernels)) > LIMIT


def test_a_slice_read_at_every_step_shares_one_call():
    """An LSTMCell stepped over x[i] reads a different slice of x at each step. Calls were cached by the
    contraction's description, which fixed the slice's offset: one oneDNN primitive made per step (0.7 ms each,
    as a 1x1 convolution), and an ever-growing cache. The offset now goes into the buffer's address."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    steps = 12
    data = rng.standard_normal((steps, 4, 16)).astype(np.float32)
    ours, theirs = mj.nn.LSTMCell(16, 32), torch.nn.LSTMCell(16, 32)
    ours.load_state_dict({key: value.detach().numpy() for key, value in theirs.state_dict().items()})

    def run(length):
        x = mj.array(data)
        h, c = mj.zeros(4, 32), mj.zeros(4, 32)
        for step in range(length):
            h, c = ours(x[step], (h, c))
        return h

    run(2).numpy()  # the calls of one step, made
    mj.reset_stats()
    result = run(steps).numpy()
    assert mj.stats()["library_calls"] >= steps  # the products did go to oneDNN
    assert mj.stats()["library_calls_made"] <= 2, mj.stats()["library_calls_made"]
    h, c = torch.zeros(4, 32), torch.zeros(4, 32)
    for step in range(steps):
        h, c = theirs(torch.from_numpy(data[step]), (h, c))
    np.testing.assert_allclose(result, h.detach().numpy(), rtol=1e-4, atol=1e-5)

"""Unified memory (issue 45 part 3), in the CUDA emulator so it runs without a GPU: with a device memory limit,
the values used least recently move to host memory and come back before their next use. Training under a limit
must give the same numbers as without one, bit for bit (the same kernels run on the same values; only where the
values wait between kernels changes); past what one kernel needs, the MemoryError names the op and the line."""
import numpy as np
import pytest

import metajit as mj
import metajit.nn as nn


@pytest.fixture(autouse=True)
def emulated_device():
    previous = mj.flags.use_cuda
    mj.flags.use_cuda = "emulator"
    yield
    mj.flags.device_memory_limit = 0
    mj.flags.use_cuda = previous


class ManyParameters(nn.Module):
    """Parameters of different sizes (so no two share an update kernel and each kernel needs a small part of the
    whole), each scaling its own input through tanh. Elementwise on purpose: the emulator runs a tiled matrix
    product's thread barriers as context switches, a second per small product."""

    def __init__(self, count, width):
        super().__init__()
        self.scales = nn.ParameterList([nn.Parameter(mj.randn(width + 8 * index, 64)) for index in range(count)])

    def forward(self, inputs):
        return sum((scale * data).tanh().square().mean() for scale, data in zip(self.scales, inputs))


def train(limit, count=6, width=64, steps=3):
    """Losses, final weights, the device peak and the evictions of a few SGD steps."""
    mj.flags.device_memory_limit = limit
    mj.manual_seed(0)
    model = ManyParameters(count, width)
    optimizer = mj.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(0)
    inputs = [mj.array(rng.standard_normal((width + 8 * index, 64)).astype(np.float32)) for index in range(count)]
    mj.gc()
    mj.reset_stats()
    losses = []
    for _ in range(steps):
        loss = model(inputs)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    statistics = mj.stats()
    weights = [parameter.numpy() for parameter in model.parameters()]
    return losses, weights, int(statistics["device_bytes_allocated_peak"]), int(statistics["device_evictions"])


def test_a_model_twice_the_limit_trains_to_the_same_numbers():
    losses, weights, peak, evictions = train(0)
    assert evictions == 0
    limit = peak // 2
    limited_losses, limited_weights, limited_peak, limited_evictions = train(limit)
    assert limited_peak <= limit < peak
    assert limited_evictions > 0
    assert limited_losses == losses
    for expected, actual in zip(weights, limited_weights):
        np.testing.assert_array_equal(actual, expected)


def test_a_kernel_that_alone_needs_more_than_the_limit_names_itself():
    with pytest.raises(MemoryError) as raised:
        train(64 << 10, count=1, width=256)  # one parameter is 64 KiB
    message = str(raised.value)
    assert "under the limit of 65536 bytes (METAJIT_DEVICE_MEMORY_LIMIT)" in message
    assert "test_unified_memory.py" in message and "float32" in message


def test_the_limit_is_a_flag_and_checked():
    mj.flags.device_memory_limit = 123456
    assert mj.flags.device_memory_limit == 123456
    with pytest.raises(ValueError, match="device_memory_limit must be 0"):
        mj.flags.device_memory_limit = -1
    assert "METAJIT_DEVICE_MEMORY_LIMIT" in {row["name"] for row in mj.flags.table()}

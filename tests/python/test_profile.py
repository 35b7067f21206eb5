"""mj.profile(): one entry per distinct kernel or library call, named by what it computes."""
import numpy as np
import torch

import metajit as mj
import metajit.nn.functional as F
from conftest import cpu_backend

pytestmark = cpu_backend


def test_library_calls_of_different_shapes_are_separate_entries():
    """A library call alone has no kernel key, and a convolution's description names only its primitive; two
    convolutions of different shapes are two entries, each named by its own output, not one entry of two launches
    under the first one's name."""
    rng = np.random.default_rng(0)
    images = mj.array(rng.standard_normal((2, 8, 32, 32)).astype(np.float32))
    first_weight = mj.array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32))
    second_weight = mj.array(rng.standard_normal((24, 16, 3, 3)).astype(np.float32))
    images.sync(), first_weight.sync(), second_weight.sync()
    with mj.profile() as report:
        first = F.conv2d(images, first_weight, padding=1)
        second = F.conv2d(first, second_weight, stride=2)
        second.sync()
    convolutions = [entry for entry in report.entries if entry["name"].startswith("onednn convolution")]
    assert len(convolutions) == 2, [entry["name"] for entry in report.entries]
    assert sorted(entry["launches"] for entry in convolutions) == [1, 1]
    assert any("[2, 16, 32, 32]" in entry["name"] for entry in convolutions)
    assert any("[2, 24, 15, 15]" in entry["name"] for entry in convolutions)
    expected = torch.nn.functional.conv2d(
        torch.nn.functional.conv2d(torch.tensor(images.numpy()), torch.tensor(first_weight.numpy()),
                                   padding=1), torch.tensor(second_weight.numpy()), stride=2)
    np.testing.assert_allclose(second.numpy(), expected.numpy(), rtol=1e-4, atol=1e-3)


def test_one_library_call_launched_again_is_one_entry():
    rng = np.random.default_rng(1)
    a = mj.array(rng.standard_normal((64, 96)).astype(np.float32))
    b = mj.array(rng.standard_normal((96, 128)).astype(np.float32))
    a.sync(), b.sync()
    with mj.profile() as report:
        for _ in range(3):
            (a @ b).sync()  # the same line: the same call three times
    products = [entry for entry in report.entries if entry["name"].startswith("onednn matmul")]
    assert [entry["launches"] for entry in products] == [3]

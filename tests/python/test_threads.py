"""Concurrency: Python threads recording and computing different graphs at the same time (syncs release the GIL),
with kernels compiled from an empty cache so compilation itself runs concurrently; and the runtime thread count
setting (mj.flags.num_threads), which must not change results."""
import threading

import numpy as np
import pytest

import metajit as mj
from conftest import CUDA_EXECUTION, assert_close, cpu_backend


@pytest.fixture
def empty_cache(tmp_path):
    """A fresh cache folder and an empty in-memory cache, so every kernel below is really compiled."""
    previous = mj.flags.cache_dir
    mj.flags.cache_dir = tmp_path
    mj._core.clear_memory_cache()
    yield tmp_path
    mj.flags.cache_dir = previous


def elementwise_graph(data, step):
    x = mj.array(data)
    return ((x * (step + 1.5)).exp() - x).relu() + step, \
        np.maximum(np.exp(data.astype(np.float64) * (step + 1.5)) - data, 0) + step


def reduction_graph(data, step):
    x = mj.array(data)
    shifted = (x - x.amax(-1, keepdim=True)).exp()
    reference = np.exp(data.astype(np.float64) - data.max(-1, keepdims=True))
    return (shifted / shifted.sum(-1, keepdim=True)) * (step + 1), \
        reference / reference.sum(-1, keepdims=True) * (step + 1)


def reindex_graph(data, step):
    x = mj.array(data)
    rows, columns = data.shape
    padded = mj.reindex(x, [rows + 2, columns + 2], ["i0-1", "i1-1"], overflow_value=float(step))
    return padded.sum(0) + x.sum(), \
        np.pad(data.astype(np.float64), 1, constant_values=step).sum(0) + data.astype(np.float64).sum()


def run_in_threads(workers):
    """Starts every worker at the same moment; returns their results, re-raising the first failure."""
    barrier = threading.Barrier(len(workers))
    results, failures = [None] * len(workers), []

    def run(index):
        try:
            barrier.wait()
            results[index] = workers[index]()
        except BaseException as error:  # noqa: BLE001  reported in the main thread
            failures.append(error)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(workers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    if failures:
        raise failures[0]
    return results


def test_two_threads_computing_different_graphs_at_once(empty_cache):
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal((40 + 7 * index, 33)).astype(np.float32) for index in range(2)]

    def worker(builders, data):
        def work():
            outputs = []
            for step in range(4):
                for build in builders:
                    value, expected = build(data, step)
                    outputs.append((value.numpy().copy(), expected))
            return outputs
        return work

    mj.reset_stats()
    results = run_in_threads([worker([elementwise_graph, reindex_graph], inputs[0]),
                              worker([reduction_graph], inputs[1])])
    for outputs in results:
        assert len(outputs) in (4, 8)
        for actual, expected in outputs:
            np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
    assert mj.stats()["kernels_compiled"] > 0


def test_many_threads_share_one_computed_input(empty_cache):
    rng = np.random.default_rng(9)
    data = rng.standard_normal((64, 48)).astype(np.float32)
    shared = mj.array(data)

    def worker(index):
        def work():
            values = []
            for step in range(3):
                scale = float(index * 10 + step)
                values.append(((shared * scale).sin().sum(1) + scale).numpy().copy())
            return values
        return work

    results = run_in_threads([worker(index) for index in range(4)])
    for index, values in enumerate(results):
        for step, actual in enumerate(values):
            scale = index * 10 + step
            expected = np.sin(data.astype(np.float64) * np.float32(scale)).sum(1) + scale
            np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4)


def convolution_reference(images, kernel):
    """3x3 convolution with padding 1, in float64."""
    padded = np.pad(images.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    height, width = images.shape[2:]
    windows = np.stack([padded[:, :, row:row + height, column:column + width]
                        for row in range(3) for column in range(3)], axis=2)  # [n, c, 9, h, w]
    return np.einsum("ncthw,oct->nohw", windows, kernel.astype(np.float64).reshape(kernel.shape[0], kernel.shape[1], 9))


@cpu_backend  # oneDNN's copies; on a GPU convolutions run in cuDNN
def test_threads_replacing_their_convolution_weights_never_read_a_stale_copy():
    """oneDNN copies of convolution weights outlive a sync while the weights live (inference), and go when the
    weights' buffer is freed, on whichever thread drops it. Three threads each make new weights of one size (the
    allocator hands freed blocks back, so new weights land where old ones were) and run forward passes: every
    result must match the weights of its own pass."""
    def worker(seed):
        def work():
            rng = np.random.default_rng(seed)
            images = rng.standard_normal((2, 32, 8, 8)).astype(np.float32)
            checked = 0
            for _ in range(6):
                kernel_data = rng.standard_normal((32, 32, 3, 3)).astype(np.float32)
                kernel = mj.array(kernel_data)
                expected = convolution_reference(images, kernel_data)
                for _ in range(2):
                    with mj.no_grad():
                        result = mj.nn.functional.conv2d(mj.array(images), kernel, padding=1).numpy()
                    np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-3)
                    checked += 1
                del kernel
            return checked
        return work

    mj.reset_stats()
    assert run_in_threads([worker(seed) for seed in (11, 12, 13)]) == [12, 12, 12]
    assert mj.stats()["library_reorders_reused"] > 0  # the copies were kept and read again


def test_thread_count_setting_does_not_change_results(rng):
    data = rng.standard_normal((300, 200)).astype(np.float32)
    image_data = rng.standard_normal((4, 8, 10, 10)).astype(np.float32)
    kernel_data = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    images, kernel = mj.array(image_data), mj.array(kernel_data)
    expected_convolution = convolution_reference(image_data, kernel_data)
    previous = mj.flags.num_threads
    try:
        for count in (1, 2, 3):
            mj.flags.num_threads = count
            assert mj.flags.num_threads == count
            x = mj.array(data)
            assert_close((x * 2).exp().sum(1), np.exp(data.astype(np.float64) * 2).sum(1), rtol=1e-5)
            assert_close(x.T + 1, data.T + 1, rtol=1e-6)
            # oneDNN calls run on the same team at the same count
            assert_close(x @ x.T, data.astype(np.float64) @ data.T.astype(np.float64), rtol=1e-4, atol=1e-3)
            assert_close(mj.nn.functional.conv2d(images, kernel, padding=1), expected_convolution, rtol=1e-4,
                         atol=1e-4)
    finally:
        mj.flags.num_threads = previous


@pytest.mark.skipif(CUDA_EXECUTION, reason="a forked child cannot use its parent's CUDA context (as in PyTorch)")
def test_forked_child_runs_kernels_on_one_thread():
    """libgomp's worker threads do not exist in a child made by fork(): a parallel region there used to wait for
    them forever. The child now runs kernels and oneDNN calls on its own thread, and refuses more threads."""
    import os
    import time
    previous = mj.flags.num_threads
    mj.flags.num_threads = 2
    rng = np.random.default_rng(11)
    data = rng.standard_normal((512, 256)).astype(np.float32)
    left = rng.standard_normal((96, 80)).astype(np.float32)
    right = rng.standard_normal((80, 72)).astype(np.float32)
    try:
        x = mj.array(data)
        assert_close((x * 2.0 + 1.0).exp().numpy(), np.exp(data.astype(np.float64) * 2 + 1), rtol=1e-5)
        assert_close((mj.array(left) @ mj.array(right)).numpy(), left.astype(np.float64) @ right, rtol=1e-4, atol=1e-4)
        child = os.fork()
        if child == 0:  # the child must never return into pytest
            status = 1
            try:
                threads_after_fork = mj.flags.num_threads
                mj.flags.num_threads = 2
                doubled = (x * 3.0 - 0.5).sigmoid().numpy()
                product = (mj.array(left) @ mj.array(right) + 1.0).numpy()
                expected = 1 / (1 + np.exp(-(data.astype(np.float64) * 3 - 0.5)))
                good = (threads_after_fork == 1 and mj.flags.num_threads == 1
                        and np.allclose(doubled, expected, rtol=1e-5, atol=1e-6)
                        and np.allclose(product, left.astype(np.float64) @ right + 1, rtol=1e-4, atol=1e-4))
                status = 0 if good else 3
            finally:
                os._exit(status)
        deadline = time.monotonic() + 120
        while True:
            finished, status = os.waitpid(child, os.WNOHANG)
            if finished:
                break
            if time.monotonic() > deadline:
                os.kill(child, 9)
                os.waitpid(child, 0)
                pytest.fail("the forked child hung running kernels")
            time.sleep(0.05)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, \
            f"forked child failed (status {status}: 3 means wrong results or thread count)"
        assert mj.flags.num_threads == 2  # the parent keeps its threads
    finally:
        mj.flags.num_threads = previous

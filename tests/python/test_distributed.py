"""metajit.distributed (issue 44): collectives over an `mpirun` job on Open MPI, checked against numpy on 2 and 3
ranks for every dtype, and the failure rules: a collective called differently raises on every rank, an uncaught
error on one rank stops the job, and a rank that never arrives stops it after METAJIT_DISTRIBUTED_TIMEOUT. In a
plain process the world is one rank and every collective returns its input."""
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import metajit as mj
import metajit.distributed as dist

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed_programs")
MPIRUN = shutil.which("mpirun")
needs_mpirun = pytest.mark.skipif(MPIRUN is None, reason="mpirun is missing (make test installs Debian's openmpi-bin)")


def mpirun(ranks, program, *arguments, timeout=300, **environment):
    """Runs `program` on `ranks` ranks; returns (exit status, output, seconds)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **environment)
    # Open MPI refuses to start as root unless told twice; CI runs as root (docs/distributed.md).
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    start = time.perf_counter()
    result = subprocess.run([MPIRUN, "-np", str(ranks), sys.executable, os.path.join(PROGRAMS, program),
                             *arguments], capture_output=True, text=True, timeout=timeout, env=env)
    return result.returncode, result.stdout + result.stderr, time.perf_counter() - start


def test_a_plain_process_is_a_world_of_one_rank():
    assert (dist.get_rank(), dist.get_world_size(), dist.get_local_rank()) == (0, 1, 0)
    assert dist.is_available() and dist.is_initialized()
    x = mj.array([1.0, 2.0])
    assert dist.all_reduce(x, op=dist.ReduceOp.AVG) is x
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    outputs = [mj.zeros(2)]
    dist.all_gather(outputs, x)
    np.testing.assert_array_equal(outputs[0].numpy(), [1.0, 2.0])
    out = mj.zeros(2)
    dist.reduce_scatter_tensor(out, mj.array([[3.0, 4.0]]))
    np.testing.assert_array_equal(out.numpy(), [3.0, 4.0])
    dist.barrier()
    gathered = dist.nn.functional.all_gather(x)
    assert len(gathered) == 1
    np.testing.assert_array_equal(gathered[0].numpy(), [1.0, 2.0])


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="unknown op 'median'"):
        dist.all_reduce(mj.ones(2), op="median")
    with pytest.raises(TypeError, match="AVG needs a floating-point tensor"):
        dist.all_reduce(mj.ones(2, dtype="int32"), op=dist.ReduceOp.AVG)
    with pytest.raises(ValueError, match="tensor_list has 2 entries for a world of 1 ranks"):
        dist.all_gather([mj.zeros(2), mj.zeros(2)], mj.ones(2))
    with pytest.raises(TypeError, match="expected a metajit Var"):
        dist.all_reduce(np.ones(2))
    with pytest.raises(ValueError, match="source rank 3 is not in a world of 1 ranks"):
        dist.broadcast(mj.ones(2), src=3)
    with pytest.raises(ValueError, match="world_size=4, but mpirun started 1 ranks"):
        dist.init_process_group("mpi", world_size=4)


@needs_mpirun
@pytest.mark.parametrize("ranks", [2, 3])
def test_every_collective_matches_numpy(ranks):
    status, output, _ = mpirun(ranks, "collectives_against_numpy.py")
    assert status == 0, output[-3000:]
    for rank in range(ranks):
        assert f"rank {rank}: " in output and "checks passed" in output, output[-3000:]


@needs_mpirun
def test_a_collective_called_differently_raises_on_every_rank():
    status, output, seconds = mpirun(2, "failures.py", "shape")
    assert status != 0
    for rank in range(2):
        assert f"rank {rank} caught: metajit.distributed: the ranks called different collectives" in output, output
    assert "rank 0: all_reduce float32 [4] sum at failures.py:" in output
    assert "rank 1: all_reduce float32 [5] sum at failures.py:" in output


@needs_mpirun
def test_an_uncaught_error_on_one_rank_stops_every_rank():
    status, output, seconds = mpirun(2, "failures.py", "raise", METAJIT_DISTRIBUTED_TIMEOUT="100")
    assert status != 0
    assert "ValueError: rank one fails on purpose" in output
    assert "rank 1 stopped with an uncaught ValueError; stopping every rank of the job" in output
    assert seconds < 60  # rank 0 waits in all_reduce and is stopped, not left to its 100 s timeout


@needs_mpirun
def test_a_rank_that_never_arrives_stops_the_job_after_the_timeout():
    status, output, seconds = mpirun(2, "failures.py", "skip", METAJIT_DISTRIBUTED_TIMEOUT="2")
    assert status != 0
    assert ("rank 0 waited 2 s for the other ranks to reach all_reduce float32 [4] sum at failures.py:" in output), \
        output
    assert seconds < 60  # rank 1 sleeps 120 s; the abort ends it


@needs_mpirun
@pytest.mark.parametrize("mode", ["ddp", "optimizer"])
def test_two_ranks_with_half_the_batch_train_as_one_process_with_all_of_it(mode, tmp_path):
    """DistributedDataParallel (or the optimizer's own averaging under mpirun) on 2 ranks, each with half of a
    24-example batch and different starting weights, ends 6 SGD steps where one process with the whole batch does
    (float32 sums in another order: 1e-6)."""
    one, two = tmp_path / "one.npz", tmp_path / "two.npz"
    program = os.path.join(PROGRAMS, "data_parallel_training.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, program, mode, str(one)], check=True, env=env, timeout=300)
    status, output, _ = mpirun(2, "data_parallel_training.py", mode, str(two))
    assert status == 0, output[-3000:]
    expected, actual = np.load(one), np.load(two)
    assert len(expected.files) == 4
    for name in expected.files:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-6, atol=1e-6, err_msg=name)


def test_data_parallel_in_one_process_only_wraps():
    model = mj.nn.Linear(3, 2)
    wrapped = mj.nn.parallel.DistributedDataParallel(model)
    assert wrapped.module is model
    x = mj.array(np.ones((4, 3), np.float32))
    before = model.weight.numpy().copy()
    loss = wrapped(x).sum()
    loss.backward()
    np.testing.assert_allclose(model.weight.grad.numpy(), np.full((2, 3), 4.0), rtol=1e-6)
    np.testing.assert_array_equal(model.weight.numpy(), before)
    assert set(wrapped.state_dict()) == {"module.weight", "module.bias"}
    with wrapped.no_sync():
        wrapped(x).sum().backward()
    np.testing.assert_allclose(model.weight.grad.numpy(), np.full((2, 3), 8.0), rtol=1e-6)


@pytest.mark.parametrize("count,replicas,drop_last", [(10, 3, False), (10, 3, True), (4, 4, False), (2, 3, False),
                                                      (12, 4, True)])
def test_distributed_sampler_shards_as_pytorch_does(count, replicas, drop_last):
    """Without shuffle the indices are PyTorch's exactly (padding by repeating the first, or cutting)."""
    import torch.utils.data
    for rank in range(replicas):
        ours = mj.data.DistributedSampler(range(count), num_replicas=replicas, rank=rank, shuffle=False,
                                          drop_last=drop_last)
        theirs = torch.utils.data.DistributedSampler(range(count), num_replicas=replicas, rank=rank, shuffle=False,
                                                     drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_shuffled_shards_partition_each_epoch_and_change_with_it():
    def shares(epoch):
        samplers = [mj.data.DistributedSampler(range(12), num_replicas=3, rank=rank, seed=7) for rank in range(3)]
        for sampler in samplers:
            sampler.set_epoch(epoch)
        return [list(sampler) for sampler in samplers]
    first, again, second = shares(0), shares(0), shares(1)
    assert sorted(sum(first, [])) == list(range(12)) and sorted(sum(second, [])) == list(range(12))
    assert first == again and first != second
    with pytest.raises(ValueError, match=r"Invalid rank 3, rank should be in the interval \[0, 2\]"):
        mj.data.DistributedSampler(range(12), num_replicas=3, rank=3)
    from metajit.utils.data.distributed import DistributedSampler
    assert DistributedSampler is mj.data.DistributedSampler


@needs_mpirun
def test_a_data_loader_under_mpirun_loads_each_rank_its_share():
    status, output, _ = mpirun(2, "sharded_loading.py")
    assert status == 0, output[-3000:]
    seen = {f"rank {rank} epoch {epoch}": [int(value) for value in values.split()]  # progress bars interleave
            for rank, epoch, values in re.findall(r"rank (\d) epoch (\d): ([0-9 ]+)", output)}
    for epoch in range(2):
        shares = [seen[f"rank {rank} epoch {epoch}"] for rank in range(2)]
        assert len(shares[0]) == len(shares[1]) == 5
        assert sorted(shares[0] + shares[1]) == list(range(10))
    assert seen["rank 0 epoch 0"] != seen["rank 0 epoch 1"]  # the epoch advances the shuffle
    assert output.count("loading: 100%") == 1  # one progress bar, rank 0's


@needs_mpirun
def test_sync_batch_norm_on_two_ranks_is_batch_norm_over_the_whole_batch(tmp_path):
    """Output, input gradient, running statistics (each rank's equal to the whole batch's) and the weight and bias
    gradients summed over the ranks, against the same program alone with all 8 rows (BatchNorm there)."""
    program = os.path.join(PROGRAMS, "sync_batch_norm.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, program, str(tmp_path / "one")], check=True, env=env, timeout=300)
    status, output, _ = mpirun(2, "sync_batch_norm.py", str(tmp_path / "two"))
    assert status == 0, output[-3000:]
    whole = np.load(tmp_path / "one.0.npz")
    parts = [np.load(tmp_path / f"two.{rank}.npz") for rank in range(2)]
    for part in parts:
        for name in ("output", "input_grad"):
            np.testing.assert_allclose(part[name], whole[name][part["rows"]], rtol=1e-4, atol=1e-5, err_msg=name)
        for name in ("running_mean", "running_var"):
            np.testing.assert_allclose(part[name], whole[name], rtol=1e-5, atol=1e-6, err_msg=name)
    for name in ("weight_grad", "bias_grad"):
        np.testing.assert_allclose(parts[0][name] + parts[1][name], whole[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_convert_sync_batchnorm_keeps_the_weights():
    model = mj.nn.Sequential(mj.nn.Conv2d(1, 2, 3), mj.nn.BatchNorm2d(2), mj.nn.ReLU())
    with mj.no_grad():
        model[1].weight.copy_(mj.array(np.array([2.0, 3.0], np.float32)))
    converted = mj.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert isinstance(converted[1], mj.nn.SyncBatchNorm)
    np.testing.assert_array_equal(converted[1].weight.numpy(), [2.0, 3.0])
    x = mj.array(np.random.default_rng(0).standard_normal((2, 1, 5, 5)).astype(np.float32))
    assert tuple(converted(x).shape) == (2, 2, 3, 3)


@needs_mpirun
def test_the_distributed_example_reaches_one_process_accuracy_on_two_ranks():
    """examples/distributed_train.py for 4 epochs: 2 ranks with half of each global batch print the same test
    accuracy as one process (the same examples make each global batch)."""
    example = os.path.join(os.path.dirname(os.path.dirname(PROGRAMS)), os.pardir, "examples", "distributed_train.py")
    example = os.path.normpath(example)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    alone = subprocess.run([sys.executable, example, "--epochs", "4"], capture_output=True, text=True, env=env,
                           timeout=600)
    assert alone.returncode == 0, alone.stderr[-3000:]
    status, output, _ = mpirun(2, example, "--epochs", "4")
    assert status == 0, output[-3000:]
    accuracy_alone = alone.stdout.split("test accuracy ")[1].split("%")[0]
    accuracy_two = output.split("test accuracy ")[1].split("%")[0]
    assert accuracy_two == accuracy_alone and float(accuracy_alone) > 50
    assert "on 2 rank(s)" in output and output.count("test accuracy") == 1  # rank 0 alone prints


@needs_mpirun
def test_a_killed_rank_ends_the_job():
    status, output, seconds = mpirun(2, "failures.py", "kill", METAJIT_DISTRIBUTED_TIMEOUT="100")
    assert status != 0
    assert "signal 9" in output or "Killed" in output, output[-3000:]
    assert seconds < 60  # mpirun ends rank 0, which waits in all_reduce, long before its 100 s timeout


def test_nccl_loads_without_a_gpu_or_says_what_to_install():
    """NCCL is loaded with dlopen from the nvidia-nccl-cu13 wheel; loading it and making a communicator id need no
    GPU. Where the wheel is not installed (CI), the reason names it."""
    status = dist.nccl_status()
    if "version" in status:
        major, minor, _ = (int(part) for part in status["version"].split("."))
        assert (major, minor) >= (2, 18) and status["path"].endswith("libnccl.so.2")
        unique_id = mj._core.nccl_unique_id()
        assert len(unique_id) == 128 and any(unique_id)
        assert dist.is_nccl_available()
    else:
        assert "pip install nvidia-nccl-cu13" in status["reason"] and "METAJIT_NCCL" in status["reason"]
        assert not dist.is_nccl_available()


@needs_mpirun
def test_collectives_are_plan_entries_run_in_recording_order():
    status, output, _ = mpirun(2, "plan_entries.py", METAJIT_DISTRIBUTED_TIMEOUT="30")
    assert status == 0, output[-3000:]
    for rank in range(2):
        assert f"rank {rank}: plan entries ok" in output, output[-3000:]


def test_in_a_world_of_one_rank_collectives_add_nothing_to_the_plan():
    x = mj.array(np.arange(4, dtype=np.float32))
    y = x * 2
    dist.all_reduce(y)
    assert [kernel.kind for kernel in mj.inspect(y + 1)] == ["generated"]
    np.testing.assert_allclose((y + 1).numpy(), np.arange(4) * 2 + 1)

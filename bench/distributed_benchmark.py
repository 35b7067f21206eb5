"""metajit.distributed against raw MPI on the same machine, in one run, and data-parallel step times.

    python bench/distributed_benchmark.py [--ranks 2] [--output bench/DISTRIBUTED.md]

- All-reduce (sum, float32) of 4 KB to 256 MB on N ranks: metajit's dist.all_reduce on a Var and reading the
  result (a plan whose one entry is the collective: Open MPI reduces the Var's buffer into the result's) against
  MPI_Allreduce on plain buffers, in place and out of place (bench/mpi_allreduce_reference.c, built with mpicc),
  all timed as the median of repeats between barriers. Bandwidth is the message size over the time; the target is
  within 10% of raw MPI from 1 MB.
- The training step of the digits CNN (examples/distributed_train.py's model, global batch 64) on 1 rank and on N
  ranks with DistributedDataParallel.
Needs Open MPI (make test installs it). Runs as root with OMPI_ALLOW_RUN_AS_ROOT set by this script.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20]


def median_time(function, repeats, barrier):
    for _ in range(2):
        function()
    times = []
    for _ in range(repeats):
        barrier()
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def repeats_for(size):
    return 5 if size >= 64 << 20 else 10 if size >= 1 << 20 else 50


def worker_all_reduce(result_path):
    import metajit as mj
    import metajit.distributed as dist
    rows = {}
    for size in SIZES:
        tensor = mj.array(np.ones(size // 4, np.float32))
        tensor.numpy()
        rows[size] = median_time(lambda: dist.all_reduce(tensor).numpy(), repeats_for(size), dist.barrier)
    if dist.get_rank() == 0:
        with open(result_path, "w") as stream:
            json.dump(rows, stream)


def training_step(model, optimizer, x, y):
    """One step of cross-entropy training as a function; returns the loss as a Python float."""
    import metajit.nn.functional as F

    def step():
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()
    return step


def worker_training_step(result_path, steps=30):
    import metajit as mj
    import metajit.distributed as dist
    from metajit.models import SmallCNN
    rank, ranks = dist.get_rank(), dist.get_world_size()
    rng = np.random.default_rng(0)
    images = rng.standard_normal((64, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 10, 64)
    mj.seed(0)
    model = SmallCNN(in_channels=1, num_classes=10, input_size=8, channels=(16, 32), hidden=64)
    if ranks > 1:
        model = mj.nn.parallel.DistributedDataParallel(model)
    optimizer = mj.optim.Adam(model.parameters(), lr=1e-3)
    x, y = mj.array(images[rank::ranks]), mj.array(labels[rank::ranks])

    step = training_step(model, optimizer, x, y)
    seconds = median_time(step, steps, dist.barrier)
    if rank == 0:
        with open(result_path, "w") as stream:
            json.dump({"step_seconds": seconds}, stream)


def worker_overlap(result_path, steps=8):
    """ResNet-18 (CIFAR stem, batch 16 per rank) with DistributedDataParallel: the step time, and the time its
    all-reduces take when each is timed alone (a profile runs every plan entry to completion)."""
    import metajit as mj
    import metajit.distributed as dist
    from metajit.models import resnet18
    rank = dist.get_rank()
    rng = np.random.default_rng(rank)
    x = mj.array(rng.standard_normal((16, 3, 32, 32)).astype(np.float32))
    y = mj.array(rng.integers(0, 10, 16))
    mj.seed(0)
    model = mj.nn.parallel.DistributedDataParallel(resnet18(num_classes=10), bucket_cap_mb=4)
    optimizer = mj.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    step = training_step(model, optimizer, x, y)
    seconds = median_time(step, steps, dist.barrier)
    with mj.profile() as report:
        step()
    collective_seconds = sum(entry["seconds"] for entry in report.entries if entry["name"].startswith("all_reduce"))
    if rank == 0:
        with open(result_path, "w") as stream:
            json.dump({"step_seconds": seconds, "all_reduce_seconds": collective_seconds}, stream)


def mpirun(ranks, command, **environment):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=os.path.join(ROOT, "python"), **environment)
    return subprocess.run(["mpirun", "--oversubscribe", "-np", str(ranks)] + command, check=True, env=env,
                          capture_output=True, text=True).stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--output", default=os.path.join(HERE, "DISTRIBUTED.md"))
    parser.add_argument("--worker", choices=["all_reduce", "training_step", "overlap"], help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.worker == "all_reduce":
        return worker_all_reduce(arguments.result)
    if arguments.worker == "training_step":
        return worker_training_step(arguments.result)
    if arguments.worker == "overlap":
        return worker_overlap(arguments.result)
    if not shutil.which("mpirun") or not shutil.which("mpicc"):
        print("distributed_benchmark: mpirun or mpicc is missing (make deps installs Open MPI); nothing measured")
        return 0
    scratch = tempfile.mkdtemp(prefix="metajit-distributed-bench-")
    reference = os.path.join(scratch, "mpi_allreduce_reference")
    subprocess.run(["mpicc", "-O2", "-o", reference, os.path.join(HERE, "mpi_allreduce_reference.c")], check=True)
    raw = {}
    for line in mpirun(arguments.ranks, [reference] + [str(size) for size in SIZES]).split("\n"):
        if line.strip():
            size, in_place, out_of_place = line.split()
            raw[int(size)] = (float(in_place), float(out_of_place))
    this_script = os.path.abspath(__file__)
    result = os.path.join(scratch, "all_reduce.json")
    mpirun(arguments.ranks, [sys.executable, this_script, "--worker", "all_reduce", "--result", result])
    ours = {int(size): seconds for size, seconds in json.load(open(result)).items()}
    steps = {}
    for ranks in (1, arguments.ranks):
        result = os.path.join(scratch, f"step_{ranks}.json")
        mpirun(ranks, [sys.executable, this_script, "--worker", "training_step", "--result", result])
        steps[ranks] = json.load(open(result))["step_seconds"]
    lines = [f"# Distributed benchmark ({arguments.ranks} ranks on one machine)", "",
             f"`python bench/distributed_benchmark.py --ranks {arguments.ranks}` on {platform.node()} "
             f"({os.cpu_count()} CPUs), Open MPI's shared-memory transport. Medians of repeats between barriers.", "",
             "Raw MPI is timed in place and out of place; the ratio is against the faster of the two.", "",
             "| message | raw in place ms | raw out of place ms | raw GB/s (faster) | metajit dist.all_reduce ms "
             "| metajit GB/s | metajit / raw |",
             "|---|---|---|---|---|---|---|"]
    for size in SIZES:
        label = f"{size >> 20} MB" if size >= 1 << 20 else f"{size >> 10} KB"
        in_place, out_of_place = raw[size]
        best = min(in_place, out_of_place)
        lines.append(f"| {label} | {in_place * 1e3:.3f} | {out_of_place * 1e3:.3f} | {size / best / 1e9:.2f} | "
                     f"{ours[size] * 1e3:.3f} | {size / ours[size] / 1e9:.2f} | {ours[size] / best:.2f}x |")
    lines += ["", "Digits CNN training step (global batch 64, Adam), median of 30:", "",
              "| ranks | ms per step |", "|---|---|"]
    for ranks, seconds in steps.items():
        lines.append(f"| {ranks} | {seconds * 1e3:.2f} |")
    overlap = {}
    for setting in ("1", "0"):
        result = os.path.join(scratch, f"overlap_{setting}.json")
        mpirun(arguments.ranks, [sys.executable, this_script, "--worker", "overlap", "--result", result],
               METAJIT_OVERLAP_COLLECTIVES=setting)
        overlap[setting] = json.load(open(result))
    with_overlap, without = overlap["1"]["step_seconds"], overlap["0"]["step_seconds"]
    communication = overlap["0"]["all_reduce_seconds"]
    hidden = (without - with_overlap) / communication if communication > 0 else 0.0
    lines += ["", f"ResNet-18 with DistributedDataParallel on {arguments.ranks} ranks (CIFAR stem, batch 16 per rank, "
              "SGD with momentum, 4 MB buckets), median of 8 steps:", "",
              "| collectives | ms per step | all-reduce ms per step, each timed alone |", "|---|---|---|",
              f"| overlapped with backward (the default) | {with_overlap * 1e3:.1f} | |",
              f"| run in place (METAJIT_OVERLAP_COLLECTIVES=0) | {without * 1e3:.1f} | {communication * 1e3:.1f} |",
              "", f"Communication hidden behind backward: {100 * hidden:.0f}% (the step time overlap saves, over "
              "the all-reduce time)."]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(arguments.output, "w") as stream:
        stream.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Trace benchmark: what `mj.trace` saves. The inference benchmark's models run three ways, taking turns run by run:
metajit as usual (recording the graph in Python and finding its plan by signature every run), the same function
under `mj.trace` (replaying the kept plan), and PyTorch eager; then a chain of small kernels shows the host time a
replay spends per kernel launch, and an SGD training step shows a traced step against an untraced one.

Outputs are checked against PyTorch's first. Before each model the run waits (at most --quiet-wait seconds) for
other processes to leave the CPUs idle. Writes bench/TRACE.md.

    python bench/trace_benchmark.py [--runs N] [--models lstm,resnet18,transformer] [--quiet-wait S]
"""
import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, os.pardir, "tests", "python"))  # torch_reference_resnet
from run_benchmarks import cpu_model, mj  # noqa: E402  (it finds metajit, also in a bare checkout)
from inference_benchmark import MODELS, build_models, inputs_for  # noqa: E402
from models_benchmark import wait_for_quiet_machine  # noqa: E402

CHAIN_KERNELS = 200  # kernels in the launch-overhead chain


def interleaved(functions, runs):
    """Median and best seconds of each function, the functions taking turns run by run."""
    times = {name: [] for name in functions}
    for _ in range(runs):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - start)
    return {name: (statistics.median(values), min(values)) for name, values in times.items()}


def model_rows(torch, names, runs, quiet_wait):
    rows = []
    for name in names:
        batches, shape, description = MODELS[name]
        batch = batches[0]
        ours, theirs = build_models(name, torch)
        rng = np.random.default_rng(batch)
        arrays = [inputs_for(name, batch, shape, rng) for _ in range(4)]

        def forward(x):
            with mj.no_grad():
                return ours(x)

        traced = mj.trace(forward)
        turn = {"index": 0}

        def next_array():
            turn["index"] += 1
            return arrays[turn["index"] % len(arrays)]

        def metajit_run():
            return forward(mj.array(next_array())).numpy()

        def traced_run():
            return traced(mj.array(next_array())).numpy()

        def torch_run():
            with torch.no_grad():
                return theirs(torch.from_numpy(next_array())).numpy()

        for array in arrays[:2]:  # the trace, then a replay, both against PyTorch
            expected = theirs(torch.from_numpy(array)).detach().numpy()
            np.testing.assert_allclose(traced(mj.array(array)).numpy(), expected, rtol=1e-3, atol=1e-3)
        for _ in range(3):
            metajit_run(), traced_run(), torch_run()
        mj.reset_stats()
        traced_run()
        launches = int(mj.stats()["kernels_launched"] + mj.stats()["library_calls"])
        wait_for_quiet_machine(quiet_wait)
        results = interleaved({"metajit": metajit_run, "traced": traced_run, "torch": torch_run}, runs)
        rows.append((description, batch, results, launches))
        print(f"{name}: " + ", ".join(f"{key} {value[0] * 1e3:.2f} ms" for key, value in results.items()),
              flush=True)
    return rows


def chain_row(runs, quiet_wait):
    """Host time per launch: CHAIN_KERNELS kernels on 16 elements, each a reduction the next one reads, so none
    fuse and each does next to no work."""
    def chain(x):
        for _ in range(CHAIN_KERNELS):
            x = x - x.sum() * 0.001
        return x

    traced = mj.trace(chain)
    value = mj.array(np.ones(16, np.float32))
    traced(value).numpy()
    mj.reset_stats()
    traced(value).numpy()
    launches = int(mj.stats()["kernels_launched"])
    wait_for_quiet_machine(quiet_wait)
    results = interleaved({"metajit": lambda: chain(value).numpy(), "traced": lambda: traced(value).numpy()}, runs)
    return launches, results


def training_row(torch, runs, quiet_wait):
    """An SGD step of a small MLP (64 -> 128 -> 10, batch 32): traced against untraced."""
    mj.seed(0)
    rng = np.random.default_rng(0)
    features = rng.standard_normal((32, 64)).astype(np.float32)
    labels = rng.integers(0, 10, 32)

    def make():
        model = mj.nn.Sequential(mj.nn.Linear(64, 128), mj.nn.ReLU(), mj.nn.Linear(128, 10))
        optimizer = mj.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def step(x, y):
            loss = mj.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss
        return step

    plain, traced = make(), mj.trace(make())
    x, y = mj.array(features), mj.array(labels)
    for _ in range(3):
        plain(x, y).item(), traced(x, y).item()
    wait_for_quiet_machine(quiet_wait)
    return interleaved({"metajit": lambda: plain(x, y).item(), "traced": lambda: traced(x, y).item()}, runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--models", default="lstm,resnet18,transformer")
    parser.add_argument("--quiet-wait", type=float, default=60.0)
    parser.add_argument("--output", default=os.path.join(HERE, "TRACE.md"))
    arguments = parser.parse_args()
    import torch
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    rows = model_rows(torch, arguments.models.split(","), arguments.runs, arguments.quiet_wait)
    launches, chain = chain_row(arguments.runs, arguments.quiet_wait)
    training = training_row(torch, arguments.runs, arguments.quiet_wait)
    lines = ["# Trace benchmark", "",
             f"Generated by `bench/trace_benchmark.py` on {cpu_model()}, {threads} cores, "
             f"{time.strftime('%Y-%m-%d %H:%M')}; PyTorch {torch.__version__} eager ({threads} threads), Python "
             f"{platform.python_version()}. The frameworks take turns run by run; medians (best in brackets) of "
             f"{arguments.runs} runs after 3 warm-up turns. A run takes a fresh numpy batch and ends with the result "
             "in numpy. \"metajit\" records the graph in Python and finds its plan by signature every run; "
             "\"traced\" is the same function under `mj.trace`, replaying its kept plan.", "",
             "## Inference", "",
             "| model | batch | metajit ms | traced ms | PyTorch eager ms | eager / traced | launches per run |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for description, batch, results, count in rows:
        ours, traced, theirs = (results[key] for key in ("metajit", "traced", "torch"))
        lines.append(f"| {description} | {batch} | {ours[0] * 1e3:.2f} ({ours[1] * 1e3:.2f}) | "
                     f"{traced[0] * 1e3:.2f} ({traced[1] * 1e3:.2f}) | {theirs[0] * 1e3:.2f} ({theirs[1] * 1e3:.2f}) | "
                     f"{theirs[0] / traced[0]:.2f}x | {count} |")
    ours, traced = chain["metajit"], chain["traced"]
    lines += ["", "## Host time per launch", "",
              f"A chain of {CHAIN_KERNELS} reductions on 16 elements ({launches} kernels launched per run, each "
              "doing next to no work): the run's time divided by its launches.", "",
              "| | ms per run | us per launch |", "|---|---:|---:|",
              f"| metajit (recording and signature every run) | {ours[0] * 1e3:.2f} | {ours[0] * 1e6 / launches:.1f} |",
              f"| traced (replay) | {traced[0] * 1e3:.2f} | {traced[0] * 1e6 / launches:.1f} |",
              "", "## Training step", "",
              "SGD with momentum on an MLP 64 -> 128 -> 10, batch 32, cross entropy; the step ends with `loss.item()`.",
              "", "| | ms per step |", "|---|---:|",
              f"| metajit | {training['metajit'][0] * 1e3:.2f} ({training['metajit'][1] * 1e3:.2f}) |",
              f"| traced | {training['traced'][0] * 1e3:.2f} ({training['traced'][1] * 1e3:.2f}) |", ""]
    with open(arguments.output, "w") as output:
        output.write("\n".join(lines))
    print(f"wrote {arguments.output}")


if __name__ == "__main__":
    main()

"""Inference benchmark: metajit against PyTorch eager, the forward pass of the training benchmark's models.

Each model (bench/training_benchmark.py builds both frameworks' copies) runs in evaluation mode without
gradients (`mj.no_grad()` / `torch.no_grad()`) on fresh inputs of several batch sizes, and each run ends with the
result in a numpy array. After warm-up runs the two frameworks take turns run by run, so drift on the host hits
them alike; the table has medians and best runs, and the outputs of both are checked against each other first.
Small batches are where per-run costs show: recording and planning, and copies of the weights into a library's
layout (which metajit keeps across runs, docs/lowering.md). Writes bench/INFERENCE.md.

    python bench/inference_benchmark.py [--runs N] [--models resnet18,transformer,lstm]
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
from training_benchmark import VOCABULARY, transformer_model  # noqa: E402

# name: (batch sizes, the input of one example, description)
MODELS = {
    "resnet18": ((1, 8, 32), (3, 32, 32), "ResNet-18, CIFAR stem, 3x32x32 images"),
    "transformer": ((1, 16), (128,), "Transformer LM (2 pre-norm blocks, width 256), 128 tokens a sequence"),
    "lstm": ((32,), (64, 128), "LSTM, 128 -> 256, 64 steps (batch is the second dim)"),
}
WARMUP_RUNS = 3


def build_models(name, torch):
    """(metajit model, PyTorch model) with the same weights, both in evaluation mode."""
    import metajit.nn.functional as F
    mj.seed(0)
    if name == "resnet18":
        from metajit.models import resnet18
        from torch_reference_resnet import torch_resnet18_cifar
        ours, theirs = resnet18(num_classes=10, stem="cifar"), torch_resnet18_cifar()
    elif name == "lstm":
        ours, theirs = LSTMOutput(mj.nn.LSTM(128, 256)), LSTMOutput(torch.nn.LSTM(128, 256))
    else:
        ours, theirs = transformer_model(mj.nn, F), transformer_model(torch.nn, torch.nn.functional)
    # PyTorch's weights become metajit's, so both compute the same function (checked below).
    values = {key: value.detach().numpy() for key, value in theirs.state_dict().items()}
    ours.load_state_dict(values)
    ours.eval()
    theirs.eval()
    return ours, theirs


class LSTMOutput:
    """An LSTM layer of either framework, called for its output sequence alone (its state is dropped)."""

    def __init__(self, layer):
        self.layer = layer

    def __call__(self, sequence):
        return self.layer(sequence)[0]

    def state_dict(self):
        return self.layer.state_dict()

    def load_state_dict(self, values):
        self.layer.load_state_dict(values)

    def eval(self):
        self.layer.eval()


def inputs_for(name, batch, shape, rng):
    if name == "transformer":
        return rng.integers(0, VOCABULARY, (batch,) + shape).astype(np.int64)
    if name == "lstm":  # [steps, batch, features]: nn.LSTM's default layout
        return rng.standard_normal((shape[0], batch) + shape[1:]).astype(np.float32)
    return rng.standard_normal((batch,) + shape).astype(np.float32)


def measure(name, batch, shape, runs, torch):
    ours, theirs = build_models(name, torch)
    rng = np.random.default_rng(batch)
    batches = [inputs_for(name, batch, shape, rng) for _ in range(4)]

    def metajit_run(array):
        with mj.no_grad():
            return ours(mj.array(array)).numpy()

    def torch_run(array):
        with torch.no_grad():
            return theirs(torch.from_numpy(array)).numpy()

    np.testing.assert_allclose(metajit_run(batches[0]), torch_run(batches[0]), rtol=1e-3, atol=1e-3)
    for index in range(WARMUP_RUNS):
        metajit_run(batches[index % len(batches)])
        torch_run(batches[index % len(batches)])
    ours_times, theirs_times = [], []
    for index in range(runs):
        array = batches[index % len(batches)]
        start = time.perf_counter()
        metajit_run(array)
        ours_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        torch_run(array)
        theirs_times.append(time.perf_counter() - start)
    return ours_times, theirs_times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="timed runs per model, batch size and framework")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--output", default=os.path.join(HERE, "INFERENCE.md"))
    arguments = parser.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("the inference benchmark compares against PyTorch, which is not installed")
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    rows = []
    for name in arguments.models.split(","):
        batches, shape, description = MODELS[name]
        for batch in batches:
            print(f"{name}, batch {batch} ...", flush=True)
            ours, theirs = measure(name, batch, shape, arguments.runs, torch)
            rows.append((description, batch, ours, theirs))
    lines = ["# Inference benchmark", "",
             f"Generated by `bench/inference_benchmark.py` on {cpu_model()}, {threads} cores, "
             f"{time.strftime('%Y-%m-%d %H:%M')}; PyTorch {torch.__version__} eager, {threads} threads for both, "
             f"Python {platform.python_version()}. Forward pass only, in evaluation mode without gradients; a run "
             "takes a fresh numpy batch and ends with the result in numpy. Medians and best of "
             f"{arguments.runs} runs per framework, taking turns run by run after {WARMUP_RUNS} warm-up runs each; "
             "the two frameworks' outputs were checked against each other (rtol 1e-3, atol 1e-3). "
             "Informational: no targets.", "",
             "| model | batch | metajit ms (median) | PyTorch ms (median) | metajit / PyTorch | metajit ms (best) | "
             "PyTorch ms (best) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for description, batch, ours, theirs in rows:
        ours_median, theirs_median = statistics.median(ours) * 1e3, statistics.median(theirs) * 1e3
        lines.append(f"| {description} | {batch} | {ours_median:.2f} | {theirs_median:.2f} | "
                     f"{ours_median / theirs_median:.2f}x | {min(ours) * 1e3:.2f} | {min(theirs) * 1e3:.2f} |")
    text = "\n".join(lines) + "\n"
    with open(arguments.output, "w") as output:
        output.write(text)
    print(text)


if __name__ == "__main__":
    main()

"""Convolution-variant benchmark: grouped, depthwise, 1x1 and grouped transposed convolutions, forward and
backward, metajit with library lowering on and off against PyTorch eager, same inputs, same run.

These are the convolutions whose index is not a plain window: a grouped one reads image channel
(o / (O/g)) * (C/g) + c, and a 1x1 stride-1 weight gradient sums over batch and pixels together. Each case
times one forward pass plus the gradients of sum(y * y) with respect to input and weight; the timed runs of
the three variants alternate run by run, so drift on the host hits them alike. Results are checked against
PyTorch once per case. Writes bench/CONVOLUTIONS.md.

    python bench/convolution_benchmark.py [--runs N] [--output bench/CONVOLUTIONS.md]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_benchmarks import cpu_model, mj  # noqa: E402  (it finds metajit, also in a bare checkout)
import metajit.nn.functional as F  # noqa: E402

# (label, input shape, weight shape, options, transposed)
CASES = [
    ("3x3, groups 4", (16, 64, 28, 28), (64, 16, 3, 3), dict(padding=1, groups=4), False),
    ("3x3, groups 8", (32, 256, 14, 14), (256, 32, 3, 3), dict(padding=1, groups=8), False),
    ("3x3, groups 32 (ResNeXt)", (32, 128, 28, 28), (128, 4, 3, 3), dict(padding=1, groups=32), False),
    ("3x3 depthwise", (32, 64, 56, 56), (64, 1, 3, 3), dict(padding=1, groups=64), False),
    ("3x3 depthwise, stride 2", (32, 128, 28, 28), (128, 1, 3, 3), dict(padding=1, stride=2, groups=128), False),
    ("1x1, 256 -> 256", (32, 256, 14, 14), (256, 256, 1, 1), dict(), False),
    ("1x1, 64 -> 256", (32, 64, 56, 56), (256, 64, 1, 1), dict(), False),
    ("1x1, groups 4", (32, 128, 28, 28), (128, 32, 1, 1), dict(groups=4), False),
    ("4x4 transposed, stride 2, groups 4", (16, 64, 14, 14), (64, 16, 4, 4), dict(stride=2, padding=1, groups=4), True),
    ("3x3, dilation 2 (DeepLab)", (4, 256, 32, 32), (256, 256, 3, 3), dict(padding=2, dilation=2), False),
    ("3x3, stride 2, 128 -> 256", (32, 128, 16, 16), (256, 128, 3, 3), dict(padding=1, stride=2), False),
]


def metajit_step(x, w, options, transposed):
    function = F.conv_transpose2d if transposed else F.conv2d

    def step():
        X, W = mj.array(x), mj.array(w)
        X.requires_grad = True
        W.requires_grad = True
        start = time.perf_counter()
        y = function(X, W, **options)
        gx, gw = mj.grad((y * y).sum(), [X, W])
        mj.sync(y, gx, gw)
        return time.perf_counter() - start, (y, gx, gw)
    return step


def torch_step(torch, x, w, options, transposed):
    function = torch.nn.functional.conv_transpose2d if transposed else torch.nn.functional.conv2d
    tx = torch.from_numpy(x).clone().requires_grad_()
    tw = torch.from_numpy(w).clone().requires_grad_()

    def step():
        start = time.perf_counter()
        y = function(tx, tw, **options)
        gx, gw = torch.autograd.grad((y * y).sum(), [tx, tw])
        return time.perf_counter() - start, (y, gx, gw)
    return step


def with_lowering(enabled, step):
    def run():
        previous = mj.flags.lowering
        mj.flags.lowering = enabled
        try:
            return step()
        finally:
            mj.flags.lowering = previous
    return run


def check(metajit_results, torch_results, label):
    for name, ours, theirs in zip(("y", "dx", "dw"), metajit_results, torch_results):
        theirs = theirs.detach().numpy()
        scale = max(1.0, float(np.abs(theirs).max()))
        error = float(np.abs(ours.numpy() - theirs).max()) / scale
        if error > 1e-3:
            raise SystemExit(f"{label}: metajit's {name} differs from PyTorch's by {error:.2e} of its scale")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each variant (median reported)")
    parser.add_argument("--output", default=os.path.join(HERE, "CONVOLUTIONS.md"))
    arguments = parser.parse_args()
    import torch
    torch.set_num_threads(mj.flags.num_threads)  # the same thread count for both frameworks
    rng = np.random.default_rng(0)
    rows = []
    for label, x_shape, w_shape, options, transposed in CASES:
        x = rng.standard_normal(x_shape, dtype=np.float32)
        w = rng.standard_normal(w_shape, dtype=np.float32) * np.float32(1 / np.sqrt(np.prod(w_shape[1:])))
        variants = {"metajit, lowered": with_lowering(True, metajit_step(x, w, options, transposed)),
                    "metajit, generated": with_lowering(False, metajit_step(x, w, options, transposed)),
                    "PyTorch": torch_step(torch, x, w, options, transposed)}
        results = {}
        for name, step in variants.items():  # warm-up: compiles, plans, and gives the values to check
            step()
            results[name] = step()[1]
        check(results["metajit, lowered"], results["PyTorch"], label)
        check(results["metajit, generated"], results["PyTorch"], label)
        mj.reset_stats()
        variants["metajit, lowered"]()
        calls = int(mj.stats()["library_calls"])
        times = {name: [] for name in variants}
        for _ in range(arguments.runs):
            for name, step in variants.items():
                times[name].append(step()[0])
        medians = {name: statistics.median(values) * 1e3 for name, values in times.items()}
        rows.append((label, x_shape, w_shape, options, transposed, medians, calls))
        print(f"{label}: " + ", ".join(f"{name} {value:.2f} ms" for name, value in medians.items()) +
              f" ({calls} library calls)", flush=True)
    write_report(arguments, rows, torch)


def write_report(arguments, rows, torch):
    lines = ["# Convolution variants: metajit vs PyTorch eager", "",
             f"Generated by `bench/convolution_benchmark.py` on {cpu_model()}, {os.cpu_count()} cores, "
             f"{time.strftime('%Y-%m-%d %H:%M')}; PyTorch {torch.__version__} eager with "
             f"{torch.get_num_threads()} threads, metajit with {mj.flags.num_threads}. float32, NCHW. Each run is "
             "one forward pass plus the gradients of sum(y * y) with respect to input and weight, from fresh "
             "inputs; the median of "
             f"{arguments.runs} runs, the three variants alternating run by run. metajit's results were checked "
             "against PyTorch's (max difference below 1e-3 of the largest value). \"generated\" is metajit with "
             "library lowering off (`mj.flags.lowering = False`): every kernel compiled from the meta-ops.", "",
             "| convolution | input | weight | options | metajit lowered ms | library calls | metajit generated ms "
             "| PyTorch ms | lowered / PyTorch |",
             "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for label, x_shape, w_shape, options, transposed, medians, calls in rows:
        text = ", ".join(f"{k}={v}" for k, v in options.items()) or "-"
        lowered, generated, reference = (medians["metajit, lowered"], medians["metajit, generated"],
                                         medians["PyTorch"])
        lines.append(f"| {label} | {list(x_shape)} | {list(w_shape)} | {text} | {lowered:.2f} | {calls} | "
                     f"{generated:.2f} | {reference:.2f} | **{lowered / reference:.2f}x** |")
    lines += ["", "Below 1 in the last column metajit is faster. \"library calls\" counts oneDNN calls in one run "
              "(3: the forward pass and both gradients)."]
    with open(arguments.output, "w") as report:
        report.write("\n".join(lines) + "\n")
    print(f"wrote {arguments.output}")


if __name__ == "__main__":
    main()

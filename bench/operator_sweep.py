"""Operator sweep: many library operators, metajit against PyTorch eager, to find the ones where metajit is slow.

Each operator runs on the same float32 inputs in both frameworks; after two warm-up runs each, their timed runs
alternate (so drift on the host hits both alike). A metajit run ends when `mj.sync` returns, so it includes
recording the lazy graph and planning. The report lists every operator with both medians and metajit's time over
PyTorch's, slowest ratio first: the top rows are where metajit has work to do. The results of both frameworks
are compared once per operator (`assert_allclose`, rtol 1e-4, atol 1e-4), so a fast wrong answer cannot hide.
A second table times forward passes together with the input's gradient, where the backward's kernels (scatters,
recomputed values, library calls of the gradient products) show.

Writes bench/SWEEP.md.

    python bench/operator_sweep.py [--runs N] [--output bench/SWEEP.md]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_benchmarks import cpu_model, last_level_cache, mj  # noqa: E402  (it finds metajit, also in a bare checkout)
import metajit.nn.functional as F  # noqa: E402



def operators(torch, rng):
    """(name, metajit function, PyTorch function) triples; each returns its framework's result."""
    TF = torch.nn.functional

    def both(array):
        return mj.array(array), torch.from_numpy(array.copy())

    matrix = rng.standard_normal((2048, 1024)).astype(np.float32)
    a, ta = both(matrix)
    b, tb = both(rng.standard_normal((2048, 1024)).astype(np.float32))
    image, timage = both(rng.standard_normal((32, 64, 56, 56)).astype(np.float32))
    small, tsmall = both(rng.standard_normal((32, 16, 56, 56)).astype(np.float32))
    rows, trows = both(rng.integers(0, 2048, 4096))
    picks, tpicks = both(rng.integers(0, 1024, (2048, 16)))
    table, ttable = both(rng.standard_normal((30000, 256)).astype(np.float32))
    tokens, ttokens = both(rng.integers(0, 30000, (64, 128)))
    logits, tlogits = both(rng.standard_normal((2048, 1000)).astype(np.float32))
    targets, ttargets = both(rng.integers(0, 1000, 2048))
    left, tleft = both(rng.standard_normal((64, 128, 64)).astype(np.float32))
    right, tright = both(rng.standard_normal((64, 64, 128)).astype(np.float32))
    ones, tones = mj.array(np.ones(64, np.float32)), torch.ones(64)
    batch, tbatch = both(rng.standard_normal((32, 256, 256)).astype(np.float32))
    scores, tscores = both(rng.standard_normal((16, 4, 256, 256)).astype(np.float32))
    query, key = mj.arange(0, 256, 1, "int64").reshape([256, 1]), mj.arange(0, 256, 1, "int64").reshape([1, 256])
    future = torch.ones(256, 256, dtype=torch.bool).triu(1)

    def sinusoid(arange):
        """Position codes sin(position * frequency) of [256, 256], built from aranges in either framework."""
        positions = arange(0, 256, 1).reshape([256, 1])
        return (positions * (arange(0, 256, 1) * -0.03).exp().reshape([1, 256])).sin()
    return [
        ("add [2048, 1024]", lambda: a + b, lambda: ta + tb),
        ("x + sin(position * frequency), x [32, 256, 256]",
         lambda: batch + sinusoid(lambda *range_: mj.arange(*range_, "float32")),
         lambda: tbatch + sinusoid(lambda *range_: torch.arange(*range_, dtype=torch.float32))),
        ("gelu", lambda: F.gelu(a), lambda: TF.gelu(ta)),
        ("gelu, tanh approximation", lambda: F.gelu(a, approximate="tanh"), lambda: TF.gelu(ta, approximate="tanh")),
        ("sigmoid", lambda: a.sigmoid(), lambda: ta.sigmoid()),
        ("tanh", lambda: a.tanh(), lambda: ta.tanh()),
        ("sum over dim 0", lambda: a.sum(0), lambda: ta.sum(0)),
        ("sum over dim 1", lambda: a.sum(1), lambda: ta.sum(1)),
        ("max over dim 0", lambda: a.amax(0), lambda: ta.amax(0)),
        ("max over dim 1", lambda: a.amax(1), lambda: ta.amax(1)),
        ("argmax over dim 0", lambda: a.argmax(0), lambda: ta.argmax(0)),
        ("argmax over dim 1", lambda: a.argmax(1), lambda: ta.argmax(1)),
        ("var over dim 1", lambda: a.var(1), lambda: ta.var(1)),
        ("softmax over dim 0", lambda: F.softmax(a, 0), lambda: TF.softmax(ta, 0)),
        ("log_softmax over dim 1", lambda: F.log_softmax(a, 1), lambda: TF.log_softmax(ta, 1)),
        ("logsumexp over dim 1", lambda: mj.logsumexp(a, 1), lambda: torch.logsumexp(ta, 1)),
        ("causal softmax [16, 4, 256, 256] (masked scores)",
         lambda: F.softmax(mj.where(key <= query, scores, float("-inf")), -1),
         lambda: TF.softmax(tscores.masked_fill(future, float("-inf")), -1)),
        ("layer_norm", lambda: F.layer_norm(a, [1024]), lambda: TF.layer_norm(ta, [1024])),
        ("transpose, materialised", lambda: a.T * 1.0, lambda: ta.t().contiguous()),
        ("cat along dim 0", lambda: F.cat([a, b], 0), lambda: torch.cat([ta, tb], 0)),
        ("cat along dim 1", lambda: F.cat([a, b], 1), lambda: torch.cat([ta, tb], 1)),
        ("where", lambda: mj.where(a > 0, a, b), lambda: torch.where(ta > 0, ta, tb)),
        ("clamp", lambda: a.clamp(-0.5, 0.5), lambda: ta.clamp(-0.5, 0.5)),
        ("cumsum along dim 1", lambda: a.cumsum(1), lambda: ta.cumsum(1)),
        ("cumsum along dim 0", lambda: a.cumsum(0), lambda: ta.cumsum(0)),
        ("index_select of 4096 rows", lambda: F.index_select(a, 0, rows), lambda: torch.index_select(ta, 0, trows)),
        ("gather along dim 1", lambda: F.gather(a, 1, picks), lambda: torch.gather(ta, 1, tpicks)),
        ("sort along dim 1", lambda: mj.sort(a, 1)[0], lambda: torch.sort(ta, 1)[0]),
        ("topk 10 along dim 1", lambda: mj.topk(a, 10, 1)[0], lambda: torch.topk(ta, 10, 1)[0]),
        ("max_pool2d 2x2 [32, 64, 56, 56]", lambda: F.max_pool2d(image, 2), lambda: TF.max_pool2d(timage, 2)),
        ("avg_pool2d 2x2", lambda: F.avg_pool2d(image, 2), lambda: TF.avg_pool2d(timage, 2)),
        ("adaptive_avg_pool2d to 1x1", lambda: F.adaptive_avg_pool2d(image, 1),
         lambda: TF.adaptive_avg_pool2d(timage, 1)),
        ("batch_norm, training", lambda: F.batch_norm(image, None, None, ones, ones * 0, training=True),
         lambda: TF.batch_norm(timage, None, None, tones, tones * 0, training=True)),
        ("pad 1 on each side", lambda: F.pad(image, [1, 1, 1, 1]), lambda: TF.pad(timage, [1, 1, 1, 1])),
        ("permute NCHW -> NHWC, materialised", lambda: image.permute(0, 2, 3, 1) * 1.0,
         lambda: timage.permute(0, 2, 3, 1).contiguous()),
        ("interpolate nearest x2 [32, 16, 56, 56]", lambda: F.interpolate(small, scale_factor=2),
         lambda: TF.interpolate(tsmall, scale_factor=2)),
        ("interpolate bilinear x2", lambda: F.interpolate(small, scale_factor=2, mode="bilinear"),
         lambda: TF.interpolate(tsmall, scale_factor=2, mode="bilinear")),
        ("embedding [30000, 256], 64x128 tokens", lambda: F.embedding(tokens, table),
         lambda: TF.embedding(ttokens, ttable)),
        ("cross_entropy [2048, 1000]", lambda: F.cross_entropy(logits, targets),
         lambda: TF.cross_entropy(tlogits, ttargets)),
        ("bmm [64, 128, 64] @ [64, 64, 128]", lambda: left @ right, lambda: tleft @ tright),
    ]


def gradient_operators(torch):
    """(name, metajit function, PyTorch function, input shape) for the forward-and-gradient table: each function
    maps its framework's input tensor to the output."""
    TF = torch.nn.functional
    weight = np.random.default_rng(1).standard_normal((64, 1, 3)).astype(np.float32) * 0.3
    transposed = np.random.default_rng(2).standard_normal((64, 32, 2, 2)).astype(np.float32) * 0.1
    mweight, tweight = mj.array(weight), torch.from_numpy(weight)
    mtransposed, ttransposed = mj.array(transposed), torch.from_numpy(transposed)
    return [
        ("elu", lambda x: F.elu(x), lambda x: TF.elu(x), (2048, 1024)),
        ("softplus", lambda x: F.softplus(x), lambda x: TF.softplus(x), (2048, 1024)),
        ("gelu", lambda x: F.gelu(x), lambda x: TF.gelu(x), (2048, 1024)),
        ("layer_norm", lambda x: F.layer_norm(x, [1024]), lambda x: TF.layer_norm(x, [1024]), (2048, 1024)),
        ("softmax over dim 1", lambda x: F.softmax(x, 1), lambda x: TF.softmax(x, 1), (2048, 1024)),
        ("interpolate bilinear x2", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
         lambda x: TF.interpolate(x, scale_factor=2, mode="bilinear"), (32, 16, 56, 56)),
        ("max_pool2d 2x2", lambda x: F.max_pool2d(x, 2), lambda x: TF.max_pool2d(x, 2), (32, 64, 56, 56)),
        ("conv1d depthwise, 3 taps", lambda x: F.conv1d(x, mweight, padding=1, groups=64),
         lambda x: TF.conv1d(x, tweight, padding=1, groups=64), (32, 64, 1024)),
        ("conv_transpose2d 2x2 stride 2", lambda x: F.conv_transpose2d(x, mtransposed, stride=2),
         lambda x: TF.conv_transpose2d(x, ttransposed, stride=2), (32, 64, 28, 28)),
        ("causal attention [16, 4, 128, 64] (q = k = v)",
         lambda x: F.scaled_dot_product_attention(x, x, x, is_causal=True),
         lambda x: TF.scaled_dot_product_attention(x, x, x, is_causal=True), (16, 4, 128, 64)),
        ("stack of 64 rows", lambda x: mj.stack([x[index] * 2.0 for index in range(64)], 1),
         lambda x: torch.stack([x[index] * 2.0 for index in range(64)], 1), (64, 32, 1024)),
        ("transpose, materialised", lambda x: x.T * 1.0, lambda x: x.t() * 1.0, (2048, 2048)),
    ]


def measure_gradient(metajit_function, torch_function, shape, runs, torch, rng):
    """Checks, then times, forward + the input's gradient against a fixed random upstream gradient in each
    framework; returns (median, best) seconds of each, as measure()."""
    data = rng.standard_normal(shape).astype(np.float32)
    x = mj.array(data, requires_grad=True)
    tx = torch.tensor(data, requires_grad=True)
    upstream = rng.standard_normal(tuple(torch_function(tx).shape)).astype(np.float32)
    mupstream, tupstream = mj.array(upstream), torch.from_numpy(upstream)

    def metajit_step():
        y = metajit_function(x)
        (gradient,) = mj.grad((y * mupstream).sum(), [x])
        mj.sync(y, gradient)
        return gradient

    def torch_step():
        tx.grad = None
        (torch_function(tx) * tupstream).sum().backward()
        return tx.grad
    np.testing.assert_allclose(metajit_step().numpy(), torch_step().numpy(), rtol=1e-3, atol=1e-3)
    return measure(metajit_step, torch_step, runs)


def measure(metajit_function, torch_function, runs):
    """(median, best) seconds of each framework's alternating timed runs, after two warm-up runs each."""
    timed = {"metajit": [], "torch": []}
    run = {"metajit": lambda: mj.sync(metajit_function()), "torch": torch_function}
    for function in run.values():
        function()
        function()
    for _ in range(runs):
        for name, function in run.items():
            start = time.perf_counter()
            function()
            timed[name].append(time.perf_counter() - start)
    return [(statistics.median(timed[name]), min(timed[name])) for name in ("metajit", "torch")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs per operator and framework")
    parser.add_argument("--output", default=os.path.join(HERE, "SWEEP.md"))
    arguments = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("operator sweep: PyTorch is not installed; nothing to compare against", file=sys.stderr)
        return 1
    threads = mj.flags.num_threads
    torch.set_num_threads(threads)
    rows = []
    for name, metajit_function, torch_function in operators(torch, np.random.default_rng(0)):
        result = metajit_function()
        values = result.numpy()
        expected = torch_function().numpy()
        np.testing.assert_allclose(values, expected, rtol=1e-4, atol=1e-4, err_msg=name)
        metajit_times, torch_times = measure(metajit_function, torch_function, arguments.runs)
        rows.append((metajit_times[0] / torch_times[0], name, metajit_times, torch_times))
        print(f"{name}: metajit {metajit_times[0] * 1e3:.3f} ms, PyTorch {torch_times[0] * 1e3:.3f} ms", flush=True)
    rows.sort(reverse=True)
    gradient_rows = []
    for name, metajit_function, torch_function, shape in gradient_operators(torch):
        metajit_times, torch_times = measure_gradient(metajit_function, torch_function, shape, arguments.runs, torch,
                                                      np.random.default_rng(0))
        gradient_rows.append((metajit_times[0] / torch_times[0], name, metajit_times, torch_times))
        print(f"{name}, forward and gradient: metajit {metajit_times[0] * 1e3:.3f} ms, PyTorch "
              f"{torch_times[0] * 1e3:.3f} ms", flush=True)
    gradient_rows.sort(reverse=True)
    lines = ["# Operator sweep: metajit vs PyTorch eager", "",
             f"Generated by `bench/operator_sweep.py` on {cpu_model()}, {os.cpu_count()} cores, "
             f"{time.strftime('%Y-%m-%d %H:%M')}; {threads} threads for both, PyTorch {torch.__version__}. float32, "
             f"the same inputs for both; after two warm-up runs each, {arguments.runs} timed runs alternate between "
             "the frameworks. A metajit run includes recording and planning and ends when `mj.sync` returns. "
             "Slowest ratio (of medians) first: rows above 1.00x are where metajit is slower. Informational: no "
             "targets. The [2048, 1024] operators move 16-24 MB, about this host's last-level cache "
             f"({last_level_cache()}), so their times depend on how much of their data the other framework's run "
             "left there: compare their best runs too, and rerun before acting on a single row.", "",
             "| operator | metajit ms (median) | PyTorch ms (median) | metajit / PyTorch | metajit ms (best) | "
             "PyTorch ms (best) | best / best |", "|---|---:|---:|---:|---:|---:|---:|"]
    def table(table_rows):
        for ratio, name, metajit_times, torch_times in table_rows:
            lines.append(f"| {name} | {metajit_times[0] * 1e3:.3f} | {torch_times[0] * 1e3:.3f} | {ratio:.2f}x | "
                         f"{metajit_times[1] * 1e3:.3f} | {torch_times[1] * 1e3:.3f} | "
                         f"{metajit_times[1] / torch_times[1]:.2f}x |")
    table(rows)
    lines += ["", "## Forward and the input's gradient", "",
              "Each run computes the output and the gradient of sum(output * upstream) with respect to the input "
              "(a fixed random upstream; in metajit `mj.grad`, then `mj.sync` of both; in PyTorch `backward()`). "
              "The gradients were checked against each other (`assert_allclose`, rtol 1e-3, atol 1e-3).", "",
              lines[4], lines[5]]
    table(gradient_rows)
    with open(arguments.output, "w") as report:
        report.write("\n".join(lines) + "\n")
    print(f"wrote {arguments.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

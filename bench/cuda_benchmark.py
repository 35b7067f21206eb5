"""The CUDA backend against PyTorch on the same GPU, in one process, on the same inputs.

    python bench/cuda_benchmark.py [--repeats N] [--output FILE]

Measures, each side by side with PyTorch (both sides are timed on the host around a device synchronize, over
batches of calls, so host overhead overlaps the GPU's work as it does in a loop):
- an elementwise chain (8 ops on 64M floats): GB/s, against a device-to-device copy of the same bytes (the
  machine's limit for a read-once-write-once kernel), target at least 85% of the copy;
- softmax over rows (8192 x 8192): GB/s and the ratio to torch.softmax;
- the ResNet-18 training step (CIFAR stem, batch 32, SGD with momentum): ms and the ratio to PyTorch eager.
Needs a GPU; prints why and exits 0 without one (CI has none).
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))  # torch_reference_resnet


def timed(function, synchronize, repeats, calls=20):
    """Median seconds per call over `repeats` timings of `calls` calls each, after two warm-up calls (the first
    compiles). Several calls per timing let the host queue the next launch while the GPU runs this one, as in a
    real loop, so a kernel's time is not hidden behind one call's host overhead."""
    for _ in range(2):
        function()
    synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            function()
        synchronize()
        times.append((time.perf_counter() - start) / calls)
    return float(np.median(times))


def chain_metajit(mj, x):
    return (((x * 1.5 + 0.25).maximum(0.0) - 0.125) * 0.75 + 1.0).sqrt()


def chain_torch(torch, x):
    return ((torch.clamp_min(x * 1.5 + 0.25, 0.0) - 0.125) * 0.75 + 1.0).sqrt()


def benchmark_chain(mj, torch, repeats):
    count = 1 << 26  # 256 MB a side: the GPU's time, not one call's host overhead, decides
    host = np.random.default_rng(0).standard_normal(count).astype(np.float32)
    x = mj.array(host).cuda()
    tx = torch.from_numpy(host).cuda()
    bytes_moved = 2 * 4 * count

    def run_metajit():
        mj.sync(chain_metajit(mj, x))

    ours = timed(run_metajit, mj.cuda.synchronize, repeats)
    theirs = timed(lambda: chain_torch(torch, tx), torch.cuda.synchronize, repeats)
    copy = timed(lambda: tx.clone(), torch.cuda.synchronize, repeats)
    expected = chain_torch(torch, tx).cpu().numpy()
    error = float(np.max(np.abs(chain_metajit(mj, x).numpy() - expected)))
    return {"name": "elementwise chain (8 ops, 64M float32)", "metajit_ms": ours * 1e3, "torch_ms": theirs * 1e3,
            "metajit_gbps": bytes_moved / ours / 1e9, "torch_gbps": bytes_moved / theirs / 1e9,
            "limit_gbps": bytes_moved / copy / 1e9, "limit": "device-to-device copy", "max_error": error}


def benchmark_softmax(mj, torch, repeats):
    rows, columns = 8192, 8192
    host = np.random.default_rng(1).standard_normal((rows, columns)).astype(np.float32)
    x = mj.array(host).cuda()
    tx = torch.from_numpy(host).cuda()
    bytes_moved = 2 * 4 * rows * columns

    ours = timed(lambda: mj.sync(mj.nn.functional.softmax(x, dim=1)), mj.cuda.synchronize, repeats)
    theirs = timed(lambda: torch.softmax(tx, dim=1), torch.cuda.synchronize, repeats)
    copy = timed(lambda: tx.clone(), torch.cuda.synchronize, repeats)
    error = float(np.max(np.abs(mj.nn.functional.softmax(x, dim=1).numpy() - torch.softmax(tx, 1).cpu().numpy())))
    return {"name": "softmax 8192 x 8192 float32", "metajit_ms": ours * 1e3, "torch_ms": theirs * 1e3,
            "metajit_gbps": bytes_moved / ours / 1e9, "torch_gbps": bytes_moved / theirs / 1e9,
            "limit_gbps": bytes_moved / copy / 1e9, "limit": "device-to-device copy", "max_error": error}


def benchmark_resnet(mj, torch, repeats, profile=False):
    import metajit.nn.functional as F
    from metajit import optim
    from metajit.models import resnet18
    from torch_reference_resnet import torch_resnet18_cifar
    rng = np.random.default_rng(2)
    images = rng.standard_normal((32, 3, 32, 32)).astype(np.float32)
    labels = rng.integers(0, 10, 32).astype(np.int64)

    mj.seed(0)
    model = resnet18(num_classes=10, stem="cifar")
    model.cuda()
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = mj.array(images).cuda(), mj.array(labels).cuda()
    losses = []

    def step_metajit():
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss)

    torch.manual_seed(0)
    torch_model = torch_resnet18_cifar().cuda()
    torch_optimizer = torch.optim.SGD(torch_model.parameters(), lr=0.01, momentum=0.9)
    tx, ty = torch.from_numpy(images).cuda(), torch.from_numpy(labels).cuda()

    def step_torch():
        loss = torch.nn.functional.cross_entropy(torch_model(tx), ty)
        torch_optimizer.zero_grad()
        loss.backward()
        torch_optimizer.step()

    start = time.perf_counter()
    step_metajit()
    mj.cuda.synchronize()
    first_step = time.perf_counter() - start
    ours = timed(step_metajit, mj.cuda.synchronize, repeats, calls=1)
    # metajit computes float32 exactly (cuDNN's FMA kernels); PyTorch's default lets cuDNN use TF32, which keeps
    # 10 mantissa bits of each operand. The ratio is against PyTorch in float32; its TF32 time is reported too.
    tf32 = timed(step_torch, torch.cuda.synchronize, repeats, calls=1)
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    theirs = timed(step_torch, torch.cuda.synchronize, repeats, calls=1)
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved
    if profile:  # where the step's time goes, kernel by kernel (each launch synchronized)
        with mj.profile() as report:
            step_metajit()
        print(report.table(20), flush=True)
    loss_values = [float(loss.item()) for loss in losses[-3:]]
    return {"name": "ResNet-18 training step (batch 32, 3x32x32)", "metajit_ms": ours * 1e3,
            "torch_ms": theirs * 1e3, "torch_tf32_ms": tf32 * 1e3, "first_step_s": first_step,
            "last_losses": loss_values}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--only", default="chain,softmax,resnet18")
    parser.add_argument("--profile", action="store_true", help="print the ResNet-18 step's kernels by time")
    parser.add_argument("--output", default=None, help="also write the results as markdown here")
    arguments = parser.parse_args()
    import metajit as mj
    if not mj.cuda.is_available():
        print(f"cuda_benchmark: no GPU here ({mj.cuda.unavailable_reason()}); nothing measured")
        return 0
    import torch
    mj.flags.use_cuda = True
    device = torch.cuda.get_device_name(0)
    rows = []
    benchmarks = {"chain": benchmark_chain, "softmax": benchmark_softmax, "resnet18": benchmark_resnet}
    for name in arguments.only.split(","):
        repeats = arguments.repeats if name != "resnet18" else max(5, arguments.repeats // 4)
        row = benchmarks[name](mj, torch, repeats, **({"profile": arguments.profile} if name == "resnet18" else {}))
        rows.append(row)
        print(row, flush=True)
    lines = [f"# CUDA benchmark on {device}", "", f"`python bench/cuda_benchmark.py --repeats {arguments.repeats}`", "",
             "PyTorch / metajit above 1 means metajit is faster; GB/s counts one read and one write of the data.", "",
             "| benchmark | metajit ms | PyTorch ms | PyTorch / metajit | metajit GB/s | limit GB/s | of limit |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        speedup = row["torch_ms"] / row["metajit_ms"]
        if "limit_gbps" in row:
            lines.append(f"| {row['name']} | {row['metajit_ms']:.3f} | {row['torch_ms']:.3f} | {speedup:.2f}x | "
                         f"{row['metajit_gbps']:.0f} | {row['limit_gbps']:.0f} ({row['limit']}) | "
                         f"{row['metajit_gbps'] / row['limit_gbps']:.0%} |")
        else:
            lines.append(f"| {row['name']} | {row['metajit_ms']:.3f} | {row['torch_ms']:.3f} | {speedup:.2f}x | | | |")
        if "torch_tf32_ms" in row:
            lines.append(f"| {row['name']}, PyTorch with TF32 (its default) | {row['metajit_ms']:.3f} | "
                         f"{row['torch_tf32_ms']:.3f} | {row['torch_tf32_ms'] / row['metajit_ms']:.2f}x | | | |")
    text = "\n".join(lines) + "\n"
    print(text)
    if arguments.output:
        with open(arguments.output, "w") as stream:
            stream.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

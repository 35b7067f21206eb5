"""The CUDA backend against PyTorch on the same GPU, in one process, on the same inputs.

    python bench/cuda_benchmark.py [--repeats N] [--output FILE]

Measures, each side by side with PyTorch (both sides are timed on the host around a device synchronize, over
batches of calls, so host overhead overlaps the GPU's work as it does in a loop):
- an elementwise chain (8 ops on 64M floats): GB/s, against a device-to-device copy of the same bytes (the
  machine's limit for a read-once-write-once kernel), target at least 85% of the copy;
- softmax over rows (8192 x 8192): GB/s and the ratio to torch.softmax;
- training steps of ResNet-18 (CIFAR stem, batch 32) and the training benchmark's transformer LM (SGD with
  momentum): ms, kernels and library calls per step, against PyTorch eager in float32, torch.compile's default
  mode, and PyTorch's TF32 and bfloat16-autocast modes for reference.
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
sys.path.insert(0, HERE)  # training_benchmark's transformer LM


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


def step_counts(mj, step):
    """Kernels launched and library calls made by one step (the step's plan is already compiled)."""
    before = mj.stats()
    step()
    mj.cuda.synchronize()
    after = mj.stats()
    return (after["kernels_launched"] - before["kernels_launched"],
            after["library_calls"] - before["library_calls"])


def training_models(name, mj, torch):
    """The same model in both frameworks, with the same batch: ResNet-18 (CIFAR stem, batch 32) or the training
    benchmark's transformer LM (2 pre-norm blocks, width 256, 16 x 128 tokens)."""
    import training_benchmark
    images, labels = training_benchmark.batch_for(name, seed=2)
    mj.seed(0)
    torch.manual_seed(0)
    if name == "resnet18":
        from metajit.models import resnet18
        from torch_reference_resnet import torch_resnet18_cifar
        return resnet18(num_classes=10, stem="cifar"), torch_resnet18_cifar(), images, labels
    model = training_benchmark.transformer_model(mj.nn, mj.nn.functional)
    torch_model = training_benchmark.transformer_model(torch.nn, torch.nn.functional)
    return model, torch_model, images, labels


def benchmark_training(mj, torch, repeats, name, profile=False, compiled=True, autocast=True):
    """One training step (forward, cross-entropy, backward, SGD with momentum) of `name` in metajit, PyTorch
    eager in float32 (TF32 off, as metajit computes), PyTorch's defaults (TF32 on), torch.compile's default mode and
    PyTorch under bfloat16 autocast; the step's kernels and library calls in metajit."""
    import metajit.nn.functional as F
    from metajit import optim
    model, torch_model, images, labels = training_models(name, mj, torch)
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

    torch_model = torch_model.cuda()
    torch_optimizer = torch.optim.SGD(torch_model.parameters(), lr=0.01, momentum=0.9)
    tx, ty = torch.from_numpy(images).cuda(), torch.from_numpy(labels).cuda()

    def torch_step(forward, precision=None):
        def step():
            if precision is None:
                loss = torch.nn.functional.cross_entropy(forward(tx), ty)
            else:
                with torch.autocast("cuda", dtype=precision):
                    loss = torch.nn.functional.cross_entropy(forward(tx), ty)
            torch_optimizer.zero_grad()
            loss.backward()
            torch_optimizer.step()
        return step

    start = time.perf_counter()
    step_metajit()
    mj.cuda.synchronize()
    first_step = time.perf_counter() - start
    ours = timed(step_metajit, mj.cuda.synchronize, repeats, calls=1)
    kernels, library_calls = step_counts(mj, step_metajit)
    row = {"name": f"{TRAINING_NAMES[name]} training step", "metajit_ms": ours * 1e3, "first_step_s": first_step,
           "kernels_per_step": kernels, "library_calls_per_step": library_calls}
    # metajit computes float32 exactly (cuDNN's FMA kernels, cuBLAS without TF32); PyTorch's default lets cuDNN
    # use TF32, which keeps 10 mantissa bits of each operand. The ratio is against PyTorch in float32.
    row["torch_tf32_ms"] = timed(torch_step(torch_model), torch.cuda.synchronize, repeats, calls=1) * 1e3
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    row["torch_ms"] = timed(torch_step(torch_model), torch.cuda.synchronize, repeats, calls=1) * 1e3
    if compiled:  # torch.compile's default mode; its compile time is reported apart from the step
        compiled_model = torch.compile(torch_model)
        start = time.perf_counter()
        torch_step(compiled_model)()
        torch.cuda.synchronize()
        row["torch_compile_first_s"] = time.perf_counter() - start
        row["torch_compile_ms"] = timed(torch_step(compiled_model), torch.cuda.synchronize, repeats, calls=1) * 1e3
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved
    if autocast:  # the mixed-precision reference point (metajit has no bfloat16 autocast yet)
        row["torch_bf16_ms"] = timed(torch_step(torch_model, torch.bfloat16), torch.cuda.synchronize, repeats,
                                     calls=1) * 1e3
    if profile:  # where the step's time goes, kernel by kernel (each launch synchronized)
        with mj.profile() as report:
            step_metajit()
        print(report.table(20), flush=True)
    row["last_losses"] = [float(loss.item()) for loss in losses[-3:]]
    return row


TRAINING_NAMES = {"resnet18": "ResNet-18 (batch 32, 3x32x32)",
                  "transformer": "Transformer LM (2 blocks, width 256, batch 16 x 128 tokens)"}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--only", default="chain,softmax,resnet18,transformer")
    parser.add_argument("--profile", action="store_true", help="print each training step's kernels by time")
    parser.add_argument("--no-compile", action="store_true", help="leave out torch.compile (it compiles for a minute)")
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
    for name in arguments.only.split(","):
        if name in TRAINING_NAMES:
            row = benchmark_training(mj, torch, max(5, arguments.repeats // 4), name, profile=arguments.profile,
                                     compiled=not arguments.no_compile)
        else:
            row = {"chain": benchmark_chain, "softmax": benchmark_softmax}[name](mj, torch, arguments.repeats)
        rows.append(row)
        print(row, flush=True)
    text = report(rows, device, arguments)
    print(text)
    if arguments.output:
        with open(arguments.output, "w") as stream:
            stream.write(text)
    return 0


def report(rows, device, arguments):
    """bench/CUDA.md: the memory-bound kernels against a copy, then the training steps against PyTorch's modes."""
    command = " ".join(["python bench/cuda_benchmark.py"] + sys.argv[1:])
    lines = [f"# CUDA benchmark on {device}", "", f"`{command}`", "",
             "Other / metajit above 1 means metajit is faster; GB/s counts one read and one write of the data.", "",
             "| benchmark | metajit ms | PyTorch ms | PyTorch / metajit | metajit GB/s | limit GB/s | of limit |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        if "limit_gbps" in row:
            lines.append(f"| {row['name']} | {row['metajit_ms']:.3f} | {row['torch_ms']:.3f} | "
                         f"{row['torch_ms'] / row['metajit_ms']:.2f}x | {row['metajit_gbps']:.0f} | "
                         f"{row['limit_gbps']:.0f} ({row['limit']}) | {row['metajit_gbps'] / row['limit_gbps']:.0%} |")
    training = [row for row in rows if "kernels_per_step" in row]
    if training:
        lines += ["", "Training steps (SGD with momentum). PyTorch float32 has TF32 off, as metajit computes; "
                  "its defaults (TF32 on) and bfloat16 autocast are shown for reference.", "",
                  "| model | metajit ms | kernels + library calls | PyTorch float32 ms | PyTorch / metajit | "
                  "torch.compile ms | compile / metajit | PyTorch TF32 ms | PyTorch bf16 autocast ms |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for row in training:
            ours = row["metajit_ms"]
            compiled = (f"{row['torch_compile_ms']:.3f} | {row['torch_compile_ms'] / ours:.2f}x"
                        if "torch_compile_ms" in row else "not run | ")
            lines.append(f"| {row['name']} | {ours:.3f} | {row['kernels_per_step']:.0f} + "
                         f"{row['library_calls_per_step']:.0f} | {row['torch_ms']:.3f} | "
                         f"{row['torch_ms'] / ours:.2f}x | "
                         f"{compiled} | {row['torch_tf32_ms']:.3f} | {row.get('torch_bf16_ms', float('nan')):.3f} |")
        lines += [""] + [f"- {row['name']}: metajit's first step {row['first_step_s']:.1f} s (compiles its kernels)"
                         + (f"; torch.compile's first step {row['torch_compile_first_s']:.1f} s"
                            if "torch_compile_first_s" in row else "") for row in training]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

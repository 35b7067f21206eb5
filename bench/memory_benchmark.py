"""Memory benchmark (issue 45 part 6): a training step's peak memory and time under mj.flags.memory_budget.

For ResNet-18 (CIFAR stem, 3x32x32) and the transformer LM of bench/training_benchmark.py, at two batch sizes each:
metajit with no budget, with budgets of 1/2 and 1/4 of that run's peak, and with mj.utils.checkpoint around every
block; PyTorch eager and torch.utils.checkpoint around every block, in the same run. Every configuration runs in a
fresh process (so one's cached blocks do not count in another's peak), with the usual kernel cache. Writes
bench/MEMORY.md.

What is measured:
- metajit's peak: `mj.max_memory_allocated()` over the timed steps (after `mj.reset_peak_memory_stats()`): every
  live buffer, parameters and optimizer state included. That is what the budget bounds.
- "step adds": that peak minus what was allocated when the step began (parameters, momentum, the batch), for
  metajit; for PyTorch (whose CPU allocator keeps no statistics) the growth of the resident set over the timed
  steps after warm-up (VmHWM after resetting it through /proc/self/clear_refs, less VmRSS before them), with
  MALLOC_MMAP_THRESHOLD_=131072 so that glibc maps every block of 128 KiB or more on its own and unmaps it when
  freed: the growth is then PyTorch's activations, gradients and workspaces. PyTorch's "peak" is that growth plus
  its parameters, momentum and batch. Its step time comes from another process without that setting.
- step time: the median of the timed steps (forward, cross-entropy, backward, SGD with momentum), measured in one
  more process per framework that alternates its configurations step by step, so that another tenant's load on
  this shared host falls on all of them alike.
- the largest batch each framework trains under a fixed cap (CAPS_MIB): batches double from the smaller of
  BATCHES until a step's peak passes the cap (or the process fails), then bisect to within an eighth; metajit runs
  with `mj.flags.memory_budget` set to the cap, PyTorch eager as it is. A batch "fits" when its peak (as above)
  is at most the cap.

    python bench/memory_benchmark.py [--steps N] [--models resnet18,transformer]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, os.pardir, "python")))
sys.path.insert(0, HERE)

BATCHES = {"resnet18": (16, 32), "transformer": (8, 16)}
NAMES = {"resnet18": "ResNet-18 (CIFAR stem, 3x32x32)",
         "transformer": "Transformer LM (2 blocks, width 256, 128 tokens)"}
METAJIT_MODES = ("none", "half", "quarter", "checkpoint", "capped")
CAPS_MIB = {"resnet18": 512, "transformer": 256}
CAP_STEPS = 2  # timed steps per try of the largest-batch search
LARGEST_BATCH = 4096
TORCH_MODES = ("eager", "checkpoint")
WARMUP_STEPS = 2


def batch_of(name, batch):
    from training_benchmark import VOCABULARY
    rng = np.random.default_rng(0)
    if name == "transformer":
        tokens = rng.integers(0, VOCABULARY, (batch, 128)).astype(np.int64)
        return tokens, rng.integers(0, VOCABULARY, batch * 128).astype(np.int64)
    return rng.standard_normal((batch, 3, 32, 32)).astype(np.float32), rng.integers(0, 10, batch).astype(np.int64)


def blocks_of(name, model):
    if name == "transformer":
        return list(model.blocks)
    return [block for layer in (model.layer1, model.layer2, model.layer3, model.layer4) for block in layer]


def checkpoint_blocks(blocks, checkpoint):
    """Each block's forward runs through `checkpoint`, as a user would wrap it."""
    for block in blocks:
        forward = block.forward
        block.forward = lambda x, forward=forward: checkpoint(forward, x)


def metajit_step(name, batch, mode, budget_bytes):
    import metajit as mj
    import metajit.nn.functional as F
    from metajit import optim
    from metajit.models import resnet18
    from metajit.utils.checkpoint import checkpoint
    from training_benchmark import transformer_model
    mj.seed(0)
    model = transformer_model(mj.nn, F) if name == "transformer" else resnet18(num_classes=10, stem="cifar")
    if mode == "checkpoint":
        checkpoint_blocks(blocks_of(name, model), checkpoint)
    if mode in ("half", "quarter", "capped"):
        mj.flags.memory_budget = budget_bytes
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    inputs, labels = (mj.array(value) for value in batch_of(name, batch))

    def step():
        loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()
    return step


def torch_step(name, batch, mode, torch):
    import torch.utils.checkpoint
    from torch_reference_resnet import torch_resnet18_cifar
    from training_benchmark import transformer_model
    torch.manual_seed(0)
    model = transformer_model(torch.nn, torch.nn.functional) if name == "transformer" else torch_resnet18_cifar()
    if mode == "checkpoint":
        checkpoint_blocks(blocks_of(name, model),
                          lambda function, x: torch.utils.checkpoint.checkpoint(function, x, use_reentrant=False))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    inputs, labels = (torch.from_numpy(value) for value in batch_of(name, batch))

    def step():
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()
    step.tensors_held = lambda: ([parameter for parameter in model.parameters()] + [inputs] +
                                 [value for state in optimizer.state.values() for value in state.values()
                                  if torch.is_tensor(value)])
    return step


def resident_mib(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def worker(framework, name, batch, mode, budget_bytes, steps):
    """One configuration in a fresh process; prints a JSON line."""
    if framework == "metajit":
        import metajit as mj
        step = metajit_step(name, batch, mode, budget_bytes)
    else:
        sys.path.insert(0, os.path.join(HERE, os.pardir, "tests", "python"))
        import torch
        torch.set_num_threads(os.cpu_count())
        step = torch_step(name, batch, mode, torch)
    losses = [step() for _ in range(WARMUP_STEPS)]
    baseline = resident_mib("VmRSS")
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # VmHWM starts again from VmRSS
    result = {}
    if framework == "metajit":
        mj.reset_peak_memory_stats()
        held = mj.memory_allocated()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - start)
    result["resident_growth_mib"] = resident_mib("VmHWM") - baseline
    if framework == "metajit":
        result["peak_mib"] = mj.max_memory_allocated() / 2 ** 20
        result["step_adds_mib"] = (mj.max_memory_allocated() - held) / 2 ** 20
        result["report"] = mj.memory_plan_report()
    else:
        result["step_adds_mib"] = result["resident_growth_mib"]
        # What the step holds anyway (parameters, momentum; its gradients were dropped by zero_grad), plus growth.
        held = sum(value.numel() * value.element_size() for value in step.tensors_held())
        result["peak_mib"] = held / 2 ** 20 + result["resident_growth_mib"]
    result["seconds"] = statistics.median(times)
    result["losses"] = losses
    print(json.dumps(result))


def timing_worker(framework, name, batch, budgets, steps):
    """Step times of every configuration of one framework in one process, alternating configuration step by step
    (this host is shared: another tenant's load then falls on all of them alike); prints a JSON line."""
    if framework == "metajit":
        import metajit as mj
        plain, checkpointed = (metajit_step(name, batch, mode, 0) for mode in ("none", "checkpoint"))

        def under(step, budget):
            def run():
                mj.flags.memory_budget = budget
                return step()
            return run
        configurations = {"none": under(plain, 0), "half": under(plain, budgets["half"]),
                          "quarter": under(plain, budgets["quarter"]), "checkpoint": under(checkpointed, 0)}
    else:
        sys.path.insert(0, os.path.join(HERE, os.pardir, "tests", "python"))
        import torch
        torch.set_num_threads(os.cpu_count())
        configurations = {"torch_" + mode: torch_step(name, batch, mode, torch) for mode in TORCH_MODES}
    for step in configurations.values():
        for _ in range(WARMUP_STEPS):
            step()
    times = {mode: [] for mode in configurations}
    for _ in range(steps):
        for mode, step in configurations.items():
            start = time.perf_counter()
            step()
            times[mode].append(time.perf_counter() - start)
    print(json.dumps({mode: statistics.median(values) for mode, values in times.items()}))


def run_worker(framework, name, batch, mode, budget_bytes, steps, map_large_blocks=False):
    environment = dict(os.environ)
    if map_large_blocks:  # blocks of 128 KiB and more are mapped and unmapped, so the resident set tracks them
        environment["MALLOC_MMAP_THRESHOLD_"] = "131072"
    process = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", framework, name, str(batch), mode,
                              str(budget_bytes), str(steps)], capture_output=True, text=True, env=environment)
    if process.returncode != 0:
        raise RuntimeError(f"{framework} {name} batch {batch} {mode} failed:\n{process.stderr[-4000:]}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def peak_under_cap(framework, name, batch, cap_mib):
    """The peak of a few steps at `batch` (metajit with the cap as its budget), or None when the process failed
    (out of memory)."""
    mode = "capped" if framework == "metajit" else "eager"
    try:
        result = run_worker(framework, name, batch, mode, int(cap_mib * 2 ** 20), CAP_STEPS,
                            map_large_blocks=framework == "torch")
    except RuntimeError:
        return None
    return result["peak_mib"]


def largest_batch(framework, name, cap_mib):
    """The largest batch whose step peaks at most cap_mib, and every try as {batch: peak or None}."""
    tries = {}

    def fits(batch):
        tries[batch] = peak_under_cap(framework, name, batch, cap_mib)
        print(f"  {framework} batch {batch}: peak {tries[batch]} MiB", flush=True)
        return tries[batch] is not None and tries[batch] <= cap_mib

    low, high = 0, None
    batch = min(BATCHES[name])
    while high is None and batch <= LARGEST_BATCH:
        if fits(batch):
            low, batch = batch, batch * 2
        else:
            high = batch
    if high is None:
        return low, tries
    while high - low > max(1, low // 8):
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return low, tries


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="timed steps per configuration")
    parser.add_argument("--models", default="resnet18,transformer")
    parser.add_argument("--output", default=os.path.join(HERE, "MEMORY.md"))
    parser.add_argument("--no-largest-batch", dest="largest_batch", action="store_false",
                        help="skip the search for the largest batch under a fixed cap")
    parser.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    parser.add_argument("--timing-worker", nargs=5, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.timing_worker:
        framework, name, batch, budgets, steps = arguments.timing_worker
        timing_worker(framework, name, int(batch), json.loads(budgets), int(steps))
        return
    if arguments.worker:
        framework, name, batch, mode, budget_bytes, steps = arguments.worker
        worker(framework, name, int(batch), mode, int(budget_bytes), int(steps))
        return
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    started = time.time()
    rows = []
    for name in arguments.models.split(","):
        for batch in BATCHES[name]:
            results = {}
            print(f"{name} batch {batch}: metajit without a budget ...", flush=True)
            results["none"] = run_worker("metajit", name, batch, "none", 0, arguments.steps)
            unconstrained = results["none"]["peak_mib"] * 2 ** 20
            for mode, fraction in (("half", 0.5), ("quarter", 0.25), ("checkpoint", None)):
                print(f"{name} batch {batch}: metajit {mode} ...", flush=True)
                budget = int(unconstrained * fraction) if fraction else 0
                results[mode] = run_worker("metajit", name, batch, mode, budget, arguments.steps)
                print(f"  peak {results[mode]['peak_mib']:.0f} MiB, {results[mode]['seconds'] * 1000:.0f} ms",
                      flush=True)
                results[mode]["budget_mib"] = budget / 2 ** 20
            if torch_version:
                for mode in TORCH_MODES:
                    print(f"{name} batch {batch}: PyTorch {mode} ...", flush=True)
                    # Memory with every large block mapped on its own (a fresh mapping per tensor, page faults on
                    # every first touch, made PyTorch's steps 2-2.5x slower: its times come from timing_worker).
                    results["torch_" + mode] = run_worker("torch", name, batch, mode, 0, arguments.steps,
                                                          map_large_blocks=True)
            print(f"{name} batch {batch}: step times, configurations alternating ...", flush=True)
            budgets = {mode: int(results[mode]["budget_mib"] * 2 ** 20) for mode in ("half", "quarter")}
            for framework in ("metajit", "torch") if torch_version else ("metajit",):
                process = subprocess.run([sys.executable, os.path.abspath(__file__), "--timing-worker", framework,
                                          name, str(batch), json.dumps(budgets), str(arguments.steps)],
                                         capture_output=True, text=True)
                if process.returncode != 0:
                    raise RuntimeError(f"{framework} {name} batch {batch} timing failed:\n{process.stderr[-4000:]}")
                for mode, seconds in json.loads(process.stdout.strip().splitlines()[-1]).items():
                    results[mode]["seconds"] = seconds
            # Recomputation must not change the numbers: within a framework (whose initialisations differ) the
            # first step's loss agrees everywhere (later steps differ by float32 rounding through the updates).
            for mode, result in results.items():
                first = results["torch_eager" if mode.startswith("torch") else "none"]["losses"][0]
                if not np.isclose(result["losses"][0], first, rtol=1e-4):
                    raise RuntimeError(f"{name} batch {batch} {mode}: first loss {result['losses'][0]} != {first}")
            rows.append((name, batch, results))
    largest = []
    if arguments.largest_batch:
        for name in arguments.models.split(","):
            print(f"{name}: the largest batch under {CAPS_MIB[name]} MiB ...", flush=True)
            frameworks = ("metajit", "torch") if torch_version else ("metajit",)
            largest.append((name, {framework: largest_batch(framework, name, CAPS_MIB[name])
                                   for framework in frameworks}))
    write_report(arguments, rows, largest, torch_version, time.time() - started)


def write_report(arguments, rows, largest, torch_version, seconds):
    lines = ["# Memory benchmark", "",
             f"`python bench/memory_benchmark.py --steps {arguments.steps}` (`make bench-memory`), "
             f"{time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
             f"PyTorch {torch_version or 'not installed'} (CPU); {seconds / 60:.1f} minutes. Memory: each "
             "configuration in a fresh process. Step times: each framework's configurations in one process, "
             "alternating step by step (the host is shared), medians of the timed steps after two untimed ones.", "",
             "Columns: *peak* is `mj.max_memory_allocated()` over the timed steps (every live buffer, parameters and "
             "momentum included: what `mj.flags.memory_budget` bounds); *step adds* is that peak less what was "
             "allocated when the step began, or for PyTorch (no allocator statistics on the CPU) the growth of the "
             "resident set over the timed steps; *budget* is the bytes given to `mj.flags.memory_budget` (1/2 and "
             "1/4 of the unbudgeted peak); *recomputed* counts the clones backward made (of which matrix products, "
             "convolutions and other reductions); *x time* is the step time over metajit's unbudgeted one.", ""]
    labels = {"none": "metajit, no budget", "half": "metajit, budget 1/2", "quarter": "metajit, budget 1/4",
              "checkpoint": "metajit, mj.utils.checkpoint per block", "torch_eager": "PyTorch eager",
              "torch_checkpoint": "PyTorch, torch.utils.checkpoint per block"}
    for name, batch, results in rows:
        lines += [f"## {NAMES[name]}, batch {batch}", "",
                  "| configuration | budget MiB | peak MiB | step adds MiB | under budget | recomputed | step ms "
                  "| x time |",
                  "|---|---:|---:|---:|---|---:|---:|---:|"]
        reference = results["none"]["seconds"]
        for mode, result in results.items():
            report = result.get("report") or {}
            budget = result.get("budget_mib")
            peak = result.get("peak_mib")
            under = "" if not budget else ("yes" if peak <= budget else "no")
            recomputed = (f"{report['recomputed_nodes']} ({report['recomputed_contractions']})"
                          if report.get("active") else "")
            lines.append(f"| {labels[mode]} | {f'{budget:.0f}' if budget else ''} | "
                         f"{f'{peak:.0f}' if peak is not None else ''} | {result['step_adds_mib']:.0f} | {under} | "
                         f"{recomputed} | {result['seconds'] * 1000:.0f} | {result['seconds'] / reference:.2f} |")
        lines.append("")
    if largest:
        lines += ["## The largest batch under a fixed cap", "",
                  "Batches double until a step's peak passes the cap, then bisect to within an eighth; metajit runs "
                  "with `mj.flags.memory_budget` equal to the cap. Tries list each batch with its peak in MiB "
                  "(\u2014: the process failed).", "",
                  "| model | cap MiB | metajit batch | PyTorch eager batch | metajit / PyTorch | metajit tries | "
                  "PyTorch tries |", "|---|---:|---:|---:|---:|---|---|"]
        for name, found in largest:
            def tries_text(tries):
                return ", ".join(f"{batch}: {peak:.0f}" if peak is not None else f"{batch}: \u2014"
                                 for batch, peak in sorted(tries.items()))
            ours, theirs = found["metajit"], found.get("torch")
            ratio = f"{ours[0] / theirs[0]:.2f}" if theirs and theirs[0] else ""
            lines.append(f"| {NAMES[name]} | {CAPS_MIB[name]} | {ours[0]} | {theirs[0] if theirs else ''} | {ratio} | "
                         f"{tries_text(ours[1])} | {tries_text(theirs[1]) if theirs else ''} |")
        lines += ["", "Target (issue 45): the largest batch under a fixed cap at least 2x PyTorch eager's.", ""]
    lines += ["Target (issue 45): under a budget of half the unconstrained peak, each model trains within it at most "
              "1.3x slower. See docs/memory.md for what the budget's model counts and what it leaves out.", "",
              "Reading the tables: the budget shrinks what the step adds on top of what it holds anyway; it cannot "
              "shrink parameters, momentum and gradients (128 MiB for ResNet-18: more than half its unbudgeted peak "
              "at batch 16, so no plan meets a budget of 1/2 there) or oneDNN's Winograd scratchpad (up to 44 MiB at "
              "batch 32, not in the budget's model). Without a budget, the scratchpad and the layout copies oneDNN "
              "keeps for backward are most of what puts metajit's peak above PyTorch's (issue 45 part 4), and they "
              "stay when blocks are checkpointed, so mj.utils.checkpoint saves less of ResNet-18's peak than "
              "torch.utils.checkpoint does.", ""]
    with open(arguments.output, "w") as output:
        output.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

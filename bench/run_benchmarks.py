#!/usr/bin/env python3
"""metajit benchmarks for the foundation issue, run by `make bench`: fused chain vs a STREAM triad and PyTorch
eager, cold compile and warm disk-cache load per kernel, cost of recording one lazy op, and a 16M sum.

Everything is measured side by side in one process (the disk-load test in one fresh subprocess), printed as a
table and written to bench/RESULTS.md. Uses the public API only; PyTorch is optional and skipped with a note.
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import metajit as mj
except ImportError:  # run directly from a checkout without PYTHONPATH=python
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
    import metajit as mj

torch = None  # imported in main(), so the disk-load subprocess does not pay for it


def import_torch():
    global torch
    try:
        import torch as imported
    except ImportError:
        return
    torch = imported


N = 16 * 1024 * 1024             # elements in the big arrays (64 MB of float32)
COMPILE_KERNELS = 20             # distinct small kernels for the compile / load measurements
SMALL = 256                      # elements in the tiny tensors of the compile / load / recording tests
RECORD_OPS = 100_000             # recorded ops in total ...
RECORD_CHAIN = 1_000             # ... in fresh chains of this length
TARGETS = {"chain_vs_triad": 1.3, "speedup_vs_torch": 8.0, "compile_ms": 15.0, "load_ms": 0.1, "record_us": 1.0}


# ---------------------------------------------------------------------------------------------------------- helpers
def median(values):
    return statistics.median(values)


def timed(function):
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def chain(a, b):
    """The issue's chain. Works for metajit Vars and torch tensors alike."""
    if torch is not None and isinstance(a, torch.Tensor):
        return torch.relu(torch.exp(a) * b + 1) * 2
    return (a.exp() * b + 1).relu() * 2


def small_kernel(x, index):
    """Distinct kernel number `index`: the chain with a different (exactly representable) constant."""
    return ((x.exp() * (1.0 + index * 0.125) + 1.0).relu() * 2.0)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or "unknown"


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return "AVX-512" if "avx512f" in flags else ("AVX2" if "avx2" in flags else "no AVX2")
    except OSError:
        pass
    return "unknown"


# ------------------------------------------------------------------------------------------- 1. chain vs triad
def bench_chain_and_triad(runs, rng, others=()):
    a_np = rng.random(N, dtype=np.float32) * 2 - 1
    b_np = rng.random(N, dtype=np.float32)
    c_np = rng.random(N, dtype=np.float32)
    a, b, c = mj.array(a_np), mj.array(b_np), mj.array(c_np)
    b64, c64 = mj.array(b_np.astype(np.float64)), mj.array(c_np.astype(np.float64))

    def chain_call():
        return chain(a, b).numpy()

    def triad32_call():
        return (b + c * 3.0).numpy()

    def triad64_call():
        return (b64 + c64 * 3.0).numpy()

    # Warm up (compile, fill the allocator's free lists) and check the result once.
    expected = np.maximum(np.exp(a_np) * b_np + 1, 0) * 2  # all positive: exp(a) * b + 1 >= 1
    np.testing.assert_allclose(chain_call(), expected, rtol=2e-6, atol=1e-6)
    for function in (chain_call, triad32_call, triad64_call):
        for _ in range(2):
            function()

    # Interleave the measurements so drift on a noisy machine hits every variant alike.
    times = {"chain": [], "chain_sync": [], "chain_plan": [], "triad32": [], "triad64": []}
    # Results are dropped right away, so each call reuses the output block its predecessor released.
    for _ in range(runs):
        times["chain"].append(timed(chain_call))
        y = chain(a, b)
        times["chain_plan"].append(timed(lambda: mj.inspect_kernels(y)))
        times["chain_sync"].append(timed(lambda: y.sync()))
        y = None
        times["triad32"].append(timed(triad32_call))
        times["triad64"].append(timed(triad64_call))
    kernels = mj.inspect_kernels(chain(a, b))
    result = {name: median(values) for name, values in times.items()}
    result.update({name + "_min": min(values) for name, values in times.items()})
    result["chain_kernels"] = len(kernels)

    # numpy triad: single-threaded, two passes (a = 3*c; a += b) into a preallocated array.
    b_f64, c_f64 = b_np.astype(np.float64), c_np.astype(np.float64)
    out_f64 = np.empty_like(b_f64)

    def numpy_triad():
        np.multiply(c_f64, 3.0, out=out_f64)
        np.add(out_f64, b_f64, out=out_f64)

    numpy_triad()
    numpy_times = [timed(numpy_triad) for _ in range(max(5, runs // 3))]
    result["numpy_triad64"], result["numpy_triad64_min"] = median(numpy_times), min(numpy_times)

    if torch is not None:
        ta, tb, tc = torch.from_numpy(a_np), torch.from_numpy(b_np), torch.from_numpy(c_np)
        tb64, tc64 = torch.from_numpy(b_f64), torch.from_numpy(c_f64)
        with torch.no_grad():
            # A peer's numerics are reported, not asserted (a wrong PyTorch result must not stop the benchmark).
            result["torch_max_relative_error"] = float(np.max(np.abs(chain(ta, tb).numpy() - expected) / expected))
            torch_times, torch_triad32, torch_triad64 = [], [], []
            chain(ta, tb)
            for _ in range(max(5, runs // 3)):
                torch_times.append(timed(lambda: chain(ta, tb).numpy()))
                torch_triad32.append(timed(lambda: torch.add(tb, tc, alpha=3.0)))
                torch_triad64.append(timed(lambda: torch.add(tb64, tc64, alpha=3.0)))
        for name, values in (("torch_chain", torch_times), ("torch_triad32", torch_triad32),
                             ("torch_triad64", torch_triad64)):
            result[name], result[name + "_min"] = median(values), min(values)

    # Jittor / tinygrad (bench/other_frameworks.py): lazy, so a call ends when the result is computed. Their
    # numerics are reported like PyTorch's.
    result["others"] = {}
    for adapter in others:
        x, y = adapter.array(a_np), adapter.array(b_np)

        def other_call():
            outputs = adapter.chain(x, y)
            adapter.finish(outputs)
            return outputs[0]
        error = float(np.max(np.abs(adapter.to_numpy(other_call()) - expected) / expected))
        other_call()
        other_times = [timed(other_call) for _ in range(max(5, runs // 3))]
        result["others"][adapter.label] = {"median": median(other_times), "min": min(other_times),
                                           "error": error, "description": adapter.description}
    return result


# --------------------------------------------------------------------------------------- 2. cold compile per kernel
def bench_cold_compile(cache_dir, rng):
    mj.flags.cache_dir = cache_dir
    mj._core.clear_memory_cache()
    x = mj.array(rng.random(SMALL, dtype=np.float32))
    compile_ms, wall_ms, compiled = [], [], 0
    for index in range(COMPILE_KERNELS):
        before = mj.stats()
        y = small_kernel(x, index)
        wall_ms.append(timed(lambda: y.sync()) * 1e3)
        after = mj.stats()
        compile_ms.append((after["compile_seconds"] - before["compile_seconds"]) * 1e3)
        compiled += int(after["kernels_compiled"] - before["kernels_compiled"])
    # Informational: kernels with no transcendental at all, to separate fixed compile cost from kernel content.
    trivial_ms = []
    for index in range(COMPILE_KERNELS // 2):
        before = mj.stats()["compile_seconds"]
        (x * (100.0 + index * 0.125) + 1.0).sync()
        trivial_ms.append((mj.stats()["compile_seconds"] - before) * 1e3)
    return {"compile_ms": compile_ms, "wall_ms": wall_ms, "compiled": compiled, "trivial_ms": trivial_ms}


# ---------------------------------------------------------------------------------- 3. warm disk-cache load per kernel
def disk_load_worker(cache_dir):
    """Runs in a fresh process: every kernel must come from the disk cache filled by bench_cold_compile."""
    mj.flags.cache_dir = cache_dir
    rng = np.random.default_rng(1)
    x = mj.array(rng.random(SMALL, dtype=np.float32))
    first_ms, memory_hit_ms = [], []
    before = mj.stats()
    for index in range(COMPILE_KERNELS):
        y = small_kernel(x, index)
        first_ms.append(timed(lambda: y.sync()) * 1e3)       # plan + disk load + run
        again = small_kernel(x, index)
        memory_hit_ms.append(timed(lambda: again.sync()) * 1e3)  # plan + memory hit + run
    after = mj.stats()
    print(json.dumps({
        "first_ms": first_ms,
        "memory_hit_ms": memory_hit_ms,
        "loaded_from_disk": int(after["kernels_loaded_from_disk"] - before["kernels_loaded_from_disk"]),
        "compiled": int(after["kernels_compiled"] - before["kernels_compiled"]),
    }))


def bench_disk_load(cache_dir):
    environment = dict(os.environ)
    environment["PYTHONPATH"] = (os.path.dirname(os.path.dirname(mj.__file__)) + os.pathsep
                                 + environment.get("PYTHONPATH", ""))
    process = subprocess.run([sys.executable, os.path.abspath(__file__), "--disk-load-worker", cache_dir],
                             capture_output=True, text=True, env=environment)
    if process.returncode != 0:
        raise RuntimeError(f"disk-load subprocess failed (exit {process.returncode}):\n{process.stderr}")
    result = json.loads(process.stdout.strip().splitlines()[-1])
    result["load_ms"] = [first - hit for first, hit in zip(result["first_ms"], result["memory_hit_ms"])]
    return result


# ------------------------------------------------------------------------------------- 4. recording one lazy op
def bench_recording(repeats):
    """Per-op cost, best of `repeats` passes: noise on a shared machine only ever adds time."""
    x = mj.array(np.ones(SMALL, dtype=np.float32))
    chains = RECORD_OPS // RECORD_CHAIN

    def record_var_var():
        for _ in range(chains):
            y = x
            for _ in range(RECORD_CHAIN):
                y = y + x

    def record_var_scalar():
        for _ in range(chains):
            y = x
            for _ in range(RECORD_CHAIN):
                y = y * 1.0

    def empty_loop():  # the Python loop itself, for reference
        for _ in range(chains):
            y = x
            for _ in range(RECORD_CHAIN):
                y = x
        return y

    result = {}
    for name, function in (("var_var", record_var_var), ("var_scalar", record_var_scalar), ("loop", empty_loop)):
        function()
        result[name] = min(timed(function) for _ in range(repeats)) / RECORD_OPS * 1e6
    if torch is not None:
        one = torch.ones(1)

        def torch_add():
            for _ in range(chains):
                y = one
                for _ in range(RECORD_CHAIN):
                    y = y + one

        def torch_functional_add():
            for _ in range(RECORD_OPS):
                torch.add(one, one)

        with torch.no_grad():
            for name, function in (("torch_add", torch_add), ("torch_functional_add", torch_functional_add)):
                function()
                result[name] = min(timed(function) for _ in range(repeats)) / RECORD_OPS * 1e6
    return result


# ----------------------------------------------------------------------------------------------------- 5. sum
def bench_sum(runs, rng, others=()):
    """Each implementation reads its own copy of the array, and their runs alternate after two warm-up runs each:
    run one after another on shared memory, the second would find the first's tail still in the last-level
    cache (a 64 MB array is only twice this host's L3)."""
    a_np = rng.random(N, dtype=np.float32)
    a = mj.array(a_np)
    reference = float(a_np.sum(dtype=np.float64))
    value = a.sum().item()
    assert abs(value - reference) <= 1e-4 * abs(reference), (value, reference)
    candidates = {"metajit": lambda: a.sum().item()}
    numpy_copy = a_np.copy()
    candidates["numpy"] = lambda: numpy_copy.sum()
    if torch is not None:
        ta = torch.from_numpy(a_np.copy())
        candidates["torch"] = lambda: ta.sum().item()
    for adapter in others:
        def other_sum(adapter=adapter, tensor=adapter.array(a_np.copy())):
            return adapter.total(tensor)[0].item()
        value = other_sum()
        if abs(value - reference) > 1e-4 * abs(reference):
            print(f"sum: {adapter.label} gives {value}, float64 numpy {reference}")
        candidates[adapter.label] = other_sum
    times = {name: [] for name in candidates}
    for function in candidates.values():
        function()
        function()
    for _ in range(runs):
        for name, function in candidates.items():
            times[name].append(timed(function))
    return {name: median(values) for name, values in times.items()}


# ------------------------------------------------------------------------------------------------------ report
def cpu_jiffies():
    """(busy, total) jiffies of the whole machine, from /proc/stat; None where unavailable."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(value) for value in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields[:8]) - idle, sum(fields[:8])


def other_load(jiffies_before, jiffies_after, own_before, own_after):
    """Share of the machine's CPU time used by other processes while the benchmark ran (0..1)."""
    if jiffies_before is None or jiffies_after is None:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    busy = (jiffies_after[0] - jiffies_before[0]) / ticks
    total = (jiffies_after[1] - jiffies_before[1]) / ticks
    own = sum(own_after[:4]) - sum(own_before[:4])
    return max(0.0, busy - own) / total if total > 0 else None


def status(ok):
    return "met" if ok else "**missed**"


def build_report(info, chain_result, compile_result, load_result, record_result, sum_result):
    chain_bytes = 3 * N * 4
    triad64_bytes = 3 * N * 8
    c, r, s = chain_result, record_result, sum_result
    lines = []
    add = lines.append

    def timing_row(label, key, nbytes, note):
        add(f"| {label} | {c[key]*1e3:.2f} | {c[key + '_min']*1e3:.2f} | {nbytes / c[key] / 1e9:.1f} | {note} |")

    add("# metajit benchmark results")
    add("")
    add("Generated by `bench/run_benchmarks.py` (`make bench`); every figure is measured in the same run "
        "(the disk-load test in one fresh subprocess). Times are medians unless a column says otherwise.")
    add("")
    add("| machine | |")
    add("|---|---|")
    add(f"| CPU | {info['cpu']}, {info['isa']}, last-level cache {info['l3']} |")
    add(f"| cores (os.cpu_count) | {info['cores']} |")
    add(f"| metajit threads | {info['threads']} |")
    add(f"| date | {info['date']} |")
    add(f"| Python / numpy / PyTorch | {info['python']} / {np.__version__} / {info['torch']} |")
    if info.get("other_load") is not None:
        add(f"| CPU used by other processes during the run | {info['other_load']*100:.0f}% of the machine |")
    add("")

    # ---- 1
    add("## 1. `relu(exp(a) * b + 1) * 2` on 16M float32, next to triads")
    add("")
    add("Traffic counted as 3 x 64 MB (read a, read b, write out). \"per call\" = build the lazy graph + "
        "`.numpy()` (zero-copy). Triads compute `b + 3*c`; GB/s count 3 arrays as STREAM does. Runs of all "
        "metajit rows are interleaved, so machine noise hits them alike.")
    add("")
    add("| measurement | median ms | best ms | GB/s (median) | note |")
    add("|---|---:|---:|---:|---|")
    timing_row("metajit chain, per call", "chain", chain_bytes,
               f"{c['chain_kernels']} fused kernel" + ("" if c["chain_kernels"] == 1 else "s (expected 1)"))
    timing_row("metajit chain, `sync()` only", "chain_sync", chain_bytes, "graph already built")
    add(f"| metajit chain, plan only (`inspect_kernels`) | {c['chain_plan']*1e3:.3f} | {c['chain_plan_min']*1e3:.3f} "
        f"| | fuse + lower + render + hash: kernel time is about sync - plan = "
        f"{(c['chain_sync'] - c['chain_plan'])*1e3:.2f} ms |")
    timing_row("**triad bound**: metajit `b + c*3.0`, float32, per call", "triad32", chain_bytes,
               f"same traffic as the chain, {info['threads']} threads")
    timing_row("STREAM triad: metajit `b + c*3.0`, float64", "triad64", triad64_bytes,
               f"3 x 128 MB, {info['threads']} threads")
    timing_row("STREAM triad: numpy float64 (`out = 3*c; out += b`)", "numpy_triad64", triad64_bytes,
               "1 thread, 2 passes (5 arrays of real traffic)")
    if "torch_chain" in c:
        timing_row("STREAM triad: PyTorch `add(b, c, alpha=3)`, float32", "torch_triad32", chain_bytes,
                   f"{info['torch_threads']} threads, allocates its output")
        timing_row("STREAM triad: PyTorch `add(b, c, alpha=3)`, float64", "torch_triad64", triad64_bytes,
                   f"{info['torch_threads']} threads, allocates its output")
        error = c["torch_max_relative_error"]
        timing_row("PyTorch eager chain", "torch_chain", chain_bytes,
                   f"5 ops, {info['torch_threads']} threads" +
                   (f"; **result differs from numpy by up to {error:.1e} (relative)**" if error > 1e-5 else ""))
    else:
        add("| PyTorch eager chain | – | – | – | skipped: torch is not installed (`pip install torch`) |")
    for label, other in c["others"].items():
        error = other["error"]
        add(f"| {label} chain | {other['median']*1e3:.2f} | {other['min']*1e3:.2f} | "
            f"{chain_bytes / other['median'] / 1e9:.1f} | {other['description']}; metajit per call / this: "
            f"{c['chain'] / other['median']:.3f}x"
            + (f"; **result differs from numpy by up to {error:.1e} (relative)**" if error > 1e-5 else "") + " |")
    if not c["others"]:
        add("| Jittor, tinygrad chains | – | – | – | not installed (`make bench-frameworks` installs them) |")
    add("")
    add(f"On this host the last-level cache ({info['l3']}) is larger than the 64 MB arrays, so these figures are "
        "partly cache bandwidth and move with what other tenants do; compare rows of one run, not across runs.")
    add("")

    # ---- targets
    compile_ms = compile_result["compile_ms"]
    load_ms = load_result["load_ms"]
    ratio, ratio_best = c["chain"] / c["triad32"], c["chain_min"] / c["triad32_min"]
    add("## Targets")
    add("")
    add("| target | measured | status |")
    add("|---|---|---|")
    add(f"| chain within {TARGETS['chain_vs_triad']}x of the triad bound (same traffic) | {ratio:.2f}x "
        f"({c['chain']*1e3:.2f} vs {c['triad32']*1e3:.2f} ms; best runs {ratio_best:.2f}x) | "
        f"{status(ratio <= TARGETS['chain_vs_triad'])} |")
    if "torch_chain" in c:
        speedup, speedup_best = c["torch_chain"] / c["chain"], c["torch_chain_min"] / c["chain_min"]
        add(f"| chain at least {TARGETS['speedup_vs_torch']:.0f}x faster than PyTorch eager | {speedup:.1f}x "
            f"({c['torch_chain']*1e3:.1f} vs {c['chain']*1e3:.2f} ms; best runs {speedup_best:.1f}x) | "
            f"{status(speedup >= TARGETS['speedup_vs_torch'])} |")
    else:
        add(f"| chain at least {TARGETS['speedup_vs_torch']:.0f}x faster than PyTorch eager | not measured "
            "(torch not installed) | – |")
    add(f"| median cold compile per kernel < {TARGETS['compile_ms']:.0f} ms | {median(compile_ms):.2f} ms "
        f"({compile_result['compiled']} kernels compiled, best {min(compile_ms):.2f} ms) | "
        f"{status(median(compile_ms) < TARGETS['compile_ms'])} |")
    load_ok = median(load_ms) < TARGETS["load_ms"] and load_result["compiled"] == 0
    add(f"| warm disk-cache load per kernel < {TARGETS['load_ms']} ms | {median(load_ms):.3f} ms "
        f"({load_result['loaded_from_disk']} loaded from disk, {load_result['compiled']} compiled) | "
        f"{status(load_ok)} |")
    add(f"| recording one lazy op from Python <= {TARGETS['record_us']:.0f} µs | {r['var_var']:.2f} µs "
        f"(`y = y + x`) | {status(r['var_var'] <= TARGETS['record_us'])} |")
    add("")

    # ---- 2-3
    add(f"## 2-3. Compile and cache load per kernel ({COMPILE_KERNELS} distinct chain kernels, {SMALL} elements)")
    add("")
    add("| measurement | median ms | min | max | note |")
    add("|---|---:|---:|---:|---|")
    add(f"| cold compile (`compile_seconds` delta) | {median(compile_ms):.2f} | {min(compile_ms):.2f} | "
        f"{max(compile_ms):.2f} | first kernel of the process: {compile_ms[0]:.2f} ms |")
    trivial = compile_result["trivial_ms"]
    add(f"| cold compile of a trivial `x * k + 1` kernel | {median(trivial):.2f} | {min(trivial):.2f} | "
        f"{max(trivial):.2f} | informational: fixed cost vs kernel content |")
    wall = compile_result["wall_ms"]
    add(f"| cold first `sync()`, wall | {median(wall):.2f} | {min(wall):.2f} | {max(wall):.2f} | "
        "plan + compile + disk store + run |")
    first, hit = load_result["first_ms"], load_result["memory_hit_ms"]
    add(f"| warm: first `sync()` in a fresh process | {median(first):.3f} | {min(first):.3f} | {max(first):.3f} | "
        "plan + disk load + run |")
    add(f"| warm: the same graph again (memory hit) | {median(hit):.3f} | {min(hit):.3f} | {max(hit):.3f} | "
        "plan + run |")
    add(f"| **disk load** (first - memory hit) | {median(load_ms):.3f} | {min(load_ms):.3f} | {max(load_ms):.3f} | "
        f"first kernel of the process: {load_ms[0]:.3f} ms (one-time JIT set-up) |")
    add("")

    # ---- 4
    add(f"## 4. Recording one op from Python ({RECORD_OPS // 1000}k ops in fresh chains of {RECORD_CHAIN}, no sync)")
    add("")
    add("Best of 7 passes; dropping each finished chain is included.")
    add("")
    add("| measurement | µs per op |")
    add("|---|---:|")
    add(f"| metajit `y = y + x` (Var + Var, {SMALL} elements, recorded only) | {r['var_var']:.2f} |")
    add(f"| metajit `y = y * 1.0` (Var * Python scalar) | {r['var_scalar']:.2f} |")
    add(f"| the bare Python loop (`y = x`) | {r['loop']:.3f} |")
    if "torch_add" in r:
        add(f"| PyTorch eager `y = y + x` (1 element, executes) | {r['torch_add']:.2f} |")
        add(f"| PyTorch eager `torch.add(x, x)` (1 element) | {r['torch_functional_add']:.2f} |")
    else:
        add("| PyTorch eager | skipped: torch not installed |")
    add("")

    # ---- 5
    add("## 5. Sum of 16M float32 (informational; 64 MB read)")
    add("")
    add("Each implementation reads its own copy; their runs alternate after two warm-up runs each.")
    add("")
    add("| implementation | median ms | GB/s |")
    add("|---|---:|---:|")
    add(f"| metajit `a.sum().item()` | {s['metajit']*1e3:.2f} | {N*4/s['metajit']/1e9:.1f} |")
    add(f"| numpy `a.sum()` (1 thread) | {s['numpy']*1e3:.2f} | {N*4/s['numpy']/1e9:.1f} |")
    if "torch" in s:
        add(f"| PyTorch `a.sum().item()` ({info['torch_threads']} threads) | {s['torch']*1e3:.2f} | "
            f"{N*4/s['torch']/1e9:.1f} |")
    for label in s:
        if label not in ("metajit", "numpy", "torch"):  # Jittor, tinygrad
            add(f"| {label} `a.sum().item()` | {s[label]*1e3:.2f} | {N*4/s[label]/1e9:.1f} |")
    add("")
    return "\n".join(lines)


def last_level_cache():
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index3/size") as size:
            text = size.read().strip()
        return f"{int(text[:-1]) // 1024} MB" if text.endswith("K") and int(text[:-1]) >= 1024 else text
    except (OSError, ValueError):
        return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="timed runs per large-array measurement")
    parser.add_argument("--output", default=os.path.join(HERE, "RESULTS.md"), help="markdown file to write")
    parser.add_argument("--disk-load-worker", metavar="CACHE_DIR", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.disk_load_worker:
        disk_load_worker(arguments.disk_load_worker)
        return

    started = time.perf_counter()
    import_torch()
    info = {
        "cpu": cpu_model(), "isa": cpu_flags(), "l3": last_level_cache(), "cores": os.cpu_count(),
        "threads": mj.flags.num_threads, "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "python": sys.version.split()[0],
        "torch": torch.__version__ if torch is not None else "not installed (PyTorch rows skipped)",
        "torch_threads": torch.get_num_threads() if torch is not None else 0,
    }
    if torch is None:
        print("note: torch is not importable; PyTorch comparisons are skipped (pip install torch to include them)")
    from other_frameworks import installed_frameworks
    others = installed_frameworks()
    rng = np.random.default_rng(0)
    work = tempfile.mkdtemp(prefix="metajit-bench-")
    original_cache = mj.flags.cache_dir
    jiffies_before, own_before = cpu_jiffies(), os.times()
    try:
        # The big-array kernels get a private cache too, so a run never touches the user's cache.
        mj.flags.cache_dir = os.path.join(work, "big")
        print("1/5 chain vs triads vs PyTorch ...", flush=True)
        chain_result = bench_chain_and_triad(arguments.runs, rng, others)
        print("2/5 cold compile ...", flush=True)
        cold_dir = os.path.join(work, "cold")
        compile_result = bench_cold_compile(cold_dir, rng)
        print("3/5 warm disk-cache load (fresh subprocess) ...", flush=True)
        load_result = bench_disk_load(cold_dir)
        mj.flags.cache_dir = os.path.join(work, "big")
        print("4/5 recording cost ...", flush=True)
        record_result = bench_recording(repeats=7)
        print("5/5 sum ...", flush=True)
        sum_result = bench_sum(arguments.runs, rng, others)
    finally:
        mj.flags.cache_dir = original_cache
        shutil.rmtree(work, ignore_errors=True)
    info["other_load"] = other_load(jiffies_before, cpu_jiffies(), own_before, os.times())

    report = build_report(info, chain_result, compile_result, load_result, record_result, sum_result)
    report += f"\nTotal benchmark time: {time.perf_counter() - started:.0f} s.\n"
    print()
    print(report)
    with open(arguments.output, "w") as output:
        output.write(report)
    print(f"wrote {os.path.relpath(arguments.output)}")


if __name__ == "__main__":
    main()

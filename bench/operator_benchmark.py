"""Operator benchmark: metajit against PyTorch eager, single operators on the same inputs in the same run.

Operators (float32): softmax and layer norm over the last dim of [4096, 1024], the transpose of a [4096, 4096]
matrix (materialised), cumsum along the last dim of [256, 4096], a 1024^3 matmul, and a 3x3 conv2d
(N=32, 64 -> 64 channels, 56x56, padding 1) forward and forward+backward; PyTorch convolutions both in its default
NCHW layout and in channels_last; the matmul also against oneDNN's sgemm called directly. For each: the median
wall time over several timed runs after warm-up, GFLOP/s or GB/s, metajit's time over the other's, and the share
of a machine limit measured in the same run (a large matmul for compute, a STREAM triad for bandwidth). metajit
rows also say how many calls went to oneDNN (`library_calls`) and how long planning took. Results are checked
against each other once per operator, and the issue's operator targets are checked against the medians.

Writes a markdown table to bench/OPERATORS.md and a bar chart of the time ratios to bench/operators.png.

    python bench/operator_benchmark.py [--runs N] [--backward-runs N] [--output bench/OPERATORS.md]
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
from other_frameworks import installed_frameworks  # noqa: E402

ROWS, FEATURES = 4096, 1024                 # softmax / layer norm input
MATRIX = 1024                               # matmul M = N = K
TRANSPOSED = 4096                           # transpose input [4096, 4096]
SCANNED = (256, 4096)                       # cumsum input, summed along the last dim
BATCH, CHANNELS, SIZE, KERNEL = 32, 64, 56, 3  # conv2d: input [32, 64, 56, 56], weight [64, 64, 3, 3]
PEAK_MATRIX = 2048                          # matmul used as the compute limit
TRIAD_ELEMENTS = 16 * 1024 * 1024           # STREAM triad arrays (64 MB of float32 each)
LIMIT_RUNS = 10                             # runs of each machine-limit measurement (the best one counts)
OTHER_BUDGET_SECONDS = 10                   # Jittor / tinygrad stop timing an operator after this (at least 3 runs):
                                            # Jittor's convolution without oneDNN takes seconds a run


# ---------------------------------------------------------------------------------------------------- helpers
def machine_load():
    """(busy CPU seconds of the whole machine, elapsed CPU seconds of all cores, this process's CPU seconds)."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(value) for value in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + ticks[4]  # idle + iowait
    clock = os.sysconf("SC_CLK_TCK")
    own = os.times()
    return (sum(ticks) - idle) / clock, sum(ticks) / clock, own.user + own.system


def other_load(before, after):
    """Share of the machine's CPU time that other processes used between two machine_load() readings (0..1):
    on a 2-core host any of it slows both frameworks, so the report shows it."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    busy, total, own = (late - early for late, early in zip(after, before))
    return max(0.0, busy - own) / total


def timed(function):
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


class Operator:
    """One benchmarked operator: how to build fresh inputs and compute it in each framework, and its work.

    metajit_inputs() runs outside the timed region; metajit_compute(*inputs) returns the Vars to force, and the
    timed region ends after mj.sync() of all of them. torch_variants maps a label to (inputs, compute) in the same
    shape; PyTorch eager is synchronous on the CPU, so its compute returning is the end of the work.
    other_variants maps a label to (inputs, compute, adapter) for Jittor and tinygrad (bench/other_frameworks.py):
    lazy like metajit, so their timed region ends when adapter.finish() of the results returns.
    floor_variants maps a label to (inputs, compute, finish): not the operator but the least work any
    implementation of it must do (a copy with the same memory traffic), timed in the same alternation and not
    checked; its time is the floor that ratios against other frameworks can be read against."""

    def __init__(self, name, description, runs, metajit_inputs, metajit_compute, torch_variants=None,
                 flops=None, traffic_bytes=None, numpy_reference=None, direct_variants=None, other_variants=None,
                 floor_variants=None):
        self.name, self.description, self.runs = name, description, runs
        self.metajit_inputs, self.metajit_compute = metajit_inputs, metajit_compute
        self.torch_variants = torch_variants or {}
        # Like torch_variants, for a library called directly on numpy arrays (oneDNN's sgemm for the matmul).
        self.direct_variants = direct_variants or {}
        self.other_variants = other_variants or {}
        self.floor_variants = floor_variants or {}
        self.disagreeing = set()  # labels of other frameworks whose results failed the check against metajit's
        self.flops, self.traffic_bytes = flops, traffic_bytes
        self.numpy_reference = numpy_reference  # the check when PyTorch is missing; None: no check then


def onednn_sgemm():
    """oneDNN's `dnnl_sgemm`, called directly through ctypes: the same shared library metajit's lowering calls
    (Debian's libdnnl.so.2, already loaded by metajit), on the OpenMP team metajit sizes. None if it cannot be
    found. Returns a function computing a @ b for C-contiguous float32 matrices into a fresh array."""
    import ctypes
    try:
        library = ctypes.CDLL("libdnnl.so.2")
    except OSError:
        return None
    sgemm = library.dnnl_sgemm
    pointer, dim = ctypes.c_void_p, ctypes.c_int64
    sgemm.argtypes = [ctypes.c_char, ctypes.c_char, dim, dim, dim, ctypes.c_float, pointer, dim, pointer, dim,
                      ctypes.c_float, pointer, dim]
    sgemm.restype = ctypes.c_int

    def matmul(a, b):
        rows, inner = a.shape
        columns = b.shape[1]
        out = np.empty((rows, columns), dtype=np.float32)
        status = sgemm(b"N", b"N", rows, columns, inner, 1.0, a.ctypes.data, inner, b.ctypes.data, columns, 0.0,
                       out.ctypes.data, columns)
        if status != 0:
            raise RuntimeError(f"dnnl_sgemm failed with status {status}")
        return out
    return matmul


def aligned_copy(array):
    """A copy of `array` starting on a 64-byte boundary, like metajit's and PyTorch's allocations."""
    raw = np.empty(array.nbytes + 64, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64
    copy = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def torch_copy(torch, array):
    """`array` in PyTorch's own allocation, as mj.array copies into metajit's: numpy's large buffers start 16 bytes
    past a 64-byte boundary, which would put every AVX-512 load of PyTorch's across two cache lines."""
    return torch.from_numpy(array).clone()


# ------------------------------------------------------------------------------------------------- operators
def build_operators(torch, runs, backward_runs, rng, others=()):
    operators = []

    def other_variants(method, *arrays, gradients=0):
        """A variant per installed other framework (`others`): fresh tensors of `arrays`, the first `gradients` of
        them differentiated, made outside the timed region; then the adapter's `method` on them."""
        def inputs_for(adapter):
            return lambda: tuple(adapter.array(array, requires_grad=index < gradients)
                                 for index, array in enumerate(arrays))
        return {adapter.label: (inputs_for(adapter), getattr(adapter, method), adapter) for adapter in others}

    # Softmax and layer norm: standard normal rows. Traffic counts one read and one write of the tensor, the
    # least any implementation must move.
    rows = rng.standard_normal((ROWS, FEATURES), dtype=np.float32)
    row_bytes = 2 * rows.nbytes

    def row_variants(function):
        return {} if torch is None else {"PyTorch": (lambda: (torch_copy(torch, rows),), function)}

    # The floor of a row operator on this host: an elementwise x * 2 reads and writes the same bytes, with
    # nothing to compute. No softmax can beat its framework's copy, so metajit / PyTorch can only go as low as
    # (metajit's copy) / (PyTorch's softmax).
    row_floors = {"same traffic: metajit `x * 2.0`": (lambda: (mj.array(rows),), lambda x: [x * 2.0], mj.sync)}
    if torch is not None:
        row_floors["same traffic: PyTorch `x * 2.0`"] = (lambda: (torch_copy(torch, rows),), lambda x: [x * 2.0],
                                                         None)

    def numpy_softmax():
        shifted = np.exp(rows - rows.max(axis=-1, keepdims=True))
        return [shifted / shifted.sum(axis=-1, keepdims=True)]

    def numpy_layer_norm():
        centered = rows - rows.mean(axis=-1, keepdims=True)
        return [centered / np.sqrt((centered * centered).mean(axis=-1, keepdims=True) + 1e-5)]

    operators.append(Operator(
        "softmax", f"softmax, last dim of [{ROWS}, {FEATURES}]", runs,
        lambda: (mj.array(rows),), lambda x: [F.softmax(x, dim=-1)],
        row_variants(lambda x: [torch.softmax(x, dim=-1)]), traffic_bytes=row_bytes, numpy_reference=numpy_softmax,
        other_variants=other_variants("softmax", rows), floor_variants=row_floors))
    operators.append(Operator(
        "layer_norm", f"layer norm, last dim of [{ROWS}, {FEATURES}]", runs,
        lambda: (mj.array(rows),), lambda x: [F.layer_norm(x, [FEATURES])],
        row_variants(lambda x: [torch.nn.functional.layer_norm(x, [FEATURES])]),
        traffic_bytes=row_bytes, numpy_reference=numpy_layer_norm, other_variants=other_variants("layer_norm", rows),
        floor_variants=row_floors))

    # Transpose, materialised (a strided read along the written dim: metajit tiles it). Traffic: one read and
    # one write of the matrix.
    square = rng.standard_normal((TRANSPOSED, TRANSPOSED), dtype=np.float32)
    operators.append(Operator(
        "transpose", f"transpose of [{TRANSPOSED}, {TRANSPOSED}], materialised", runs,
        lambda: (mj.array(square),), lambda x: [x.T],
        {} if torch is None else {"PyTorch": (lambda: (torch_copy(torch, square),),
                                              lambda x: [x.t().contiguous()])},
        traffic_bytes=2 * square.nbytes, numpy_reference=lambda: [square.T],
        other_variants=other_variants("transpose", square)))

    # Cumulative sum along the last dim (metajit: blocked triangle sums, rendered as running sums). Traffic: one
    # read and one write.
    scanned = rng.standard_normal(SCANNED, dtype=np.float32)
    operators.append(Operator(
        "cumsum", f"cumsum, last dim of [{SCANNED[0]}, {SCANNED[1]}]", runs,
        lambda: (mj.array(scanned),), lambda x: [x.cumsum(-1)],
        {} if torch is None else {"PyTorch": (lambda: (torch_copy(torch, scanned),),
                                              lambda x: [torch.cumsum(x, -1)])},
        traffic_bytes=2 * scanned.nbytes, numpy_reference=lambda: [np.cumsum(scanned, axis=-1)],
        other_variants=other_variants("cumsum", scanned)))

    # Matmul: scaled so the products are about N(0, 1), which keeps the absolute tolerance of the check meaningful.
    left = rng.standard_normal((MATRIX, MATRIX), dtype=np.float32) / np.float32(np.sqrt(MATRIX))
    right = rng.standard_normal((MATRIX, MATRIX), dtype=np.float32)
    direct = onednn_sgemm()
    if direct is None:
        print("libdnnl.so.2 not found: no oneDNN-direct row for the matmul")
    operators.append(Operator(
        "matmul", f"matmul {MATRIX}x{MATRIX} @ {MATRIX}x{MATRIX}", runs,
        lambda: (mj.array(left), mj.array(right)), lambda a, b: [a @ b],
        {} if torch is None else {"PyTorch": (lambda: (torch_copy(torch, left), torch_copy(torch, right)),
                                              lambda a, b: [torch.mm(a, b)])},
        flops=2 * MATRIX ** 3, numpy_reference=lambda: [left @ right],
        other_variants=other_variants("matmul", left, right),
        direct_variants={} if direct is None else {
            "oneDNN `dnnl_sgemm` called directly": (lambda: (aligned_copy(left), aligned_copy(right)),
                                                    lambda a, b: [direct(a, b)])}))

    # Convolution. Scales chosen so the output and both gradients are all about N(0, 1): y ~ 24*sw*sx,
    # dx ~ 24*sw*sg, dw ~ sqrt(N*H*W)*sx*sg (24 = sqrt(C*3*3)).
    positions = BATCH * SIZE * SIZE
    input_scale = positions ** -0.25
    weight_scale = 1.0 / (np.sqrt(CHANNELS * KERNEL * KERNEL) * input_scale)
    images = (rng.standard_normal((BATCH, CHANNELS, SIZE, SIZE), dtype=np.float32) * input_scale).astype(np.float32)
    weight = (rng.standard_normal((CHANNELS, CHANNELS, KERNEL, KERNEL), dtype=np.float32)
              * weight_scale).astype(np.float32)
    upstream = (rng.standard_normal((BATCH, CHANNELS, SIZE, SIZE), dtype=np.float32) * input_scale).astype(np.float32)
    conv_flops = 2 * BATCH * CHANNELS * CHANNELS * SIZE * SIZE * KERNEL * KERNEL
    shape = f"N={BATCH}, {CHANNELS}->{CHANNELS} channels, {SIZE}x{SIZE}, 3x3, padding 1"

    def metajit_conv_inputs(requires_grad):
        def inputs():
            x, w = mj.array(images), mj.array(weight)
            if not requires_grad:
                return x, w
            x.requires_grad = True
            w.requires_grad = True
            return x, w, mj.array(upstream)
        return inputs

    def metajit_conv_backward(x, w, g):
        y = F.conv2d(x, w, padding=1)
        gx, gw = mj.grad((y * g).sum(), [x, w])
        return [y, gx, gw]

    def torch_conv_inputs(layout, requires_grad):
        def inputs():
            tensors = [torch_copy(torch, array).to(memory_format=layout) for array in (images, weight)]
            if requires_grad:
                tensors = [tensor.detach().requires_grad_() for tensor in tensors]
                tensors.append(torch_copy(torch, upstream).to(memory_format=layout))  # same layout as y
            return tuple(tensors)
        return inputs

    def torch_conv_backward(x, w, g):
        y = torch.nn.functional.conv2d(x, w, padding=1)
        gx, gw = torch.autograd.grad((y * g).sum(), [x, w])
        return [y, gx, gw]

    layouts = {} if torch is None else {"PyTorch": torch.contiguous_format,
                                        "PyTorch channels_last": torch.channels_last}
    operators.append(Operator(
        "conv2d", f"conv2d forward, {shape}", runs,
        metajit_conv_inputs(False), lambda x, w: [F.conv2d(x, w, padding=1)],
        {label: (torch_conv_inputs(layout, False), lambda x, w: [torch.nn.functional.conv2d(x, w, padding=1)])
         for label, layout in layouts.items()},
        flops=conv_flops, other_variants=other_variants("conv2d", images, weight)))
    operators.append(Operator(
        "conv2d_backward", f"conv2d forward+backward (y, dx, dw), {shape}", backward_runs,
        metajit_conv_inputs(True), metajit_conv_backward,
        {label: (torch_conv_inputs(layout, True), torch_conv_backward) for label, layout in layouts.items()},
        flops=3 * conv_flops, other_variants=other_variants("conv2d_backward", images, weight, upstream, gradients=2)))
    return operators


# ----------------------------------------------------------------------------------------------- measurement
def metajit_runner(operator):
    """One timed metajit run: (seconds, results, stats of that run)."""
    def run_once():
        inputs = operator.metajit_inputs()
        mj.reset_stats()
        start = time.perf_counter()
        results = operator.metajit_compute(*inputs)
        mj.sync(*results)
        seconds = time.perf_counter() - start
        return seconds, results, mj.stats()
    return run_once


def torch_runner(torch, operator, inputs, compute):
    def run_once():
        arguments = inputs()
        with torch.inference_mode(operator.name != "conv2d_backward"):  # forward-only: no autograd bookkeeping
            start = time.perf_counter()
            results = compute(*arguments)
            seconds = time.perf_counter() - start
        return seconds, results, None
    return run_once


def direct_runner(inputs, compute, finish=None):
    """A run of a library called directly (finish None: its call returning is the end of the work) or of a lazy
    framework whose finish(results) forces them."""
    def run_once():
        arguments = inputs()
        start = time.perf_counter()
        results = compute(*arguments)
        if finish is not None:
            finish(results)
        return time.perf_counter() - start, results, None
    return run_once


def as_numpy(label, operator, result):
    """One result of a variant's run as a numpy array, whichever framework made it."""
    if isinstance(result, np.ndarray):
        return result
    if label == "metajit":
        return result.numpy()
    if label in operator.other_variants:
        return operator.other_variants[label][2].to_numpy(result)
    if not hasattr(result, "detach"):  # a floor variant's metajit Var
        return result.numpy()
    return result.detach().numpy()


def measure(torch, operator):
    """Times metajit and every PyTorch (and direct library) variant of one operator, round-robin run by run, so
    drift on a shared machine hits all of them alike; returns ({label: samples}, {label: result values of one
    untimed run})."""
    runners = {"metajit": metajit_runner(operator)}
    runners.update({label: torch_runner(torch, operator, inputs, compute)
                    for label, (inputs, compute) in operator.torch_variants.items()})
    runners.update({label: direct_runner(inputs, compute)
                    for label, (inputs, compute) in operator.direct_variants.items()})
    runners.update({label: direct_runner(inputs, compute, adapter.finish)
                    for label, (inputs, compute, adapter) in operator.other_variants.items()})
    runners.update({label: direct_runner(inputs, compute, finish)
                    for label, (inputs, compute, finish) in operator.floor_variants.items()})
    values = {}
    for label, run_once in runners.items():
        # Two warm-up runs: the first compiles kernels, the second settles the allocators' free lists.
        for _ in range(2):
            run_once()
        results = run_once()[1]
        values[label] = [as_numpy(label, operator, result) for result in results]
        results = None
    samples = {label: {"times": [], "library_calls": [], "planning": []} for label in runners}
    for _ in range(operator.runs):
        for label, run_once in runners.items():
            times = samples[label]["times"]
            if label in operator.other_variants and len(times) >= 3 and sum(times) > OTHER_BUDGET_SECONDS:
                continue
            outcome = run_once()
            seconds, stats = outcome[0], outcome[2]
            outcome = None  # drop the results before the next run, so it can reuse their memory
            samples[label]["times"].append(seconds)
            if stats is not None:
                samples[label]["library_calls"].append(int(stats["library_calls"]))
                samples[label]["planning"].append(stats["planning_seconds"])
    return samples, values


def check(operator, label, ours, reference):
    """Fails loudly when metajit and the reference disagree (softmax needs a tighter atol: its values are ~1e-3)."""
    absolute = 1e-6 if operator.name == "softmax" else 1e-3
    assert len(ours) == len(reference), (operator.name, len(ours), len(reference))
    for index, (mine, theirs) in enumerate(zip(ours, reference)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-3, atol=absolute,
                                   err_msg=f"{operator.name}: metajit result {index} differs from {label}")


def measure_limits(torch, runs):
    """Compute peak (GFLOP/s of a large oneDNN matmul) and bandwidth (GB/s of STREAM triads); best runs, since
    these are ceilings and noise only ever slows a run down."""
    limits = {}
    rng = np.random.default_rng(1)
    left = rng.standard_normal((PEAK_MATRIX, PEAK_MATRIX), dtype=np.float32)
    right = rng.standard_normal((PEAK_MATRIX, PEAK_MATRIX), dtype=np.float32)
    peak_flops = 2 * PEAK_MATRIX ** 3
    if torch is not None:
        a, b = torch_copy(torch, left), torch_copy(torch, right)
        out = torch.empty(PEAK_MATRIX, PEAK_MATRIX)
        torch.mm(a, b, out=out)
        best = min(timed(lambda: torch.mm(a, b, out=out)) for _ in range(runs))
        limits["peak"] = (peak_flops / best / 1e9,
                          f"PyTorch `mm` {PEAK_MATRIX}^3 float32 (oneDNN/MKL), best of {runs}")
    else:  # metajit lowers the same product to oneDNN
        def metajit_matmul():
            mj.sync(a @ b)
        a, b = mj.array(left), mj.array(right)
        metajit_matmul()
        best = min(timed(metajit_matmul) for _ in range(runs))
        limits["peak"] = (peak_flops / best / 1e9,
                          f"metajit `a @ b` {PEAK_MATRIX}^3 float32 (oneDNN), best of {runs} (PyTorch not installed)")

    # STREAM triad a = b + s*c. numpy needs two passes (t = s*c; a = b + t): 5 arrays of traffic, one thread.
    # PyTorch (into a preallocated output) and metajit (one fused kernel) make one multi-threaded pass: 3 arrays.
    b = rng.random(TRIAD_ELEMENTS, dtype=np.float32)
    c = rng.random(TRIAD_ELEMENTS, dtype=np.float32)
    a, scratch = np.empty_like(b), np.empty_like(b)
    array_bytes = b.nbytes

    def numpy_triad():
        np.multiply(c, np.float32(3.0), out=scratch)
        np.add(b, scratch, out=a)

    numpy_triad()
    triads = {"numpy": (5 * array_bytes / min(timed(numpy_triad) for _ in range(runs)) / 1e9,
                        "numpy `multiply` + `add`, 1 thread, 5 array passes")}
    if torch is not None:
        tb, tc, ta = torch_copy(torch, b), torch_copy(torch, c), torch_copy(torch, a)
        torch.add(tb, tc, alpha=3.0, out=ta)
        best = min(timed(lambda: torch.add(tb, tc, alpha=3.0, out=ta)) for _ in range(runs))
        triads["torch"] = (3 * array_bytes / best / 1e9,
                           f"PyTorch `add(b, c, alpha=3, out=a)`, {torch.get_num_threads()} threads, 3 array passes")
    metajit_b, metajit_c = mj.array(b), mj.array(c)

    def metajit_triad():
        mj.sync(metajit_b + metajit_c * 3.0)

    metajit_triad()
    best = min(timed(metajit_triad) for _ in range(runs))
    triads["metajit"] = (3 * array_bytes / best / 1e9,
                         f"metajit `mj.sync(b + c * 3.0)`, {mj.flags.num_threads} threads, 3 array passes")
    limits["triads"] = triads
    limits["bandwidth"] = max(triads.values())
    return limits


# ---------------------------------------------------------------------------------------------------- report
def work_rate(operator, seconds):
    """(rate, unit) of one run: GFLOP/s for compute-bound operators, GB/s for memory-bound ones."""
    if operator.flops is not None:
        return operator.flops / seconds / 1e9, "GFLOP/s"
    return operator.traffic_bytes / seconds / 1e9, "GB/s"


def limit_share(operator, rate, limits):
    limit = limits["peak"][0] if operator.flops is not None else limits["bandwidth"][0]
    return rate / limit


def value_range(values, format_spec):
    low, high = min(values), max(values)
    return format(low, format_spec) if low == high else f"{format(low, format_spec)}-{format(high, format_spec)}"


def build_report(arguments, torch, limits, measurements, others=()):
    lines = ["# Operator benchmark: metajit vs PyTorch eager", ""]
    if torch is not None:
        torch_note = f"PyTorch {torch.__version__} eager ({torch.get_num_threads()} threads)"
        check_note = "Every metajit result was checked against each PyTorch variant's"
    else:
        torch_note = "PyTorch not installed (`pip install torch`): metajit rows only"
        check_note = "metajit's softmax, layer norm and matmul were checked against numpy (no check for conv)"
    lines += [f"Generated by `bench/operator_benchmark.py` on {cpu_model()}, {os.cpu_count()} cores "
              f"(`os.cpu_count()`), {time.strftime('%Y-%m-%d %H:%M')}; metajit with {mj.flags.num_threads} threads "
              f"(oneDNN lowering {'on' if mj.flags.lowering else 'off'}), {torch_note}, numpy {np.__version__}. "
              "float32, the same inputs for both frameworks, measured in the same run. After two warm-up runs "
              "each, the timed runs of metajit and of the PyTorch variants alternate run by run "
              f"({arguments.runs} each, {arguments.backward_runs} for conv forward+backward), so drift on the "
              "host hits them alike. The bandwidth limit is the fastest triad below. A metajit run starts "
              "from fresh `mj.array` inputs (made outside the timed region) and ends when `mj.sync` of every "
              "result returns, so it includes recording the lazy graph and planning. PyTorch's inputs are "
              "likewise fresh copies in its own (64-byte aligned) memory, made outside the timed region. "
              f"{check_note} (`assert_allclose`, rtol 1e-3, atol 1e-3; softmax atol 1e-6).", "", others_note(others),
              ""]
    lines += ["| machine limit | value | measured with |", "|---|---:|---|",
              f"| compute peak | {limits['peak'][0]:.0f} GFLOP/s | {limits['peak'][1]} |"]
    for rate, how in limits["triads"].values():
        used = " (used as the bandwidth limit)" if (rate, how) == limits["bandwidth"] else ""
        lines.append(f"| STREAM triad, {TRIAD_ELEMENTS // (1024 * 1024)}M float32 | {rate:.1f} GB/s | {how}{used} |")
    if limits.get("other_load") is not None:
        lines.append(f"| CPU used by other processes during the run | {limits['other_load'] * 100:.0f}% of the "
                     "machine | /proc/stat minus this process |")
    lines += ["", "| operator | framework | median ms | best ms | rate (median) | of machine limit | "
              "metajit / this | oneDNN calls per run | planning ms per run |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for operator, ours, theirs in measurements:
        mine = statistics.median(ours["times"])
        rate, unit = work_rate(operator, mine)
        lines.append(f"| {operator.description} | metajit | {mine * 1e3:.2f} | {min(ours['times']) * 1e3:.2f} | "
                     f"{rate:.1f} {unit} | {limit_share(operator, rate, limits) * 100:.0f}% | | "
                     f"{value_range(ours['library_calls'], 'd')} | "
                     f"{statistics.median(ours['planning']) * 1e3:.3f} |")
        for label, result in theirs.items():
            reference = statistics.median(result["times"])
            rate, unit = work_rate(operator, reference)
            shown = f"{label} (result differs from metajit's)" if label in operator.disagreeing else label
            runs = "" if len(result["times"]) == operator.runs else f" ({len(result['times'])} runs)"
            lines.append(f"| | {shown}{runs} | {reference * 1e3:.2f} | {min(result['times']) * 1e3:.2f} | "
                         f"{rate:.1f} {unit} | {limit_share(operator, rate, limits) * 100:.0f}% | "
                         f"**{ratio_text(mine / reference)}** | | |")
    lines += target_lines(measurements)
    lines += ["", "\"metajit / this\" is metajit's median time over that variant's: below 1 metajit is "
              "faster. oneDNN's `dnnl_sgemm` is called through ctypes on the same library and thread team metajit "
              "uses, on 64-byte aligned numpy copies. The \"same traffic\" rows time `x * 2.0` of the softmax input "
              "in each framework: one read and one write of the tensor, the least a softmax or layer norm must do, "
              "with nothing to compute (not checked; \"metajit / this\" there is the operator's time over that "
              "copy's). Softmax and layer norm count one read and one write of the tensor (32 MB), the transpose of "
              "its matrix (128 MB), cumsum of its [256, 4096] input (8 MB); matmul "
              "2·M·N·K flops, conv forward 2·N·O·C·H·W·9 and forward+backward three times that (the direct "
              "algorithm's count: metajit runs these 3x3 convolutions with Winograd F(4x4, 3x3), which does about "
              "half the multiplications, so its rate can pass the FMA peak; `mj.flags.conv_algorithm`). "
              "\"oneDNN calls\" is `mj.stats()[\"library_calls\"]` of one run (0: generated kernels only). "
              "metajit tensors are "
              "always NCHW; `channels_last` is PyTorch's NHWC layout, converted outside the timed region. The "
              "last-level cache of this host may hold the 64 MB triad arrays, so the bandwidth limit is partly "
              f"cache bandwidth. The limits are the best of {LIMIT_RUNS} runs, yet on a shared host a later median "
              "can still beat them (over 100%); single runs are noisy, so compare rows of one run."]
    return lines


def ratio_text(ratio):
    """metajit's time over another's, with a third digit where two would round it to 0.00x."""
    return f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.3f}x"


def others_note(others):
    """The report's sentence on Jittor and tinygrad."""
    if not others:
        return ("Jittor and tinygrad were not installed, so they have no rows (`make bench-frameworks` installs "
                "them and runs the benchmarks with them).")
    return ("Also measured, in the same alternation and checked against metajit the same way: "
            + "; ".join(adapter.description for adapter in others)
            + ". Their inputs are tensors computed outside the timed region, and a run ends when the framework has "
              "computed every result (`jt.sync` / `Tensor.realize`), as metajit's ends at `mj.sync`.")


# (operator, variant, the most metajit's time may be of the variant's, what the issue asks)
TARGETS = [
    ("softmax", "PyTorch", 0.5, "softmax at least 2x faster than PyTorch eager"),
    ("matmul", "oneDNN `dnnl_sgemm` called directly", 1 / 0.9, "matmul at least 0.9x of oneDNN called directly"),
    ("matmul", "PyTorch", 1.0, "matmul no slower than PyTorch"),
    ("conv2d_backward", "PyTorch channels_last", 1.0,
     "conv forward+backward no slower than PyTorch with channels_last"),
]


def target_lines(measurements):
    """The issue's operator targets against this run's medians (and best runs, for the noise)."""
    lines = ["", "| target | measured (median; best runs) | status |", "|---|---|---|"]
    found = {(operator.name, label): (ours, result) for operator, ours, theirs in measurements
             for label, result in theirs.items()}
    for name, label, limit, text in TARGETS:
        if (name, label) not in found:
            lines.append(f"| {text} | not measured ({label} missing) | - |")
            continue
        ours, result = found[(name, label)]
        ratio = statistics.median(ours["times"]) / statistics.median(result["times"])
        best_ratio = min(ours["times"]) / min(result["times"])
        lines.append(f"| {text} | metajit / {label}: {ratio:.2f}x; {best_ratio:.2f}x | "
                     f"{'met' if ratio <= limit else 'not met'} (<= {limit:.2f}x) |")
    lines += floor_lines(measurements)
    return lines


def floor_lines(measurements):
    """For operators measured beside a same-traffic copy: how close each framework's operator is to its copy, and
    the lowest metajit / PyTorch ratio this host allows (metajit's copy over PyTorch's operator)."""
    lines = []
    for operator, ours, theirs in measurements:
        floors = [label for label in operator.floor_variants if label in theirs]
        if not floors or "PyTorch" not in theirs:
            continue
        if not lines:
            lines = ["", "| operator | its time over its framework's same-traffic copy (median) | lowest metajit / "
                     "PyTorch any metajit version could reach here |", "|---|---|---:|"]
        median = {label: statistics.median(theirs[label]["times"]) for label in floors + ["PyTorch"]}
        median["metajit"] = statistics.median(ours["times"])
        metajit_copy = next(label for label in floors if "metajit" in label)
        torch_copy_label = next((label for label in floors if "PyTorch" in label), None)
        shares = [f"metajit {median['metajit'] / median[metajit_copy]:.2f}x"]
        if torch_copy_label is not None:
            shares.append(f"PyTorch {median['PyTorch'] / median[torch_copy_label]:.2f}x")
        lines.append(f"| {operator.description} | {'; '.join(shares)} | "
                     f"{median[metajit_copy] / median['PyTorch']:.2f}x |")
    return lines


def write_chart(path, measurements):
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display on a benchmark host
        import matplotlib.pyplot as pyplot
    except ImportError:
        print("matplotlib is not installed: no chart (`pip install matplotlib`)")
        return False
    short_names = {"softmax": "softmax", "layer_norm": "layer norm", "transpose": "transpose", "cumsum": "cumsum",
                   "matmul": "matmul", "conv2d": "conv fwd", "conv2d_backward": "conv fwd+bwd"}
    labels, ratios = [], []
    for operator, ours, theirs in measurements:
        for label, result in theirs.items():
            if label in operator.other_variants or label in operator.floor_variants:
                continue  # the chart is against PyTorch and oneDNN; tables have the rest
            name = short_names.get(operator.name, operator.name)
            if label in operator.direct_variants:
                name += "\nvs oneDNN direct"
            elif len(operator.torch_variants) > 1:  # say which PyTorch layout the bar is against
                name += "\nvs channels_last" if "channels_last" in label else "\nvs NCHW"
            labels.append(name)
            ratios.append(statistics.median(ours["times"]) / statistics.median(result["times"]))
    if not ratios:
        print("no PyTorch measurements: no chart")
        return False
    figure, axes = pyplot.subplots(figsize=(max(6, 1.3 * len(ratios)), 4))
    colors = ["tab:green" if ratio <= 1 else "tab:red" for ratio in ratios]
    bars = axes.bar(range(len(ratios)), ratios, color=colors)
    axes.bar_label(bars, labels=[f"{ratio:.2f}x" for ratio in ratios])
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xticks(range(len(ratios)), labels, fontsize=8)
    axes.set_ylabel("metajit time / other time (lower is better)")
    axes.set_title(f"metajit vs PyTorch eager (and oneDNN called directly), float32, {os.cpu_count()} cores")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)
    return True


# ------------------------------------------------------------------------------------------------------ main
def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25, help="timed runs per operator and framework")
    parser.add_argument("--backward-runs", type=int, default=9, help="timed runs of conv2d forward+backward")
    parser.add_argument("--output", default=os.path.join(HERE, "OPERATORS.md"))
    parser.add_argument("--chart", default=os.path.join(HERE, "operators.png"))
    parser.add_argument("--only", default="", help="comma-separated operator names to run (default: all), e.g. "
                        "softmax,layer_norm; for quick checks: the report then has only those rows")
    arguments = parser.parse_args()
    try:
        import torch
        torch.set_num_threads(os.cpu_count())
    except ImportError:
        torch = None
        print("PyTorch is not installed: measuring metajit only, checked against numpy (`pip install torch`)")

    others = installed_frameworks()
    load_before = machine_load()
    print("machine limits ...", flush=True)
    limits = measure_limits(torch, runs=LIMIT_RUNS)
    measurements = []
    for operator in build_operators(torch, arguments.runs, arguments.backward_runs, np.random.default_rng(0),
                                    others):
        if arguments.only and operator.name not in arguments.only.split(","):
            continue
        print(f"{operator.name} ...", flush=True)
        theirs, values = measure(torch, operator)
        ours = theirs.pop("metajit")
        for label in theirs:
            if label in operator.floor_variants:  # a copy, not the operator: nothing to compare
                continue
            if label not in operator.other_variants:
                check(operator, label, values["metajit"], values[label])
                continue
            try:  # another framework's numerics are not metajit's to fail on: its row says so instead
                check(operator, label, values["metajit"], values[label])
            except AssertionError as error:
                print(f"{operator.name}: {label}'s result differs from metajit's:\n{error}")
                operator.disagreeing.add(label)
        if not operator.torch_variants:
            if operator.numpy_reference is not None:
                check(operator, "numpy", values["metajit"], operator.numpy_reference())
            else:
                print(f"{operator.name}: no numerical check without PyTorch")
        values = None  # only needed for the check; keeps the big conv arrays out of later runs
        measurements.append((operator, ours, theirs))
    limits["other_load"] = other_load(load_before, machine_load())

    lines = build_report(arguments, torch, limits, measurements, others)
    with open(arguments.output, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {arguments.output}")
    if write_chart(arguments.chart, measurements):
        print(f"wrote {arguments.chart}")


if __name__ == "__main__":
    main()

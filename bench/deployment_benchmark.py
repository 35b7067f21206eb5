"""Deployment benchmark: an exported model (mj.export) run by metajit's C++ runtime, next to the other ways to run it.

ResNet-18 (ImageNet layout, 3x224x224 images, 1000 classes) and the transformer LM of the other benchmarks, at
batch 1 and 8, forward only, each run six ways with the same weights and the same thread count: the C++ runtime
in its own process (examples/cpp_inference, built here against the installed runtime), the C++ runtime from
Python (mj.load_exported), metajit untraced, metajit traced (mj.trace), PyTorch eager, and ONNX Runtime (the
model exported from the PyTorch twin). Every engine's output is checked against PyTorch's before timing. Then the
traced LSTM and the host time a replayed plan spends per kernel launch (bench/trace_benchmark.py's measurements),
the artifacts' sizes and what libmetajit_runtime.so links. Writes bench/DEPLOYMENT.md, with the issue's targets.

Must not: fail when onnxruntime, the C++ build or an export is missing; it says so in the table instead.

    python bench/deployment_benchmark.py [--runs N] [--rounds N] [--quiet-wait S] [--models resnet18,transformer]
"""
import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))  # torch_reference_resnet
from run_benchmarks import cpu_jiffies, cpu_model, mj, other_load, status  # noqa: E402
from inference_benchmark import build_models, inputs_for  # noqa: E402
from models_benchmark import QUIET_SHARE, relative_difference, wait_for_quiet_machine  # noqa: E402
import trace_benchmark  # noqa: E402

# name: (batch sizes, the input of one example, description)
MODELS = {
    "resnet18": ((1, 8), (3, 224, 224), "ResNet-18 (ImageNet layout, 1000 classes), 3x224x224 images"),
    "transformer": ((1, 8), (128,), "Transformer LM (2 pre-norm blocks, width 256, vocabulary 1000), 128 tokens"),
}
ENGINES = ("cpp", "exported", "untraced", "traced", "torch", "onnxruntime")
ENGINE_LABELS = {
    "cpp": "C++ runtime (`cpp_inference --repeat`)",
    "exported": "C++ runtime from Python (`mj.load_exported`)",
    "untraced": "metajit, untraced",
    "traced": "metajit, traced (`mj.trace`)",
    "torch": "PyTorch eager",
    "onnxruntime": "ONNX Runtime (CPUExecutionProvider)",
}
TOLERANCE = 1e-3  # largest |difference| to PyTorch's output, relative to PyTorch's largest |output|
# Tries of a model's timed rounds that other processes disturbed (the least disturbed is kept); fewer than
# bench/models_benchmark.py's 3, to keep the run near 10 minutes on a busy 2-core host.
PHASE_ATTEMPTS = 2
BLOCK_PAUSE_SECONDS = 0.1  # lets the previous engine's spinning threads go to sleep before the next block
LAUNCH_TARGET_MICROSECONDS = 1.0
# Separate measurements of the launch chain: on this host its time per launch fell in two groups from call to call
# (about 0.7 and 1.3 us, untraced runs slower by the same factor, with 1 thread as with 2), so one is not enough.
CHAIN_MEASUREMENTS = 3
CHAIN_RUNS_PER_RUN = 10  # the chain takes well under a millisecond: it gets 10x the models' runs
# A library name in the runtime's dependencies that would mean Python, LLVM or a compiler comes along
# (libgcc_s is GCC's unwinding support, not the compiler).
FORBIDDEN_LIBRARY = re.compile(r"python|llvm|clang|gccjit|nvrtc|libLTO", re.IGNORECASE)


# ----------------------------------------------------------------------------------------------- the engines
def build_resnet18_pair(torch):
    """metajit's ResNet-18 and its PyTorch twin (torchvision's layout), with the same weights, in eval mode."""
    from torch_reference_resnet import TorchResNet
    torch.manual_seed(0)
    theirs = TorchResNet([2, 2, 2, 2], 1000, "imagenet")
    # Batch norm with its initial statistics is the identity in eval mode; other values make the check stronger.
    generator = np.random.default_rng(0)
    for module in theirs.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            channels = module.num_features
            module.running_mean.copy_(torch.from_numpy(generator.uniform(-0.1, 0.1, channels).astype(np.float32)))
            module.running_var.copy_(torch.from_numpy(generator.uniform(0.5, 1.5, channels).astype(np.float32)))
            with torch.no_grad():
                module.weight.copy_(torch.from_numpy(generator.uniform(0.5, 1.5, channels).astype(np.float32)))
                module.bias.copy_(torch.from_numpy(generator.uniform(-0.1, 0.1, channels).astype(np.float32)))
    ours = mj.models.resnet18(num_classes=1000)
    # PyTorch's weights become metajit's, as bench/inference_benchmark.py does.
    ours.load_state_dict({key: value.detach().numpy() for key, value in theirs.state_dict().items()})
    return ours.eval(), theirs.eval()


def build_pair(name, torch):
    if name == "resnet18":
        return build_resnet18_pair(torch)
    return build_models(name, torch)


def build_cpp_inference(work_directory, build_directory):
    """Installs the runtime component of the build tree and builds examples/cpp_inference against it, as its
    CMakeLists.txt says. Returns (program path, None) or (None, why not)."""
    prefix = os.path.join(work_directory, "runtime-prefix")
    program_build = os.path.join(work_directory, "cpp_inference-build")
    commands = [
        ["cmake", "--install", build_directory, "--component", "runtime", "--prefix", prefix],
        ["cmake", "-S", os.path.join(ROOT, "examples", "cpp_inference"), "-B", program_build,
         f"-DCMAKE_PREFIX_PATH={prefix}"],
        ["cmake", "--build", program_build],
    ]
    for command in commands:
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as error:
            return None, f"`{' '.join(command)}` did not run: {error}"
        if result.returncode != 0:
            last_lines = " / ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
            return None, f"`{' '.join(command)}` failed: {last_lines}"
    return os.path.join(program_build, "cpp_inference"), None


def cpp_environment(threads):
    environment = dict(os.environ)
    environment["METAJIT_NUM_THREADS"] = str(threads)  # the runtime's thread count, as in the Python process
    return environment


def run_cpp_inference(program, model_path, input_path, threads, repeat=0, output_directory=None):
    """Runs the C++ program; returns its (median ms, best ms) with `repeat`, else None. Raises on failure."""
    command = [program, model_path, input_path]
    if output_directory:
        command += ["--outputs", output_directory]
    if repeat:
        command += ["--repeat", str(repeat)]
    result = subprocess.run(command, capture_output=True, text=True, env=cpp_environment(threads), timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` exited with {result.returncode}: {result.stderr.strip()}")
    if not repeat:
        return None
    match = re.search(r"latency_ms median ([0-9.eE+-]+) best ([0-9.eE+-]+)", result.stdout)
    if not match:
        raise RuntimeError(f"no latency line in the output of `{' '.join(command)}`: {result.stdout.strip()}")
    return float(match.group(1)), float(match.group(2))


def onnx_session(onnxruntime, torch, model, example, path, threads):
    """The PyTorch twin exported with torch.onnx.export and loaded into ONNX Runtime on the CPU."""
    with warnings.catch_warnings():  # the TorchScript exporter is deprecated in PyTorch 2.9+, and says so at length
        warnings.simplefilter("ignore")
        # dynamo=False: the TorchScript exporter needs only the onnx package, not onnxscript. Not under
        # torch.no_grad(): there nn.MultiheadAttention takes its fused fast path, which has no ONNX form.
        torch.onnx.export(model, (torch.from_numpy(example),), path, dynamo=False)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return session, session.get_inputs()[0].name


def describe_error(error):
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


# ------------------------------------------------------------------------------------------------- measuring
def timed_in_blocks(functions, runs, rounds):
    """Median and best seconds of each function over `runs` timed runs. The engines take turns block by block,
    `rounds` times, each block starting with one untimed run after a short pause: PyTorch, metajit and ONNX
    Runtime each keep threads that spin for a while after a run, and on a 2-core machine a run right after another
    engine's was measured up to 2.5x slower, so run-by-run turns would time the neighbour's threads. Functions
    that time themselves (the C++ program) return (median, best) of their block; their median is the median of
    the block medians."""
    per_block = max(1, runs // rounds)
    samples = {name: [] for name in functions}
    block_medians, block_bests = {name: [] for name in functions}, {name: [] for name in functions}
    for _ in range(rounds):
        for name, (function, times_itself) in functions.items():
            time.sleep(BLOCK_PAUSE_SECONDS)
            if times_itself:
                median, best = function(per_block)
                block_medians[name].append(median)
                block_bests[name].append(best)
                continue
            function()
            for _ in range(per_block):
                start = time.perf_counter()
                function()
                samples[name].append(time.perf_counter() - start)
    results = {}
    for name, (_, times_itself) in functions.items():
        if times_itself:
            results[name] = (statistics.median(block_medians[name]), min(block_bests[name]))
        else:
            results[name] = (statistics.median(samples[name]), min(samples[name]))
    return results


def measure_model(name, batch, arguments, context):
    """Exports, checks and times one model at one batch size. Returns a dict for the report."""
    torch, threads, work_directory = context["torch"], context["threads"], context["work_directory"]
    _, shape, description = MODELS[name]
    ours, theirs = build_pair(name, torch)
    array = inputs_for(name, batch, shape, np.random.default_rng(batch))
    stem = os.path.join(work_directory, f"{name}-batch{batch}")
    result = {"name": name, "batch": batch, "description": description, "notes": [], "report": None,
              "onnx_bytes": None, "difference": {}, "times": {}}

    def untraced_run():
        with mj.no_grad():
            return ours(mj.array(array)).numpy()

    def forward(x):
        with mj.no_grad():
            return ours(x)

    traced = mj.trace(forward)

    def traced_run():
        return traced(mj.array(array)).numpy()

    def torch_run():
        with torch.no_grad():
            return theirs(torch.from_numpy(array)).numpy()

    python_engines = {"untraced": untraced_run, "traced": traced_run, "torch": torch_run}

    # The artifact both C++ engines run: the same model, traced on this batch's shape.
    artifact_path, input_path = stem + ".mjm", stem + "-input.bin"
    array.tofile(input_path)
    try:
        result["report"] = mj.export(ours, (mj.array(array),), artifact_path)
        exported = mj.load_exported(artifact_path)
        python_engines["exported"] = lambda: exported(array).numpy()
    except Exception as error:  # reported in the table: the export is one of the things measured
        result["notes"].append(f"mj.export / mj.load_exported failed: {describe_error(error)}")
        artifact_path = None

    if context["onnxruntime"] is not None:
        onnx_path = stem + ".onnx"
        try:
            session, input_name = onnx_session(context["onnxruntime"], torch, theirs, array, onnx_path, threads)
            result["onnx_bytes"] = os.path.getsize(onnx_path)
            python_engines["onnxruntime"] = lambda: session.run(None, {input_name: array})[0]
        except Exception as error:
            result["notes"].append(f"ONNX export or session failed: {describe_error(error)}")

    # Outputs against PyTorch's before anything is timed (the traced function's first call records, the
    # second replays: both are checked).
    reference = torch_run()
    outputs = {engine: function() for engine, function in python_engines.items() if engine != "torch"}
    outputs["traced (replay)"] = traced_run()
    if context["cpp_program"] and artifact_path:
        output_directory = stem + "-outputs"
        os.makedirs(output_directory, exist_ok=True)
        try:
            run_cpp_inference(context["cpp_program"], artifact_path, input_path, threads,
                              output_directory=output_directory)
            output_name = exported.outputs[0].name
            outputs["cpp"] = np.fromfile(os.path.join(output_directory, output_name + ".bin"),
                                         dtype=np.float32).reshape(reference.shape)
        except Exception as error:
            result["notes"].append(f"cpp_inference failed: {describe_error(error)}")
    for engine, output in outputs.items():
        difference = relative_difference(output, reference) if output.shape == reference.shape else float("inf")
        key = "traced" if engine == "traced (replay)" else engine
        result["difference"][key] = max(result["difference"].get(key, 0.0), difference)
    if "exported" in outputs:
        result["exported_identical"] = bool(np.array_equal(outputs["exported"], outputs["untraced"]))
        if "cpp" in outputs:
            result["cpp_identical"] = bool(np.array_equal(outputs["cpp"], outputs["exported"]))
    for engine, difference in result["difference"].items():
        if not difference <= TOLERANCE:
            result["notes"].append(f"{ENGINE_LABELS[engine]} differs from PyTorch by {difference:.2e} of its "
                                   f"largest output (tolerance {TOLERANCE:g}); timed anyway")

    functions = {engine: (function, False) for engine, function in python_engines.items()}
    if "cpp" in outputs:
        functions["cpp"] = (lambda count: run_cpp_inference(context["cpp_program"], artifact_path, input_path,
                                                            threads, repeat=count), True)
    functions = {engine: functions[engine] for engine in ENGINES if engine in functions}
    for function, times_itself in functions.values():  # warm-up: kernels compiled or loaded, pools started
        if not times_itself:
            function(), function()
    # The host is shared: rounds during which other processes took more than QUIET_SHARE of the CPUs run again.
    best = None
    for attempt in range(1, PHASE_ATTEMPTS + 1):
        waited = wait_for_quiet_machine(arguments.quiet_wait)
        before, own_before = cpu_jiffies(), os.times()
        seconds = timed_in_blocks(functions, arguments.runs, arguments.rounds)
        load = other_load(before, cpu_jiffies(), own_before, os.times())
        if best is None or (load or 0.0) < (best["other_load"] or 0.0):
            best = {"seconds": seconds, "other_load": load, "waited": waited, "attempt": attempt}
        if load is None or load <= QUIET_SHARE or attempt == PHASE_ATTEMPTS:
            break
        print(f"  other processes used {load:.0%} of the CPUs; timing again", flush=True)
    seconds = best.pop("seconds")
    result.update(best, attempts=attempt)
    # The C++ program reports milliseconds; everything else is in seconds.
    result["times"] = {engine: (value if engine == "cpp" else (value[0] * 1e3, value[1] * 1e3))
                       for engine, value in seconds.items()}
    print(f"{name}, batch {batch}: " + ", ".join(f"{engine} {value[0]:.2f} ms"
                                                  for engine, value in result["times"].items()), flush=True)
    return result


def lstm_in_blocks(torch, runs, rounds):
    """The LSTM of bench/INFERENCE.md, traced metajit against PyTorch eager, timed block by block as the models
    above are (bench/trace_benchmark.py takes turns run by run); a cross-check of the method, informational."""
    batches, shape, _ = trace_benchmark.MODELS["lstm"]
    ours, theirs = build_models("lstm", torch)
    array = inputs_for("lstm", batches[0], shape, np.random.default_rng(batches[0]))

    def forward(x):
        with mj.no_grad():
            return ours(x)

    traced = mj.trace(forward)

    def torch_run():
        with torch.no_grad():
            return theirs(torch.from_numpy(array)).numpy()

    functions = {"traced": (lambda: traced(mj.array(array)).numpy(), False), "torch": (torch_run, False)}
    for function, _ in functions.values():
        function(), function()
    return timed_in_blocks(functions, runs, rounds)


def runtime_library(build_directory):
    """Size, NEEDED entries (readelf -d) and the full dependency closure (ldd) of libmetajit_runtime.so."""
    path = os.path.join(build_directory, "runtime", "libmetajit_runtime.so")
    info = {"path": os.path.relpath(path, ROOT), "bytes": None, "needed": [], "closure": [], "error": None}
    if not os.path.exists(path):
        info["error"] = f"{info['path']} does not exist (build the tree first)"
        return info
    info["bytes"] = os.path.getsize(path)
    try:
        dynamic = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
        info["needed"] = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
        closure = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
        info["closure"] = sorted({line.split()[0] for line in closure.splitlines() if line.strip()})
    except (OSError, subprocess.CalledProcessError) as error:
        info["error"] = describe_error(error)
    return info


# ------------------------------------------------------------------------------------------------- the report
def milliseconds(value):
    return "–" if value is None else f"{value:.2f}"


def ratio(value, reference):
    return "–" if value is None or reference is None else f"{value / reference:.2f}x"


def model_table(result):
    times = result["times"]
    onnx_median = times.get("onnxruntime", (None,))[0]
    torch_median = times.get("torch", (None,))[0]
    lines = [f"### {result['description']}, batch {result['batch']}", "",
             f"Waited {result['waited']:.0f} s for a quiet machine; other processes used "
             + ("an unknown share" if result.get("other_load") is None else f"{result['other_load']:.0%}")
             + " of the CPUs during the timed rounds"
             + (f" (the least disturbed of {result['attempts']} tries)" if result["attempts"] > 1 else "") + ".", "",
             "| engine | median ms | best ms | median / ONNX Runtime | median / PyTorch eager | "
             "max \\|difference\\| to PyTorch (relative) |", "|---|---:|---:|---:|---:|---:|"]
    for engine in ENGINES:
        median, best = times.get(engine, (None, None))
        difference = result["difference"].get(engine)
        difference_text = "–" if difference is None else f"{difference:.1e}"
        lines.append(f"| {ENGINE_LABELS[engine]} | {milliseconds(median)} | {milliseconds(best)} | "
                     f"{ratio(median, onnx_median)} | {ratio(median, torch_median)} | {difference_text} |")
    identical = []
    if "exported_identical" in result:
        identical.append("`mj.load_exported`'s output is " + ("bit-identical to" if result["exported_identical"]
                                                              else "**not** bit-identical to")
                         + " untraced metajit's")
    if "cpp_identical" in result:
        identical.append("`cpp_inference`'s is " + ("bit-identical to" if result["cpp_identical"]
                                                    else "**not** bit-identical to") + " `mj.load_exported`'s")
    lines.append("")
    if identical:
        lines += ["; ".join(identical) + ".", ""]
    lines += [f"Note: {note}" for note in result["notes"]]
    if result["notes"]:
        lines.append("")
    return lines


def per_launch_microseconds(chain, engine="traced"):
    launches, timings = chain
    return timings[engine][0] * 1e6 / launches


def target_rows(results, lstm_rows, lstm_blocks, chains, library):
    rows = []
    if lstm_rows:
        _, _, lstm, _ = lstm_rows[0]
        traced, eager = lstm["traced"][0] * 1e3, lstm["torch"][0] * 1e3
        rows.append(("Traced LSTM no slower than PyTorch eager",
                     f"{traced:.2f} vs {eager:.2f} ms ({traced / eager:.2f}x; bench/trace_benchmark.py, turns run by "
                     f"run); block by block {lstm_blocks['traced'][0] * 1e3:.2f} vs "
                     f"{lstm_blocks['torch'][0] * 1e3:.2f} ms", status(traced <= eager)))
    per_launch = statistics.median(per_launch_microseconds(chain) for chain in chains)
    rows.append((f"A replayed plan adds at most {LAUNCH_TARGET_MICROSECONDS:g} us of host time per kernel launch",
                 f"{per_launch:.2f} us, the median of {len(chains)} measurements ("
                 + ", ".join(f"{per_launch_microseconds(chain):.2f}" for chain in chains)
                 + f" us; {chains[0][0]} launches a replay); an upper bound: each kernel's own work on 16 elements "
                 "is included", status(per_launch <= LAUNCH_TARGET_MICROSECONDS)))
    for name in ("resnet18", "transformer"):
        label = "ResNet-18" if name == "resnet18" else "transformer LM"
        found = [result for result in results if result["name"] == name and result["batch"] == 1]
        if not found:
            rows.append((f"C++ runtime batch-1 latency no slower than ONNX Runtime: {label}",
                         "not measured: the model was left out (--models)", "not measured"))
            continue
        cpp, onnx = found[0]["times"].get("cpp"), found[0]["times"].get("onnxruntime")
        if cpp is None or onnx is None:
            missing = "the C++ runtime" if cpp is None else "ONNX Runtime"
            rows.append((f"C++ runtime batch-1 latency no slower than ONNX Runtime: {label}",
                         f"not measured: no timing of {missing} (see the notes below)", "not measured"))
            continue
        rows.append((f"C++ runtime batch-1 latency no slower than ONNX Runtime: {label}",
                     f"{cpp[0]:.2f} vs {onnx[0]:.2f} ms median ({cpp[0] / onnx[0]:.2f}x); best {cpp[1]:.2f} vs "
                     f"{onnx[1]:.2f} ms", status(cpp[0] <= onnx[0])))
    if library["error"]:
        rows.append(("The runtime library links without Python, LLVM or a compiler", library["error"],
                     "not measured"))
    else:
        forbidden = [entry for entry in library["closure"] + library["needed"] if FORBIDDEN_LIBRARY.search(entry)]
        rows.append(("The runtime library links without Python, LLVM or a compiler",
                     ("NEEDED: " + ", ".join(library["needed"]))
                     + (f"; forbidden: {', '.join(sorted(set(forbidden)))}" if forbidden else
                        "; none in its whole ldd closure either"), status(not forbidden)))
    return rows


def write_report(arguments, context, results, lstm_rows, lstm_blocks, chains, library, started):
    torch, threads = context["torch"], context["threads"]
    load_one, load_five, load_fifteen = context["load_average"]
    onnx_text = (f"ONNX Runtime {context['onnxruntime'].__version__}" if context["onnxruntime"] is not None
                 else f"ONNX Runtime: not available ({context['onnxruntime_missing']})")
    command = " ".join(["python", "bench/deployment_benchmark.py"] + sys.argv[1:])
    lines = ["# Deployment benchmark", "",
             f"Generated by `bench/deployment_benchmark.py` (`make bench-deployment`) on "
             f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(started))}, in {time.time() - started:.0f} s.", "",
             "| machine | |", "|---|---|",
             f"| CPU | {cpu_model()} |",
             f"| cores (os.cpu_count) | {os.cpu_count()} |",
             f"| threads, every engine | {threads} (`torch.set_num_threads`, ONNX Runtime `intra_op_num_threads` "
             "with `inter_op_num_threads` 1, `mj.flags.num_threads`, `METAJIT_NUM_THREADS` for `cpp_inference`) |",
             f"| load average at start (1, 5, 15 min) | {load_one:.2f}, {load_five:.2f}, {load_fifteen:.2f} |",
             f"| command | `{command}` |",
             f"| software | Python {platform.python_version()}, numpy {np.__version__}, PyTorch {torch.__version__}, "
             f"{onnx_text} |", ""]
    if context["cpp_missing"]:
        lines += [f"The C++ program was not built, so there are no `cpp_inference` rows: {context['cpp_missing']}",
                  ""]
    lines += ["## Targets", "", "| target | measured | status |", "|---|---|---|"]
    lines += [f"| {target} | {measured} | {verdict} |"
              for target, measured, verdict in target_rows(results, lstm_rows, lstm_blocks, chains, library)]
    lines += ["", "## Latency", "",
              "Forward pass only, every engine on the same input (a fixed numpy batch) and the same weights (the "
              "PyTorch twin's, loaded into metajit); a Python run ends with the output in numpy, a `cpp_inference` "
              "run with its output tensor. Before timing, every engine's output was checked against PyTorch's: the "
              "last column is the largest |difference| divided by PyTorch's largest |output| (tolerance "
              f"{TOLERANCE:g}; the traced function is checked on its recording call and on a replay). "
              f"Timing: {arguments.runs // arguments.rounds * arguments.rounds} timed runs per engine after two "
              f"warm-up runs, in {arguments.rounds} rounds in which the engines take turns block by block (each "
              "block starts with one untimed run after a short pause, so one engine's spinning threads do not slow "
              "the next; run-by-run turns were measured to slow PyTorch 2.5x here). Before the rounds the run waits "
              f"(at most {arguments.quiet_wait:.0f} s) for other processes to use under {QUIET_SHARE:.0%} of the CPUs, "
              f"times them again (at most {PHASE_ATTEMPTS} tries) when they used more, and keeps the least disturbed "
              "try. `cpp_inference` times its own "
              "runs in its own process (steady_clock around `Model::run`, inputs already in memory); its median is "
              "the median of its per-block medians. metajit untraced records the graph in Python and finds its plan "
              "by signature every run; traced replays the kept plan; the two C++ rows run the exported artifact "
              "(the same plan, kernels and oneDNN calls). ONNX Runtime runs the PyTorch twin exported with "
              "`torch.onnx.export(..., dynamo=False)` (static shapes), default graph optimizations.", ""]
    for result in results:
        lines += model_table(result)
    lstm_description, lstm_batch, lstm, lstm_launches = lstm_rows[0]
    lines += ["## Traced LSTM and host time per launch", "",
              "Measured by bench/trace_benchmark.py's own functions (`model_rows`, `chain_row`; the engines take turns "
              "run by run there), plus the LSTM once more timed block by block as above. Other processes used "
              + ("an unknown share" if context.get("trace_load") is None else f"{context['trace_load']:.0%}")
              + " of the CPUs over these measurements (waits for a quiet machine included).", "",
              "| measurement | metajit untraced ms | traced ms | PyTorch eager ms | traced / eager |",
              "|---|---:|---:|---:|---:|",
              f"| {lstm_description}, batch {lstm_batch}, run by run ({lstm_launches} launches) | "
              f"{lstm['metajit'][0] * 1e3:.2f} ({lstm['metajit'][1] * 1e3:.2f}) | "
              f"{lstm['traced'][0] * 1e3:.2f} ({lstm['traced'][1] * 1e3:.2f}) | "
              f"{lstm['torch'][0] * 1e3:.2f} ({lstm['torch'][1] * 1e3:.2f}) | "
              f"{lstm['traced'][0] / lstm['torch'][0]:.2f}x |",
              f"| the same, block by block | – | {lstm_blocks['traced'][0] * 1e3:.2f} "
              f"({lstm_blocks['traced'][1] * 1e3:.2f}) | {lstm_blocks['torch'][0] * 1e3:.2f} "
              f"({lstm_blocks['torch'][1] * 1e3:.2f}) | {lstm_blocks['traced'][0] / lstm_blocks['torch'][0]:.2f}x |",
              "", "Medians, best in brackets.", "",
              f"Host time per launch: a chain of {trace_benchmark.CHAIN_KERNELS} reductions on 16 elements "
              f"({chains[0][0]} kernels launched per run, each doing next to no work), the median run's time divided "
              f"by its launches; {len(chains)} separate measurements of {arguments.runs * CHAIN_RUNS_PER_RUN} runs "
              "each (new traced function each time).", "",
              "| measurement | untraced ms per run | untraced us per launch | traced ms per run | "
              "traced us per launch |", "|---|---:|---:|---:|---:|"]
    for index, (launches, timings) in enumerate(chains, 1):
        lines.append(f"| {index} | {timings['metajit'][0] * 1e3:.3f} | {timings['metajit'][0] * 1e6 / launches:.2f} | "
                     f"{timings['traced'][0] * 1e3:.3f} | {timings['traced'][0] * 1e6 / launches:.2f} |")
    lines.append("")
    lines += ["## Artifacts and the runtime library", "",
              "What `mj.export` wrote (its ExportReport) for each model and batch, with the ONNX file of the PyTorch "
              "twin for comparison.", "",
              "| model | batch | artifact bytes | weights | weight bytes | kernels launched | "
              "distinct kernel objects | object bytes | oneDNN calls | ONNX file bytes |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for result in results:
        report = result["report"]
        if report is None:
            lines.append(f"| {result['description']} | {result['batch']} | export failed | | | | | | | "
                         f"{result['onnx_bytes'] or '–'} |")
            continue
        lines.append(f"| {result['description']} | {result['batch']} | {report.bytes:,} | {report.weights} | "
                     f"{report.weight_bytes:,} | {report.kernels} | {report.kernel_objects} | "
                     f"{report.object_bytes:,} | {report.library_calls} | "
                     + (f"{result['onnx_bytes']:,}" if result["onnx_bytes"] else "–") + " |")
    lines += [""]
    if library["error"]:
        lines += [f"`libmetajit_runtime.so`: {library['error']}", ""]
    else:
        lines += [f"`{library['path']}`: {library['bytes']:,} bytes. `readelf -d` NEEDED: "
                  + ", ".join(f"`{entry}`" for entry in library["needed"]) + ". Its whole `ldd` closure: "
                  + ", ".join(f"`{entry}`" for entry in library["closure"]) + ".", ""]
    with open(arguments.output, "w") as output:
        output.write("\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {arguments.output}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="timed runs per engine, model and batch")
    parser.add_argument("--rounds", type=int, default=5, help="turns of the engines, block by block")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--quiet-wait", type=float, default=30.0,
                        help="longest wait (s) for a quiet machine before each timed measurement")
    parser.add_argument("--build-dir", default=os.environ.get("BUILD_DIR", os.path.join(ROOT, "build")))
    parser.add_argument("--output", default=os.path.join(HERE, "DEPLOYMENT.md"))
    arguments = parser.parse_args()
    started = time.time()
    load_average = os.getloadavg()
    try:
        import torch
    except ImportError:
        sys.exit("the deployment benchmark compares against PyTorch, which is not installed")
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    mj.flags.num_threads = threads
    context = {"torch": torch, "threads": threads, "load_average": load_average, "onnxruntime": None,
               "onnxruntime_missing": None, "cpp_program": None, "cpp_missing": None}
    try:
        import onnxruntime
        context["onnxruntime"] = onnxruntime
    except ImportError as error:
        context["onnxruntime_missing"] = f"{describe_error(error)}; `make bench-deployment` installs it"
        print(f"ONNX Runtime is not installed: no ONNX Runtime rows ({error})")
    build_directory = os.path.abspath(arguments.build_dir)
    with tempfile.TemporaryDirectory(prefix="metajit-deployment-") as work_directory:
        context["work_directory"] = work_directory
        if shutil.which("cmake") is None:
            context["cpp_missing"] = "cmake is not on the PATH"
        else:
            print("building examples/cpp_inference against the installed runtime ...", flush=True)
            context["cpp_program"], context["cpp_missing"] = build_cpp_inference(work_directory, build_directory)
        results = []
        for name in arguments.models.split(","):
            for batch in MODELS[name][0]:
                print(f"{name}, batch {batch} ...", flush=True)
                results.append(measure_model(name, batch, arguments, context))
    # trace_benchmark's functions wait for a quiet machine themselves; the load is recorded around them.
    before, own_before = cpu_jiffies(), os.times()
    print("traced LSTM (bench/trace_benchmark.py) ...", flush=True)
    lstm_rows = trace_benchmark.model_rows(torch, ["lstm"], arguments.runs, arguments.quiet_wait)
    wait_for_quiet_machine(arguments.quiet_wait)
    lstm_blocks = lstm_in_blocks(torch, arguments.runs, arguments.rounds)
    print("host time per launch (bench/trace_benchmark.py) ...", flush=True)
    chains = [trace_benchmark.chain_row(arguments.runs * CHAIN_RUNS_PER_RUN, arguments.quiet_wait)
              for _ in range(CHAIN_MEASUREMENTS)]
    context["trace_load"] = other_load(before, cpu_jiffies(), own_before, os.times())
    library = runtime_library(build_directory)
    write_report(arguments, context, results, lstm_rows, lstm_blocks, chains, library, started)


if __name__ == "__main__":
    main()

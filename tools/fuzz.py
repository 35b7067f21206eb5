#!/usr/bin/env python3
"""Differential fuzzing of metajit against numpy (and of mj.grad against finite differences) until time runs out.

    python tools/fuzz.py --seconds 600 --start-seed 100000              # value cases (random meta-op graphs)
    python tools/fuzz.py --seconds 600 --start-seed 100000 --gradients  # gradient cases only
    python tools/fuzz.py --seconds 600 --start-seed 100000 --all        # a value and a gradient case per seed
    python tools/fuzz.py --seed 123456 [--gradients] [--show-program]   # rerun one seed, print its reproducer
    python tools/fuzz.py --seconds 60 --mutation                        # programs that mutate tensors, vs PyTorch
    python tools/fuzz.py --seed 123 --mutation --show-program           # rerun one of those
    python tools/fuzz.py --seconds 600 --deep                           # deep and wide graphs (10^4..10^5 ops)
    python tools/fuzz.py --seconds 3600 --deep --large                  # the same up to 10^6 ops
    python tools/fuzz.py --seed 123 --deep [--large] [--show-program]   # rerun one of those

Cases come from tests/python/graph_fuzzer.py (against numpy and finite differences), with --mutation from
tests/python/mutation_fuzzer.py (in-place ops, views, detach, .data, no_grad and backward, against PyTorch, which
must be installed), and with --deep from tests/python/deep_graph_fuzzer.py (chains of 10^4 to 10^6 ops, fan-outs
of 10^3 to 10^5 consumers, long backwards, unrolled recurrences and running totals, against numpy step by step;
each case prints a line with its parameters, wall time, kernels compiled and peak memory, and a failure names a
standalone reproducer script and the command that shrinks it); a case is a pure function of its seed.
Progress goes to stdout every few seconds; each failure prints its seed and a minimal, self-contained reproducer.
The exit status is 1 if any case failed. Constructs listed in graph_fuzzer.KNOWN_BUGS are skipped unless
--include-known-bugs is given.

Cases run in worker processes of at most --seeds-per-worker seeds each: a crash or hang costs one case (reported
as a failure with its seed) instead of the run, and no process accumulates more compiled kernels than the
operating system lets one process map (every kernel metajit loads stays mapped until the process exits).
Kernels of random programs are rarely reused, so they go to a temporary cache removed at the end unless
METAJIT_CACHE_DIR is set.
"""
import argparse
import faulthandler
import os
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
if os.path.join(ROOT, "python") not in sys.path:
    sys.path.append(os.path.join(ROOT, "python"))  # after PYTHONPATH, which may name another build

SUMMARY = "@@fuzz-worker-summary"


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=600, help="run cases until this much time has passed")
    parser.add_argument("--start-seed", type=int, default=100000, help="first seed; later cases count up")
    parser.add_argument("--count", type=int, default=None, help="stop after this many seeds")
    parser.add_argument("--seed", type=int, action="append", help="run only this seed (repeatable), in process")
    parser.add_argument("--gradients", action="store_true", help="gradient cases instead of value cases")
    parser.add_argument("--all", action="store_true", help="a value and a gradient case for each seed")
    parser.add_argument("--mutation", action="store_true",
                        help="programs that mutate tensors (tests/python/mutation_fuzzer.py), compared with PyTorch")
    parser.add_argument("--deep", action="store_true",
                        help="deep and wide graphs (tests/python/deep_graph_fuzzer.py), compared with numpy")
    parser.add_argument("--large", action="store_true", help="with --deep: the large sizes (up to 10^6 ops)")
    parser.add_argument("--include-known-bugs", action="store_true",
                        help="also generate the constructs listed in graph_fuzzer.KNOWN_BUGS")
    parser.add_argument("--max-failures", type=int, default=50, help="stop after this many failing cases")
    parser.add_argument("--case-timeout", type=float, default=None,
                        help="a case running longer counts as a hang (default 120 s; --deep --large 900 s)")
    parser.add_argument("--progress", type=float, default=10, help="seconds between progress lines")
    parser.add_argument("--seeds-per-worker", type=int, default=None,
                        help="seeds run by one worker process (default 1000; --deep 50)")
    parser.add_argument("--show-program", action="store_true", help="with --seed: print the program as well")
    # internal: a worker run by the parent
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--status-file", help=argparse.SUPPRESS)
    parser.add_argument("--started-at", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--base-cases", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--base-failures", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case_timeout is None:
        args.case_timeout = 900 if args.deep and args.large else 120
    if args.seeds_per_worker is None:  # deep cases compile many kernels: fresh processes more often
        args.seeds_per_worker = 50 if args.deep else 1000
    return args


DEEP_MODES = ("deep", "deep-large")


def modes_of(args):
    if args.deep:
        return ["deep-large" if args.large else "deep"]
    if args.mutation:
        return ["mutation"]
    return ["value", "grad"] if args.all else ["grad"] if args.gradients else ["value"]


def rerun_hint(seed, mode):
    return f"python tools/fuzz.py --seed {seed}" + {"grad": " --gradients", "mutation": " --mutation",
                                                    "deep": " --deep", "deep-large": " --deep --large"}.get(mode, "")


def fuzzer_of(mode):
    """The module that generates and runs cases of `mode` (imported late: it imports metajit)."""
    if mode == "mutation":
        import mutation_fuzzer
        return mutation_fuzzer
    if mode in DEEP_MODES:
        import deep_graph_fuzzer
        return deep_graph_fuzzer
    import graph_fuzzer
    return graph_fuzzer


def excluded(args, mode):
    """Known-bug constructs the generator leaves out (graph_fuzzer.KNOWN_BUGS; the others have none)."""
    if args.include_known_bugs or mode == "mutation" or mode in DEEP_MODES:
        return []
    return fuzzer_of(mode).KNOWN_BUGS


def program_text(mode, seed, exclude):
    fuzzer = fuzzer_of(mode)
    if mode in DEEP_MODES:
        program = fuzzer.generate(seed, large=mode == "deep-large")
        return f"# {program.describe()}\n" + program.source()
    program = fuzzer.generate(seed) if mode == "mutation" else fuzzer.generate(seed, mode, exclude)
    return fuzzer.gradient_function_source(program) if mode == "grad" else program.source()


def run_one(fuzzer, seed, mode, exclude, case_timeout, status):
    """Runs a case under a watchdog; returns its failures."""
    if mode in DEEP_MODES:  # a runaway graph raises MemoryError here instead of waking the OOM killer
        fuzzer.limit_memory()
    if status is not None:
        os.pwrite(status, f"{seed} {mode}\n".ljust(64).encode(), 0)

    def hang():
        print(f"\nHANG: seed {seed} ({mode} mode) has run for more than {case_timeout:g} s; rerun: "
              f"{rerun_hint(seed, mode)}", flush=True)
    watchdog = threading.Timer(case_timeout, hang)
    watchdog.daemon = True
    watchdog.start()
    # the worker dies (and the parent reports the case) soon after a hang: deep cases are long, and a deep run
    # should move on to the next seed rather than wait twice the timeout
    faulthandler.dump_traceback_later(case_timeout * (1.2 if mode in DEEP_MODES else 2), exit=True)
    try:
        return fuzzer.run_case(seed, mode, exclude)
    except Exception as error:  # noqa: BLE001  (a fuzzer error is reported like a failure)
        import traceback
        text = "fuzzer error: " + "".join(traceback.format_exception(type(error), error, error.__traceback__))
        if mode == "mutation":
            return [fuzzer.Failure(seed, "fuzzer error", text)]
        if mode in DEEP_MODES:
            return [fuzzer.Failure(seed, mode, text)]
        return [fuzzer.Failure(seed, mode, None, text)]
    finally:
        watchdog.cancel()
        faulthandler.cancel_dump_traceback_later()


def print_failure(failure):
    print("=" * 100)
    print(f"FAILURE seed {failure.seed} ({failure.mode} mode) -- rerun: {rerun_hint(failure.seed, failure.mode)}")
    print(failure, flush=True)


def worker(args):
    """Runs seeds from --start-seed until --count seeds, the deadline or --max-failures; prints a summary line."""
    status = os.open(args.status_file, os.O_WRONLY | os.O_CREAT, 0o600) if args.status_file else None
    started = args.started_at if args.started_at is not None else time.time()
    deadline = started + args.seconds
    cases, failing = 0, []
    seed = args.start_seed
    bucket = int((time.time() - started) // args.progress)  # progress lines on a grid shared by all workers
    while seed < args.start_seed + args.count and time.time() < deadline and \
            args.base_failures + len(failing) < args.max_failures:
        for mode in modes_of(args):
            found = run_one(fuzzer_of(mode), seed, mode, excluded(args, mode), args.case_timeout, status)
            if mode in DEEP_MODES:  # one line per case: its size, wall time and memory are the point
                print(f"[{time.time() - started:6.0f} s] {fuzzer_of(mode).LAST_REPORT}", flush=True)
            cases += 1
            if found:
                failing.append(f"{seed}:{mode}")
                print_failure(found[0])
            if args.status_file:  # what this worker finished, for the parent if the worker dies later
                with open(args.status_file + ".done", "a") as done:
                    done.write(f"{seed}:{mode} {'fail' if found else 'pass'}\n")
        seed += 1
        if int((time.time() - started) // args.progress) > bucket:
            bucket = int((time.time() - started) // args.progress)
            print(f"[{time.time() - started:6.0f} s] {args.base_cases + cases} cases, last seed {seed - 1}, "
                  f"{args.base_failures + len(failing)} failing", flush=True)
    print(f"{SUMMARY} next_seed={seed} cases={cases} failing={','.join(failing)}", flush=True)
    return 0


def run_seeds(args):
    """--seed N: in process, with the reproducer (and optionally the program) printed."""
    failures = 0
    for seed in args.seed:
        for mode in modes_of(args):
            found = run_one(fuzzer_of(mode), seed, mode, excluded(args, mode), args.case_timeout, None)
            if mode in DEEP_MODES:
                print(fuzzer_of(mode).LAST_REPORT)
            if found:
                failures += 1
                print_failure(found[0])
            else:
                print(f"seed {seed} ({mode} mode): passed")
            if args.show_program:
                print(program_text(mode, seed, excluded(args, mode)))
    return 1 if failures else 0


def parent(args):
    import tempfile
    started = time.time()
    seed = args.start_seed
    last_seed = args.start_seed + args.count if args.count is not None else None
    cases, failing = 0, []
    status_directory = tempfile.mkdtemp(prefix="metajit-fuzz-")
    status_path = os.path.join(status_directory, "status")
    while time.time() - started < args.seconds and len(failing) < args.max_failures and \
            (last_seed is None or seed < last_seed):
        count = args.seeds_per_worker if last_seed is None else min(args.seeds_per_worker, last_seed - seed)
        command = [sys.executable, os.path.abspath(__file__), "--worker", "--start-seed", str(seed), "--count",
                   str(count), "--seconds", str(args.seconds), "--started-at", repr(started), "--status-file",
                   status_path, "--base-cases", str(cases), "--base-failures", str(len(failing)), "--max-failures",
                   str(args.max_failures), "--case-timeout", str(args.case_timeout), "--progress", str(args.progress)]
        command += ["--deep"] + (["--large"] if args.large else []) if args.deep else \
            ["--mutation"] if args.mutation else ["--all"] if args.all else ["--gradients"] if args.gradients else []
        command += ["--include-known-bugs"] if args.include_known_bugs else []
        for path in (status_path, status_path + ".done"):
            if os.path.exists(path):
                os.remove(path)
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        summary = None
        for line in process.stdout:
            if line.startswith(SUMMARY):
                summary = dict(item.split("=", 1) for item in line[len(SUMMARY):].split())
            else:
                sys.stdout.write(line)
                sys.stdout.flush()
        code = process.wait()
        if summary is not None and code == 0:
            seed = int(summary["next_seed"])
            cases += int(summary["cases"])
            failing += [item for item in summary["failing"].split(",") if item]
            continue
        # the worker died (crash, hang, out of memory): count what it finished, blame the case it was running
        # and go on after it
        if os.path.exists(status_path + ".done"):
            for line in open(status_path + ".done").read().splitlines():
                item, verdict = line.split()
                cases += 1
                failing += [item] if verdict == "fail" else []
        crashed_seed, crashed_mode = seed, modes_of(args)[0]
        if os.path.exists(status_path):
            text = open(status_path).read().split()
            if len(text) == 2:
                crashed_seed, crashed_mode = int(text[0]), text[1]
        print("=" * 100)
        print(f"FAILURE seed {crashed_seed} ({crashed_mode} mode): the worker process died (exit status {code}) "
              f"while running it -- rerun: {rerun_hint(crashed_seed, crashed_mode)}", flush=True)
        try:
            text = program_text(crashed_mode, crashed_seed, excluded(args, crashed_mode))
            print("--- program ---")
            print(text)
            if crashed_mode in DEEP_MODES:
                print(f"shrink: python tests/python/deep_graph_fuzzer.py --seed {crashed_seed}"
                      f"{' --large' if crashed_mode == 'deep-large' else ''} --shrink")
        except Exception as error:  # noqa: BLE001
            print(f"(could not regenerate the program: {error})")
        failing.append(f"{crashed_seed}:{crashed_mode}")
        cases += 1
        seed = crashed_seed + 1
    shutil.rmtree(status_directory, ignore_errors=True)
    elapsed = time.time() - started
    print(f"done: {cases} cases (seeds {args.start_seed}..{seed - 1}) in {elapsed:.0f} s, {len(failing)} failing" +
          (": " + ", ".join(item.replace(":value", "").replace(":grad", " (gradients)").replace(":mutation", "")
                            .replace(":deep-large", " (deep, large)").replace(":deep", " (deep)")
                            for item in failing)
           if failing else ""), flush=True)
    return 1 if failing else 0


def main():
    args = parse_arguments()
    if args.worker:  # the parent set METAJIT_CACHE_DIR
        return worker(args)
    temporary = None
    if not os.environ.get("METAJIT_CACHE_DIR"):  # before metajit is imported (graph_fuzzer imports it)
        import tempfile
        temporary = tempfile.mkdtemp(prefix="metajit-fuzz-cache-")
        os.environ["METAJIT_CACHE_DIR"] = temporary
    try:
        return run_seeds(args) if args.seed else parent(args)
    finally:
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""Training steps of two metajit builds side by side: steady step time and kernels per step.

Runs the training benchmark's step functions (bench/training_benchmark.py: SmallCNN, the transformer LM,
ResNet-18) under each build's python/ directory in turn, in fresh processes, for a few rounds, and prints the
median step time and the kernels and library calls each step launches. For checking that a change does not
regress the benchmarks, as the issues ask ("side by side with the old build"):

    git worktree add /tmp/old <commit> && make -C /tmp/old build
    python bench/compare_builds.py --old /tmp/old --new .

Times are medians of --steps steady steps after three warm-up steps; each build keeps its own kernel cache.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

WORKER = r"""
import json, statistics, sys, time
sys.path.insert(0, {bench!r})
import training_benchmark
import metajit as mj
step = training_benchmark.metajit_step_function({model!r})
for _ in range(3):
    step()
before = dict(mj.stats())
times = []
for _ in range({steps}):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
after = dict(mj.stats())
per_step = lambda key: (after.get(key, 0) - before.get(key, 0)) / {steps}
print(json.dumps({{"milliseconds": statistics.median(times) * 1000, "kernels": per_step("kernels_launched"),
                   "library_calls": per_step("library_calls")}}))
"""


def run(build, model, steps):
    environment = dict(os.environ, PYTHONPATH=os.path.join(os.path.abspath(build), "python"),
                       METAJIT_CACHE_DIR=os.path.join(os.path.abspath(build), "build", "compare-kernel-cache"))
    code = WORKER.format(bench=HERE, model=model, steps=steps)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment,
                            timeout=1800)
    if result.returncode != 0:
        raise SystemExit(f"{model} under {build} failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="checkout of the old build (its python/ holds _core)")
    parser.add_argument("--new", default=os.path.dirname(HERE), help="checkout of the new build (default: this one)")
    parser.add_argument("--models", default="small_cnn,transformer,resnet18")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2, help="each model runs under old, then new, this many times")
    arguments = parser.parse_args()
    print("| model | old ms/step | new ms/step | new / old | old kernels, library calls | new kernels, library calls |")
    print("|---|---:|---:|---:|---|---|")
    for model in arguments.models.split(","):
        results = {"old": [], "new": []}
        for _ in range(arguments.rounds):
            for name in ("old", "new"):
                results[name].append(run(getattr(arguments, name), model, arguments.steps))
        old_ms = statistics.median(entry["milliseconds"] for entry in results["old"])
        new_ms = statistics.median(entry["milliseconds"] for entry in results["new"])
        counts = {name: f'{results[name][-1]["kernels"]:.0f}, {results[name][-1]["library_calls"]:.0f}'
                  for name in results}
        print(f"| {model} | {old_ms:.2f} | {new_ms:.2f} | {new_ms / old_ms:.2f}x | {counts['old']} | {counts['new']} |",
              flush=True)


if __name__ == "__main__":
    main()

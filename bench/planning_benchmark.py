"""Planning benchmark: what the planner costs per step and per graph node on an unrolled recurrence (issue 43).

One training step of an LSTMCell unrolled over T steps (LSTMCell(32, 64) then Linear(64, 10) at every step, batch
8, the squared outputs' means summed over the steps, SGD) is one long lazy graph: tens of thousands of pending
nodes, planned in several syncs (recording syncs a chain once it is 10,000 ops deep). Each size runs in a fresh
process, so no plan is cached, after a warm-up process has compiled its kernels, so the time is planning rather
than compiling: mj.stats()['planning_seconds'] over mj.stats()['planned_nodes'] (the pending nodes of the graphs
planned). Planning runs on the calling thread; the processes run with one kernel thread and one BLAS thread so that
idle worker threads spinning on a small machine do not take its cores. PyTorch eager's time for the same program
is shown for scale. Writes bench/PLANNING.md.

    python bench/planning_benchmark.py [--steps 250,500,1000,2000] [--runs 3] [--output bench/PLANNING.md]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.normpath(os.path.join(HERE, os.pardir, "python"))
INPUT, HIDDEN, OUTPUT, BATCH = 32, 64, 10, 8


def unrolled_step(framework, steps):
    """Builds and runs one training step of the unrolled cell in `framework` (metajit or torch); its seconds."""
    nn = framework.nn
    framework.manual_seed(0)
    cell, head = nn.LSTMCell(INPUT, HIDDEN), nn.Linear(HIDDEN, OUTPUT)
    optimizer = framework.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.01)
    x = framework.randn(steps, BATCH, INPUT)
    start = time.perf_counter()
    h, c = framework.zeros(BATCH, HIDDEN), framework.zeros(BATCH, HIDDEN)
    loss = 0
    for step in range(steps):
        h, c = cell(x[step], (h, c))
        loss = loss + (head(h) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    loss.item()
    return time.perf_counter() - start


def child(steps, framework_name):
    """Runs in the subprocess: prints the step's figures as JSON."""
    if framework_name == "torch":
        import torch
        torch.set_num_threads(1)
        print(json.dumps({"total_seconds": unrolled_step(torch, steps)}))
        return
    sys.path.insert(0, PACKAGE)
    import metajit as mj
    seconds = unrolled_step(mj, steps)
    stats = mj.stats()
    print(json.dumps({"total_seconds": seconds, "planning_seconds": stats["planning_seconds"],
                      "planned_nodes": stats["planned_nodes"], "kernels_compiled": stats["kernels_compiled"]}))


def run_child(steps, framework_name):
    environment = dict(os.environ, METAJIT_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    output = subprocess.run([sys.executable, __file__, "--child", str(steps), "--framework", framework_name],
                            env=environment, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="250,500,1000,2000", help="comma-separated unrolled lengths")
    parser.add_argument("--runs", type=int, default=3, help="timed processes per length (median reported)")
    parser.add_argument("--output", default=os.path.join(HERE, "PLANNING.md"))
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--framework", default="metajit", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child is not None:
        return child(arguments.child, arguments.framework)
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    rows = []
    for steps in [int(value) for value in arguments.steps.split(",")]:
        warm_up = run_child(steps, "metajit")  # compiles what the kernel cache lacks
        runs = [run_child(steps, "metajit") for _ in range(arguments.runs)]
        if any(run["kernels_compiled"] for run in runs):
            print(f"warning: {steps} steps compiled kernels in a timed run", file=sys.stderr)
        planning = statistics.median(run["planning_seconds"] for run in runs)
        total = statistics.median(run["total_seconds"] for run in runs)
        nodes = runs[0]["planned_nodes"]
        reference = statistics.median(run_child(steps, "torch")["total_seconds"] for _ in range(arguments.runs)) \
            if torch_version else None
        rows.append((steps, nodes, planning, total, reference, warm_up["kernels_compiled"]))
        print(f"{steps} steps: {int(nodes)} nodes planned in {planning:.2f} s ({planning / steps * 1e3:.2f} ms a "
              f"step, {planning / nodes * 1e6:.1f} us a node); step {total:.2f} s" +
              (f", PyTorch {reference:.2f} s" if reference is not None else ""), flush=True)
    write_report(arguments, rows, torch_version)


def write_report(arguments, rows, torch_version):
    sys.path.insert(0, HERE)
    from run_benchmarks import cpu_model  # only here: it imports metajit, which the child processes time
    lines = ["# Planning cost on an unrolled recurrence", "",
             f"Generated by `bench/planning_benchmark.py` (`make bench-planning`) on {cpu_model()}, "
             f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')}. One training step of LSTMCell({INPUT}, "
             f"{HIDDEN}) and Linear({HIDDEN}, {OUTPUT}) unrolled over T steps (batch {BATCH}, the squared outputs' "
             "means summed, SGD), in a fresh process after a warm-up process compiled its kernels; the median of "
             f"{arguments.runs} processes, each with one kernel thread. Planning is `mj.stats()['planning_seconds']` "
             "(every sync's planning: recording syncs chains 10,000 ops deep, so longer runs make several plans), "
             "nodes are `mj.stats()['planned_nodes']`, the pending nodes of the graphs planned; the step is the "
             "whole program from recording to `loss.item()`." +
             (f" PyTorch {torch_version} eager, one thread, runs the same program." if torch_version else ""), "",
             "| steps | nodes planned | planning s | ms per step | us per node | step s |" +
             (" PyTorch step s |" if torch_version else ""),
             "|---:|---:|---:|---:|---:|---:|" + ("---:|" if torch_version else "")]
    for steps, nodes, planning, total, reference, _ in rows:
        lines.append(f"| {steps} | {int(nodes)} | {planning:.2f} | {planning / steps * 1e3:.2f} | "
                     f"{planning / nodes * 1e6:.1f} | {total:.2f} |" +
                     (f" {reference:.2f} |" if reference is not None else ""))
    lines += ["", "A flat \"us per node\" column is linear planning. The history of these figures is in "
              "docs/design.md (\"The cost per node\")."]
    with open(arguments.output, "w") as report:
        report.write("\n".join(lines) + "\n")
    print(f"wrote {arguments.output}")


if __name__ == "__main__":
    main()

"""Planning benchmark: what the planner costs per step and per graph node on an unrolled recurrence (issue 43).

One training step of an LSTMCell unrolled over T steps (LSTMCell(32, 64) then Linear(64, 10) at every step, batch
8, the squared outputs' means summed over the steps, SGD) is one long lazy graph: tens of thousands of pending
nodes, planned in several syncs (recording syncs a chain once it is 10,000 ops deep). Each size runs in a fresh
process, so no plan is cached, after a warm-up process has compiled its kernels, so the time is planning rather
than compiling: mj.stats()['planning_seconds'] over mj.stats()['planned_nodes'] (the pending nodes of the graphs
planned). The same forward pass alone under no_grad is measured too: without a backward pass reading the cell
states, only the planner's own cuts keep its kernels short. Planning runs on the calling thread; the processes run
with one kernel thread and one BLAS thread so that idle worker threads spinning on a small machine do not take its
cores. PyTorch eager's time for the same program is shown for scale. Writes bench/PLANNING.md.

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


def unrolled_step(framework, steps, mode="train"):
    """Builds and runs one training step of the unrolled cell in `framework` (metajit or torch), or with mode
    "infer" its forward pass alone under no_grad; its seconds."""
    nn = framework.nn
    framework.manual_seed(0)
    cell, head = nn.LSTMCell(INPUT, HIDDEN), nn.Linear(HIDDEN, OUTPUT)
    optimizer = framework.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.01)
    x = framework.randn(steps, BATCH, INPUT)
    start = time.perf_counter()
    with framework.set_grad_enabled(mode == "train"):
        h, c = framework.zeros(BATCH, HIDDEN), framework.zeros(BATCH, HIDDEN)
        loss = 0
        for step in range(steps):
            h, c = cell(x[step], (h, c))
            loss = loss + (head(h) ** 2).mean()
        if mode == "train":
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        loss.item()
    return time.perf_counter() - start


def child(steps, framework_name, mode):
    """Runs in the subprocess: prints the step's figures as JSON."""
    if framework_name == "torch":
        import torch
        torch.set_num_threads(1)
        print(json.dumps({"total_seconds": unrolled_step(torch, steps, mode)}))
        return
    sys.path.insert(0, PACKAGE)
    import metajit as mj
    seconds = unrolled_step(mj, steps, mode)
    stats = mj.stats()
    print(json.dumps({"total_seconds": seconds, "planning_seconds": stats["planning_seconds"],
                      "planned_nodes": stats["planned_nodes"], "plans_made": stats["plans_made"],
                      "kernels_compiled": stats["kernels_compiled"]}))


def run_child(steps, framework_name, mode="train"):
    environment = dict(os.environ, METAJIT_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    output = subprocess.run([sys.executable, __file__, "--child", str(steps), "--framework", framework_name,
                             "--mode", mode],
                            env=environment, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="250,500,1000,2000", help="comma-separated unrolled lengths")
    parser.add_argument("--runs", type=int, default=3, help="timed processes per length (median reported)")
    parser.add_argument("--output", default=os.path.join(HERE, "PLANNING.md"))
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--framework", default="metajit", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="train", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child is not None:
        return child(arguments.child, arguments.framework, arguments.mode)
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    tables = {}
    for mode in ("train", "infer"):
        rows = tables[mode] = []
        for steps in [int(value) for value in arguments.steps.split(",")]:
            run_child(steps, "metajit", mode)  # compiles what the kernel cache lacks
            runs = [run_child(steps, "metajit", mode) for _ in range(arguments.runs)]
            if any(run["kernels_compiled"] for run in runs):
                print(f"warning: {mode}, {steps} steps compiled kernels in a timed run", file=sys.stderr)
            planning = statistics.median(run["planning_seconds"] for run in runs)
            total = statistics.median(run["total_seconds"] for run in runs)
            nodes, plans = runs[0]["planned_nodes"], runs[0]["plans_made"]
            reference = statistics.median(run_child(steps, "torch", mode)["total_seconds"]
                                          for _ in range(arguments.runs)) if torch_version else None
            rows.append((steps, nodes, plans, planning, total, reference))
            print(f"{mode}, {steps} steps: {int(nodes)} nodes planned in {int(plans)} plans, {planning:.2f} s "
                  f"({planning / steps * 1e3:.2f} ms a step, {planning / nodes * 1e6:.1f} us a node); "
                  f"step {total:.2f} s" + (f", PyTorch {reference:.2f} s" if reference is not None else ""),
                  flush=True)
    write_report(arguments, tables, torch_version)


def write_report(arguments, tables, torch_version):
    sys.path.insert(0, HERE)
    from run_benchmarks import cpu_model  # only here: it imports metajit, which the child processes time
    lines = ["# Planning cost on an unrolled recurrence", "",
             f"Generated by `bench/planning_benchmark.py` (`make bench-planning`) on {cpu_model()}, "
             f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')}. One training step of LSTMCell({INPUT}, "
             f"{HIDDEN}) and Linear({HIDDEN}, {OUTPUT}) unrolled over T steps (batch {BATCH}, the squared outputs' "
             "means summed, SGD), and the same forward pass alone under no_grad (inference), each in a fresh "
             "process after a warm-up process compiled its kernels; the median of "
             f"{arguments.runs} processes, each with one kernel thread. Planning is `mj.stats()['planning_seconds']` "
             "(every sync's planning: recording syncs chains 10,000 ops deep, so longer runs make several plans), "
             "nodes are `mj.stats()['planned_nodes']`, the pending nodes of the graphs planned, and plans "
             "`mj.stats()['plans_made']`, the graphs planned (syncs the plan cache did not serve); the step is the "
             "whole program from recording to `loss.item()`." +
             (f" PyTorch {torch_version} eager, one thread, runs the same program." if torch_version else "")]
    for mode, title in (("train", "Training step"), ("infer", "Inference (the forward pass under no_grad)")):
        lines += ["", f"## {title}", "",
                  "| steps | nodes planned | plans | planning s | ms per step | us per node | step s |" +
                  (" PyTorch step s |" if torch_version else ""),
                  "|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if torch_version else "")]
        for steps, nodes, plans, planning, total, reference in tables[mode]:
            lines.append(f"| {steps} | {int(nodes)} | {int(plans)} | {planning:.2f} | {planning / steps * 1e3:.2f} | "
                         f"{planning / nodes * 1e6:.1f} | {total:.2f} |" +
                         (f" {reference:.2f} |" if reference is not None else ""))
    lines += ["", "A flat \"us per node\" column is linear planning. The history of these figures is in "
              "docs/design.md (\"The cost per node\")."]
    with open(arguments.output, "w") as report:
        report.write("\n".join(lines) + "\n")
    print(f"wrote {arguments.output}")


if __name__ == "__main__":
    main()

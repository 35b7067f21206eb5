"""Bounded run of the deep and wide graph fuzzer (tests/python/deep_graph_fuzzer.py): a few fixed seeds of each
shape (long chains, fan-outs, long backwards, recurrences) at sizes that keep this file near a minute on a 2-core
machine with a cold kernel cache, each checked against numpy step by step within its propagated error bound.

Every case runs in a subprocess, so a crash or a hang fails that test instead of taking pytest down. Each shape
also runs once with a deliberately wrong reference (every reference op off by 2^-16 relative), which must fail:
the comparison is not vacuous. This file must not grow the sizes past what `make test` can afford: longer and
larger runs belong to `python tools/fuzz.py --deep [--large]`."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FUZZER = os.path.join(HERE, "deep_graph_fuzzer.py")

# (shape, seed, size): size is ops for chains, consumers for fan-outs, steps or batches for recurrences
CASES = [
    ("chain", 2, 10000),      # 10^4 ops (ten times kMaximumFusedDepth): tanh, sin, clamp, clamp_, sub_
    ("chain", 3, 4000),       # an .item() sync point in the middle, events every 2 and 3 iterations
    ("chain", 22, 5000),      # dyadic constants: compared bit for bit
    ("chain", 16, 5000),      # dyadic, with events
    ("fanout", 1, 500),       # a fan-in tree of additions, differentiated back to the leaf
    ("fanout", 3, 1000),      # `result += item` over 1000 consumers, differentiated
    ("fanout", 25, 1500),     # a loop of `result = result + item` in float64, differentiated
    ("fanout", 0, 300),       # mj.stack of 300 consumers of one pending value
    ("gradient", 1, 12000),   # a backward through 12,000 ops
    ("gradient", 2, 6000),
    ("recurrence", 3, 500),   # an RNN unrolled over 500 steps, the loss summed over every step, backward through time
    ("recurrence", 1, 500),   # a running total of 500 batch losses, one backward at the end
    ("recurrence", 0, 600),   # a training loop of 600 steps without a sync
    ("recurrence", 6, 200),   # a backward per batch, W.grad accumulating
]
SABOTAGED = [("chain", 22, 1000), ("fanout", 1, 200), ("gradient", 1, 2000), ("recurrence", 3, 100)]


def run_fuzzer(*arguments, timeout=300):
    environment = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, FUZZER, "--no-reproducer", *arguments], capture_output=True, text=True,
                          timeout=timeout, env=environment)


@pytest.mark.parametrize("shape,seed,size", CASES,
                         ids=[f"{shape}-seed{seed}-size{size}" for shape, seed, size in CASES])
def test_deep_graph_matches_numpy(shape, seed, size):
    result = run_fuzzer("--seed", str(seed), "--shape", shape, "--size", str(size))
    assert result.returncode == 0, f"exit status {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
    assert " passed in " in result.stdout, result.stdout


@pytest.mark.parametrize("shape,seed,size", SABOTAGED, ids=[f"{shape}-seed{seed}" for shape, seed, size in SABOTAGED])
def test_a_wrong_reference_fails(shape, seed, size):
    result = run_fuzzer("--seed", str(seed), "--shape", shape, "--size", str(size), "--sabotage-reference")
    assert result.returncode == 1, f"exit status {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
    assert "wrong value" in result.stdout, result.stdout


def test_cases_are_reproducible_and_reproducers_run(tmp_path):
    sys.path.insert(0, HERE)
    import deep_graph_fuzzer
    for seed in range(8):
        first, second = deep_graph_fuzzer.generate(seed, size=200), deep_graph_fuzzer.generate(seed, size=200)
        assert first.source() == second.source() and first.describe() == second.describe()
        assert sorted(first.expected) == sorted(second.expected)
    # a smaller size runs a prefix of the same program: the same loop body, shorter tables and loop
    for shape in ("chain", "gradient"):
        long, short = deep_graph_fuzzer.generate(5, shape=shape, size=3000), \
            deep_graph_fuzzer.generate(5, shape=shape, size=1000)

        def body(program):
            return [line for line in program.lines if line.startswith("    ") and "check(" not in line and
                    "if t in" not in line]
        assert body(long) == body(short)
        assert long.parameters["iterations"] > short.parameters["iterations"]
    # the standalone reproducer holds the program and its expected values, and passes where the case passes
    program = deep_graph_fuzzer.generate(2, shape="recurrence", size=100)
    script = tmp_path / "reproducer.py"
    script.write_text(deep_graph_fuzzer.reproducer_text(program))
    environment = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                            env=environment)
    assert result.returncode == 0 and "all checks passed" in result.stdout, result.stdout + result.stderr[-3000:]

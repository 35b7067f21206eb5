"""Graphs of any depth run without taking the interpreter down (issue: a lazy chain of 20,000 additions crashed
with a segmentation fault). Each program runs in a subprocess, so a crash is a failure of this test, not of the
test run; values are checked against numpy. jit/graph_executor.cc cuts kernels at kMaximumFusedDepth ops, and
core/node.h computes a chain once it is kMaximumPendingDepth ops deep. Times on the 2-core host (Zen 5): about
1 s for the 20,000-op chain, 2 s for the 20,000-step backward, 3.7 s (196 MiB peak) for the 1,000,000-op chain
and 3.9 s for the 100,000-step backward; before the automatic prefix runs the million-op chain planned for a
minute in 3.4 GB."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_program(source, timeout=600):
    environment = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], capture_output=True, text=True,
                            timeout=timeout, env=environment)
    assert result.returncode == 0, f"exit status {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
    return [float(value) for value in result.stdout.split()]


def test_a_lazy_chain_of_20000_additions():
    values = run_program("""
        import metajit as mj
        x = mj.ones(4)
        for i in range(20000):
            x = x + 1
        print(*x.numpy())
    """)
    assert values == [20001.0] * 4


@pytest.mark.parametrize("steps", [20000, 100000])
def test_a_long_backward(steps):
    values = run_program(f"""
        import metajit as mj
        a = mj.ones(4, requires_grad=True)
        x = a
        for i in range({steps}):
            x = x * 1.0001
        x.sum().backward()
        print(*a.grad.numpy())
    """)
    expected = float(np.float32(1.0001)) ** steps  # float32's 1.0001, multiplied exactly
    np.testing.assert_allclose(values, [expected] * 4, rtol=1e-3 if steps > 20000 else 2e-3)  # float32 roundings


def test_a_running_total_of_in_place_additions():
    values = run_program("""
        import metajit as mj
        total = mj.zeros(())
        step = mj.full([], 0.5)
        for i in range(20000):
            total += step
        print(total.item())
    """)
    assert values == [10000.0]


def test_a_lazy_chain_of_a_million_additions_runs_in_bounded_memory():
    values = run_program("""
        import resource
        import metajit as mj
        x = mj.ones(4)
        for i in range(1000000):
            x = x + 1
        print(*x.numpy())
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    """)
    assert values[:4] == [1000001.0] * 4
    assert values[4] < 1024  # MiB: the chain is computed in prefixes, never held or planned whole


"""Graphs of any depth run without taking the interpreter down (issue: a lazy chain of 20,000 additions crashed
with a segmentation fault). Each program runs in a subprocess, so a crash is a failure of this test, not of the
test run; values are checked against numpy. jit/plan/cut_deep_chains.cc cuts kernels at kMaximumFusedDepth ops, and
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


def run_program(source, timeout=600, stack_bytes=None):
    environment = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))

    def limit_stack():  # the main thread's stack is sized from this limit when the program starts
        import resource
        resource.setrlimit(resource.RLIMIT_STACK, (stack_bytes, resource.getrlimit(resource.RLIMIT_STACK)[1]))

    result = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], capture_output=True, text=True,
                            timeout=timeout, env=environment, preexec_fn=limit_stack if stack_bytes else None)
    assert result.returncode == 0, f"exit status {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
    return [float(value) for value in result.stdout.split()]


# Prints the peak resident memory (MiB) after one compiled kernel, so that the tests bound what the graph adds: on a
# GPU the CUDA context and NVRTC alone take about 1 GB, which no graph causes.
MEASURE_BASELINE = textwrap.indent(textwrap.dedent("""
    import resource
    import metajit as mj
    (mj.ones(4) + 1).numpy()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""), " " * 8)


def test_a_lazy_chain_of_20000_additions():
    values = run_program("""
        import metajit as mj
        x = mj.ones(4)
        for i in range(20000):
            x = x + 1
        print(*x.numpy())
    """)
    assert values == [20001.0] * 4


def test_a_traced_chain_of_20000_additions_and_its_replay():
    """Under mj.trace the chain is not cut into prefixes (nothing may run inside a recording): the whole chain is
    the trace's one plan, which replays on a new argument."""
    values = run_program("""
        import metajit as mj

        @mj.trace
        def chain(x):
            for i in range(20000):
                x = x + 1
            return x

        print(*chain(mj.ones(4)).numpy())
        print(*chain(mj.zeros(4)).numpy(), chain.replays)
    """)
    assert values == [20001.0] * 4 + [20000.0] * 4 + [1.0]


def test_an_exported_chain_of_20000_additions_runs_in_the_cpp_runtime(tmp_path):
    """Export walks the trace's plan (41 kernels for this chain) with loops only; the runtime runs its steps in
    order. About 1 s."""
    values = run_program(f"""
        import metajit as mj

        def chain(x):
            for i in range(20000):
                x = x + 1
            return x

        mj.export(chain, mj.ones(4), {str(tmp_path / "chain.mjm")!r})
        print(*mj.load_exported({str(tmp_path / "chain.mjm")!r})(mj.zeros(4)).numpy())
    """)
    assert values == [20000.0] * 4


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
    values = run_program(MEASURE_BASELINE + """
        x = mj.ones(4)
        for i in range(1000000):
            x = x + 1
        print(*x.numpy())
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    """)
    assert values[1:5] == [1000001.0] * 4
    assert values[5] - values[0] < 768  # MiB: the chain is computed in prefixes, never held or planned whole



def test_views_composed_in_a_loop_stay_linear():
    """Each reshape's source indices use the whole flat offset, so composing views doubled the written-out index
    at every step: 24 steps of this loop took 68 s and 23 GB, and 8 steps with a backward compiled for minutes
    (jit/ir/lowering.cc kMaxIndexTreeSize now stores the view instead). About 0.5 s."""
    values = run_program(MEASURE_BASELINE + """
        x = mj.arange(8).float().reshape(4, 2).requires_grad_()
        y = x
        for i in range(60):
            y = y.flip([0]).t().reshape(4, 2) * 1.0
        (y * mj.arange(8).float().reshape(4, 2)).sum().backward()
        print(*y.numpy().ravel(), *x.grad.numpy().ravel())
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    """, timeout=120)
    order = np.arange(8).reshape(4, 2)
    for _ in range(60):
        order = np.flip(order, 0).T.reshape(4, 2)
    gradient = np.zeros(8)
    np.add.at(gradient, order.ravel(), np.arange(8))
    assert values[1:9] == list(order.ravel().astype(float))
    assert values[9:17] == list(gradient)
    assert values[17] - values[0] < 768  # MiB


def test_joined_kernels_keep_the_depth_cut():
    """Planning cuts a chain every kMaximumFusedDepth (1000) ops; joining kernels with several outputs used to
    merge the pieces back (a 2,500-op chain became one kernel, and compile time grows with the square of a
    kernel's length: 2,000 sines took 145 s). Plans only; compiles nothing."""
    values = run_program("""
        import metajit as mj
        x = mj.full([2, 2], 0.5)
        for i in range(2500):
            x = mj.sin(x)
        print(*[len(kernel.ops) for kernel in mj.inspect(x)])
    """, timeout=120)
    assert len(values) >= 3 and sum(values) >= 2500, values
    assert max(values) <= 1000, values


def test_writes_through_views_of_views_in_a_loop_stay_linear():
    """Each pass views the previous view and writes through it. The path from the base grew by one step per
    pass, and every use re-derived it and every write scattered back through it: 200 passes took 2 s and
    400 MB, growing as the square (meta_ops/var.cc now merges consecutive steps). About 0.2 s for 2,000."""
    values = run_program(MEASURE_BASELINE + """
        a = mj.tensor([1.0, 2.0], requires_grad=True)
        x = a.clone()
        for i in range(2000):
            x = x.reshape(2, 1)
            x += 0.5
            x = x.t()[0]
        (x * mj.tensor([3.0, 4.0])).sum().backward()
        print(*x.detach().numpy(), *a.grad.numpy())
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    """, timeout=120)
    assert values[1:5] == [1001.0, 1002.0, 3.0, 4.0]
    assert values[5] - values[0] < 768  # MiB


def test_joins_of_many_pending_pieces_plan_bounded_kernels():
    """mj.cat and mj.stack of many pending values: one kernel held every piece, and compiling it grew faster
    than the count (stacking 1,000 took 20 s, concatenating 1,000 more than 300 s). Past 64 pieces each group
    of 8 is a kernel of its own. About 2 s: the values of a 100-piece join, then the plan of a 1,000-piece one."""
    values = run_program("""
        import numpy as np
        import metajit as mj
        source = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
        x = mj.tensor(source) * 2.0
        pieces = [mj.sin(x + i) for i in range(100)]
        joined = mj.cat(pieces, 1).numpy()
        stacked = mj.stack(pieces).numpy()
        want = [np.sin(source * 2.0 + i) for i in range(100)]
        print(np.abs(joined - np.concatenate(want, 1)).max(), np.abs(stacked - np.stack(want)).max())
        pieces = [mj.sin(x + i) for i in range(1000)]
        for join in (mj.cat, mj.stack):
            kernels = mj.inspect(join(pieces))
            print(len(kernels), max(len(kernel.ops) for kernel in kernels))
    """, timeout=300)
    assert max(values[:2]) <= 1e-6, values
    for count, largest in (values[2:4], values[4:6]):
        assert count >= 1000 / 8 and largest <= 8 * 8 * 3, values  # a piece is an add, a sine and a placement


def test_a_loop_reading_its_state_through_a_reduction_repeats_its_kernels():
    """Each step's reduction kernel rebuilt the small state from the loop's start (its traffic too small for
    the recompute policy to store it): work growing as the square of the loop and a new kernel at almost every
    step (300 steps: 132 kernels). jit/recompute_policy.cc now stores a shared value whose rebuild runs more
    than 32 ops, so the kernels repeat. Plans only, plus the values of a shorter loop; about 2 s."""
    values = run_program("""
        import numpy as np
        import metajit as mj
        start = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
        x, want = mj.tensor(start), start.astype(np.float64)
        for i in range(60):
            x = x * 0.5 - x.amax(0, keepdim=True) * 0.25
            want = want * 0.5 - want.max(0, keepdims=True) * 0.25
        print(np.abs(x.numpy() - want).max() / np.abs(want).max())
        for i in range(300):
            x = x * 0.5 - x.amax(0, keepdim=True) * 0.25
        kernels = mj.inspect(x)
        print(len(kernels), len({kernel.key for kernel in kernels}))
    """, timeout=300)
    assert values[0] < 1e-5, values
    assert values[1] >= 300 and values[2] <= 20, values


def test_an_unrolled_lstm_cell_repeats_its_kernels(tmp_path):
    """An LSTMCell stepped 60 times: its gradient compiled 63 distinct kernels (29 for 30 steps): the cell state
    and its gradient were rebuilt inline from the last stored step, a longer kernel every step, and the depth cut
    fell at a different point of a step each time. Now each step's state is stored with the step's kernel
    (jit/plan/recompute_policy.cc) and chains start again after a matrix product (jit/plan/cut_deep_chains.cc):
    14 kernels for 30 steps and for 60. Plans only, plus the gradient of a short run against PyTorch; about 5 s."""
    torch = pytest.importorskip("torch")
    values = run_program("""
        import numpy as np
        import metajit as mj
        import metajit.nn as nn

        def unrolled(steps, inputs):
            mj.manual_seed(0)
            cell = nn.LSTMCell(16, 32)
            h = c = mj.zeros(8, 32)
            for step in range(steps):
                h, c = cell(mj.tensor(inputs[step]), (h, c))
            return cell, h.sum()

        inputs = np.random.default_rng(0).standard_normal((60, 8, 16)).astype(np.float32)
        for steps in (30, 60):
            cell, loss = unrolled(steps, inputs)
            kernels = mj.inspect(*mj.grad(loss, [cell.weight_hh, cell.weight_ih]))
            print(len(kernels), len({kernel.key for kernel in kernels if kernel.key}))
        cell, loss = unrolled(20, inputs)
        loss.backward()
        np.savez(%r, gradient=cell.weight_hh.grad.numpy(), weight_hh=cell.weight_hh.numpy(),
                 weight_ih=cell.weight_ih.numpy(), bias_ih=cell.bias_ih.numpy(), bias_hh=cell.bias_hh.numpy())
    """ % str(tmp_path / "cell.npz"), timeout=300)
    short, long = values[1], values[3]
    assert values[0] >= 30 * 4 and values[2] >= 60 * 4, values  # every step plans its own kernels and calls
    assert long <= short + 2 and long <= 20, values
    saved = np.load(tmp_path / "cell.npz")
    reference = torch.nn.LSTMCell(16, 32)
    with torch.no_grad():
        for name in ("weight_hh", "weight_ih", "bias_ih", "bias_hh"):
            getattr(reference, name).copy_(torch.from_numpy(saved[name]))
    inputs = torch.from_numpy(np.random.default_rng(0).standard_normal((60, 8, 16)).astype(np.float32))
    h = c = torch.zeros(8, 32)
    for step in range(20):
        h, c = reference(inputs[step], (h, c))
    h.sum().backward()
    np.testing.assert_allclose(saved["gradient"], reference.weight_hh.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_chains_of_reductions_without_matrix_products_are_still_cut():
    """Reductions of elementwise values or of views of reductions are inlined as per-row passes of per-row
    passes, so the depth count runs through them (it starts again only after a matrix product) and a chain of
    20,000 of them is cut like any other (run with a 2 MiB stack: a kernel inlining such a chain whole overflows
    it, as starting the count again after every reduction did). About 10 s."""
    values = run_program("""
        import numpy as np
        import metajit as mj
        start = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
        for form in range(2):
            x, want = mj.tensor(start), start.copy()
            for i in range(20000):
                if form == 0:
                    x = (x * 1.0).amax(-1, keepdim=True).expand(4, 8)
                    want = np.broadcast_to(want.max(-1, keepdims=True), (4, 8))
                else:
                    x = (x * x).sum(-1, keepdim=True).expand(4, 8) * 0.125
                    want = np.broadcast_to((want * want).sum(-1, keepdims=True) * np.float32(0.125), (4, 8))
            print(np.abs(x.numpy() - want).max())
    """, timeout=300, stack_bytes=2 * 1024 * 1024)
    assert max(values) <= 1e-6, values


def test_a_backward_past_the_pending_depth_plans_once():
    """A 6,000-step chain `x = x * w + 0.001` is 12,000 ops deep, so recording syncs a prefix by itself; the
    values that sync inlined stay pending with the depth they were made at. The backward reads them, and every
    gradient op counted the whole forward again and synced: 8 plans, 182 kernels compiled and 12 s cold, for
    the 1000-step LSTMCell of bench/planning_benchmark.py 67 plans. make_node now counts the depth again before
    it syncs. About 3 s cold."""
    values = run_program("""
        import numpy as np
        import metajit as mj
        start = np.linspace(0.5, 1.5, 16)
        scale = np.linspace(0.9999, 1.0001, 16)
        x0 = mj.tensor(start.astype(np.float32), requires_grad=True)
        w = mj.tensor(scale.astype(np.float32), requires_grad=True)
        x = x0
        for i in range(6000):
            x = x * w + 0.001
        before = mj.stats()["plans_made"]
        x.sum().backward()
        gradient = w.grad.numpy()
        print(mj.stats()["plans_made"] - before)
        values = [start]
        for i in range(6000):
            values.append(values[-1] * scale + 0.001)
        upstream, want = np.ones(16), np.zeros(16)
        for i in reversed(range(6000)):
            want += upstream * values[i]
            upstream = upstream * scale
        print(np.abs(gradient - want).max() / np.abs(want).max())
    """, timeout=300)
    assert values[0] <= 2, values
    assert values[1] < 1e-3, values  # float32 rounding over 6,000 steps (n * eps is about 4e-4)


def test_a_running_total_of_small_matrix_products_plans_bounded_kernels():
    """`total = total + ((X[b % 3] @ W - Y[b % 3]) ** 2).mean()` over many batches (the deep fuzzer's seed 7008):
    W's gradient is a chain of additions of small matrix products, too small for the library, so each is a sum
    inlined into the addition's kernel. The lowering walks the additions first and only then the sums, past any
    value it could cut, so 600 steps made one kernel of 4,818 ops (1,500 steps: 100 s to compile). Sums are now cut
    like elementwise values once a kernel holds 1000 values. Plans only, plus the gradient of a short run; 2 s."""
    values = run_program("""
        import numpy as np
        import metajit as mj
        rng = np.random.default_rng(0)
        w, x, y = (rng.uniform(-1, 1, shape).astype(np.float32) for shape in ((3, 2), (3, 8, 3), (3, 8, 2)))

        def running_total(steps):
            W = mj.tensor(w, requires_grad=True)
            X, Y = mj.tensor(x), mj.tensor(y)
            total = mj.zeros(())
            for b in range(steps):
                total = total + ((X[b % 3] @ W - Y[b % 3]) ** 2).mean()
            return W, total

        W, total = running_total(600)
        kernels = mj.inspect(*mj.grad(total, [W]))
        print(max(len(kernel.ops) for kernel in kernels))
        W, total = running_total(40)
        total.backward()
        want = np.zeros((3, 2))
        for b in range(40):
            error = x[b % 3].astype(np.float64) @ w - y[b % 3]
            want += x[b % 3].T @ (2 * error / error.size)
        print(np.abs(W.grad.numpy() - want).max() / np.abs(want).max())
    """, timeout=300)
    assert values[0] <= 1500, values
    assert values[1] < 1e-5, values


def test_a_wide_tree_of_sums_plans_bounded_kernels():
    """A balanced tree of 1,024 pending pieces added pairwise is shallow but wide: every add has one reader, so
    no depth cut and no shared value split it, and one kernel of some 3,000 ops took minutes to compile (the deep
    fuzzer's seed 5009, 2,441 pieces: a hang). Past 1000 values a kernel is now cut at any elementwise value.
    About 2 s."""
    values = run_program("""
        import numpy as np
        import metajit as mj
        source = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2)
        v = mj.tensor(source) * 0.5
        level = [mj.sin(v) * (1.0 + i % 7) for i in range(1024)]
        while len(level) > 1:
            level = [level[j] + level[j + 1] for j in range(0, len(level), 2)]
        kernels = mj.inspect(level[0])
        print(len(kernels), max(len(kernel.ops) for kernel in kernels))
        want = sum(np.sin(source * 0.5) * (1.0 + i % 7) for i in range(1024))
        print(np.abs(level[0].numpy() - want).max() / np.abs(want).max())
    """, timeout=300)
    assert values[0] >= 3 and values[1] <= 1100, values
    assert values[2] < 1e-5, values

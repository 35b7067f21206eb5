"""Fusion: how many kernels a graph launches (mj.stats()["kernels_launched"]) and that the fused result still
matches numpy: elementwise chains, reductions with elementwise producers, softmax, diamonds, multi-output sync,
laziness, and what mj.inspect_kernels reports without running anything."""
import inspect
import os
import re

import numpy as np

import metajit as mj
from conftest import assert_close, flag_set, launched


def test_chain_of_eight_elementwise_ops_on_1m_elements_is_one_kernel(rng):
    a_data = rng.standard_normal(1 << 20).astype(np.float32)
    b_data = rng.uniform(0.5, 2.0, 1 << 20).astype(np.float32)
    a, b = mj.array(a_data), mj.array(b_data)  # mj.array inputs are already computed: no kernels for them

    def chain():
        y = ((((((a * b + 1.0).exp() - a) / b).relu() * 2.0).sqrt() + 0.5).maximum(a))  # 8 ops
        return y.numpy()

    result, kernels = launched(chain)
    a64, b64 = a_data.astype(np.float64), b_data.astype(np.float64)
    expected = np.maximum(np.sqrt(np.maximum((np.exp(a64 * b64 + 1) - a64) / b64, 0) * 2) + 0.5, a64)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)
    assert kernels == 1


def test_reduction_with_elementwise_producers_is_one_kernel(rng):
    a_data = rng.standard_normal((64, 300)).astype(np.float32)
    b_data = rng.standard_normal((64, 300)).astype(np.float32)
    a, b = mj.array(a_data), mj.array(b_data)
    for dim in (1, 0, -1):
        result, kernels = launched(lambda: (a * b).sum(dim).numpy())
        np.testing.assert_allclose(result, (a_data.astype(np.float64) * b_data).sum(dim), rtol=1e-5, atol=1e-5)
        assert kernels == 1, f"dim {dim}"
    result, kernels = launched(lambda: ((a - b).abs() * 0.5).max().numpy())
    np.testing.assert_allclose(result, (np.abs(a_data - b_data) * 0.5).max(), rtol=1e-6)
    assert kernels == 1


def test_reduction_followed_by_elementwise_is_one_kernel(rng):
    data = rng.standard_normal((32, 50)).astype(np.float32)
    x = mj.array(data)
    result, kernels = launched(lambda: ((x * x).sum(1).sqrt() + 1).numpy())
    np.testing.assert_allclose(result, np.sqrt((data.astype(np.float64) ** 2).sum(1)) + 1, rtol=1e-5)
    assert kernels == 1


def test_reshape_of_a_fused_reduction_stays_one_kernel(rng):
    """Reshaping a pending result reads it at split indices; the kernel loops over the reshaped value's own shape
    instead (same elements, same offsets), so a reduction inside it is not forced into a kernel of its own."""
    data = rng.standard_normal((6, 8, 40)).astype(np.float32)
    offsets = rng.standard_normal((6, 8)).astype(np.float32)
    x, z = mj.array(data), mj.array(offsets)
    result, kernels = launched(lambda: ((x * x).sum(2) + z).reshape([48]).numpy())
    np.testing.assert_allclose(result, ((data.astype(np.float64) ** 2).sum(2) + offsets).reshape(48), rtol=1e-5)
    assert kernels == 1
    result, kernels = launched(lambda: (x.amax(2, keepdim=True) - x).reshape([6, 320]).numpy())
    np.testing.assert_allclose(result, (data.max(2, keepdims=True) - data).reshape(6, 320), rtol=1e-6)
    assert kernels == 1


def softmax_reference(data):
    shifted = data.astype(np.float64) - data.max(-1, keepdims=True)
    return np.exp(shifted) / np.exp(shifted).sum(-1, keepdims=True)


def test_softmax_last_dim_at_most_three_kernels(rng):
    data = (rng.standard_normal((128, 257)) * 5).astype(np.float32)
    x = mj.array(data)

    def softmax():
        shifted = (x - x.amax(-1, keepdim=True)).exp()
        return (shifted / shifted.sum(-1, keepdim=True)).numpy()

    result, kernels = launched(softmax)
    np.testing.assert_allclose(result, softmax_reference(data), rtol=1e-5, atol=1e-7)
    assert kernels <= 3


def test_softmax_on_a_computed_input_and_middle_dim(rng):
    data = rng.standard_normal((4, 9, 6)).astype(np.float32)
    x = mj.array(data) * 3.0
    x.numpy()

    def softmax():
        shifted = (x - x.amax(1, keepdim=True)).exp()  # let go before the sync: free to fuse
        return shifted / shifted.sum(1, keepdim=True)

    result, kernels = launched(lambda: softmax().numpy())
    expected = softmax_reference(np.moveaxis(data * 3.0, 1, -1))
    np.testing.assert_allclose(result, np.moveaxis(expected, -1, 1), rtol=1e-5, atol=1e-7)
    assert kernels <= 3


def test_diamond_is_one_kernel_and_shares_work(rng):
    data = rng.standard_normal((100, 7)).astype(np.float32)
    x = mj.array(data)
    y = x.exp()
    body = mj.inspect_kernels(y * y + y.sin() - y)[0]["source"].split('---- end of prelude ----')[1]
    assert body.count("mj_exp(") + body.count("mj_exp_lanes(") == 1  # y is computed once per element, not three times
    result, kernels = launched(lambda: (y * y + y.sin() - y).numpy())
    e = np.exp(data.astype(np.float64))
    np.testing.assert_allclose(result, e * e + np.sin(e) - e, rtol=1e-5, atol=1e-6)
    assert kernels == 1
    assert y.is_computed  # held by this test, so the kernel stored it as a second output


def test_a_value_the_user_holds_is_stored_by_the_sync_that_reads_it(rng):
    """A pending value a Var still holds is stored by the first sync whose graph reads it (Jittor keeps such values
    too), so asking for it later runs nothing, and a running value carried through a loop is computed once per
    step instead of re-deriving every earlier step: a step's kernels stay the same in number from the first
    step to the last."""
    data = rng.standard_normal((50, 8)).astype(np.float32)
    x = mj.array(data)
    held = x.exp() + 1
    total, _ = launched(lambda: (held * 2).sum().numpy())
    assert held.is_computed
    value, kernels = launched(lambda: held.numpy())
    assert kernels == 0
    np.testing.assert_allclose(value, np.exp(data) + 1, rtol=1e-6)
    np.testing.assert_allclose(total, 2 * (np.exp(data.astype(np.float64)) + 1).sum(), rtol=1e-5)

    running = mj.zeros(8)
    expected = np.zeros(8)
    per_step = []
    for step in range(30):
        running = running * 0.5 + x[step]
        expected = expected * 0.5 + data[step]
        _, kernels = launched(lambda: (running * running).sum().numpy())
        per_step.append(kernels)
    np.testing.assert_allclose(running.numpy(), expected, rtol=1e-5)
    assert per_step[1:] == [per_step[1]] * 29, f"kernels per step: {per_step}"


def test_sync_of_several_outputs_and_reuse_of_computed_values(rng):
    data = rng.standard_normal((20, 30)).astype(np.float32)
    x = mj.array(data)
    y = x * 2
    z = (y + 1).sum(0)
    w = y - 3
    mj.sync(z, w)
    assert z.is_computed and w.is_computed
    assert_close(z, (data * 2 + 1).astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)
    assert_close(w, data * 2 - 3, rtol=1e-6)
    # already computed: reading them again launches nothing
    _, kernels = launched(lambda: (z.numpy(), w.numpy()))
    assert kernels == 0
    mj.sync([w, z])


def test_graph_is_lazy_until_a_value_is_needed(rng):
    x = mj.array(rng.standard_normal(16).astype(np.float32))
    mj.reset_stats()
    y = (x + 1).exp()
    assert not y.is_computed
    assert mj.stats()["kernels_launched"] == 0
    kernels = mj.inspect_kernels(y)
    assert len(kernels) == 1 and set(kernels[0]) >= {"key", "source", "ops"}
    assert mj.stats()["kernels_launched"] == 0 and not y.is_computed
    y.numpy()
    assert y.is_computed and mj.stats()["kernels_launched"] == 1


def test_long_chain_of_ops(rng):
    data = rng.standard_normal(64).astype(np.float32)
    x = mj.array(data)
    y = x
    for _ in range(300):
        y = y * 1.01 + 0.01
    expected = data.astype(np.float64)
    for _ in range(300):
        expected = expected * 1.01 + 0.01
    assert_close(y, expected, rtol=1e-4)


def test_a_very_long_chain_is_cut_into_kernels_of_bounded_size(rng):
    """A kernel builds at most 256 values by inlining (jit/ir/lowering.cc, kMaxInlinedValues); past that, the next
    state read by several ops is stored and the chain continues in another kernel. Before the recompute policy
    cuts them, a recurrence's kernels inlined its whole chain: planning an LSTM's gradients took a minute."""
    data = rng.standard_normal(4096).astype(np.float32)
    y = mj.array(data)
    expected = data.astype(np.float64)
    for _ in range(500):
        y = y * 0.999 + (y * 0.001).tanh()  # each state is read twice
        expected = expected * 0.999 + np.tanh(expected * 0.001)
    kernels = mj.inspect(y, device="cpu")
    assert len(kernels) >= 3, len(kernels)
    # The count runs down the chain first; the tanh beside each step is added on the way back up.
    assert max(len(kernel.ops) for kernel in kernels) <= 4 * 256, [len(kernel.ops) for kernel in kernels]
    assert_close(y, expected, rtol=1e-4)


def test_reduction_broadcast_back_over_its_rows_is_one_kernel(rng):
    """A reduction with one result per row, read back by every element of its row, runs once per row inside the
    consumer's kernel (no kernel of its own, no round trip through memory)."""
    data = rng.standard_normal((16, 33)).astype(np.float32)
    x = mj.array(data)
    result, kernels = launched(lambda: (x - x.mean(1, keepdim=True)).numpy())
    np.testing.assert_allclose(result, data - data.astype(np.float64).mean(1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert kernels == 1
    wide = rng.standard_normal((64, 300)).astype(np.float32)
    y = mj.array(wide)
    result, kernels = launched(lambda: y.softmax(-1).numpy())
    expected = np.exp(wide - wide.max(-1, keepdims=True))
    np.testing.assert_allclose(result, expected / expected.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert kernels == 1


def test_reduction_broadcast_back_across_rows_is_materialised_once(rng):
    """Reduced over the rows (one result per column): recomputing it per element would repeat the whole
    reduction, so it is a kernel of its own, computed once."""
    data = rng.standard_normal((16, 33)).astype(np.float32)
    x = mj.array(data)
    result, kernels = launched(lambda: (x - x.mean(0, keepdim=True)).numpy())
    np.testing.assert_allclose(result, data - data.astype(np.float64).mean(0, keepdims=True), rtol=1e-5, atol=1e-6)
    assert kernels == 2


def current_line():
    return inspect.currentframe().f_back.f_lineno


def test_kernel_source_names_the_user_file_and_line_of_each_op(rng):
    x = mj.array(rng.standard_normal((4, 4)).astype(np.float32))
    exp_line = current_line() + 1
    y = x.exp()
    sum_line = current_line() + 1
    z = (y * 3).sum(1)
    file_name = os.path.basename(__file__)
    assert y.created_at.endswith(f"{file_name}:{exp_line}")
    del y  # a pending value a Var holds is stored by itself (docs/design.md); let go, it fuses into the sum
    kernels = mj.inspect_kernels(z)
    assert len(kernels) == 1
    source, ops = kernels[0]["source"], kernels[0]["ops"]
    assert f"{file_name}:{exp_line}" in source
    assert f"{file_name}:{sum_line}" in source
    assert any(op.startswith("exp") and f"{file_name}:{exp_line}" in op for op in ops)
    assert any(op.startswith("reduce_add") and f"{file_name}:{sum_line}" in op for op in ops)
    assert isinstance(kernels[0]["key"], str) and len(kernels[0]["key"]) >= 16


def test_provenance_skips_frames_inside_the_package(rng):
    x = mj.array(rng.standard_normal((4, 6)).astype(np.float32))
    line = current_line() + 1
    y = x[1:, ::2].mean(-1).reshape(3, 1).T  # getitem, mean and reshape are written in Python inside metajit
    file_name = os.path.basename(__file__)
    assert y.created_at.endswith(f"{file_name}:{line}")
    assert f"{file_name}:{line}" in mj.inspect_kernels(y)[0]["source"]


def test_provenance_lines_stay_right_for_repeated_and_generated_code(rng):
    """Lines are remembered per code object and instruction: each call site and each line keeps its own."""
    x = mj.array(rng.standard_normal(3).astype(np.float32))
    file_name = os.path.basename(__file__)

    def two_ops():
        first = x.exp()
        second = x.abs()
        return first, second

    first_line = two_ops.__code__.co_firstlineno + 1
    for _ in range(3):
        first, second = two_ops()
        assert first.created_at.endswith(f"{file_name}:{first_line}")
        assert second.created_at.endswith(f"{file_name}:{first_line + 1}")
    # Code compiled at run time, a new code object each time, the op on a different line each time.
    for blank_lines in range(5):
        namespace = {"x": x}
        exec(compile("\n" * blank_lines + "y = x.exp()\n", "<generated>", "exec"), namespace)
        assert namespace["y"].created_at == f"<generated>:{blank_lines + 1}"


def test_kernel_key_is_stable_and_ignores_provenance(rng):
    data = rng.standard_normal(10).astype(np.float32)
    first = mj.inspect_kernels(mj.array(data) * 4 + 1)[0]
    second = mj.inspect_kernels(mj.array(data) * 4 + 1)[0]  # another line, same computation
    assert first["key"] == second["key"]
    assert first["source"] != second["source"]  # the header comments name different lines
    assert mj.inspect_kernels(mj.array(data) * 5 + 1)[0]["key"] != first["key"]


def test_graphs_are_freed_once_computed_and_unreferenced(rng):
    import gc
    gc.collect()
    baseline_nodes, baseline_bytes = mj.stats()["vars_live"], mj.stats()["bytes_allocated"]
    data = rng.standard_normal((64, 64)).astype(np.float32)
    for step in range(20):
        x = mj.array(data)
        total = ((x * step).exp().sum(1) + x.T.amax(0)).sum()
        np.testing.assert_allclose(total.item(), (np.exp(data.astype(np.float64) * step).sum(1) + data.T.max(0)).sum(),
                                   rtol=1e-4)
        assert mj.stats()["vars_live"] - baseline_nodes <= 3  # x, total and nothing of the graph between them
    del x, total
    gc.collect()
    assert mj.stats()["vars_live"] == baseline_nodes
    assert mj.stats()["bytes_allocated"] == baseline_bytes


def test_short_rows_are_merged_when_every_buffer_reads_them_in_order(rng):
    """NCHW images with small H and W: the kernel loops over the trailing dims as one when every buffer is read in
    that order (a per-channel scale reads i1 only), and keeps the dims where a read would need them apart (a
    slice along W, a transpose). The numbers are the same either way."""
    data = rng.standard_normal((8, 16, 4, 5)).astype(np.float32)
    scale = rng.standard_normal((1, 16, 1, 1)).astype(np.float32)
    x, s = mj.array(data), mj.array(scale)
    cases = [
        ((x * s + 1).relu(), np.maximum(data * scale + 1, 0), "over [8, 16, 20]"),
        (x.exp() * 2, np.exp(data.astype(np.float64)) * 2, "over [2560]"),
        (x[..., 1:] + 1, data[..., 1:] + 1, "over [8, 16, 4, 4]"),
        (x.transpose(2, 3) * 3, data.transpose(0, 1, 3, 2) * 3, "over [8, 16, 5, 4]"),
    ]
    for var, expected, domain in cases:
        kernel, = mj.inspect(var)
        assert domain in kernel.header, kernel.header
        np.testing.assert_allclose(var.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_reduction_loops_walking_memory_in_order_are_merged(rng):
    """Summing NCHW over (N, H, W) reads each (n, c) plane contiguously: H and W become one loop (r2_3), N stays
    apart (its stride skips the other channels). A sum over a transposed view cannot merge its loops. The
    numbers match numpy either way."""
    data = rng.standard_normal((4, 6, 8, 8)).astype(np.float32)
    x = mj.array(data)
    merged = (x * 2).sum([0, 2, 3])
    kernel, = mj.inspect(merged, device="cpu")
    assert "for (int64_t r2_3 = 0; r2_3 < 64;" in kernel.source, kernel.source
    assert "for (int64_t r0 = 0; r0 < 4;" in kernel.source, kernel.source
    np.testing.assert_allclose(merged.numpy(), (data.astype(np.float64) * 2).sum((0, 2, 3)), rtol=1e-5, atol=1e-5)
    everything = x.sum()
    kernel, = mj.inspect(everything, device="cpu")
    assert "const int64_t r0_1_2_3 = " in kernel.source and "<= 1536;" in kernel.source, kernel.source  # one loop
    np.testing.assert_allclose(everything.numpy(), data.astype(np.float64).sum(), rtol=1e-5)
    transposed = x.transpose(2, 3).reshape(4, 6, 64).sum(2)
    kernel, = mj.inspect(transposed, device="cpu")
    assert "r2 < 64" in kernel.source and "r2_" not in kernel.source, kernel.source
    np.testing.assert_allclose(transposed.numpy(), data.transpose(0, 1, 3, 2).reshape(4, 6, 64).sum(2), rtol=1e-5,
                               atol=1e-5)


def test_value_rebuilt_from_many_buffers_is_stored_once_for_its_readers(rng):
    """A value at the end of a chain over six buffers, read by three kernels (two reductions at other indices
    and an elementwise result): recomputing it in each would read the six buffers three times, so the planner
    stores it once (its own kernel) and the readers load it. A cheap shared value (relu of one buffer) stays
    inlined in every reader."""
    shape = (64, 256)
    datas = [rng.standard_normal(shape).astype(np.float32) for _ in range(6)]
    xs = [mj.array(d) for d in datas]
    chain = ((xs[0] * xs[1] + xs[2]) * xs[3] - xs[4]) * xs[5]
    rows, columns, scaled = chain.sum(1), chain.sum(0), chain * 3.0
    def full_size_inputs(kernel):
        return len(re.findall(r"const float\* __restrict__ in\d+,  // float32 \[64, 256\]", kernel.source))

    kernels = mj.inspect(rows, columns, scaled, device="cpu")
    assert sorted(full_size_inputs(kernel) for kernel in kernels) == [1, 1, 1, 6], [k.source for k in kernels]
    d = [a.astype(np.float64) for a in datas]
    expected = ((d[0] * d[1] + d[2]) * d[3] - d[4]) * d[5]
    mj.sync(rows, columns, scaled)
    np.testing.assert_allclose(rows.numpy(), expected.sum(1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(columns.numpy(), expected.sum(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(scaled.numpy(), expected * 3, rtol=1e-5, atol=1e-5)
    def readers(cheap):  # the relu is held by nothing once this returns (a held value would be stored)
        return cheap.sum(1), cheap.sum(0), cheap * 3.0

    kernels = mj.inspect(*readers(xs[0].relu()), device="cpu")
    assert [full_size_inputs(kernel) for kernel in kernels] == [1, 1, 1], [k.source for k in kernels]


def test_value_built_on_an_embedding_lookup_is_stored_once_for_its_readers(rng):
    """A transformer's residual stream starts with an embedding lookup (a gather from buffers) and adds every
    block's output. Rebuilt in each reader, a 12-block model's later kernels read 20-40 buffers; the recompute
    policy counts the lookup's traffic like a buffer's and stores the stream instead."""
    table = rng.standard_normal((100, 64)).astype(np.float32)
    tokens = rng.integers(0, 100, (8, 32))
    blocks = [rng.standard_normal((8, 32, 64)).astype(np.float32) for _ in range(6)]
    stream = mj.nn.functional.embedding(mj.array(tokens), mj.array(table))
    for block in blocks:
        stream = stream + mj.array(block)
    readers = [stream.sum(-1), (stream * stream).sum(0), stream * 2.0]
    full_size_reads = [len(re.findall(r"const float\* __restrict__ in\d+,  // float32 \[8, 32, 64\]", kernel.source))
                       for kernel in mj.inspect(*readers, device="cpu")]
    # The stream's kernel reads the six blocks, its readers the stream (rebuilt, each reader read all six).
    assert sum(full_size_reads) <= 6 + 3, full_size_reads
    expected = table[tokens].astype(np.float64) + sum(block.astype(np.float64) for block in blocks)
    mj.sync(*readers)
    np.testing.assert_allclose(readers[0].numpy(), expected.sum(-1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(readers[1].numpy(), (expected ** 2).sum(0), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(readers[2].numpy(), expected * 2, rtol=1e-5, atol=1e-5)


def _recurrence(rng, steps):
    """An LSTM-like recurrence: each step's gates come from a matrix product of the previous output, and the cell
    state c = f * c + i * g is read by the next step and by the step's own output."""
    weight = mj.array(rng.standard_normal((32, 96)).astype(np.float32) * 0.1)
    inputs = [mj.array(rng.standard_normal((16, 96)).astype(np.float32)) for _ in range(steps)]
    hidden = mj.zeros(16, 32)
    cell = mj.zeros(16, 32)
    outputs = []
    for step in range(steps):
        gates = hidden @ weight + inputs[step]
        forget, update, candidate = gates[:, :32].sigmoid(), gates[:, 32:64].sigmoid(), gates[:, 64:].tanh()
        cell = forget * cell + update * candidate
        hidden = cell.tanh()
        outputs.append(hidden)
    return mj.stack(outputs, 0)


def test_each_state_of_a_recurrence_is_stored_once(rng):
    """Every later step's kernel would otherwise rebuild the cell state from the first step: the planner stores
    each state once, so the kernels, and the ops fused into each, grow with the steps at most linearly."""
    short, long = _recurrence(rng, 16), _recurrence(rng, 64)
    with flag_set("multiple_outputs", False):  # joined, the stack's groups of 8 steps would be one kernel
        short_kernels, long_kernels = mj.inspect(short, device="cpu"), mj.inspect(long, device="cpu")
    assert len(long_kernels) <= 5 * len(short_kernels), (len(short_kernels), len(long_kernels))  # 4x the steps
    largest = max(len(kernel.ops) for kernel in long_kernels[:-1])  # the stack of all outputs reads every step
    assert largest <= max(len(kernel.ops) for kernel in short_kernels[:-1]), largest
    assert largest < 7 * 16, largest  # seven ops a step: no kernel rebuilds even 16 steps of the chain


def test_a_slice_of_a_stored_sequence_counts_as_the_slice_alone(rng):
    """An LSTM step's gate pre-activations are projection[t] + h @ W^T + b, read by the cell's and the output's
    kernels. Rebuilding them reads the slice projection[t], not the whole [64, 32, 1024] projection: the policy
    counted all 8 MB, stored them in a kernel of their own (19 us a step) and the step took three launches.
    Counted as the slice, they fuse into the gate kernel: a library call and one kernel per step."""
    layer = mj.nn.LSTM(128, 256)
    data = rng.standard_normal((64, 32, 128)).astype(np.float32)
    with mj.no_grad():
        output = layer(mj.array(data))[0]
    kernels = mj.inspect(output, device="cpu")
    assert len(kernels) <= 2 * 64 + 4, len(kernels)
    reference = _numpy_lstm_output(layer, data)
    np.testing.assert_allclose(output.numpy(), reference, rtol=1e-4, atol=1e-5)


def _numpy_lstm_output(layer, data):
    """The output sequence of a float64 numpy LSTM with `layer`'s weights (PyTorch's gate order i, f, g, o)."""
    weights = {name: value.numpy().astype(np.float64) for name, value in layer.state_dict().items()}
    size = weights["weight_hh_l0"].shape[1]
    hidden = np.zeros((data.shape[1], size))
    cell = np.zeros((data.shape[1], size))
    outputs = []
    sigmoid = lambda value: 1 / (1 + np.exp(-value))  # noqa: E731
    for step in data.astype(np.float64):
        gates = step @ weights["weight_ih_l0"].T + weights["bias_ih_l0"] + hidden @ weights["weight_hh_l0"].T + \
            weights["bias_hh_l0"]
        input_gate, forget_gate = sigmoid(gates[:, :size]), sigmoid(gates[:, size:2 * size])
        candidate, output_gate = np.tanh(gates[:, 2 * size:3 * size]), sigmoid(gates[:, 3 * size:])
        cell = forget_gate * cell + input_gate * candidate
        hidden = output_gate * np.tanh(cell)
        outputs.append(hidden)
    return np.stack(outputs)


def test_softmax_multiplies_by_a_reciprocal_and_user_division_stays_division(rng):
    """Softmax is e * (1 / sum) in the graph, as PyTorch computes it: one division per row (LLVM hoists it out
    of the element loop). A user's x / x.sum() stays a true division in every kernel."""
    data = rng.uniform(0.5, 2.0, (64, 300)).astype(np.float32)
    other = rng.uniform(0.5, 2.0, (64, 300)).astype(np.float32)
    x, y = mj.array(data), mj.array(other)
    softmax, = mj.inspect(x.softmax(-1))
    assert "(1.0f) / sum_" in softmax.source, softmax.source
    normalised = x / x.sum(-1, keepdim=True)
    kernel, = mj.inspect(normalised)
    assert "(1.0f) /" not in kernel.source and " / " in kernel.source, kernel.source
    # (the sums add in another order than numpy's)
    np.testing.assert_allclose(normalised.numpy(), data / data.astype(np.float64).sum(-1, keepdims=True), rtol=2e-6)
    np.testing.assert_array_equal((x / y).numpy(), data / other)
    np.testing.assert_array_equal((x // x.sum(-1, keepdim=True)).numpy(), data // data.sum(-1, keepdims=True))


def _sinusoid(length, width):
    """Sinusoidal position codes [length, width] from arange vectors, as a transformer builds them."""
    positions = mj.arange(0, length, 1, "float32").reshape([length, 1])
    frequencies = (mj.arange(0, width, 1, "float32") * -0.03).exp().reshape([1, width])
    return (positions * frequencies).sin()


def _sinusoid_reference(length, width):
    frequencies = np.exp(np.arange(width, dtype=np.float32) * np.float32(-0.03))
    return np.sin(np.arange(length, dtype=np.float32)[:, None] * frequencies[None, :])


def _kernel_shapes(var):
    return [kernel["header"].splitlines()[0].split(" over ")[-1] for kernel in mj.inspect_kernels(var)]


def test_costly_value_broadcast_over_outer_dims_gets_its_own_kernel(rng):
    # sin(position * frequency) varies along the innermost dim and repeats for each of the 64 batch entries:
    # inlined, it would be rebuilt (exp, sin) 64 times per element; stored, it is computed once and loaded.
    batch = rng.standard_normal((64, 128, 64)).astype(np.float32)
    codes = _sinusoid(128, 64)
    total = mj.array(batch) + codes
    shapes = _kernel_shapes(total)
    assert len(shapes) == 2 and shapes[0] == "[128, 64]", shapes  # the codes, then the sum (dims may merge)
    assert_close(total, batch + _sinusoid_reference(128, 64), rtol=1e-5, atol=1e-5)


def test_cheap_or_small_or_hoistable_broadcasts_stay_fused(rng):
    batch = rng.standard_normal((64, 128, 64)).astype(np.float32)
    x = mj.array(batch)
    positions = mj.arange(0, 128, 1, "float32").reshape([128, 1])
    steps = mj.arange(0, 64, 1, "float32").reshape([1, 64])
    cheap = x + positions * steps                                # two operations: rebuilding them is cheaper
    assert len(_kernel_shapes(cheap)) == 1
    per_row = x + (positions * 0.01).exp().sin()                 # constant along the innermost loop: hoisted
    assert len(_kernel_shapes(per_row)) == 1
    small = mj.array(batch[:8, :16]) + _sinusoid(16, 64)         # 8K elements: not worth a second launch
    assert len(_kernel_shapes(small)) == 1
    expected_rows = np.sin(np.exp(np.arange(128, dtype=np.float32)[:, None] * np.float32(0.01)))
    assert_close(cheap, batch + np.arange(128, dtype=np.float32)[:, None] * np.arange(64, dtype=np.float32), rtol=1e-6)
    assert_close(per_row, batch + expected_rows, rtol=1e-5, atol=1e-6)
    assert_close(small, batch[:8, :16] + _sinusoid_reference(16, 64), rtol=1e-5, atol=1e-5)


def test_value_gathered_along_its_last_dim_and_read_twice_is_stored(rng):
    """torch.gather along the last dim reads its source through an index buffer across the innermost loop (a vector
    gather per element). Read at two positions, it would be gathered twice per element: stored, it is gathered
    once and read back with plain loads."""
    table = rng.standard_normal((512, 256)).astype(np.float32)
    picks = rng.integers(0, 256, (512, 64))
    gathered = mj.gather(mj.array(table), 1, mj.array(picks))
    differences = gathered[:, 1:] - gathered[:, :-1]
    shapes = _kernel_shapes(differences)
    assert shapes == ["[512, 64]", "[512, 63]"], shapes
    expected = np.take_along_axis(table, picks, 1)
    assert_close(differences, expected[:, 1:] - expected[:, :-1], rtol=0, atol=0)


def test_row_lookups_small_gathers_and_single_reads_stay_fused(rng):
    table = rng.standard_normal((512, 256)).astype(np.float32)
    rows = rng.integers(0, 512, 128)
    # Rows picked by an index (an embedding lookup): each row is read with plain loads, so rereading is cheap.
    looked_up = mj.array(table)[mj.array(rows)]
    row_differences = looked_up[:, 1:] - looked_up[:, :-1]
    assert len(_kernel_shapes(row_differences)) == 1
    # 16 x 64 = 1024 gathered elements: not worth a second launch.
    small_picks = rng.integers(0, 256, (16, 64))
    small = mj.gather(mj.array(table[:16]), 1, mj.array(small_picks))
    small_differences = small[:, 1:] - small[:, :-1]
    assert len(_kernel_shapes(small_differences)) == 1
    # Read once, a gather stays inside its reader.
    picks = rng.integers(0, 256, (512, 64))
    once = mj.gather(mj.array(table), 1, mj.array(picks)) * 2.0
    assert len(_kernel_shapes(once)) == 1
    assert_close(row_differences, table[rows][:, 1:] - table[rows][:, :-1], rtol=0, atol=0)
    expected_small = np.take_along_axis(table[:16], small_picks, 1)
    assert_close(small_differences, expected_small[:, 1:] - expected_small[:, :-1], rtol=0, atol=0)
    assert_close(once, np.take_along_axis(table, picks, 1) * 2.0, rtol=0, atol=0)


def test_a_value_is_rounded_the_same_in_every_kernel_that_computes_it(rng):
    """The gradient of max / min compares the value each kernel recomputes with the stored extreme, so fusion
    must not change a value's rounding. Dividing by a per-row sum through its reciprocal only inside row kernels
    (a rewrite of the kernel, not of the graph) did, and the gradient of softmax(x).min() lost its one-hot
    element (fuzz seed 30262222)."""
    cases = [np.array([[-1.8870599670650217, -1.7952008324172843, 0.5161634037529783]])]
    cases += [rng.standard_normal(shape).astype(dtype) for shape, dtype in
              [((4, 300), np.float32), ((16, 1000), np.float64), ((64, 77), np.float32), ((3, 4096), np.float32)]]
    for data in cases:
        shifted = np.exp(data - data.max(-1, keepdims=True))
        probabilities = shifted / shifted.sum(-1, keepdims=True)
        positive = np.abs(data) + 0.1
        for reduce in ("max", "min"):
            x = mj.array(data, requires_grad=True)
            gradient = mj.grad(getattr(x.softmax(-1), reduce)(), [x])[0]
            one_hot = np.zeros_like(probabilities)
            one_hot[np.unravel_index(getattr(np, "arg" + reduce)(probabilities), data.shape)] = 1
            expected = probabilities * (one_hot - (one_hot * probabilities).sum(-1, keepdims=True))
            np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-4, atol=1e-6, err_msg=reduce)

            y = mj.array(positive, requires_grad=True)
            gradient = mj.grad(getattr(y / y.sum(-1, keepdim=True), reduce)(), [y])[0]
            totals = positive.sum(-1, keepdims=True)
            one_hot = np.zeros_like(positive)
            one_hot[np.unravel_index(getattr(np, "arg" + reduce)(positive / totals), data.shape)] = 1
            expected = one_hot / totals - (one_hot * positive).sum(-1, keepdims=True) / totals ** 2
            np.testing.assert_allclose(gradient.numpy(), expected, rtol=1e-4, atol=1e-6, err_msg=reduce)

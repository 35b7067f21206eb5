"""Library lowering: matrix products and convolutions recognised from their index expressions run in oneDNN.

Every case is computed twice, with lowering on and off (metajit.flags.lowering), and compared with numpy or
PyTorch; `library_calls` in mj.stats() shows which syncs were lowered."""
import re

import numpy as np
import pytest

import metajit as mj
import metajit.nn.functional as F
from conftest import cpu_backend
from lowering_checks import (ATOL, CONVOLUTIONS, RTOL, both_ways, check_forward_and_both_gradients,
                             check_users_reindex_convolution, evaluate, floats)

pytestmark = cpu_backend  # the CPU backend's own kernels (conftest.cpu_backend)

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def lowering_on():
    previous = mj.flags.lowering
    mj.flags.lowering = True
    yield
    mj.flags.lowering = previous


@pytest.mark.parametrize("transpose_left", [False, True])
@pytest.mark.parametrize("transpose_right", [False, True])
def test_matmul_all_transposes_is_one_library_call(rng, transpose_left, transpose_right):
    a, b = floats(rng, 48, 40), floats(rng, 40, 56)
    left = a.T.copy() if transpose_left else a
    right = b.T.copy() if transpose_right else b

    def build(x, y):
        return (x.T if transpose_left else x) @ (y.T if transpose_right else y)
    (result,), calls = both_ways(build, left, right)
    np.testing.assert_allclose(result, a @ b, rtol=RTOL, atol=ATOL)
    assert calls == 1
    # a single product with unit-stride operands goes to oneDNN's sgemm, a left operand stored transposed copied
    # row-major first (sgemm ran it at half speed); a right operand stored transposed goes to the matmul
    # primitive, which reads it up to 5x faster than sgemm (read again in the sync: sgemm on a copy, below)
    kernel, = mj.inspect(build(mj.array(left), mj.array(right)))
    if transpose_right:
        first_read = kernel.library.split("; read again: ")[0]
        assert "sgemm" not in first_read and not first_read.endswith("(ref)"), kernel.library
    else:
        assert kernel.library.endswith("(reorder + sgemm)" if transpose_left else "(sgemm)"), kernel.library


@pytest.mark.parametrize("transpose_left", [False, True])
@pytest.mark.parametrize("rows, columns, padded", [(128, 256, True), (200, 768, True), (200, 1000, False),
                                                   (64, 256, False), (512, 256, False)])
def test_right_rows_a_multiple_of_one_kib_apart_are_padded_for_few_rows(rng, transpose_left, rows, columns,
                                                                        padded):
    """With 128 to 511 output rows, a row-major right operand whose rows are a multiple of 1 KiB apart is copied
    with padded rows (sgemm read it in place at half speed, its rows on the same cache sets); others go as they
    are. The results match numpy either way."""
    a, b = floats(rng, rows, 512), floats(rng, 512, columns)
    left = mj.array(a.T.copy()).transpose(0, 1) if transpose_left else mj.array(a)
    result = left @ mj.array(b)
    kernel, = mj.inspect(result)
    expected = ("reorder + " if transpose_left else "") + ("pad + " if padded else "") + "sgemm"
    assert kernel.library.endswith(f"({expected})"), kernel.library
    np.testing.assert_allclose(result.numpy(), a @ b, rtol=RTOL, atol=ATOL)


def test_transposed_left_copy_is_shared_within_a_sync_and_fresh_in_the_next(rng):
    """x^T @ a and x^T @ b (two weight gradients of one input) make one row-major copy of x^T in a sync; the
    next sync, whose x may land at the same address, makes its own."""
    for _ in range(3):
        x, a, b = floats(rng, 300, 64), floats(rng, 300, 32), floats(rng, 300, 48)
        mx = mj.array(x)
        first, second = mx.transpose(0, 1) @ mj.array(a), mx.transpose(0, 1) @ mj.array(b)
        before = mj.stats()
        mj.sync(first, second)
        after = mj.stats()
        assert after["library_reorders"] - before["library_reorders"] == 1
        assert after["library_reorders_reused"] - before["library_reorders_reused"] == 1
        np.testing.assert_allclose(first.numpy(), x.T @ a, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(second.numpy(), x.T @ b, rtol=RTOL, atol=ATOL)


def test_a_transposed_weight_read_again_in_a_sync_is_copied_once_for_sgemm(rng):
    """x @ W^T read once runs in the primitive; read again in the same sync (an RNN's steps), it runs as sgemm on
    a row-major copy of W^T, made once: a chain of three steps makes one copy, reused by the third. Every step
    matches numpy, and the next sync starts over."""
    w = floats(rng, 96, 64) * 0.2
    for _ in range(2):
        h0 = floats(rng, 8, 64)
        weight = mj.array(w)
        states, expected = [mj.array(h0)], [h0]
        for _ in range(3):
            states.append((states[-1] @ weight.T)[:, :64].tanh())
            expected.append(np.tanh((expected[-1] @ w.T)[:, :64]))
        kernel = mj.inspect(states[1])[0]
        assert kernel.library.endswith("; read again: reorder + sgemm)"), kernel.library
        before = mj.stats()
        mj.sync(*states[1:])
        after = mj.stats()
        assert after["library_calls"] - before["library_calls"] == 3
        assert after["library_reorders"] - before["library_reorders"] == 1
        assert after["library_reorders_reused"] - before["library_reorders_reused"] == 1
        for state, reference in zip(states[1:], expected[1:]):
            np.testing.assert_allclose(state.numpy(), reference, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("left_shape,right_shape", [
    ((6, 20, 24), (6, 24, 16)),       # batched
    ((2, 3, 20, 24), (3, 24, 16)),    # broadcast batch on the right
    ((20, 24), (5, 24, 16)),          # a plain matrix against a stack
    ((5, 20, 24), (24, 16)),          # a stack against a plain matrix
])
def test_batched_and_broadcast_matmul(rng, left_shape, right_shape):
    a, b = floats(rng, *left_shape), floats(rng, *right_shape)
    (result,), calls = both_ways(lambda x, y: x @ y, a, b)
    np.testing.assert_allclose(result, np.matmul(a, b), rtol=RTOL, atol=ATOL)
    assert calls == 1
    if left_shape == (6, 20, 24):  # a real batch runs in the matmul primitive
        kernel, = mj.inspect(mj.array(a) @ mj.array(b))
        assert kernel.library.startswith("onednn matmul 6x20x24x16") and "sgemm" not in kernel.library


def test_linear_with_bias_and_activation_keeps_the_epilogue_fused(rng):
    x, w, bias = floats(rng, 32, 64), floats(rng, 48, 64), floats(rng, 48)
    (result,), calls = both_ways(lambda x, w, b: F.relu(F.linear(x, w, b)), x, w, bias)
    np.testing.assert_allclose(result, np.maximum(x @ w.T + bias, 0), rtol=RTOL, atol=ATOL)
    assert calls == 1


def planned_kernels(build, *arrays):
    """(kind, library name) of each kernel computing build(*arrays), with lowering on."""
    results = build(*[mj.array(a) for a in arrays])
    return [(kernel.kind, kernel.library) for kernel in mj.inspect(results)]


POST_OP_CASES = [  # (name, metajit build, numpy reference, input shapes, the one kernel's kind, words in its name)
    ("linear + bias + relu", lambda x, w, b: F.relu(F.linear(x, w, b)),
     lambda x, w, b: np.maximum(x @ w.T + b, 0), ((32, 64), (48, 64), (48,)), "library", ("+ bias", "+ relu")),
    ("scale and shift", lambda x, w, b: (x @ w.T) * 0.5 - 2.0,
     lambda x, w, b: (x @ w.T) * 0.5 - 2.0, ((32, 64), (48, 64), (48,)), "library", ("+ scale",)),
    ("constant minus product, then relu", lambda x, w, b: F.relu(3.0 - (x @ w.T) / 4.0),
     lambda x, w, b: np.maximum(3.0 - (x @ w.T) / 4.0, 0), ((32, 64), (48, 64), (48,)), "library",
     ("+ scale", "+ relu")),
    ("batched linear + bias", lambda x, w, b: F.linear(x, w, b),
     lambda x, w, b: x @ w.T + b, ((4, 8, 64), (48, 64), (48,)), "library", ("+ bias",)),
    # one bias value per row: oneDNN's matmul adds a bias along columns, so the call is the plain product
    ("bias per row", lambda x, w, b: (w @ x.T) + b.reshape(48, 1),
     lambda x, w, b: w @ x.T + b.reshape(48, 1), ((32, 64), (48, 64), (48,)), "library+epilogue", ("48x64x32 (",)),
    # two scale-and-shifts apart: oneDNN 2.6 gets such a chain wrong, so only the first one and the ReLU are folded
    ("two separate scales", lambda x, w, b: F.relu(F.relu(x @ w.T + 1.0) - 3.0),
     lambda x, w, b: np.maximum(np.maximum(x @ w.T + 1.0, 0) - 3.0, 0), ((32, 64), (48, 64), (48,)),
     "library+epilogue", ("+ scale + relu (",)),
    # the bias comes after the ReLU, where oneDNN adds no bias: it is a tensor added after the ReLU instead
    ("relu, then bias", lambda x, w, b: F.relu(x @ w.T) + b,
     lambda x, w, b: np.maximum(x @ w.T, 0) + b, ((32, 64), (48, 64), (48,)), "library", ("+ relu + add (",)),
    # a residual: oneDNN reads it in place (a binary post-op) instead of an epilogue pass over the product
    ("linear + bias + residual", lambda x, w, b, r: F.linear(x, w, b) + r,
     lambda x, w, b, r: x @ w.T + b + r, ((32, 64), (48, 64), (48,), (32, 48)), "library", ("+ bias + add (",)),
    ("batched linear + residual, then relu", lambda x, w, r: F.relu(F.linear(x, w) + r),
     lambda x, w, r: np.maximum(x @ w.T + r, 0), ((4, 8, 64), (48, 64), (4, 8, 48)), "library", ("+ add + relu (",)),
    ("product minus a tensor", lambda x, w, r: (x @ w.T) - r,
     lambda x, w, r: x @ w.T - r, ((32, 64), (48, 64), (32, 48)), "library", ("+ subtract (",)),
    # libraries subtract the tensor from the product, not the product from the tensor
    ("tensor minus product", lambda x, w, r: r - (x @ w.T),
     lambda x, w, r: r - x @ w.T, ((32, 64), (48, 64), (32, 48)), "library+epilogue", ("32x64x48 (",)),
    ("product times a tensor, plus a tensor", lambda x, w, b: (x @ w.T) * b + b,
     lambda x, w, b: (x @ w.T) * b + b, ((32, 64), (48, 64), (48,)), "library", ("+ multiply + add (",)),
    # a residual oneDNN cannot read in place (its row stride differs from the product's): the plain call
    ("residual sliced from a wider tensor", lambda x, w, r: (x @ w.T) + r[:, 8:56],
     lambda x, w, r: x @ w.T + r[:, 8:56], ((32, 64), (48, 64), (32, 64)), "library+epilogue", ("32x64x48 (",)),
    # the biased product is read twice (x * sigmoid(x)): only the bias is folded
    ("swish", lambda x, w, b: F.silu(F.linear(x, w, b)),
     lambda x, w, b: (x @ w.T + b) / (1 + np.exp(-(x @ w.T + b))), ((32, 64), (48, 64), (48,)), "library+epilogue",
     ("+ bias",)),
    ("conv + bias + relu", lambda x, w, b: F.relu(F.conv2d(x, w, b, padding=1)),
     lambda x, w, b: np.maximum(torch.nn.functional.conv2d(*map(torch.from_numpy, (x, w, b)), padding=1).numpy(), 0),
     ((2, 8, 10, 10), (12, 8, 3, 3), (12,)), "library", ("convolution forward + bias + relu",)),
    ("grouped conv + bias", lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=4),
     lambda x, w, b: torch.nn.functional.conv2d(*map(torch.from_numpy, (x, w, b)), padding=1, groups=4).numpy(),
     ((2, 8, 10, 10), (12, 2, 3, 3), (12,)), "library", ("+ bias",)),
    # the residual would move oneDNN from its direct kernel to im2col + gemm (its plain layout next to a blocked
    # destination): the longest fold that keeps the kernel, the bias, is taken
    ("conv + bias, then a residual", lambda x, w, b: F.conv2d(x, w, b, padding=1) + x,
     lambda x, w, b: torch.nn.functional.conv2d(*map(torch.from_numpy, (x, w, b)), padding=1).numpy() + x,
     ((2, 8, 10, 10), (8, 8, 3, 3), (8,)), "library+epilogue", ("+ bias (jit:",)),
    # a batch norm folded for inference: a per-channel scale and shift
    ("conv, per-channel scale and shift",
     lambda x, w, s: F.conv2d(x, w, padding=1) * s.reshape(1, 8, 1, 1) + s.reshape(1, 8, 1, 1),
     lambda x, w, s: (torch.nn.functional.conv2d(*map(torch.from_numpy, (x, w)), padding=1).numpy()
                      * s.reshape(1, 8, 1, 1) + s.reshape(1, 8, 1, 1)),
     ((2, 8, 10, 10), (8, 8, 3, 3), (8,)), "library", ("forward + multiply + add (",)),
]


@pytest.mark.parametrize("case", POST_OP_CASES, ids=lambda case: case[0])
def test_elementwise_work_after_the_sum_is_folded_into_the_library_call(rng, case):
    """A bias, ReLU, constant scales or shifts and tensors added, subtracted or multiplied right after the sum are
    oneDNN post-ops: the call writes the final values (no epilogue kernel) or leaves only the rest to the
    epilogue."""
    name, build, reference, shapes, kind, words = case
    arrays = [floats(rng, *shape) for shape in shapes]
    (result,), calls = both_ways(build, *arrays)
    np.testing.assert_allclose(result, reference(*arrays), rtol=RTOL, atol=ATOL)
    assert calls == 1
    ((planned_kind, library),) = planned_kernels(build, *arrays)
    assert planned_kind == kind, library
    for word in words:
        assert word in library, library


def random_post_op_chain(seed):
    """A product (plain or batched, either operand transposed or not) followed by 1 to 4 random element-wise
    steps a library may take as post-ops: a tensor added, subtracted or multiplied (full, per column, per row,
    broadcast over the batch), ReLU, a constant scale or shift. Returns (build, numpy reference, inputs, steps)."""
    rng = np.random.default_rng(seed)
    batch = (3,) if rng.random() < 0.4 else ()
    rows, inner, columns = (int(n) for n in rng.integers(16, 48, 3))  # over the backend's minimum size
    arrays = [floats(rng, *batch, rows, inner), floats(rng, columns, inner)]
    transpose_right = bool(rng.integers(2))
    if transpose_right:
        arrays[1] = arrays[1].T.copy()  # [inner, columns]
    output_shape = batch + (rows, columns)
    shapes = {"full": output_shape, "column": (columns,), "row": (rows, 1), "batchless": (rows, columns)}
    steps = []
    for _ in range(int(rng.integers(1, 5))):
        kind = str(rng.choice(["add", "subtract", "multiply", "relu", "scale", "shift"]))
        if kind in ("add", "subtract", "multiply"):
            shape = shapes[str(rng.choice(list(shapes)))]
            steps.append((kind, len(arrays)))
            arrays.append(floats(rng, *shape))
        else:
            steps.append((kind, float(rng.choice([0.5, -2.0, 3.0]))))

    def apply(tensors, library):
        x, w = tensors[0], tensors[1]
        y = x @ (w if transpose_right else w.T)
        for kind, argument in steps:
            if kind == "add":
                y = y + tensors[argument]
            elif kind == "subtract":
                y = y - tensors[argument]
            elif kind == "multiply":
                y = y * tensors[argument]
            elif kind == "relu":
                y = np.maximum(y, 0) if library is np else F.relu(y)
            elif kind == "scale":
                y = y * argument
            else:
                y = y + argument
        return y

    build = lambda *tensors: apply(tensors, mj)  # noqa: E731
    reference = lambda *tensors: apply([t.astype(np.float64) for t in tensors], np)  # noqa: E731
    return build, reference, arrays, steps


def test_random_post_op_chains_match_numpy():
    """oneDNN has computed some post-op chains wrongly (tools/fuzz.py seed 8443): random chains of tensor and
    constant post-ops after a product must match numpy whatever the backend folds, and some must fold whole."""
    folded_whole = 0
    for seed in range(40):
        build, reference, arrays, steps = random_post_op_chain(seed)
        (result,), calls = evaluate(build, *arrays)
        expected = reference(*arrays)
        scale = max(1.0, float(np.abs(expected).max()))
        np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-4 * scale, err_msg=f"seed {seed}: {steps}")
        assert calls == 1, (seed, steps)
        kinds = [kind for kind, _ in planned_kernels(build, *arrays)]
        folded_whole += kinds == ["library"]
    assert folded_whole >= 10, folded_whole


def lone_bias_additions(kernels):
    return [kernel.ops for kernel in kernels if kernel.kind == "generated" and len(kernel.ops) == 1
            and kernel.ops[0].startswith("add ")]


def test_a_biased_projection_read_in_slices_adds_its_bias_in_the_call(rng):
    """An RNN's input projection x @ W^T + b is read one slice a step, and attention's q, k and v are slices of
    one projection. The planner stored the product for one reader first and the biased sum later, for the
    others: two passes (0.6 ms for a 64-step LSTM's [64, 32, 1024] projection) where the call adds the bias."""
    data = floats(rng, 12, 8, 32)
    ours, theirs = mj.nn.LSTM(32, 64), torch.nn.LSTM(32, 64)
    ours.load_state_dict({key: value.detach().numpy() for key, value in theirs.state_dict().items()})
    (result,), _ = both_ways(lambda x: ours(x)[0], data)
    np.testing.assert_allclose(result, theirs(torch.from_numpy(data))[0].detach().numpy(), rtol=1e-4, atol=1e-5)
    kernels = mj.inspect(ours(mj.array(data))[0])
    assert "+ bias" in next(kernel.library for kernel in kernels if kernel.library), kernels[0].library
    assert not lone_bias_additions(kernels), lone_bias_additions(kernels)

    data = floats(rng, 4, 16, 64)
    ours = mj.nn.MultiheadAttention(64, 4, batch_first=True)
    theirs = torch.nn.MultiheadAttention(64, 4, batch_first=True)
    ours.load_state_dict({key: value.detach().numpy() for key, value in theirs.state_dict().items()})
    (result,), _ = both_ways(lambda x: ours(x, x, x, need_weights=False)[0], data)
    reference = theirs(*[torch.from_numpy(data)] * 3, need_weights=False)[0].detach().numpy()
    np.testing.assert_allclose(result, reference, rtol=1e-4, atol=1e-5)
    x = mj.array(data)
    kernels = mj.inspect(ours(x, x, x, need_weights=False)[0])
    assert "x192 + bias" in next(kernel.library for kernel in kernels if kernel.library), kernels[0].library
    assert not lone_bias_additions(kernels), lone_bias_additions(kernels)


def test_a_product_also_asked_for_keeps_its_own_call(rng):
    """An LSTM cell written out, whose projection's product (before its bias) is a result too: the product must be
    stored as it is, so the bias stays out of its call."""
    size, steps = 16, 12
    x, w, bias, recurrent = (floats(rng, *shape) * 0.3 for shape in ((steps, 8, 32), (4 * size, 32), (4 * size,),
                                                                      (4 * size, size)))

    def cell(total, cell_state, sigmoid, tanh):
        input_gate, forget_gate = sigmoid(total[:, :size]), sigmoid(total[:, size:2 * size])
        candidate, output_gate = tanh(total[:, 2 * size:3 * size]), sigmoid(total[:, 3 * size:])
        cell_state = forget_gate * cell_state + input_gate * candidate
        return output_gate * tanh(cell_state), cell_state

    def build(x, w, b, recurrent):
        product = F.linear(x, w)
        projected = product + b
        hidden, cell_state, outputs = mj.zeros(8, size), mj.zeros(8, size), []
        for step in range(steps):
            hidden, cell_state = cell(projected[step] + F.linear(hidden, recurrent), cell_state, mj.sigmoid, mj.tanh)
            outputs.append(hidden)
        return [product] + outputs
    results, _ = both_ways(build, x, w, bias, recurrent)
    product = x.astype(np.float64) @ w.T
    np.testing.assert_allclose(results[0], product, rtol=RTOL, atol=ATOL)
    hidden, cell_state = np.zeros((8, size)), np.zeros((8, size))
    for step in range(steps):
        hidden, cell_state = cell(product[step] + bias + hidden @ recurrent.T, cell_state,
                                  lambda value: 1 / (1 + np.exp(-value)), np.tanh)
        np.testing.assert_allclose(results[1 + step], hidden, rtol=1e-4, atol=1e-5)


def test_matmul_of_a_computed_operand_materialises_it(rng):
    a, b = floats(rng, 32, 40), floats(rng, 40, 24)
    (result,), calls = both_ways(lambda x, y: x.exp() @ (y * 2), a, b)
    np.testing.assert_allclose(result, np.exp(a) @ (b * 2), rtol=RTOL, atol=ATOL)
    assert calls == 1


def test_operand_read_through_joined_heads_is_copied_once_then_lowered(rng):
    """Attention's heads joined again (permute, then a reshape merging the permuted dims) are no strided matrix:
    the joined view becomes one copy, and both the projection and its weight gradient go to oneDNN (they ran as
    generated loop nests at 30x the time before)."""
    heads, weights, upstream = floats(rng, 2, 4, 16, 8), floats(rng, 24, 32), floats(rng, 2, 16, 24)

    def build(a, w, g):
        joined = a.permute(0, 2, 1, 3).reshape([2, 16, 32])
        w.requires_grad = True
        y = F.linear(joined, w)
        return y, mj.grad((y * g).sum(), [w])[0]
    (y, weight_gradient), calls = both_ways(build, heads, weights, upstream)
    joined = heads.transpose(0, 2, 1, 3).reshape(2, 16, 32)
    np.testing.assert_allclose(y, joined @ weights.T, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(weight_gradient, np.einsum("blo,bli->oi", upstream, joined), rtol=RTOL, atol=ATOL)
    assert calls == 2
    kernels = mj.inspect(*build(mj.array(heads), mj.array(weights), mj.array(upstream)))
    assert sum(kernel.kind.startswith("library") for kernel in kernels) == 2, kernels
    # mj.inspect says why the joined heads were copied
    projection = next(kernel for kernel in kernels if kernel.kind.startswith("library"))
    assert any(text.startswith("operand 1 (reshape [2, 16, 1, 32] of [2, 16, 4, 8]") and
               "the library cannot read a buffer read at indices that are not affine" in text
               for text in projection.stored_operands), projection.stored_operands


def test_each_of_several_products_added_in_one_kernel_is_a_library_call(rng):
    """A kernel holds one contraction for a library call. The sum of several products (the gradient of an input
    used as attention's query, key and value) had matched none and ran every product as a loop nest: each is now
    a call of its own, and the kernel adds their results."""
    a, b, c, d = floats(rng, 48, 40), floats(rng, 40, 32), floats(rng, 48, 24), floats(rng, 24, 32)
    (result,), calls = both_ways(lambda w, x, y, z: w @ x + y @ z + 1.0, a, b, c, d)
    np.testing.assert_allclose(result, a @ b + c @ d + 1.0, rtol=RTOL, atol=ATOL)
    assert calls == 2


def test_product_of_a_softmax_materialises_the_softmax_and_is_lowered(rng):
    """Attention's probabilities @ values: the softmax's max and sum are per-row reductions, which no library
    call takes, so the probabilities become a buffer and the product a call (fused, the product recomputed the
    softmax's exp for every output column: 6x slower than PyTorch)."""
    scores, values = floats(rng, 2, 3, 40, 40), floats(rng, 2, 3, 40, 24)
    (result,), calls = both_ways(lambda s, v: F.softmax(s, dim=-1) @ v, scores, values)
    probabilities = np.exp(scores - scores.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    np.testing.assert_allclose(result, probabilities @ values, rtol=RTOL, atol=ATOL)
    assert calls == 1
    kinds = [kernel.kind for kernel in mj.inspect(F.softmax(mj.array(scores), dim=-1) @ mj.array(values))]
    assert kinds == ["generated", "library"], kinds


def test_attention_forward_and_gradient_run_every_product_in_the_library(rng):
    query = floats(rng, 2, 4, 32, 16)
    upstream = floats(rng, 2, 4, 32, 16)

    def build(q, g):
        q.requires_grad = True
        y = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        return y, mj.grad((y * g).sum(), [q])[0]
    (y, gradient), calls = both_ways(build, query, upstream)
    torch_query = torch.tensor(query, requires_grad=True)
    expected = torch.nn.functional.scaled_dot_product_attention(torch_query, torch_query, torch_query, is_causal=True)
    (expected * torch.from_numpy(upstream)).sum().backward()
    np.testing.assert_allclose(y, expected.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(gradient, torch_query.grad.numpy(), rtol=RTOL, atol=ATOL)
    # Forward: scores and probabilities @ values; gradient: the values', the probabilities' and the scores' two.
    assert calls == 6, calls


def test_small_or_non_float32_products_stay_generated(rng):
    a, b = floats(rng, 4, 5), floats(rng, 5, 3)
    (result,), calls = both_ways(lambda x, y: x @ y, a, b)
    np.testing.assert_allclose(result, a @ b, rtol=RTOL, atol=ATOL)
    assert calls == 0
    a64, b64 = rng.standard_normal((40, 40)), rng.standard_normal((40, 40))
    (result,), calls = both_ways(lambda x, y: x @ y, a64, b64)
    np.testing.assert_allclose(result, a64 @ b64, rtol=1e-10)
    assert calls == 0


def test_a_sum_over_one_operand_alone_is_not_a_matmul(rng):
    a, b = floats(rng, 16, 20, 24), floats(rng, 16, 24)
    # out[i] = sum_jk a[i, j, k] * b[i, k]: j only indexes a.
    (result,), calls = both_ways(lambda x, y: (x * y.reshape(16, 1, 24)).sum([1, 2]), a, b)
    np.testing.assert_allclose(result, np.einsum("ijk,ik->i", a, b), rtol=RTOL, atol=ATOL)
    assert calls == 0


@pytest.mark.parametrize("options", CONVOLUTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_convolution_forward_and_both_gradients_are_lowered(rng, options):
    calls = check_forward_and_both_gradients(F.conv2d, torch.nn.functional.conv2d, floats(rng, 3, 8, 11, 13),
                                             floats(rng, 12, 8, 3, 3), options)
    assert calls == 3, "forward, backward data and backward weights must each be one library call"


TRANSPOSED_CONVOLUTIONS = [
    dict(stride=2, padding=1, output_padding=1),
    dict(stride=1, padding=0),
    dict(stride=2, padding=1, dilation=2),
    dict(stride=(2, 3), padding=(0, 1), output_padding=(1, 2)),
]


@pytest.mark.parametrize("options", TRANSPOSED_CONVOLUTIONS,
                         ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_transposed_convolution_and_its_gradients_are_lowered(rng, options):
    """conv_transpose2d is written as a convolution's data-gradient scatter, so oneDNN runs it (backward data)
    and its two gradients (a convolution forward and a weight gradient)."""
    calls = check_forward_and_both_gradients(F.conv_transpose2d, torch.nn.functional.conv_transpose2d,
                                             floats(rng, 3, 12, 7, 9), floats(rng, 12, 8, 3, 3), options)
    assert calls == 3, "the transposed convolution and both its gradients must each be one library call"


@pytest.mark.parametrize("kernel", [2, 4])
def test_windows_that_tile_the_image_and_their_transposes_are_lowered(rng, kernel):
    """Kernel == stride (2x2 stride-2 downsampling, patch embedding, upsampling by a transposed convolution): the
    image index s * o + k with k < s nests like one plain dimension, so no tensor looked like a window; these ran
    as generated loop nests or as many tiny batched matrix products. All three passes of both are calls now."""
    x, w = floats(rng, 2, 6, 12, 16), floats(rng, 10, 6, kernel, kernel)
    options = dict(stride=kernel)
    calls = check_forward_and_both_gradients(F.conv2d, torch.nn.functional.conv2d, x, w, options)
    assert calls == 3
    transposed_x, transposed_w = floats(rng, 2, 6, 5, 7), floats(rng, 6, 10, kernel, kernel)
    calls = check_forward_and_both_gradients(F.conv_transpose2d, torch.nn.functional.conv_transpose2d,
                                             transposed_x, transposed_w, options)
    assert calls == 3
    kernels = mj.inspect(F.conv_transpose2d(mj.array(transposed_x), mj.array(transposed_w), **options))
    assert [kernel.library.split(" (")[0] for kernel in kernels] == ["onednn convolution backward data"], kernels


@pytest.mark.parametrize("out_channels", [3, 16])
def test_convolutions_of_few_output_channels_run_channels_last(rng, out_channels):
    """An image network's last convolution (16 -> 3 channels): oneDNN's blocked layouts pad the 3 channels to 16,
    and its backward-data pass sums over them (3.3 ms against 0.63 channels last, [4, 16, 72, 72], 9x9). All three
    passes run channels last; convolutions of 16 channels keep oneDNN's layouts."""
    x, w, g = floats(rng, 2, 16, 20, 20), floats(rng, out_channels, 16, 5, 5), floats(rng, 2, out_channels, 16, 16)
    image, weights = mj.array(x), mj.array(w)
    image.requires_grad = weights.requires_grad = True
    y = F.conv2d(image, weights)
    image_gradient, weight_gradient = mj.grad((y * mj.array(g)).sum(), [image, weights])
    calls = {kernel.library.split(" (")[0]: kernel.library for kernel in mj.inspect(y, image_gradient, weight_gradient)
             if kernel.library}
    assert set(calls) == {"onednn convolution forward", "onednn convolution backward data",
                          "onednn convolution backward weights"}, calls
    for call in calls.values():
        assert ("channels last" in call) == (out_channels < 16), calls
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw)
    (ty * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(image_gradient.numpy(), tx.grad.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(weight_gradient.numpy(), tw.grad.numpy(), rtol=RTOL, atol=1e-3)


@pytest.mark.parametrize("stride", [1, 2])
def test_one_by_one_convolution_and_its_gradients_are_lowered(rng, stride):
    """Stride 1: the forward and data gradient are matrix products; the weight gradient sums over the batch and
    the pixels, which do not merge into one matrix dim, so it runs as a convolution's weight gradient."""
    calls = check_forward_and_both_gradients(F.conv2d, torch.nn.functional.conv2d, floats(rng, 4, 16, 9, 9),
                                             floats(rng, 24, 16, 1, 1), dict(stride=stride))
    assert calls == 3


def test_convolution_with_bias_relu_and_a_computed_input(rng):
    x, w, b = floats(rng, 2, 6, 10, 10), floats(rng, 8, 6, 3, 3), floats(rng, 8)

    def build(x, w, b):
        return F.relu(F.conv2d(F.relu(x) * 0.5, w, b, padding=1))
    (y,), calls = both_ways(build, x, w, b)
    expected = torch.relu(torch.nn.functional.conv2d(torch.relu(torch.from_numpy(x)) * 0.5, torch.from_numpy(w),
                                                     torch.from_numpy(b), padding=1)).numpy()
    np.testing.assert_allclose(y, expected, rtol=RTOL, atol=ATOL)
    assert calls == 1


RESAMPLED_INPUTS = {
    "reflection pad": (lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect"), dict(padding=0)),
    # a computed image: its reflected reads need no bounds test, so no padded read marks them (the matcher stores
    # the reindex, the view reading it at plain indices)
    "reflection pad of a computed image": (lambda x: F.pad(x.relu(), (1, 1, 1, 1), mode="reflect"),
                                           dict(padding=0)),
    "replication pad": (lambda x: F.pad(x, (2, 1, 1, 2), mode="replicate"), dict(padding=0)),
    "reflection pad, zero padding": (lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect"), dict(padding=1)),
    "nearest upsampling": (lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), dict(padding=1)),
    "upsampling, then reflection": (
        lambda x: F.pad(F.interpolate(x, scale_factor=2, mode="nearest"), (1, 1, 1, 1), mode="reflect"),
        dict(padding=0)),
}


@pytest.mark.parametrize("case", sorted(RESAMPLED_INPUTS))
def test_convolution_of_a_padded_or_upsampled_image_runs_in_the_library(rng, case):
    """Style-transfer and super-resolution networks convolve reflected, replicated or upsampled images: the
    resampled image is stored in one pass and all three convolution passes go to oneDNN (as generated loop nests
    that recomputed the reflection at every multiply-add, a training step took 50x PyTorch's time)."""
    resample, options = RESAMPLED_INPUTS[case]
    torch_resample = {
        "reflection pad": lambda x: torch.nn.functional.pad(x, (1, 1, 1, 1), mode="reflect"),
        "reflection pad of a computed image": lambda x: torch.nn.functional.pad(x.relu(), (1, 1, 1, 1), mode="reflect"),
        "replication pad": lambda x: torch.nn.functional.pad(x, (2, 1, 1, 2), mode="replicate"),
        "reflection pad, zero padding": lambda x: torch.nn.functional.pad(x, (1, 1, 1, 1), mode="reflect"),
        "nearest upsampling": lambda x: torch.nn.functional.interpolate(x, scale_factor=2, mode="nearest"),
        "upsampling, then reflection": lambda x: torch.nn.functional.pad(
            torch.nn.functional.interpolate(x, scale_factor=2, mode="nearest"), (1, 1, 1, 1), mode="reflect"),
    }[case]
    x, w = floats(rng, 2, 6, 12, 12), floats(rng, 8, 6, 3, 3)
    calls = check_forward_and_both_gradients(
        lambda x, w, **options: F.conv2d(resample(x), w, **options),
        lambda x, w, **options: torch.nn.functional.conv2d(torch_resample(x), w, **options), x, w, options)
    assert calls == 3, f"{case}: {calls} library calls, expected forward, backward data and backward weights"


STORE_REASONS = {  # the resampling, and what mj.inspect says the library cannot read
    "reflection pad": "a buffer read at indices that are not affine (split by a reshape, clamped, reflected)",
    "reflection pad of a computed image": "a reindex whose indices are not affine (a reflection, a clamp, a division)",
    "nearest upsampling": "zero padding around a value read at indices that are not affine",
}


@pytest.mark.parametrize("case", sorted(STORE_REASONS))
def test_inspect_says_which_operand_was_stored_for_the_call_and_why(rng, case):
    """The planner stores a resampled image before the convolution's library call; mj.inspect names the operand,
    the value stored (its op, shape, source and line), what the library cannot read, and the two costs weighed."""
    resample, options = RESAMPLED_INPUTS[case]
    x, w = mj.array(floats(rng, 2, 6, 12, 12)), mj.array(floats(rng, 8, 6, 3, 3))
    kernels = mj.inspect(F.conv2d(resample(x), w, **options))
    assert [kernel.kind for kernel in kernels] == ["generated", "library"]
    stored, call = kernels
    assert stored.stored_operands == []
    assert len(call.stored_operands) == 1
    text = call.stored_operands[0]
    side = 24 if case == "nearest upsampling" else 14
    assert re.match(rf"operand 1 \(reindex \[2, 6, {side}, {side}\] of \[2, 6, 12, 12\] at \S*test_lowering.py:\d+\) ",
                    text), text
    assert f"stored first: the library cannot read {STORE_REASONS[case]}" in text
    stored_bytes = 2 * 6 * side * side * 4
    multiply_adds = 2 * 8 * 12 * 12 * 6 * 3 * 3 * (4 if case == "nearest upsampling" else 1)
    assert f"storing {stored_bytes / 1024:.1f} KiB costs less than a generated loop nest of {multiply_adds:.1e} " \
           "multiply-adds" in text
    assert f"// {text}" in str(call)  # print(kernel) shows it under the library call


def test_inspect_names_a_computed_operand_stored_for_a_matrix_product(rng):
    a, b = mj.array(floats(rng, 32, 40)), mj.array(floats(rng, 40, 24))
    product = (a.exp() @ b).relu()
    call = [kernel for kernel in mj.inspect(product) if kernel.kind.startswith("library")]
    assert len(call) == 1
    (text,) = call[0].stored_operands
    assert re.match(r"operand 1 \(exp \[32, 40\] at \S*test_lowering.py:\d+\) stored first", text), text
    assert "the library cannot read a value computed inside the kernel" in text
    np.testing.assert_allclose(product.numpy(), np.maximum(np.exp(a.numpy()) @ b.numpy(), 0), rtol=RTOL, atol=ATOL)


def test_a_call_reading_buffers_stores_nothing(rng):
    a, b = mj.array(floats(rng, 32, 40)), mj.array(floats(rng, 40, 24))
    a.sync(), b.sync()
    (call,) = mj.inspect(a @ b)
    assert call.kind == "library" and call.stored_operands == []
    assert "stored first" not in str(call)


def test_users_own_reindex_convolution_is_lowered(rng):
    """A convolution the user writes with reindex/broadcast/sum (no conv op) is recognised too."""
    assert check_users_reindex_convolution(rng) == 1


@pytest.mark.parametrize("spatial", [1, 3])
def test_conv1d_and_conv3d_are_lowered(rng, spatial):
    shape = (4, 8) + ((64,) if spatial == 1 else (7, 7, 7))
    x, w = floats(rng, *shape), floats(rng, *((6, 8) + (3,) * spatial))
    function = {1: (F.conv1d, torch.nn.functional.conv1d), 3: (F.conv3d, torch.nn.functional.conv3d)}[spatial]
    (y,), calls = both_ways(lambda x, w: function[0](x, w, padding=1, stride=2), x, w)
    expected = function[1](torch.from_numpy(x), torch.from_numpy(w), padding=1, stride=2).numpy()
    np.testing.assert_allclose(y, expected, rtol=RTOL, atol=ATOL)
    assert calls == 1


GROUPED_CONVOLUTIONS = [  # (input shape, weight shape, options)
    ((2, 8, 9, 9), (12, 4, 3, 3), dict(groups=2, padding=1)),                  # 4 channels -> 6 per group
    ((3, 12, 11, 10), (8, 3, 3, 3), dict(groups=4, stride=2, padding=1)),
    ((2, 8, 12, 12), (8, 2, 3, 3), dict(groups=4, padding=2, dilation=2)),
    ((2, 8, 9, 9), (8, 1, 3, 3), dict(groups=8, padding=1)),                   # depthwise
    ((2, 8, 9, 9), (16, 1, 3, 3), dict(groups=8, padding=1)),                  # depthwise, 2 outputs per channel
    ((4, 6, 9, 9), (12, 2, 1, 1), dict(groups=3)),                             # 1x1
]


@pytest.mark.parametrize("x_shape,w_shape,options", GROUPED_CONVOLUTIONS,
                         ids=lambda v: ",".join(f"{k}={o}" for k, o in v.items()) if isinstance(v, dict) else None)
def test_grouped_convolution_and_its_gradients_are_lowered(rng, x_shape, w_shape, options):
    """A grouped convolution reads image channel (o / (O/g)) * (C/g) + c: the matcher splits o into its group and
    its place in the group, and oneDNN runs all three passes with grouped weights."""
    calls = check_forward_and_both_gradients(F.conv2d, torch.nn.functional.conv2d, floats(rng, *x_shape),
                                             floats(rng, *w_shape), options)
    assert calls == 3, "forward, backward data and backward weights must each be one library call"


def test_batch_norm_statistics_and_gradients_are_not_library_calls(rng):
    """Batch norm's per-channel sums over (N, H, W), of x and of products like x * dy, read as depthwise 1x1
    weight gradients: one multiply per element, which generated kernels fuse with their neighbours. They stay
    generated reductions (oneDNN's depthwise kernel made the ResNet-18 step 20% slower) and match PyTorch."""
    x = floats(rng, 8, 16, 10, 10)
    upstream = floats(rng, 8, 16, 10, 10)
    layer = mj.nn.BatchNorm2d(16)
    layer.train()
    mx = mj.array(x)
    mx.requires_grad = True
    y = layer(mx)
    gx, gweight = mj.grad((y * mj.array(upstream)).sum(), [mx, layer.weight])
    mj.reset_stats()
    mj.sync(y, gx, gweight)
    assert mj.stats()["library_calls"] == 0
    tx = torch.from_numpy(x).requires_grad_()
    reference = torch.nn.BatchNorm2d(16)
    ty = reference(tx)
    (ty * torch.from_numpy(upstream)).sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(gx.numpy(), tx.grad.numpy(), rtol=RTOL, atol=1e-3)
    np.testing.assert_allclose(gweight.numpy(), reference.weight.grad.numpy(), rtol=RTOL, atol=1e-3)


def test_depthwise_passes_that_onednn_runs_through_gemm_stay_generated(rng):
    """oneDNN has no direct depthwise kernel for some passes of a 1-D depthwise convolution and runs im2col + gemm,
    a tiny matrix product per channel (5.7 ms against the generated stencil's 0.6 at [32, 64, 1024]): those
    passes are declined and stay generated; results match PyTorch either way."""
    x, w = floats(rng, 2, 16, 200), floats(rng, 16, 1, 3)
    options = dict(groups=16, padding=1)
    check_forward_and_both_gradients(F.conv1d, torch.nn.functional.conv1d, x, w, options)
    image, weight = mj.array(x, requires_grad=True), mj.array(w, requires_grad=True)
    y = F.conv1d(image, weight, **options)
    kernels = mj.inspect(y, *mj.grad((y * mj.array(floats(rng, 2, 16, 200))).sum(), [image, weight]))
    assert not any("gemm" in (kernel.library or "") for kernel in kernels), kernels


@pytest.mark.parametrize("spatial", [1, 3])
def test_grouped_conv1d_and_conv3d_are_lowered(rng, spatial):
    x = floats(rng, *((4, 6) + ((64,) if spatial == 1 else (6, 6, 6))))
    w = floats(rng, *((9, 2) + (3,) * spatial))
    function = {1: (F.conv1d, torch.nn.functional.conv1d), 3: (F.conv3d, torch.nn.functional.conv3d)}[spatial]
    calls = check_forward_and_both_gradients(function[0], function[1], x, w, dict(groups=3, padding=1))
    assert calls == 3


def test_grouped_transposed_convolution_and_its_gradients_are_lowered(rng):
    calls = check_forward_and_both_gradients(F.conv_transpose2d, torch.nn.functional.conv_transpose2d,
                                             floats(rng, 2, 12, 7, 8), floats(rng, 12, 2, 4, 4),
                                             dict(groups=3, stride=2, padding=1, output_padding=1))
    assert calls == 3


def test_training_step_gradients_match_with_and_without_lowering(rng):
    """A small CNN step: every gradient agrees between the lowered and the generated path."""
    x = floats(rng, 8, 3, 12, 12)
    labels = rng.integers(0, 5, 8)

    def gradients(lowering):
        mj.flags.lowering = lowering
        mj.seed(0)
        model = mj.nn.Sequential(mj.nn.Conv2d(3, 8, 3, padding=1), mj.nn.ReLU(), mj.nn.MaxPool2d(2),
                                 mj.nn.Conv2d(8, 16, 3, stride=2, padding=1), mj.nn.ReLU(), mj.nn.Flatten(),
                                 mj.nn.Linear(16 * 3 * 3, 5))
        loss = F.cross_entropy(model(mj.array(x)), mj.array(labels))
        parameters = list(model.parameters())
        grads = mj.grad(loss, parameters)
        mj.reset_stats()
        mj.sync(*grads)
        values = [g.numpy() for g in grads]
        return values, mj.stats()["library_calls"]
    lowered, calls = gradients(True)
    plain, plain_calls = gradients(False)
    assert calls >= 4 and plain_calls == 0
    for a, b in zip(lowered, plain):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


def test_backward_calls_reuse_the_layout_copies_of_the_forward_call(rng):
    """In one sync, the weight-gradient call reads the input the forward call already reordered into oneDNN's
    blocked layout, and the two backward calls share the reordered output gradient: each is copied once.
    The gradients still match PyTorch, and a second sync (a new plan run) copies afresh."""
    x, w = floats(rng, 4, 32, 12, 12), floats(rng, 32, 32, 3, 3)
    upstream = floats(rng, 4, 32, 12, 12)
    tx, tw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
    ty = torch.nn.functional.conv2d(tx, tw, padding=1)
    (ty * torch.from_numpy(upstream)).sum().backward()
    for attempt in range(2):
        mx, mw, mg = mj.array(x), mj.array(w), mj.array(upstream)
        mx.requires_grad = True
        mw.requires_grad = True
        y = F.conv2d(mx, mw, padding=1)
        gx, gw = mj.grad((y * mg).sum(), [mx, mw])
        mj.reset_stats()
        mj.sync(y, gx, gw)
        counters = mj.stats()
        assert counters["library_calls"] == 3
        assert counters["library_reorders_reused"] == 2, counters
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(gx.numpy(), tx.grad.numpy(), rtol=RTOL, atol=1e-3)
        np.testing.assert_allclose(gw.numpy(), tw.grad.numpy(), rtol=RTOL, atol=1e-3)


def torch_conv2d(x, w, **options):
    return torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), **options).numpy()


def reorders_of(build):
    """(value, library_reorders, library_reorders_reused) of one sync of build()."""
    mj.reset_stats()
    value = build().numpy()
    counters = mj.stats()
    return value, counters["library_reorders"], counters["library_reorders_reused"]


def test_weights_reordered_once_are_reused_by_later_runs(rng):
    """Inference runs the same layers on the same weights again and again: the first run copies the weights
    into oneDNN's layout, later runs (new plan runs, new inputs) read that copy. Results match PyTorch each time."""
    w = floats(rng, 32, 32, 3, 3)
    weights = mj.array(w)
    first_x = floats(rng, 2, 32, 10, 10)
    first, first_reorders, first_reused = reorders_of(lambda: F.conv2d(mj.array(first_x), weights, padding=1))
    np.testing.assert_allclose(first, torch_conv2d(first_x, w, padding=1), rtol=RTOL, atol=ATOL)
    assert first_reorders >= 1 and first_reused == 0
    for _ in range(2):
        x = floats(rng, 2, 32, 10, 10)
        value, reorders, reused = reorders_of(lambda: F.conv2d(mj.array(x), weights, padding=1))
        np.testing.assert_allclose(value, torch_conv2d(x, w, padding=1), rtol=RTOL, atol=ATOL)
        assert reorders == first_reorders - 1 and reused == 1


def test_a_weight_copy_dies_with_its_buffer(rng):
    """A freed weight buffer's copy must not serve the next tensor the allocator puts at the same address: the
    caching allocator hands the same block back for the same size, so a stale copy would give the old result."""
    x = floats(rng, 2, 32, 10, 10)
    for _ in range(4):
        w = floats(rng, 32, 32, 3, 3)
        weights = mj.array(w)
        value, _, reused = reorders_of(lambda: F.conv2d(mj.array(x), weights, padding=1))
        np.testing.assert_allclose(value, torch_conv2d(x, w, padding=1), rtol=RTOL, atol=ATOL)
        assert reused == 0
        weights = None  # frees the buffer (the lambda above reads the name, so it is rebound rather than deleted)


def test_an_optimizer_step_gives_the_next_run_new_weight_copies(rng):
    """A training step replaces the weights (a new buffer): the next forward reads the new values."""
    x, w = floats(rng, 2, 16, 8, 8), floats(rng, 32, 16, 3, 3)
    model = mj.nn.Conv2d(16, 32, 3, padding=1, bias=False)
    model.weight.assign(mj.array(w))
    optimizer = mj.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        current = model.weight.numpy().copy()
        y = model(mj.array(x))
        np.testing.assert_allclose(y.numpy(), torch_conv2d(x, current, padding=1), rtol=RTOL, atol=ATOL)
        optimizer.zero_grad()
        (y * y).sum().backward()
        optimizer.step()
        mj.sync(model.weight)
        assert not np.array_equal(model.weight.numpy(), current)


def test_a_run_that_trains_the_weights_keeps_no_copy_of_them_past_its_end(rng):
    """A sync computing a weight gradient (a training step) replaces the weights afterwards: its weight copies go at
    its end, as its other copies, so a later forward-only run of the same weights copies them again."""
    x, w = floats(rng, 2, 32, 10, 10), floats(rng, 32, 32, 3, 3)
    weights = mj.array(w)
    weights.requires_grad = True
    y = F.conv2d(mj.array(x), weights, padding=1)
    (gradient,) = mj.grad((y * y).sum(), [weights])
    mj.sync(y, gradient)
    _, reorders, reused = reorders_of(lambda: F.conv2d(mj.array(x), weights, padding=1))
    assert reorders >= 1 and reused == 0
    value, _, reused = reorders_of(lambda: F.conv2d(mj.array(x), weights, padding=1))
    np.testing.assert_allclose(value, torch_conv2d(x, w, padding=1), rtol=RTOL, atol=ATOL)
    assert reused == 1


def test_gc_drops_the_kept_weight_copies(rng):
    w, x = floats(rng, 32, 32, 3, 3), floats(rng, 2, 32, 10, 10)
    weights = mj.array(w)
    _, first_reorders, _ = reorders_of(lambda: F.conv2d(mj.array(x), weights, padding=1))
    mj.gc()
    value, reorders, reused = reorders_of(lambda: F.conv2d(mj.array(x), weights, padding=1))
    np.testing.assert_allclose(value, torch_conv2d(x, w, padding=1), rtol=RTOL, atol=ATOL)
    assert reorders == first_reorders and reused == 0


@pytest.fixture
def conv_algorithm():
    previous = mj.flags.conv_algorithm
    yield
    mj.flags.conv_algorithm = previous


def convolution_and_gradients(x, w, upstream, **options):
    """Lazy y, dx, dw of conv2d(x, w) weighted by upstream, and the library names of the calls computing them."""
    mx, mw = mj.array(x, requires_grad=True), mj.array(w, requires_grad=True)
    y = F.conv2d(mx, mw, **options)
    gx, gw = mj.grad((y * mj.array(upstream)).sum(), [mx, mw])
    names = [kernel.library for kernel in mj.inspect(y, gx, gw) if kernel.kind.startswith("library")]
    return (y, gx, gw), names


def float64_reference(x, w, upstream, **options):
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, **options)
    (ty * torch.tensor(upstream, dtype=torch.float64)).sum().backward()
    return ty.detach().numpy(), tx.grad.numpy(), tw.grad.numpy()


def scaled_error(value, reference):
    """Largest error over the reference's largest magnitude."""
    return float(np.abs(value.astype(np.float64) - reference).max() / np.abs(reference).max())


def cpu_has_avx512_core():
    """oneDNN's Winograd kernels (jit_wino_4x3) exist only for AVX-512 (its avx512_core: F, BW, VL and DQ); on
    other CPUs metajit's own F(2x2, 3x3) (libraries/cpu/winograd_convolution.h) takes 3x3 stride-1 convolutions instead,
    with its own rule for where it pays. Read from the CPU's own flags."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            flags = next((line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), [])
    except OSError:
        return False
    return all(flag in flags for flag in ("avx512f", "avx512bw", "avx512vl", "avx512dq"))


ONEDNN_WINOGRAD_EXISTS = cpu_has_avx512_core()


def test_winograd_takes_large_three_by_three_convolutions_and_direct_turns_it_off(rng, conv_algorithm):
    """64 channels, 16x16 maps, batch 8: 128 output tiles of 4x4 (512 of 2x2), where `auto` picks Winograd for
    all three passes: oneDNN's F(4x4, 3x3) where it has it, metajit's F(2x2, 3x3) elsewhere. Its rounding error
    stays near 1e-5 of the results' scale (float64 reference), and `direct` gives the direct kernels with their
    smaller error."""
    x, w, upstream = floats(rng, 8, 64, 16, 16), floats(rng, 64, 64, 3, 3) / 24, floats(rng, 8, 64, 16, 16)
    references = float64_reference(x, w, upstream, padding=1)
    errors = {}
    for algorithm in ("auto", "direct"):
        mj.flags.conv_algorithm = algorithm
        results, names = convolution_and_gradients(x, w, upstream, padding=1)
        assert len(names) == 3, names
        uses_winograd = ["wino" in name for name in names]
        assert uses_winograd == [algorithm == "auto"] * 3, names
        mj.sync(*results)
        errors[algorithm] = max(scaled_error(r.numpy(), e) for r, e in zip(results, references))
    assert errors["auto"] < 2e-5, errors
    assert errors["direct"] < 1e-5, errors


def test_auto_keeps_direct_where_winograd_does_not_pay(rng, conv_algorithm):
    """16 channels, a stride of 2 or a 4x4 map at batch 2 (too few tiles) stay direct under `auto`;
    `winograd` forces it on the stride-1 ones (oneDNN's or metajit's), and a stride-2 convolution, which neither
    has, still runs direct."""
    mj.flags.conv_algorithm = "auto"
    cases = [(floats(rng, 8, 16, 16, 16), floats(rng, 16, 16, 3, 3), dict(padding=1)),
             (floats(rng, 8, 64, 16, 16), floats(rng, 64, 64, 3, 3), dict(padding=1, stride=2)),
             (floats(rng, 2, 64, 4, 4), floats(rng, 64, 64, 3, 3), dict(padding=1))]
    upstreams = [floats(rng, *torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), **options).shape)
                 for x, w, options in cases]
    for (x, w, options), upstream in zip(cases, upstreams):
        _, names = convolution_and_gradients(x, w, upstream, **options)
        assert len(names) == 3 and not any("wino" in name for name in names), (options, names)
    mj.flags.conv_algorithm = "winograd"
    for (x, w, options), upstream, winograd_exists in zip(cases, upstreams, (True, False, True)):
        results, names = convolution_and_gradients(x, w, upstream, **options)
        assert all(("wino" in name) == winograd_exists for name in names), (options, names)
        mj.sync(*results)
        for result, reference in zip(results, float64_reference(x, w, upstream, **options)):
            assert scaled_error(result.numpy(), reference) < 1e-4


def test_auto_takes_winograd_for_backward_weights_from_fewer_tiles(rng, conv_algorithm):
    """64 channels, 4x4 maps, batch 32: 32 output tiles of 4x4. With oneDNN's Winograd, `auto` keeps forward and
    backward data direct (128 tiles needed) but computes the weight gradient with it, which pays from 32 tiles.
    metajit's F(2x2, 3x3) (128 tiles of 2x2) pays in forward and backward weights, not in backward data, where
    oneDNN's direct kernel is faster. All match float64."""
    mj.flags.conv_algorithm = "auto"
    x, w, upstream = floats(rng, 32, 64, 4, 4), floats(rng, 64, 64, 3, 3) / 24, floats(rng, 32, 64, 4, 4)
    results, names = convolution_and_gradients(x, w, upstream, padding=1)
    assert len(names) == 3, names
    winograd = sorted(name for name in names if "wino" in name)
    if ONEDNN_WINOGRAD_EXISTS:
        assert len(winograd) == 1 and "backward weights" in winograd[0], names
    else:
        assert len(winograd) == 2 and not any("backward data" in name for name in winograd), names
    mj.sync(*results)
    for result, reference in zip(results, float64_reference(x, w, upstream, padding=1)):
        assert scaled_error(result.numpy(), reference) < 2e-5


def test_auto_keeps_the_weight_gradient_direct_where_winograd_wants_a_huge_scratchpad(rng, conv_algorithm):
    """512 channels, 4x4 maps, batch 32 (ResNet-18's last stage): oneDNN's Winograd weight gradient sums a
    transformed copy of the weights per thread and asked for about 120 MiB of scratchpad, 11x the call's tensors
    (11 MiB), at the top of a training step's peak. `auto` takes the direct kernels there, so the call adds little
    beyond its tensors and the gradient still matches float64."""
    mj.flags.conv_algorithm = "auto"
    x, w, upstream = floats(rng, 32, 512, 4, 4), floats(rng, 512, 512, 3, 3) / 48, floats(rng, 32, 512, 4, 4)
    mx, mw, mu = mj.array(x), mj.array(w, requires_grad=True), mj.array(upstream)
    mj.sync(mx, mw, mu)
    mj.reset_peak_memory_stats()
    before = mj.memory_allocated()
    (gw,) = mj.grad((F.conv2d(mx, mw, padding=1) * mu).sum(), [mw])
    names = [kernel.library for kernel in mj.inspect(gw) if kernel.kind.startswith("library")]
    mj.sync(gw)
    added_mib = (mj.max_memory_allocated() - before) / 2**20
    assert added_mib < 48, (added_mib, names)  # the gradient (9 MiB) and layout copies; Winograd's took 149
    assert not any("wino" in name for name in names), names
    assert scaled_error(gw.numpy(), float64_reference(x, w, upstream, padding=1)[2]) < 1e-5


@pytest.mark.parametrize("shape, options", [((2, 5, 7, 9), dict(padding=1)), ((2, 4, 6, 6), dict(padding=0)),
                                            ((2, 3, 5, 4), dict(padding=2)), ((8, 16, 1, 1), dict(padding=1)),
                                            ((2, 5, 9, 11), dict(padding=2, dilation=2)),
                                            ((2, 4, 13, 10), dict(padding=3, dilation=3))])
def test_forced_winograd_matches_float64_on_odd_sizes_every_padding_and_dilation(rng, conv_algorithm, shape, options):
    """`winograd` on small, odd shapes: partial 2x2 tiles at the edges, no padding, padding 2, a 1x1 image (one
    tile, nearly all padding), and dilations 2 and 3 (4 or 9 interleaved undilated convolutions). All three passes
    match float64 PyTorch; without oneDNN's Winograd, each pass is metajit's call."""
    mj.flags.conv_algorithm = "winograd"
    batch, channels, height, width = shape
    x, w = floats(rng, batch, channels, height, width), floats(rng, 6, channels, 3, 3) / 6
    output_shape = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), **options).shape
    upstream = floats(rng, *output_shape)
    results, names = convolution_and_gradients(x, w, upstream, **options)
    assert len(names) == 3, names
    if not ONEDNN_WINOGRAD_EXISTS:
        assert all(name.startswith("winograd convolution") for name in names), names
    mj.sync(*results)
    for result, reference in zip(results, float64_reference(x, w, upstream, **options)):
        assert scaled_error(result.numpy(), reference) < 1e-5


POST_OP_CHAINS = {
    "bias + relu": (lambda y, b, r, s, F: F.relu(y + b), " + bias + relu"),
    "bias + residual + relu": (lambda y, b, r, s, F: F.relu(y + b + r), " + bias + add + relu"),
    "scale + shift": (lambda y, b, r, s, F: y * 0.5 - 1.0, " + scale"),
    "channel scale + residual": (lambda y, b, r, s, F: y * s + r, " + multiply + add"),
}


@pytest.mark.parametrize("chain", sorted(POST_OP_CHAINS))
def test_winograd_folds_a_bias_and_post_ops(rng, conv_algorithm, chain):
    """conv2d followed by a bias, ReLU, a constant scale and shift, a per-channel scale or a residual, under
    `auto` at a size where Winograd pays. Without oneDNN's Winograd, metajit's call applies them as it writes each
    output row: one library kernel and nothing after it. The result matches float64 PyTorch either way."""
    mj.flags.conv_algorithm = "auto"
    x, w = floats(rng, 8, 64, 16, 16), floats(rng, 64, 64, 3, 3) / 24
    b, residual, scale = floats(rng, 64).reshape(1, 64, 1, 1), floats(rng, 8, 64, 16, 16), floats(rng, 1, 64, 1, 1)
    work, suffix = POST_OP_CHAINS[chain]
    y = work(F.conv2d(mj.array(x), mj.array(w), padding=1), mj.array(b), mj.array(residual), mj.array(scale), F)
    kernels = mj.inspect(y)
    names = [kernel.library for kernel in kernels if kernel.kind.startswith("library")]
    assert len(names) == 1, names
    if not ONEDNN_WINOGRAD_EXISTS:
        assert names[0].startswith("winograd convolution forward" + suffix + " (F(4x4,3x3)"), names
        assert [kernel.kind for kernel in kernels] == ["library"], [kernel.kind for kernel in kernels]
    double = [torch.tensor(value, dtype=torch.float64) for value in (x, w, b, residual, scale)]
    reference = work(torch.nn.functional.conv2d(double[0], double[1], padding=1), *double[2:], torch.nn.functional)
    assert scaled_error(y.numpy(), reference.numpy()) < 2e-5


@pytest.mark.parametrize("options", [dict(padding=1), dict(padding=1, stride=2), dict(padding=2, dilation=2)])
def test_channels_last_images_are_lowered_in_all_three_passes(rng, options):
    """An image stored channels-last ([N, H, W, C], viewed as NCHW by a permute) is read with its own strides: the
    convolution and both gradients (the data gradient written back channels-last) become library calls, and
    match float64 PyTorch. Before, the channel dim had to be dim 1, and all three stayed generated loops."""
    x_last, w = floats(rng, 4, 12, 12, 64), floats(rng, 64, 64, 3, 3) / 24
    mx, mw = mj.array(x_last, requires_grad=True), mj.array(w, requires_grad=True)
    y = F.conv2d(mx.permute(0, 3, 1, 2), mw, **options)
    upstream = floats(rng, *y.shape)
    gx, gw = mj.grad((y * mj.array(upstream)).sum(), [mx, mw])
    names = [kernel.library for kernel in mj.inspect(y, gx, gw) if kernel.kind.startswith("library")]
    assert len(names) == 3, names
    tx = torch.tensor(x_last, dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx.permute(0, 3, 1, 2), tw, **options)
    (ty * torch.tensor(upstream, dtype=torch.float64)).sum().backward()
    mj.sync(y, gx, gw)
    for result, reference in zip((y, gx, gw), (ty.detach().numpy(), tx.grad.numpy(), tw.grad.numpy())):
        assert scaled_error(result.numpy(), reference) < 2e-5


@pytest.mark.parametrize("extent, options", [(8, dict(stride=2)), (9, dict(stride=2)), (8, dict(stride=3)),
                                             (8, dict(stride=2, padding=1))])
def test_strided_one_by_one_convolutions_read_the_whole_image(rng, extent, options):
    """A 1x1 stride-2 window over an even extent leaves the last row and column unread. The lowering passes the
    whole image anyway (the outputs are the same under rounding down), so oneDNN's 1x1 kernels take all three
    passes (they refused the cropped image: 5.1 -> 0.95 ms for ResNet's 256 -> 512 shortcut at 8x8 forward),
    and the data gradient of the unread rows is written as zeros. Odd extents, stride 3 and padding take their
    own paths; all match float64 PyTorch."""
    x, w = floats(rng, 4, 32, extent, extent), floats(rng, 64, 32, 1, 1) / 6
    output_extent = (extent + 2 * options.get("padding", 0) - 1) // options["stride"] + 1
    upstream = floats(rng, 4, 64, output_extent, output_extent)
    results, names = convolution_and_gradients(x, w, upstream, **options)
    assert len(names) == 3, names
    if extent == 8 and options == dict(stride=2):
        assert all("1x1" in name for name in names), names
    mj.sync(*results)
    for result, reference in zip(results, float64_reference(x, w, upstream, **options)):
        assert scaled_error(result.numpy(), reference) < 1e-5
    if extent == 8 and options == dict(stride=2):
        gradient = results[1].numpy()
        assert not gradient[:, :, -1, :].any() and not gradient[:, :, :, -1].any()


def test_conv_algorithm_names_are_checked():
    with pytest.raises(ValueError, match="'auto', 'direct' or 'winograd'"):
        mj.flags.conv_algorithm = "fft"
    assert mj.flags.conv_algorithm in ("auto", "direct", "winograd")

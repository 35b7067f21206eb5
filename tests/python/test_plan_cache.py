"""The plan cache replays a kernel list for a graph of the same structure: it must never replay one for a graph
that differs in anything that changes the kernels (constants, sharing, shapes, which inputs are computed)."""
import numpy as np

import metajit as mj
from conftest import cpu_backend


def floats(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_constants_are_part_of_the_plan(rng):
    a = floats(rng, 5, 7)
    for scale in (2.0, 3.0, -1.5):
        x = mj.array(a)
        np.testing.assert_allclose((x * scale + 1).numpy(), a * scale + 1, rtol=1e-6, atol=1e-6)


def test_negative_and_positive_zero_constants_are_different_plans(rng):
    a = np.abs(floats(rng, 6)) + 1
    for zero in (0.0, -0.0, 0.0):
        product = (mj.array(a) * zero).numpy()
        assert np.array_equal(np.signbit(product), np.signbit(a * zero)), zero


def test_shapes_with_the_same_extents_but_another_rank_are_different_plans(rng):
    a = floats(rng, 2, 3)
    for shape in ((2, 3), (2, 3, 1), (1, 2, 3), (2, 3)):
        data = a.reshape(shape)
        total = mj.array(data).sum(0)
        assert total.shape == data.sum(0).shape
        np.testing.assert_allclose(total.numpy(), data.sum(0), rtol=1e-6)


def test_shared_and_distinct_inputs_are_different_graphs(rng):
    a, b = floats(rng, 4, 6), floats(rng, 4, 6)
    for _ in range(2):
        x, y = mj.array(a), mj.array(b)
        np.testing.assert_allclose((x * x + 1).exp().numpy(), np.exp(a * a + 1), rtol=1e-5)
        np.testing.assert_allclose((x * y + 1).exp().numpy(), np.exp(a * b + 1), rtol=1e-5)


def test_a_computed_input_changes_the_plan(rng):
    a = floats(rng, 8, 3)
    for computed in (False, True, False):
        x = mj.array(a)
        y = x.exp()
        if computed:
            y.numpy()  # y is now a buffer, not a pending exp
        np.testing.assert_allclose((y.sum(1) * 2).numpy(), np.exp(a).sum(1) * 2, rtol=1e-5)


def test_same_structure_new_data_reuses_the_plan_with_the_new_values(rng):
    mj.reset_stats()
    for _ in range(5):
        a, b = floats(rng, 16, 9), floats(rng, 9, 4)
        x, y = mj.array(a), mj.array(b)
        np.testing.assert_allclose(mj.softmax(x @ y, 1).numpy(),
                                   np.exp(a @ b) / np.exp(a @ b).sum(1, keepdims=True), rtol=1e-4, atol=1e-6)
    assert mj.stats()["kernels_compiled"] + mj.stats()["kernels_loaded_from_disk"] <= 4


def test_reindex_payloads_with_different_expressions_differ(rng):
    a = floats(rng, 6, 6)
    for expression, expected in (("i1", a.T), ("i0", a)):
        x = mj.array(a)
        y = mj.reindex(x, [6, 6], [expression, "i1" if expression == "i0" else "i0"])
        np.testing.assert_allclose(y.numpy(), expected)


@cpu_backend
def test_lowering_switch_is_part_of_the_plan(rng):
    a, b = floats(rng, 64, 64), floats(rng, 64, 64)
    previous = mj.flags.lowering
    try:
        for lowering in (True, False, True):
            mj.flags.lowering = lowering
            mj.reset_stats()
            np.testing.assert_allclose((mj.array(a) @ mj.array(b)).numpy(), a @ b, rtol=1e-4, atol=1e-4)
            assert (mj.stats()["library_calls"] > 0) == lowering
    finally:
        mj.flags.lowering = previous


def test_planned_nodes_counts_the_pending_nodes_of_graphs_planned_not_replayed(rng):
    a = floats(rng, 7, 5)
    counts = []
    for _ in range(2):  # the second graph has the first one's structure: its plan is replayed
        mj.reset_stats()
        x = mj.array(a)  # computed: not a pending node
        np.testing.assert_allclose(((x * 0.25 + 1).exp().sum(1) * 3).numpy(), np.exp(a * 0.25 + 1).sum(1) * 3,
                                   rtol=1e-5)
        counts.append(mj.stats()["planned_nodes"])
    # (x * 0.25 + 1).exp().sum(1) * 3: two multiplies, an add, exp, sum, and the scalar constants they read
    assert counts[0] >= 5 and counts[1] == 0, counts

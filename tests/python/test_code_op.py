"""The Code op (mj.code): values, gradients through grad_src, several outputs, data without recompiling,
typed accessors, dtypes, and errors that point at the user's own source and line."""
import numpy as np
import pytest

import metajit as mj
from conftest import assert_close

SQUARE = "for (int64_t i = 0; i < in0_numel; ++i) out0_p[i] = 2 * in0_p[i] * in0_p[i];"
SQUARE_GRAD = "for (int64_t i = 0; i < in0_numel; ++i) out0_p[i] = dout_p[i] * 4 * in0_p[i];"


def test_two_x_squared_value_and_gradient():
    values = np.random.default_rng(0).uniform(-3, 3, (4, 5)).astype(np.float32)
    x = mj.array(values, requires_grad=True)
    y = mj.code(x.shape, x.dtype, [x], SQUARE, grad_src=[SQUARE_GRAD])
    assert_close(y, 2 * values ** 2, rtol=1e-6)
    weights = np.random.default_rng(1).uniform(-1, 1, (4, 5)).astype(np.float32)
    gradient = mj.grad((y * mj.array(weights)).sum(), x)
    assert_close(gradient, 4 * values * weights, rtol=1e-5)


def test_gradient_with_backward_and_fused_consumers():
    values = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    x = mj.array(values, requires_grad=True)
    y = mj.code(x.shape, x.dtype, [x.exp()], SQUARE, grad_src=[SQUARE_GRAD])
    (y.relu() + 1).sum().backward()
    expected = 4 * np.exp(values) * np.exp(values)  # d/dx 2 e^{2x}
    assert_close(x.grad, expected, rtol=1e-5)


def test_grad_src_reads_forward_output_and_inputs():
    # y = a * b elementwise; grads read pout (unused check) and in1 / in0.
    a_values = np.arange(1, 7, dtype=np.float64).reshape(2, 3)
    b_values = np.arange(6, 0, -1, dtype=np.float64).reshape(2, 3)
    a = mj.array(a_values, requires_grad=True)
    b = mj.array(b_values, requires_grad=True)
    source = "for (int64_t i = 0; i < out0_numel; ++i) out0_p[i] = in0_p[i] * in1_p[i];"
    grad_a = "for (int64_t i = 0; i < out0_numel; ++i) out0_p[i] = dout_p[i] * pout_p[i] / in0_p[i];"
    grad_b = ("for (int i = 0; i < in0_shape0; ++i) for (int j = 0; j < in0_shape1; ++j) "
              "out0(i, j) = dout(i, j) * in0(i, j);")
    y = mj.code(a.shape, a.dtype, [a, b], source, grad_src=[grad_a, grad_b])
    ga, gb = mj.grad((y * y).sum(), [a, b])
    assert_close(ga, 2 * a_values * b_values * b_values, rtol=1e-12)
    assert_close(gb, 2 * a_values * b_values * a_values, rtol=1e-12)


def test_multiple_outputs():
    values = np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32)
    x = mj.array(values)
    negated, column_sums = mj.code([[3, 4], [4]], ["float32", "float64"], [x], """
        for (int i = 0; i < in0_shape0; ++i)
          for (int j = 0; j < in0_shape1; ++j) out0(i, j) = -in0(i, j);
        for (int j = 0; j < in0_shape1; ++j) {
          out1(j) = 0;
          for (int i = 0; i < in0_shape0; ++i) out1(j) += in0(i, j);
        }""")
    assert negated.dtype == "float32" and column_sums.dtype == "float64"
    before = mj.stats()["kernels_launched"]
    assert_close(column_sums, values.astype(np.float64).sum(0), rtol=1e-6)
    assert_close(negated, -values)
    # One launch computed both outputs.
    assert mj.stats()["kernels_launched"] - before == 1


def test_multiple_output_gradients_run_each_source_once():
    values = np.array([1.0, 2.0, 3.0])
    x = mj.array(values, requires_grad=True)
    double, square = mj.code([[3], [3]], ["float64", "float64"], [x],
                             "for (int i = 0; i < 3; ++i) { out0_p[i] = 2 * in0_p[i]; "
                             "out1_p[i] = in0_p[i] * in0_p[i]; }",
                             grad_src=["for (int i = 0; i < 3; ++i) "
                                       "out0_p[i] = 2 * dout0_p[i] + 2 * in0_p[i] * dout1_p[i];"])
    assert_close(mj.grad((3 * double + square).sum(), x), 6 + 2 * values, rtol=1e-12)
    # Only one output used: the other incoming gradient is zeros.
    assert_close(mj.grad(square.sum(), x), 2 * values, rtol=1e-12)


def test_data_changes_result_without_recompiling():
    x = mj.array(np.arange(5, dtype=np.float32))
    source = 'for (int64_t i = 0; i < in0_numel; ++i) out0_p[i] = in0_p[i] * data["scale"] + data["shift"];'
    first = mj.code(x.shape, "float32", [x], source, data={"scale": 2.0, "shift": 1.0})
    assert_close(first, np.arange(5) * 2.0 + 1.0)
    compiled = mj.stats()["kernels_compiled"]
    second = mj.code(x.shape, "float32", [x], source, data={"scale": -3.0, "shift": 0.5})
    assert_close(second, np.arange(5) * -3.0 + 0.5)
    assert mj.stats()["kernels_compiled"] == compiled


def test_integer_dtypes_header_and_standard_library():
    x = mj.array(np.array([[5, -2, 9], [1, 7, -4]], dtype=np.int32))
    header = "#include <numeric>\nstatic int32_t clamp_to(int32_t v, int32_t hi) { return std::min(v, hi); }"
    y = mj.code([2], "int64", [x], """
        for (int i = 0; i < in0_shape0; ++i) {
          int64_t total = 0;
          for (int j = 0; j < in0_shape1; ++j) total += clamp_to(in0(i, j), 6);
          out0(i) = total + (int64_t)std::sqrt(16.0);
        }""", cpu_header=header)
    assert y.dtype == "int64"
    assert_close(y, np.minimum(x.numpy(), 6).sum(1).astype(np.int64) + 4)


def test_shape_and_stride_names():
    x = mj.array(np.zeros((2, 3, 4), dtype=np.float32))
    y = mj.code([6], "int64", [x], """
        out0_p[0] = in0_shape0; out0_p[1] = in0_shape1; out0_p[2] = in0_shape2;
        out0_p[3] = in0_stride0; out0_p[4] = in0_stride1; out0_p[5] = in0_ndim * 100 + in0.numel;""")
    assert_close(y, np.array([2, 3, 4, 12, 4, 324]))


def test_syntax_error_names_user_line_and_python_line():
    x = mj.array(np.ones(3, dtype=np.float32))
    y = mj.code([3], "float32", [x], "out0_p[0] = 1;\nout0_p[1] = 2;\nthis is not C++;\n")  # CREATED HERE
    with pytest.raises(mj.CompileError) as caught:
        y.numpy()
    message = str(caught.value)
    assert "cpu_src:3:" in message
    assert "error" in message
    assert f"test_code_op.py:{_line_of('# CREATED HERE')}" in message
    assert "3: this is not C++;" in message  # the user's source is listed with line numbers


def test_header_error_is_reported_in_header_lines():
    x = mj.array(np.ones(3, dtype=np.float32))
    y = mj.code([3], "float32", [x], "out0_p[0] = helper();",
                cpu_header="float helper() {\n  return undefined_name;\n}")
    with pytest.raises(mj.CompileError, match=r"cpu_header:2:"):
        y.numpy()


def test_unknown_data_name_raises_with_creation_line():
    x = mj.array(np.ones(2, dtype=np.float32))
    y = mj.code([2], "float32", [x], 'out0_p[0] = data["missing"]; out0_p[1] = 0;', data={"present": 1.0})
    with pytest.raises(RuntimeError, match=r'read data\["missing"\], which is not in its data \(given: present\)'):
        y.numpy()


def test_grad_src_is_first_order_only():
    x = mj.array(np.array([1.0, 2.0]), requires_grad=True)
    y = mj.code([2], "float64", [x], SQUARE, grad_src=[SQUARE_GRAD])
    first = mj.grad(y.sum(), x)
    with pytest.raises(ValueError, match="mj.Function"):
        mj.grad(first.sum(), x)


def test_grad_src_error_is_reported_in_grad_src_lines():
    x = mj.array(np.array([1.0, 2.0]), requires_grad=True)
    y = mj.code([2], "float64", [x], SQUARE, grad_src=["out0_p[0] = 0;\nnot_declared = 1;"])
    with pytest.raises(mj.CompileError) as caught:
        mj.grad(y.sum(), x).numpy()
    message = str(caught.value)
    assert "grad_src[0]:2:" in message and "--- grad_src[0] ---" in message


def test_input_without_grad_src_is_fine_when_its_gradient_is_not_asked_for():
    a = mj.array(np.array([1.0, 2.0]), requires_grad=True)
    b = mj.array(np.array([3.0, 4.0]), requires_grad=True)
    y = mj.code([2], "float64", [a, b], "for (int i = 0; i < 2; ++i) out0_p[i] = in0_p[i] * in1_p[i];",
                grad_src=["for (int i = 0; i < 2; ++i) out0_p[i] = dout_p[i] * in1_p[i];", None])
    assert_close(mj.grad(y.sum(), a), np.array([3.0, 4.0]))
    with pytest.raises(ValueError, match=r"input 1 \(in1\) requires grad but the op has no grad_src"):
        mj.grad(y.sum(), b)


def test_missing_grad_src_is_an_error():
    x = mj.array(np.array([1.0, 2.0]), requires_grad=True)
    y = mj.code([2], "float64", [x], SQUARE)
    with pytest.raises(ValueError, match="no grad_src"):
        mj.grad(y.sum(), x)


@pytest.mark.parametrize("arguments, message", [
    (dict(shape=[2], dtype="float32", cpu_src=""), "cpu_src and cuda_src are both empty"),
    (dict(shape=[2], dtype="float32", cpu_src="x", grad_src=["a", "b"]), "one per input"),
    (dict(shape=[2], dtype="float32", cpu_src="x", data={"not a name": 1}), "not an identifier"),
    (dict(shape=[-1], dtype="float32", cpu_src="x"), "negative"),
    (dict(shape=[[2], [3]], dtype=["float32"], cpu_src="x"), "2 output shapes but 1 output dtypes"),
])
def test_bad_arguments_raise_at_the_call(arguments, message):
    x = mj.array(np.ones(2, dtype=np.float32))
    with pytest.raises((ValueError, TypeError), match=message):
        mj.code(inputs=[x], **arguments)


ROWS_TIMES_TWO = """
for (int64_t row = begin; row < end; ++row) {
  for (int64_t column = 0; column < in0_shape1; ++column) out0(row, column) = in0(row, column) * 2 + row;
  out1(row) = begin;  // which call computed this row
}
"""


def test_cpu_parallel_runs_every_work_item_once_across_calls():
    values = np.random.default_rng(2).standard_normal((301, 7)).astype(np.float32)
    threads = mj.flags.num_threads
    mj.flags.num_threads = 2
    try:
        doubled, begins = mj.code([[301, 7], [301]], ["float32", "int64"], [mj.array(values)], ROWS_TIMES_TWO,
                                  cpu_parallel=301)
        doubled, begins = doubled.numpy(), begins.numpy()
    finally:
        mj.flags.num_threads = threads
    assert_close(doubled, values * 2 + np.arange(301, dtype=np.float32)[:, None], rtol=1e-6)
    assert np.all(begins <= np.arange(301)) and np.all(np.diff(begins) >= 0)
    assert len(np.unique(begins)) > 1  # split into several calls (the thread pool's chunks)


def test_without_cpu_parallel_the_source_runs_once_as_item_zero():
    # The same source as above: without cpu_parallel it is one call with begin 0 and end 1, so only row 0 is
    # written, and the plan of the parallel op above must not be reused for it (or the reverse).
    values = np.ones((5, 3), dtype=np.float32)
    doubled, begins = mj.code([[5, 3], [5]], ["float32", "int64"], [mj.array(values)],
                              ROWS_TIMES_TWO.replace("out1(row) = begin;", "out1(row) = 40 + end;"))
    assert_close(doubled.numpy()[0], np.full(3, 2, dtype=np.float32))
    assert begins.numpy()[0] == 41
    parallel = mj.code([[5, 3], [5]], ["float32", "int64"], [mj.array(values)],
                       ROWS_TIMES_TWO.replace("out1(row) = begin;", "out1(row) = 40 + end;"), cpu_parallel=5)
    assert_close(parallel[0], values * 2 + np.arange(5, dtype=np.float32)[:, None])
    assert np.all(parallel[1].numpy() >= 41)


def test_unknown_data_name_under_cpu_parallel_is_reported_once():
    x = mj.array(np.ones((64, 4), dtype=np.float32))
    source = "for (int64_t row = begin; row < end; ++row) out0(row, 0) = data[\"scale\"];"
    with pytest.raises(RuntimeError, match=r'read data\["scale"\], which is not in its data \(given: shift\)'):
        mj.code([64, 1], "float32", [x], source, data={"shift": 1}, cpu_parallel=64).numpy()


@pytest.mark.parametrize("work_items", [0, -3, 2.5, True, "4"])
def test_cpu_parallel_must_be_a_positive_int(work_items):
    x = mj.array(np.ones(2, dtype=np.float32))
    with pytest.raises(TypeError, match="cpu_parallel must be a positive int"):
        mj.code([2], "float32", [x], "out0_p[0] = 1;", cpu_parallel=work_items)


def test_code_op_kernels_are_cached_like_any_kernel():
    x = mj.array(np.arange(4, dtype=np.float32))
    source = "for (int i = 0; i < 4; ++i) out0_p[i] = in0_p[i] + 0.25f;  // cached-kernel test"
    mj.code([4], "float32", [x], source).numpy()
    mj._core.clear_memory_cache()
    before = mj.stats()
    assert_close(mj.code([4], "float32", [x], source), np.arange(4) + 0.25)
    after = mj.stats()
    assert after["kernels_compiled"] == before["kernels_compiled"]
    assert after["kernels_loaded_from_disk"] == before["kernels_loaded_from_disk"] + 1


def _line_of(marker):
    import pathlib
    for number, line in enumerate(pathlib.Path(__file__).read_text().splitlines(), 1):
        if marker in line and "_line_of" not in line:
            return number
    raise AssertionError(marker)

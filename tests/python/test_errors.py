"""Errors are raised when an op is recorded, at the user's line, as ValueError (or IndexError/TypeError where Python
expects those) with a message naming the problem: malformed index expressions, mismatched shapes, bad dims, bad
dtypes. Each check also verifies that the innermost user frame of the traceback is the line in this file."""
import os
import traceback

import numpy as np
import pytest

import metajit as mj

PACKAGE_DIR = os.path.dirname(os.path.abspath(mj.__file__))


def assert_raised_at_call_site(excinfo, call_text):
    """The innermost traceback frame outside the metajit package is in this file, on the line making the call."""
    frames = [frame for frame in traceback.extract_tb(excinfo.tb)
              if not os.path.abspath(frame.filename).startswith(PACKAGE_DIR + os.sep)]
    assert frames, "no user frame in the traceback"
    last = frames[-1]
    assert os.path.abspath(last.filename) == os.path.abspath(__file__), last
    assert call_text in last.line, (last.line, call_text)


@pytest.fixture
def x():
    return mj.array(np.arange(12, dtype=np.float32).reshape(3, 4))


# ---------------------------------------------------------------------------------------------------- index expressions
def test_incomplete_index_expression(x):
    with pytest.raises(ValueError) as excinfo:
        mj.reindex(x, [3, 4], ["i0+", "i1"])
    message = str(excinfo.value)
    assert 'invalid index expression "i0+"' in message and "expected an operand" in message and "column 4" in message
    assert_raised_at_call_site(excinfo, 'mj.reindex(x, [3, 4], ["i0+", "i1"])')


def test_unknown_name_in_index_expression(x):
    with pytest.raises(ValueError) as excinfo:
        mj.reindex(x, [3, 4], ["j0", "i1"])
    assert "unknown name 'j0'" in str(excinfo.value)
    assert "i0..i1" in str(excinfo.value)  # says what is allowed
    assert_raised_at_call_site(excinfo, 'mj.reindex(x, [3, 4], ["j0", "i1"])')


def test_loop_index_beyond_output_rank(x):
    with pytest.raises(ValueError) as excinfo:
        mj.reindex(x, [3, 4], ["i0", "i5"])
    assert "i5" in str(excinfo.value) and "rank 2" in str(excinfo.value)
    assert_raised_at_call_site(excinfo, 'mj.reindex(x, [3, 4], ["i0", "i5"])')


@pytest.mark.parametrize("indexes,fragment", [
    (["i0", "1.5"], "non-integer literal"),
    (["i0", "xshape7"], "xshape7"),
    (["i0", "@e0(i0)"], "@e0"),
    (["i0 < 1", "i1"], "integer index is required"),
    (["(i0", "i1"], "never closed"),
    (["i0 & 1", "i1"], "did you mean '&&'"),
    (["i0", ""], "empty"),
    (["i0"], "expected 2 index expressions"),
])
def test_other_malformed_reindex_arguments(x, indexes, fragment):
    with pytest.raises(ValueError) as excinfo:
        mj.reindex(x, [3, 4], indexes)
    assert fragment in str(excinfo.value)
    assert_raised_at_call_site(excinfo, "mj.reindex(x, [3, 4], indexes)")


def test_malformed_overflow_condition_and_extra(x):
    with pytest.raises(ValueError, match="non-boolean result") as excinfo:
        mj.reindex(x, [3, 4], ["i0", "i1"], overflow_conditions=["i0 + 1"])
    assert_raised_at_call_site(excinfo, 'overflow_conditions=["i0 + 1"]')
    with pytest.raises(ValueError, match="integer or bool") as excinfo:
        mj.reindex(x, [3, 4], ["@e0(i0)", "i1"], extras=[mj.array(np.zeros(3, np.float32))])
    assert_raised_at_call_site(excinfo, "extras=[mj.array(np.zeros(3, np.float32))]")


def test_malformed_reindex_reduce(x):
    with pytest.raises(ValueError) as excinfo:
        mj.reindex_reduce(x, "add", [3], ["i0 /"])
    assert 'invalid index expression "i0 /"' in str(excinfo.value)
    assert_raised_at_call_site(excinfo, 'mj.reindex_reduce(x, "add", [3], ["i0 /"])')
    with pytest.raises(ValueError, match="unknown reduce op 'average'"):
        mj.reindex_reduce(x, "average", [3], ["i0"])


# ---------------------------------------------------------------------------------------------------- shapes and dims
def test_mismatched_shapes_in_binary_op(x):
    y = mj.array(np.ones((2, 4), np.float32))
    with pytest.raises(ValueError) as excinfo:
        x + y
    message = str(excinfo.value)
    assert "[3, 4]" in message and "[2, 4]" in message and "cannot be broadcast" in message
    assert_raised_at_call_site(excinfo, "x + y")
    with pytest.raises(ValueError, match="cannot be broadcast") as excinfo:
        mj.where(x > 0, x, y)
    assert_raised_at_call_site(excinfo, "mj.where(x > 0, x, y)")


def test_reduction_over_missing_dim(x):
    with pytest.raises(ValueError) as excinfo:
        x.sum(2)
    assert "dim 2 is out of range" in str(excinfo.value) and "rank 2" in str(excinfo.value)
    assert_raised_at_call_site(excinfo, "x.sum(2)")
    with pytest.raises(ValueError, match="dim -3 is out of range"):
        x.max(dim=-3)
    with pytest.raises(ValueError, match="repeated") as excinfo:
        x.mean((1, -1))
    assert_raised_at_call_site(excinfo, "x.mean((1, -1))")


@pytest.mark.parametrize("call,fragment", [
    (lambda x: x.reshape(5, -1), "cannot reshape [3, 4]"),
    (lambda x: x.reshape(-1, -1), "only one dimension can be -1"),
    (lambda x: x.permute(0), "expected 2 dims"),
    (lambda x: x.permute(0, 0), "repeated"),
    (lambda x: x.transpose(0, 2), "out of range"),
    (lambda x: x.broadcast_to(3, 5), "cannot broadcast shape [3, 4] to [3, 5]"),
    (lambda x: mj.broadcast(x, [3, 4, 2], dims=[0]), "cannot broadcast"),
    (lambda x: mj.broadcast(x, [3, 4], dims=[0]), "does not give rank"),
    (lambda x: mj.zeros(2, -1), "negative dimension"),
    (lambda x: mj.reindex(x, [-1, 4], ["i0", "i1"]), "negative dimension"),
], ids=["reshape", "reshape_two_minus_one", "permute_rank", "permute_repeat", "transpose", "broadcast_to",
        "broadcast_extent", "broadcast_rank", "zeros", "reindex_shape"])
def test_invalid_shape_arguments(x, call, fragment):
    with pytest.raises(ValueError) as excinfo:
        call(x)
    assert fragment in str(excinfo.value)
    assert_raised_at_call_site(excinfo, "lambda x: ")  # the innermost user frame is the lambda


# ---------------------------------------------------------------------------------------------------- dtypes and values
def test_dtype_errors(x):
    flags = mj.array(np.array([True, False]))
    with pytest.raises(ValueError, match="neg of a bool tensor"):
        -flags
    with pytest.raises(ValueError, match="sub of two bool tensors"):
        flags - flags
    with pytest.raises(ValueError, match="bitwise_and needs integer or bool operands, got float32") as excinfo:
        x & x
    assert_raised_at_call_site(excinfo, "x & x")
    with pytest.raises(ValueError, match="unknown dtype 'int16'"):
        x.astype("int16")
    with pytest.raises(ValueError, match="uint16 is not supported"):
        mj.array(np.ones(3, np.uint16))
    with pytest.raises(ValueError, match="floating dtype"):
        mj.rand(3, dtype="int32")
    with pytest.raises(ValueError, match="unknown unary op"):
        mj._core.unary("cube", x)
    with pytest.raises(ValueError, match="unknown binary op"):
        mj._core.binary("hypot", x, x)


def test_type_and_value_errors_of_python_protocols(x):
    with pytest.raises(TypeError):
        x + "a"
    with pytest.raises(ValueError, match="exactly one element"):
        x.item()
    with pytest.raises(ValueError, match="one element"):
        float(x)
    with pytest.raises(TypeError, match="0-d"):
        len(mj.array(np.float32(1)))
    with pytest.raises(ValueError, match="step must not be zero"):
        mj.arange(0, 5, 0)
    with pytest.raises(ValueError, match="log level"):
        mj.flags.log = "verbose"


def test_errors_leave_the_graph_usable(x):
    with pytest.raises(ValueError):
        mj.reindex(x, [3, 4], ["i0+", "i1"])
    np.testing.assert_array_equal((x + 1).numpy(), np.arange(12, dtype=np.float32).reshape(3, 4) + 1)


def test_shapes_too_large_for_memory_addresses_are_refused_at_the_call():
    with pytest.raises(ValueError, match="too large") as excinfo:
        mj.zeros(2 ** 40, 2 ** 40)
    assert_raised_at_call_site(excinfo, "mj.zeros(2 ** 40, 2 ** 40)")
    with pytest.raises(ValueError, match="too large"):
        mj.zeros(2 ** 62, dtype="float64")  # 2^65 bytes: the allocation size would wrap around
    with pytest.raises(ValueError, match="too large"):
        mj.array(np.ones((1, 1), np.float32)).broadcast_to(2 ** 31, 2 ** 31, 4)


def test_out_of_memory_at_execution_names_the_op_and_its_line():
    line = traceback.extract_stack()[-1].lineno + 1
    y = mj.zeros(2 ** 48) + 1  # 2^50 bytes: more than any x86-64 address space, even with overcommit
    with pytest.raises(MemoryError) as excinfo:
        y.numpy()
    message = str(excinfo.value)
    assert "cannot allocate" in message and "add float32 [281474976710656]" in message
    assert "bytes in use by metajit" in message
    assert f"{os.path.basename(__file__)}:{line}" in message
    assert not y.is_computed
    np.testing.assert_array_equal((mj.zeros(3) + 1).numpy(), np.ones(3, np.float32))

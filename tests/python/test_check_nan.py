"""METAJIT_CHECK_NAN / mj.flags.check_nan: a NaN or infinity produced by a kernel, a library call or a Code op
raises mj.NonFiniteError naming the op and the user's line; off by default."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import metajit as mj

from conftest import PACKAGE_ROOT, flag_set


def checking():
    return flag_set("check_nan", True)


def line_of(marker):
    for number, line in enumerate(pathlib.Path(__file__).read_text().splitlines(), 1):
        if marker in line and "line_of(" not in line:
            return number
    raise AssertionError(marker)


def test_infinity_from_a_fused_op_names_the_op_and_line():
    x = mj.array(np.array([1.0, 0.0, 2.0], dtype=np.float32))
    with checking():
        y = x.log() * 2 + 1  # LOG OF ZERO
        with pytest.raises(mj.NonFiniteError) as caught:
            y.numpy()
    message = str(caught.value)
    assert "-inf at flat index 1" in message
    assert f"test_check_nan.py:{line_of('# LOG OF ZERO')}" in message
    assert "log" in message  # among the ops fused into the kernel
    assert isinstance(caught.value, FloatingPointError)


def test_nan_already_in_a_user_input_is_named():
    x = mj.array(np.array([1.0, np.nan], dtype=np.float64))
    with checking():
        with pytest.raises(mj.NonFiniteError, match=r"already held NaN at flat index 1"):
            (x * 3).numpy()


def test_code_op_producing_nan():
    x = mj.array(np.ones(4, dtype=np.float32))
    with checking():
        y = mj.code([4], "float32", [x], "for (int i = 0; i < 4; ++i) out0_p[i] = i == 2 ? NAN : in0_p[i];")  # NAN OP
        with pytest.raises(mj.NonFiniteError) as caught:
            y.numpy()
    assert "NaN at flat index 2" in str(caught.value)
    assert f"test_check_nan.py:{line_of('# NAN OP')}" in str(caught.value)


def test_float16_overflow_is_found():
    x = mj.array(np.array([1000.0, 60000.0], dtype=np.float16))
    with checking():
        with pytest.raises(mj.NonFiniteError, match="an infinity at flat index 1"):
            (x * 2).numpy()


def test_finite_values_and_integers_pass_and_check_is_off_by_default():
    assert not mj.flags.check_nan
    x = mj.array(np.array([1.0, 0.0], dtype=np.float32))
    assert np.isneginf(x.log().numpy()[1])  # no check: the value comes back
    with checking():
        np.testing.assert_allclose((x * 2 + 1).numpy(), [3.0, 1.0])
        assert (mj.array(np.array([3, 4])) // 2).numpy().tolist() == [1, 2]


def test_environment_variable_turns_it_on(tmp_path):
    script = "import numpy as np, metajit as mj\nprint(mj.flags.check_nan)\nmj.array(np.zeros(2)).log().numpy()\n"
    environment = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT), METAJIT_CHECK_NAN="1")
    completed = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True,
                               cwd=tmp_path)
    assert completed.stdout.startswith("True")
    assert completed.returncode != 0 and "NonFiniteError" in completed.stderr and "<string>:3" in completed.stderr

"""mj.inspect (kernels without running them) and METAJIT_DUMP_DIR (kernel sources written as they are used)."""
import json
import os
import subprocess
import sys

import numpy as np

import metajit as mj

from conftest import PACKAGE_ROOT, cpu_backend


@cpu_backend
def test_inspect_softmax_lists_kernels_and_runs_nothing():
    x = mj.array(np.random.default_rng(0).normal(size=(8, 16)).astype(np.float32))
    y = x.softmax(1)  # SOFTMAX LINE
    before = mj.stats()
    kernels = mj.inspect(y)
    after = mj.stats()
    assert after["kernels_launched"] == before["kernels_launched"]
    assert after["kernels_compiled"] == before["kernels_compiled"]
    assert not y.is_computed
    assert len(kernels) == 1  # the row's max and sum run once per row inside the normalising kernel
    for kernel in kernels:
        assert kernel.kind == "generated"
        assert len(kernel.key) == 32
        assert 'extern "C" void metajit_kernel' in kernel.source
        assert "metajit prelude" not in kernel.source  # readable: the shared prelude is left out
        assert "metajit prelude" in kernel.full_source
        assert str(kernel).startswith(f"// key: {kernel.key}")
        assert any("test_inspect.py" in line for line in kernel.lines)
    ops = " ".join(op for kernel in kernels for op in kernel.ops)
    assert "reduce_max" in ops and "reduce_add" in ops and "exp" in ops and "div" in ops
    # Now run it: every kernel becomes cached, and the values are right.
    expected = np.exp(x.numpy() - x.numpy().max(1, keepdims=True))
    np.testing.assert_allclose(y.numpy(), expected / expected.sum(1, keepdims=True), rtol=1e-5)
    z = x.softmax(1)
    assert all(kernel.cached and kernel.where == "memory" for kernel in mj.inspect(z))


def test_inspect_shows_each_kernels_ir():
    x = mj.array(np.ones((8, 16), dtype=np.float32))
    kernel, = mj.inspect(x.softmax(1))
    assert kernel.ir.startswith("kernel pointwise over [8, 16]\n"), kernel.ir
    assert "per row:\n  reduce " in kernel.ir  # the row's max and sum, once per row
    assert "= max over r1 < 16" in kernel.ir and "= add over r1 < 16" in kernel.ir
    assert "\nper point (i0 < 8, i1 < 16):\n" in kernel.ir
    assert "  store out0[" in kernel.ir
    assert "fused exp" in kernel.ir


def test_inspect_reports_an_uncompiled_kernel():
    x = mj.array(np.arange(7, dtype=np.float32))
    kernel, = mj.inspect(x * 1234.5 - 0.125)  # a constant no other test uses
    assert kernel.where == "" and not kernel.cached
    assert "1234.5" in kernel.source


@cpu_backend
def test_inspect_code_op_and_library_call():
    x = mj.array(np.ones((4, 4), dtype=np.float32))
    y = mj.code([4], "float32", [x + 1], "for (int i = 0; i < 4; ++i) out0(i) = in0(i, i);")
    kinds = [kernel.kind for kernel in mj.inspect(y)]
    assert kinds == ["generated", "code"]
    code_kernel = mj.inspect(y)[1]
    assert "out0(i) = in0(i, i);" in code_kernel.source
    assert code_kernel.source.startswith("// ... shared prelude")
    if mj.flags.lowering:
        a = mj.array(np.ones((64, 128), dtype=np.float32))
        b = mj.array(np.ones((128, 96), dtype=np.float32))
        kernels = mj.inspect(a @ b)
        assert [kernel.kind for kernel in kernels] == ["library"]
        assert kernels[0].library.startswith("onednn matmul")
        assert "library call" in str(kernels[0])


@cpu_backend
def test_dump_dir_writes_sources_objects_and_index(tmp_path):
    script = (
        "import numpy as np, metajit as mj\n"
        "x = mj.array(np.arange(6, dtype=np.float32))\n"
        "y = (x * 2.5 + 1).exp()  # DUMPED\n"
        "y.numpy()\n"
        "mj.code([6], 'float32', [y], 'for (int i = 0; i < 6; ++i) out0_p[i] = in0_p[i];').numpy()\n")
    environment = dict(os.environ, METAJIT_DUMP_DIR=str(tmp_path / "dump"), PYTHONPATH=str(PACKAGE_ROOT))
    subprocess.run([sys.executable, "-c", script], env=environment, check=True, cwd=tmp_path)
    records = [json.loads(line) for line in (tmp_path / "dump" / "index.jsonl").read_text().splitlines()]
    # Without AVX-512 the exp kernel calls into the runtime support object, which is dumped like a kernel.
    support = [record for record in records
               if (tmp_path / "dump" / record["source"]).read_text().startswith("// metajit runtime support")]
    assert len(support) == (0 if "+avx512f" in mj._core.host_cpu_features() else 1)
    assert len(records) - len(support) == 2
    for record in records:
        source = (tmp_path / "dump" / record["source"]).read_text()
        assert source.startswith("// metajit")
        assert (tmp_path / "dump" / record["object"]).read_bytes()[:4] == b"\x7fELF"
        assert record["origin"] in ("compiled", "disk cache")
    descriptions = [" ".join(record["description"]) for record in records]
    assert any("exp" in text and "<string>:3" in text for text in descriptions)
    assert any("code op created at <string>:5" in text for text in descriptions)

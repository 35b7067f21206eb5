"""The Code op: a C++ kernel written inline, in Jittor's naming (``in0_p``, ``out0_p``, ``in0_shape0``, ...).

See docs/code_op.md for the full C++ surface. The op is never fused; its inputs are computed first and its
source runs once, on one thread, writing every output element itself."""
import numbers

from . import _core
from ._core import Var


def _is_shape(value):
    return isinstance(value, (list, tuple)) and all(isinstance(extent, numbers.Integral) for extent in value)


def code(shape, dtype, inputs, cpu_src="", cpu_header="", cuda_src="", cuda_header="", grad_src=None, data=None,
         cpu_parallel=None):
    """Runs `cpu_src` (C++) on the CPU, or `cuda_src` (CUDA) on the GPU under mj.flags.use_cuda, to compute a new
    Var of `shape` and `dtype` from `inputs`. Give either or both; under use_cuda an op with only `cpu_src` runs
    on the CPU between the GPU kernels (its inputs and outputs are copied), and one with only `cuda_src` cannot
    run without use_cuda.

    Several outputs: pass a list of shapes and a list of dtypes; a list of Vars comes back.
    Inside the source: ``in0_p`` / ``out0_p`` (typed pointers), ``in0_shape0``, ``in0_stride0`` (in elements),
    ``in0_numel``, ``in0_ndim``, ``in0_type``, and a typed accessor ``in0(i, j)`` / ``out0(i, j)``.
    `data` (a dict of numbers) is read as ``data["name"]``; changing its values never recompiles.
    `grad_src` gives one C++ source per input (``None`` or ``""`` for an input without gradient). In it,
    ``dout`` is the incoming gradient, ``pout`` the forward output (``dout0``, ``pout0``, ... with several
    outputs), ``in0`` ... the forward inputs, and ``out0`` the gradient being written.
    `cpu_parallel` (an int n) spreads the CPU source over the threads: it is then called for ranges of n work
    items and must compute exactly items ``[begin, end)`` (say, rows ``begin`` to ``end - 1``), each independently
    of the others. Without it the source runs once, with ``begin`` 0 and ``end`` 1.
    """
    from . import array, _dtype_name
    multiple = isinstance(shape, (list, tuple)) and len(shape) > 0 and all(_is_shape(item) for item in shape)
    if isinstance(shape, Var) or not isinstance(shape, (list, tuple)):
        raise TypeError(f"code: shape must be a list of ints (or a list of shapes), got {type(shape).__name__}")
    shapes = [list(item) for item in shape] if multiple else [list(shape)]
    if not multiple and not _is_shape(shape):
        raise TypeError(f"code: shape must be a list of ints (or a list of shapes), got {shape!r}")
    if multiple:
        if not isinstance(dtype, (list, tuple)):
            dtype = [dtype] * len(shapes)
        dtypes = [_dtype_name(item) for item in dtype]
    else:
        dtypes = [_dtype_name(dtype)]
    if isinstance(inputs, Var):
        inputs = [inputs]
    inputs = [item if isinstance(item, Var) else array(item) for item in inputs]
    if not isinstance(cpu_src, str):
        raise TypeError(f"code: cpu_src must be a string of C++ source, got {type(cpu_src).__name__}")
    if grad_src is None:
        gradient_sources = []
    else:
        if isinstance(grad_src, str):
            grad_src = [grad_src]
        gradient_sources = ["" if item is None else str(item) for item in grad_src]
    data = dict(data or {})
    for name, value in data.items():
        if not isinstance(name, str):
            raise TypeError(f"code: data keys must be strings, got {name!r}")
        if not isinstance(value, numbers.Real):
            raise TypeError(f"code: data[{name!r}] must be a number, got {type(value).__name__}")
    if cpu_parallel is None:
        work_items = 0
    elif isinstance(cpu_parallel, bool) or not isinstance(cpu_parallel, numbers.Integral) or cpu_parallel < 1:
        raise TypeError(f"code: cpu_parallel must be a positive int (the number of work items), got {cpu_parallel!r}")
    else:
        work_items = int(cpu_parallel)
    outputs = _core.code(shapes, dtypes, inputs, cpu_src, cpu_header, cuda_src, cuda_header, gradient_sources,
                         list(data.keys()), [float(value) for value in data.values()], work_items)
    return outputs if multiple else outputs[0]

"""metajit.distributed: training on several processes started by Open MPI's `mpirun -np N python train.py`, with
PyTorch's names (`torch.distributed`). The engine is Open MPI, loaded only when a collective runs in a job of more
than one rank (libraries/collectives.h); a plain `python train.py` is a world of one rank in which every collective
returns its input unchanged at no cost.

    import metajit as mj
    import metajit.distributed as dist
    total = mj.array([float(dist.get_rank())])
    dist.all_reduce(total)                      # in place, as torch.distributed: now 0 + 1 + ... + (N - 1)

PyTorch's collectives (`all_reduce`, `broadcast`, `all_gather`, `reduce_scatter`, ...) write into the tensors they
are given and record no gradient; `metajit.distributed.nn.functional` has the differentiable ones that return new
Vars (the gradient of all_gather is reduce_scatter, and so on).

Every rank must call the same collectives in the same order with the same shapes and dtypes: a rank that does not
makes every rank raise CollectiveMismatchError naming each rank's call and line (at the sync that runs the
collective, since collectives are lazy; see below), and a rank that never arrives
stops the whole job after METAJIT_DISTRIBUTED_TIMEOUT seconds with the rank, collective and line that waited. An
uncaught error on one rank stops every rank (MPI_Abort) instead of leaving the others waiting.

Collectives are lazy, like every other op: each is an entry of the plan that computes its input, run at the next
sync between the kernels that feed it and those that read its result. Every sync also runs the collectives
recorded before it that nothing has read yet, in the order they were recorded, so each rank calls them in program
order; barrier() and the end of the process run any that are left (docs/distributed.md).
"""
import atexit
import os
import sys

from .. import _core
from .._core import Var

CollectiveMismatchError = _core.CollectiveMismatchError


class ReduceOp:
    """torch.distributed.ReduceOp's members; each is also accepted as a string ("sum", "mean", ...)."""
    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    AVG = "mean"


_OPERATIONS = {"sum": "sum", "product": "product", "prod": "product", "min": "min", "max": "max", "mean": "mean",
               "avg": "mean"}
_PACKAGE_DIRECTORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # metajit/


_WORLD = _core.distributed_world()  # fixed for the process's life: mpirun's environment, read once


def _world():
    return _WORLD


def is_available():
    """True where collectives can run: always in a world of one rank; under mpirun when Open MPI loads."""
    return _world()["size"] == 1 or _core.mpi_unavailable_reason() == ""


def unavailable_reason():
    """Why Open MPI cannot be loaded ("" when it can)."""
    return _core.mpi_unavailable_reason()


def nccl_status():
    """Whether NCCL (for CUDA tensors) loads: {"version": "2.32.3", "path": ...} or {"reason": why not}. Needs no
    GPU: the library and a communicator id are checked without one."""
    status = _core.nccl_status()
    if status["reason"]:
        return {"reason": status["reason"]}
    code = status["version"]
    return {"version": f"{code // 10000}.{code // 100 % 100}.{code % 100}", "path": status["path"]}


def is_nccl_available():
    """torch.distributed's name: True where NCCL loads."""
    return "version" in nccl_status()


def is_initialized():
    """The job is set up from mpirun's environment when metajit loads: always True."""
    return True


def init_process_group(backend="mpi", init_method=None, world_size=-1, rank=-1, **_):
    """Accepted for PyTorch programs: the world is already the mpirun job. A world_size or rank that disagrees with
    mpirun's is an error."""
    if backend not in ("mpi", "nccl", "gloo", None):
        raise ValueError(f"init_process_group: unknown backend {backend!r}; metajit uses Open MPI (and NCCL for "
                         f"CUDA tensors), started by mpirun")
    if world_size not in (-1, None) and world_size != get_world_size():
        raise ValueError(f"init_process_group: world_size={world_size}, but mpirun started {get_world_size()} "
                         f"ranks")
    if rank not in (-1, None) and rank != get_rank():
        raise ValueError(f"init_process_group: rank={rank}, but this process is rank {get_rank()}")


def destroy_process_group(group=None):
    """Accepted for PyTorch programs; MPI ends when the process exits."""


def get_rank(group=None):
    return _world()["rank"]


def get_world_size(group=None):
    return _world()["size"]


def get_local_rank():
    """This process's index among the ranks on its machine (OMPI_COMM_WORLD_LOCAL_RANK)."""
    return _world()["local_rank"]


rank, world_size, local_rank = get_rank, get_world_size, get_local_rank  # Jittor-style short names


def _user_line():
    """The caller's file:line outside metajit, which every rank sends with its call (to name mismatches)."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIRECTORY):
        frame = frame.f_back
    if frame is None:
        return ""
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def _check_var(name, tensor):
    if not isinstance(tensor, Var):
        raise TypeError(f"{name}: expected a metajit Var, got {type(tensor).__name__}")


def _operation(name, op):
    key = str(op).lower()
    if key not in _OPERATIONS:
        raise ValueError(f"{name}: unknown op {op!r}; expected one of ReduceOp.SUM, PRODUCT, MIN, MAX, AVG")
    return _OPERATIONS[key]


_CARRIED_AS = {"float16": "float32", "bool": "uint8"}  # dtypes MPI has no type for, and what carries them


def _collective(name, tensor, operation="sum", root=-1, line=""):
    """The pending result of a collective over tensor (a plan entry run at the next sync, between the kernels that
    compute its input and those that read its result; libraries/collective_operation.h). No gradient."""
    if _core.trace_recording_active():  # a replay would skip it on this rank only: a hang, not an error
        raise RuntimeError(f"mj.trace: {name} ({line}) inside a traced function is not replayed yet; call the "
                           "collective outside the traced function (or keep this function untraced)")
    from .._autograd import no_grad
    with no_grad():
        carried = _CARRIED_AS.get(tensor.dtype)
        value = tensor.detach() if carried is None else tensor.detach().astype(carried)
        result = _core.collective(name, value, operation, int(root), line)
        if carried is None:
            return result
        return result != 0 if tensor.dtype == "bool" else result.astype(tensor.dtype)


def _identity(tensor):
    """A new Var with tensor's values and no history: what every collective gives in a world of one rank."""
    return tensor.detach().clone()


def _reduced(tensor, op, name, line):
    """tensor's values reduced over the ranks, as a new pending Var (no gradient)."""
    operation = _operation(name, op)
    if operation == "mean" and tensor.dtype not in ("float16", "float32", "float64"):
        raise TypeError(f"{name}: ReduceOp.AVG needs a floating-point tensor, got {tensor.dtype}")
    if get_world_size() == 1:
        return _identity(tensor)
    result = _collective("all_reduce", tensor, "sum" if operation == "mean" else operation, -1, line)
    return result / get_world_size() if operation == "mean" else result


def _write(tensor, value):
    """tensor.copy_(value) for a collective's fresh result: when shape and dtype agree, tensor takes the result's
    own node (nothing else holds it), which saves copy_'s pass over the whole buffer."""
    from .._autograd import no_grad
    with no_grad():
        if tuple(value.shape) == tuple(tensor.shape) and value.dtype == tensor.dtype:
            tensor._check_writable("copy_")
            tensor._write(value, "copy_")
        else:
            tensor.copy_(value)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Replaces tensor's values with their reduction over every rank (sum, product, min, max or mean), as
    torch.distributed.all_reduce; returns tensor."""
    _check_var("all_reduce", tensor)
    reduced = _reduced(tensor, op, "all_reduce", _user_line())
    if get_world_size() > 1:
        _write(tensor, reduced)
    return tensor


def broadcast(tensor, src=0, group=None, async_op=False):
    """Replaces tensor's values on every rank with rank src's, as torch.distributed.broadcast; returns tensor."""
    _check_var("broadcast", tensor)
    broadcast_value = _broadcast(tensor, src, _user_line())
    if get_world_size() > 1:
        _write(tensor, broadcast_value)
    return tensor


def _broadcast(tensor, src, line):
    if not 0 <= int(src) < get_world_size():
        raise ValueError(f"broadcast at {line}: source rank {src} is not in a world of {get_world_size()} ranks")
    if get_world_size() == 1:
        return _identity(tensor)
    return _collective("broadcast", tensor, "sum", src, line)


def _gathered(tensor, line):
    if get_world_size() == 1:
        return _identity(tensor).unsqueeze(0)
    return _collective("all_gather", tensor, "sum", -1, line)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Fills tensor_list (one Var per rank, each of tensor's shape) with every rank's tensor, rank 0's first."""
    _check_var("all_gather", tensor)
    if len(tensor_list) != get_world_size():
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} entries for a world of "
                         f"{get_world_size()} ranks")
    gathered = _gathered(tensor, _user_line())
    for index, target in enumerate(tensor_list):
        _write(target, gathered[index])
    return tensor_list


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """output_tensor (world size times input's first dimension) receives every rank's input, concatenated."""
    _check_var("all_gather_into_tensor", input_tensor)
    if output_tensor.numel() != input_tensor.numel() * get_world_size():
        raise ValueError(f"all_gather_into_tensor: output has {output_tensor.numel()} elements; it must have the "
                         f"input's {input_tensor.numel()} times the {get_world_size()} ranks")
    gathered = _gathered(input_tensor, _user_line())
    _write(output_tensor, gathered.reshape(list(output_tensor.shape)))
    return output_tensor


def _reduce_scattered(input, op, name, line):
    operation = _operation(name, op)
    if input.ndim == 0 or input.shape[0] % get_world_size():
        raise ValueError(f"{name}: the input's first dimension ({input.shape[0] if input.ndim else 'none'}) "
                         f"must divide into {get_world_size()} equal pieces, one per rank")
    if get_world_size() == 1:
        return _identity(input)
    result = _collective("reduce_scatter", input, "sum" if operation == "mean" else operation, -1, line)
    return result / get_world_size() if operation == "mean" else result


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """output (input's first dimension divided by the world size) receives this rank's piece of the reduction of
    input over every rank."""
    _check_var("reduce_scatter_tensor", input)
    if output.numel() * get_world_size() != input.numel():
        raise ValueError(f"reduce_scatter_tensor: output has {output.numel()} elements; it must have the input's "
                         f"{input.numel()} divided by the {get_world_size()} ranks")
    _write(output, _reduce_scattered(input, op, "reduce_scatter_tensor", _user_line()).reshape(list(output.shape)))
    return output


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """output receives the reduction over every rank of each rank's input_list[this rank]."""
    from .. import stack
    if len(input_list) != get_world_size():
        raise ValueError(f"reduce_scatter: input_list has {len(input_list)} entries for a world of "
                         f"{get_world_size()} ranks")
    _write(output, _reduce_scattered(stack(list(input_list)), op, "reduce_scatter", _user_line())[0])
    return output


def barrier(group=None, async_op=False, device_ids=None):
    """Returns once every rank has called it (and has run the collectives it recorded before)."""
    _core.sync_ordered_nodes()
    _core.collective_barrier(_user_line())


def _finish():
    try:
        _core.sync_ordered_nodes()  # collectives recorded and never read still run, as the other ranks expect
    except BaseException as error:  # the other ranks may wait in them: stop the job rather than hang it
        _core.distributed_abort(f"metajit.distributed: rank {get_rank()} failed running its last collectives at "
                                f"exit: {type(error).__name__}: {error}", 1)
    _core.distributed_finalize()


def _abort_on_uncaught_error(previous_hook):
    def hook(kind, value, traceback):
        previous_hook(kind, value, traceback)
        _core.distributed_abort(f"metajit.distributed: rank {get_rank()} stopped with an uncaught "
                                f"{kind.__name__}; stopping every rank of the job", 1)
    return hook


if _world()["launched"] and _world()["size"] > 1:
    _core.distributed_start()  # Open MPI's start waits for every rank: here, not at a collective one rank skips
    atexit.register(_finish)
    # A rank that dies of an error would otherwise leave its peers waiting in their next collective.
    sys.excepthook = _abort_on_uncaught_error(sys.excepthook)

from . import nn  # noqa: E402,F401  (metajit.distributed.nn.functional: the differentiable collectives)

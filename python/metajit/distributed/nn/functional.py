"""Differentiable collectives (torch.distributed.nn.functional's names): each returns new Vars and records a
gradient that is itself a collective. The gradient of all_reduce (sum) is the all-reduced gradient, of broadcast
the sum of the gradients onto the source rank, of all_gather a reduce-scatter and of reduce_scatter an all-gather.
Like the in-place collectives in metajit.distributed, each is a lazy plan entry run at the next sync, and so are
their gradients, recorded when backward reaches them; every rank must reach them in the same order."""
from ... import stack, zeros_like
from ..._function import Function
from .. import (ReduceOp, _broadcast, _gathered, _operation, _reduce_scattered, _reduced, _user_line, get_rank,
                get_world_size)


class _AllReduce(Function):
    @staticmethod
    def forward(context, tensor, operation, line):
        context.operation, context.line = operation, line
        return _reduced(tensor, operation, "all_reduce", line)

    @staticmethod
    def backward(context, grad):
        if context.operation not in ("sum", "mean"):
            raise NotImplementedError(f"all_reduce with op {context.operation!r} has no gradient here; use sum "
                                      f"or mean")
        return _reduced(grad, context.operation, "all_reduce (gradient)", context.line), None, None


class _Broadcast(Function):
    @staticmethod
    def forward(context, tensor, source, line):
        context.source, context.line = source, line
        return _broadcast(tensor, source, line)

    @staticmethod
    def backward(context, grad):
        total = _reduced(grad, "sum", "broadcast (gradient)", context.line)
        return (total if get_rank() == context.source else zeros_like(total)), None, None


class _AllGather(Function):
    @staticmethod
    def forward(context, tensor, line):
        context.line, context.like = line, tensor
        gathered = _gathered(tensor, line)
        return tuple(gathered[index] for index in range(get_world_size()))

    @staticmethod
    def backward(context, *grads):
        grads = [zeros_like(context.like) if grad is None else grad for grad in grads]  # outputs not used
        return _reduce_scattered(stack(grads), "sum", "all_gather (gradient)", context.line)[0], None


class _ReduceScatter(Function):
    @staticmethod
    def forward(context, operation, line, *inputs):
        context.operation, context.line = operation, line
        return _reduce_scattered(stack(list(inputs)), operation, "reduce_scatter", line)[0]

    @staticmethod
    def backward(context, grad):
        if context.operation not in ("sum", "mean"):
            raise NotImplementedError(f"reduce_scatter with op {context.operation!r} has no gradient here")
        gathered = _gathered(grad, context.line)
        if context.operation == "mean":
            gathered = gathered / get_world_size()
        return (None, None) + tuple(gathered[index] for index in range(get_world_size()))


def all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """The reduction of tensor over every rank, as a new Var with a gradient."""
    return _AllReduce.apply(tensor, _operation("all_reduce", op), _user_line())


def broadcast(tensor, src, group=None):
    """Rank src's tensor on every rank, as a new Var; the gradient sums every rank's onto src."""
    return _Broadcast.apply(tensor, int(src), _user_line())


def all_gather(tensor, group=None):
    """Every rank's tensor, rank 0's first, as a tuple of new Vars with gradients."""
    return _AllGather.apply(tensor, _user_line())


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None):
    """This rank's piece: the reduction over every rank of their input_list[this rank], as a new Var with a
    gradient (output only gives the shape, as in PyTorch's signature)."""
    if len(input_list) != get_world_size():
        raise ValueError(f"reduce_scatter: input_list has {len(input_list)} entries for a world of "
                         f"{get_world_size()} ranks")
    return _ReduceScatter.apply(_operation("reduce_scatter", op), _user_line(), *input_list)

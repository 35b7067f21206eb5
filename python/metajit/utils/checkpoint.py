"""metajit.utils.checkpoint: activation checkpointing with torch.utils.checkpoint's names and semantics.

checkpoint(function, *args) runs function without recording its graph, so the values inside it are not kept for
the backward pass; backward runs function again (from its inputs, with the random generator set back to where it
was, so dropout draws the same mask) and differentiates that. The parameters used inside get their gradients as
usual. The result equals the unchecked function's, gradients included; the cost is a second forward of function
in the backward pass, the gain the memory its activations would have held (issue 45).

checkpoint_sequential(functions, segments, input) checkpoints a Sequential (or a list of modules) in `segments`
pieces, the last one run normally, as PyTorch does.
"""
from .. import _core
from .._autograd import backward_frees_graph, enable_grad, grad
from .._core import Var
from .._function import Function

__all__ = ["checkpoint", "checkpoint_sequential"]


class _Checkpoint(Function):
    @staticmethod
    def forward(context, function, preserve_rng_state, kwargs, *inputs):
        context.function, context.kwargs, context.inputs = function, kwargs, inputs
        context.random_state = _core.random_state() if preserve_rng_state else None
        return function(*inputs, **kwargs)

    @staticmethod
    def backward(context, *output_grads):
        if context.inputs is None:
            raise RuntimeError("checkpoint: backward through a checkpointed function a second time, after the first "
                               "backward freed its inputs; pass retain_graph=True to the first backward")
        now = _core.random_state()
        if context.random_state is not None:
            _core.set_random_state(context.random_state)
        try:
            with enable_grad():
                detached = [value.detach().requires_grad_(value.requires_grad) if isinstance(value, Var) else value
                            for value in context.inputs]
                outputs = context.function(*detached, **context.kwargs)
        finally:
            _core.set_random_state(now)
        if backward_frees_graph():
            # The recomputation just recorded reads the inputs through graph edges. A reference kept here would
            # hold each checkpoint's inputs (and so its output, which reads them) until the step's run ends: the
            # run releases a buffer early only when nothing but the graph holds it (jit/plan/buffer_lifetimes.cc).
            context.inputs = None
        outputs = [outputs] if isinstance(outputs, Var) else list(outputs)
        # One scalar whose gradient is the chain rule for every output at once.
        with enable_grad():
            terms = [(output * output_grad).sum() for output, output_grad in zip(outputs, output_grads)
                     if isinstance(output, Var) and output.requires_grad and output_grad is not None]
        input_grads = [None] * len(detached)
        if not terms:
            return (None, None, None, *input_grads)
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        leaves = _core.gradient_leaves(total)
        grads = grad(total, leaves) if leaves else []
        positions = {value._node_id: index for index, value in enumerate(detached) if isinstance(value, Var)}
        for leaf, value in zip(leaves, grads):
            index = positions.get(leaf._node_id)
            if index is not None:
                input_grads[index] = value
            else:  # a parameter used inside: accumulate as backward() does
                leaf.grad = value if leaf.grad is None else leaf.grad + value
        return (None, None, None, *input_grads)


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), its activations recomputed in the backward pass instead of kept."""
    if context_fn is not None:
        raise NotImplementedError("checkpoint: context_fn (selective checkpointing) is not supported")
    if not any(isinstance(value, Var) and value.requires_grad for value in args):
        # Nothing to differentiate through the inputs; PyTorch (use_reentrant=False) still trains the parameters
        # inside, so run it recorded as usual.
        return function(*args, **kwargs)
    return _Checkpoint.apply(function, preserve_rng_state, kwargs, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """A Sequential (or list of modules) in `segments` checkpointed pieces; the last piece runs normally."""
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if segments <= 0:
        raise ValueError(f"checkpoint_sequential: segments must be positive, got {segments}")
    size = max(1, len(functions) // segments)

    def run(start, end):
        def forward(value):
            for function in functions[start:end]:
                value = function(value)
            return value
        return forward
    start = 0
    for start in range(0, size * (segments - 1), size):
        input = checkpoint(run(start, start + size), input, use_reentrant=use_reentrant, **kwargs)
    return run(start + size if segments > 1 else 0, len(functions))(input)

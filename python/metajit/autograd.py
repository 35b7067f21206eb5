"""mj.autograd: PyTorch's torch.autograd names over metajit's autodiff (python/metajit/_autograd.py), so
`torch.autograd.grad(...)`, `torch.autograd.Function` and `Variable(x)` run with the import changed.

Only argument conventions are translated here; gradients are computed by mj.grad and Var.backward.
"""
from . import _autograd
from ._autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401
from ._core import Var
from ._function import Function  # noqa: F401

__all__ = ["grad", "backward", "Function", "Variable", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled"]


def _sequence(values, what):
    values = [values] if isinstance(values, Var) else list(values)
    for index, value in enumerate(values):
        if not isinstance(value, Var):
            raise TypeError(f"autograd.{what}: element {index} is a {type(value).__name__}, expected a metajit Var")
    return values


def _seeded_total(outputs, grad_outputs, what):
    """One scalar whose gradient is the sum of each output's vector-Jacobian product with its seed."""
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    grad_outputs = [grad_outputs] if isinstance(grad_outputs, Var) else list(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"autograd.{what}: {len(outputs)} outputs but {len(grad_outputs)} grad_outputs")
    total = None
    for output, seed in zip(outputs, grad_outputs):
        if seed is None:
            if output.numel() != 1:
                raise RuntimeError(f"autograd.{what}: grad can be implicitly created only for outputs with one "
                                   f"element; this one has shape {list(output.shape)} (pass grad_outputs)")
            term = output.sum()
        else:
            term = (output * seed).sum()
        total = term if total is None else total + term
    return total


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """d(outputs)/d(inputs) as a tuple of Vars, as torch.autograd.grad. With create_graph the results can be
    differentiated again; without it they are detached. An input the outputs do not depend on gets zeros
    (PyTorch gives None with allow_unused=True, an error without)."""
    if is_grads_batched:
        raise NotImplementedError("autograd.grad: is_grads_batched is not supported")
    outputs = _sequence(outputs, "grad")
    inputs = _sequence(inputs, "grad")
    total = _seeded_total(outputs, grad_outputs, "grad")
    if create_graph:
        results = _autograd.grad(total, inputs)
    else:
        with no_grad():
            results = _autograd.grad(total, inputs)
        results = [result.detach() for result in results]
    return tuple(results)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates into .grad of the leaves, as torch.autograd.backward (tensor.backward for several)."""
    tensors = _sequence(tensors, "backward")
    total = _seeded_total(tensors, grad_tensors, "backward")
    if inputs is not None:
        raise NotImplementedError("autograd.backward: inputs= is not supported; use autograd.grad")
    total.backward(retain_graph=retain_graph)


def Variable(data, requires_grad=False, volatile=False):
    """The pre-0.4 PyTorch wrapper: returns `data` itself (a Var already is what Variable was)."""
    if requires_grad:
        data.requires_grad = True
    return data

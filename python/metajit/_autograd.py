"""Autodiff front end: mj.grad (Jittor style, differentiable results) and PyTorch-style requires_grad,
backward(), .grad, no_grad() and detach(). The gradient rules themselves live in C++ beside each meta-op."""
import contextlib
import functools
import threading
import weakref

from . import _core
from ._core import Var

# Losses that backward() was called on: the next optimizer step computes them in the same fused plan as the
# update, so reading the loss afterwards costs nothing. Weak references: a loss the program dropped is not
# computed, and a loop of backward() calls without optimizer steps (manual updates) keeps no graphs alive.
_pending_outputs = []

# True on a thread while backward() without retain_graph builds its gradients: the graph it walks is freed once
# computed, so a gradient rule may let go of what it kept for this backward (mj.utils.checkpoint's inputs).
_frees_graph = threading.local()


def backward_frees_graph():
    """Whether the gradients being built are backward()'s without retain_graph (the graph is used once)."""
    return getattr(_frees_graph, "value", False)


def _as_list(value):
    if isinstance(value, Var):
        return [value], True
    return list(value), False


def grad(output, inputs, output_grad=None):
    """Gradients of `output` with respect to `inputs` (a Var or a list of Vars), as lazy Vars.

    A non-scalar output is treated as ``output.sum()`` unless `output_grad` seeds the chain rule. Inputs the
    output does not depend on get zeros. The results are differentiable again (under grad mode), so
    ``mj.grad(mj.grad(y, x), x)`` gives second derivatives."""
    inputs_list, single = _as_list(inputs)
    for index, value in enumerate(inputs_list):
        if not isinstance(value, Var):
            raise TypeError(f"grad: input {index} is a {type(value).__name__}, expected a metajit Var")
    if output_grad is not None and not isinstance(output_grad, Var):
        from . import array
        output_grad = array(output_grad, dtype=output.dtype)
    results = _core.grad(output, inputs_list, output_grad)
    return results[0] if single else results


def backward(self, gradient=None, retain_graph=None):
    """Accumulates d(self)/d(leaf) into ``leaf.grad`` for every leaf that requires grad (PyTorch semantics).

    Nothing is computed yet: the gradients are lazy and fuse with whatever reads them (usually the optimizer
    step). `self` must have one element unless `gradient` is given. Unless retain_graph is true, the graph's
    values are freed once they are computed (as PyTorch frees saved tensors): a later backward through the same
    graph after that raises, naming the op."""
    if not self.requires_grad:
        raise RuntimeError("backward: this Var does not require grad (no input it was computed from has "
                           "requires_grad=True)")
    if gradient is None and self.numel() != 1:
        raise RuntimeError(f"backward: grad can be implicitly created only for a Var with one element, this one "
                           f"has shape {tuple(self.shape)}; pass gradient=")
    leaves = _core.gradient_leaves(self)
    outer, _frees_graph.value = backward_frees_graph(), not retain_graph
    try:
        with no_grad():
            grads = grad(self, leaves, gradient) if leaves else []
    finally:
        _frees_graph.value = outer
    if _core.memory_budget():
        _warn_if_over_budget()
    with no_grad():
        for leaf, value in zip(leaves, grads):
            leaf.grad = value if leaf.grad is None else leaf.grad + value
    for hook in list(_post_backward_hooks):
        hook()
    if not retain_graph:
        _core.mark_backward_taken(self)
    defer_sync(self)


_post_backward_hooks = []


def _warn_if_over_budget():
    """Warns (once per calling line, Python's default filter) when backward() under mj.flags.memory_budget
    could not plan the step under it."""
    report = _core.last_recomputation_report()
    if not report["active"] or report["fits"]:
        return
    import warnings
    warnings.warn(
        f"mj.flags.memory_budget: this training step needs about {report['planned_peak_bytes'] / 2**20:.1f} MiB at "
        f"least (parameters, inputs and gradients {report['held_bytes'] / 2**20:.1f} MiB and more), over the budget "
        f"of {report['budget_bytes'] / 2**20:.1f} MiB; recomputing as much as helps. mj.memory_plan_report() has "
        f"the figures (docs/memory.md)", RuntimeWarning, stacklevel=3)


def add_post_backward_hook(hook):
    """Calls hook() at the end of every backward(), once the leaves' .grad are set (DistributedDataParallel
    averages them over the ranks there). Adding the same hook again does nothing."""
    if hook not in _post_backward_hooks:
        _post_backward_hooks.append(hook)


def defer_sync(var):
    """Asks the next optimizer step to compute `var` in its fused plan (running statistics, losses), if the
    program still holds it then."""
    if len(_pending_outputs) >= 64:  # no optimizer steps: forget the Vars that died meanwhile
        _pending_outputs[:] = [reference for reference in _pending_outputs if reference() is not None]
    _pending_outputs.append(weakref.ref(var))
    return var


def take_pending_outputs():
    """The live Vars backward() ran on since the last call (for the optimizer to sync with its update)."""
    outputs = [reference() for reference in _pending_outputs]
    _pending_outputs.clear()
    return [output for output in outputs if output is not None]


def is_grad_enabled():
    return _core.is_grad_enabled()


class set_grad_enabled(contextlib.ContextDecorator):
    """Turns gradient recording on or off (for this thread); works as a call, a context manager or a decorator."""

    def __init__(self, mode):
        self._previous = _core.is_grad_enabled()
        self._mode = bool(mode)
        _core.set_grad_enabled(self._mode)

    def __enter__(self):
        _core.set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        _core.set_grad_enabled(self._previous)
        return False


class no_grad(contextlib.ContextDecorator):
    """Within it, new Vars record no gradient history (evaluation, optimizer updates)."""

    def __enter__(self):
        self._previous = _core.is_grad_enabled()
        _core.set_grad_enabled(False)
        return self

    def __exit__(self, *exc):
        _core.set_grad_enabled(self._previous)
        return False


class enable_grad(contextlib.ContextDecorator):
    """Turns gradient recording back on inside a no_grad region."""

    def __enter__(self):
        self._previous = _core.is_grad_enabled()
        _core.set_grad_enabled(True)
        return self

    def __exit__(self, *exc):
        _core.set_grad_enabled(self._previous)
        return False


def requires_grad_(self, requires_grad=True):
    self.requires_grad = requires_grad
    return self


def assign(self, value):
    """Gives this Var (and every view of its values) `value` in place, computed now; ops recorded before keep
    the old value. A leaf that requires grad stays one. Returns self (Jittor's assign/update)."""
    if not isinstance(value, Var):
        from . import array
        value = array(value, dtype=self.dtype)
    with no_grad():
        self._assign(value)
    return self


def stop_grad(x):
    """Jittor's name for detach(): the same value, with no gradient flowing through it."""
    return x.detach()


# Attached by _var_method_table.py.
VAR_METHODS = {"backward": backward, "requires_grad_": requires_grad_, "assign": assign,
               "update": assign,  # Jittor's name
               "stop_grad": stop_grad}
functools.update_wrapper(backward, backward)

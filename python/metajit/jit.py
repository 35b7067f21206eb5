"""mj.jit.trace (also mj.trace given a function; MegEngine's megengine.jit.trace): a function's lazy graph
recorded once and kept as a plan that later calls replay without Python.

The first call with given argument shapes and dtypes runs the function as usual while the engine records what it
touches (trace/traced_function.h): the Vars it reads (parameters, optimizer state), the Vars it writes in place,
the gradients it sets and the random numbers it draws. Its results and updates are computed in one sync whose
plan is kept. A later call with the same shapes, dtypes and guards does not run the function: the plan runs on
the new arguments and the Vars' current values, random numbers are drawn afresh, and the written Vars, the
gradients and the results get the new values. This module keys and guards the variants; it must not run kernels
itself.

What a replay cannot see is refused or re-traced, never replayed stale:
- reading a value back inside the function (.item(), .numpy(), print, a Python `if` on a Var) raises, naming
  the line;
- a value made inside and kept somewhere other than the results or an in-place update (an attribute, a list)
  raises when the trace is captured, naming the line that made it;
- Python values that shape the graph are guards: the non-Var arguments, the numbers, strings and tuples among the
  function's globals and closure variables, the training flags of the modules it can reach, and the options and
  Python state of the optimizers it can reach; when one changes, the call traces again (a new variant, at most
  `max_variants`);
- values made inside from Python numbers or numpy arrays (mj.array(data)) are constants of the trace: pass data
  that changes as an argument.
"""
import functools

import numpy as np

from . import _core
from ._core import Var

# Python values a guard compares by value.
_GUARDED_TYPES = (bool, int, float, complex, str, bytes, type(None), np.generic)


class TraceError(RuntimeError):
    """A traced function could not be traced or replayed as asked."""


def _flatten(value, vars):
    """The structure of `value` with each Var replaced by its index in `vars` (which it is appended to)."""
    if isinstance(value, Var):
        vars.append(value)
        return ("var", len(vars) - 1)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_flatten(item, vars) for item in value))
    if isinstance(value, dict):
        return ("dict", tuple((key, _flatten(item, vars)) for key, item in value.items()))
    return ("value", value)


def _unflatten(structure, vars):
    kind, content = structure
    if kind == "var":
        return vars[content]
    if kind in ("list", "tuple"):
        items = [_unflatten(item, vars) for item in content]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {key: _unflatten(item, vars) for key, item in content}
    return content


def _hashable(structure):
    try:
        hash(structure)
    except TypeError as error:
        raise TraceError(f"mj.trace: the arguments hold a value that is neither a Var nor hashable ({error}); "
                         "pass Vars, numbers, strings or tuples of them") from None
    return structure


class _Variant:
    def __init__(self, traced, results, hooks):
        self.traced = traced
        self.results = results
        self.hooks = hooks  # Python to run before each replay (an optimizer's scalar pass)


_replay_hooks = None  # while a recording runs: the hooks it collects


def _note_replay_hook(hook):
    """Called during a recording by code whose Python numbers a replay must work out again (optimizers)."""
    if _replay_hooks is not None:
        _replay_hooks.append(hook)


class trace:
    """trace(function, *, max_variants=8), or @trace / @trace(max_variants=...): MegEngine's trace.

    The first call records the function and keeps its plan; later calls with the same argument shapes, dtypes
    and guards replay the plan without running the function's Python (see the module's documentation for what
    is guarded and what is refused). Training steps work: forward, backward and the optimizer update replay
    together, the parameters and optimizer state updated in place. ``trace.enabled = False`` runs every traced
    function as plain Python."""

    enabled = True

    def __init__(self, function=None, *, max_variants=8):
        self._function = function
        self.max_variants = max_variants
        self._variants = {}
        self._last_variant = None
        self.replays = 0
        if function is not None:
            functools.update_wrapper(self, function)

    def __get__(self, instance, owner):
        if instance is None:
            return self
        return functools.partial(self.__call__, instance)

    def __call__(self, *args, **kwargs):
        if self._function is None:  # @trace(max_variants=...)
            if len(args) != 1 or kwargs or not callable(args[0]):
                raise TypeError("trace(...) used as a decorator takes the function")
            self._function = args[0]
            functools.update_wrapper(self, self._function)
            return self
        if not trace.enabled or _core.trace_recording_active():
            return self._function(*args, **kwargs)
        vars = []
        structure = _hashable(_flatten((args, kwargs), vars))
        key = (structure, tuple((tuple(var.shape), var.dtype) for var in vars), self._guards(args, kwargs))
        variant = self._variants.get(key)
        if variant is not None:
            try:
                variant.traced.check(vars)
            except ValueError:  # a Var it reads changed shape or dtype, or went away: trace again
                del self._variants[key]
            else:
                for hook in variant.hooks:
                    hook()
                outputs = variant.traced.replay(vars)
                self.replays += 1
                return _unflatten(variant.results, outputs)
        if len(self._variants) >= self.max_variants:
            raise TraceError(f"mj.trace: {getattr(self._function, '__qualname__', self._function)} was traced "
                             f"{len(self._variants)} times (max_variants={self.max_variants}): its argument "
                             "shapes, dtypes or guarded Python values (numbers among its globals, module "
                             "training flags, optimizer options or step counts) change from call to call")
        from . import sync
        sync([var for var in vars if not var.is_computed])
        global _replay_hooks
        hooks, _replay_hooks = _replay_hooks, []
        recording = _core.TraceRecording()
        try:
            result = self._function(*args, **kwargs)
        except BaseException:
            recording.stop()
            raise
        finally:
            hooks, _replay_hooks = _replay_hooks, hooks
        results = []
        result_structure = _flatten(result, results)
        traced = recording.finish(vars, results)
        self._variants[key] = _Variant(traced, result_structure, hooks)
        self._last_variant = self._variants[key]
        return result

    def dump(self, path, *, input_names=None, output_names=None):
        """Writes the plan of the last traced call as an artifact the C++ runtime runs (MegEngine's dump; see
        mj.export, which traces and dumps in one call). The inputs are the Vars among that call's arguments in
        order, the outputs the Vars it returned; the weights are the values of the Vars it read, as they are now.
        Returns an ExportReport."""
        from ._export import _write
        if self._last_variant is None:
            raise TraceError("trace.dump: call the traced function once (with example inputs) before dump()")
        return _write(self._last_variant.traced, path, input_names, output_names)

    @property
    def variants(self):
        """How many argument signatures and guard values this function has been traced for."""
        return len(self._variants)

    def _guards(self, args, kwargs):
        """The Python values the recorded graph may depend on, compared on every call."""
        function = getattr(self._function, "__func__", self._function)
        values = []
        roots = list(args) + list(kwargs.values())
        code = getattr(function, "__code__", None)
        if code is not None:
            namespace = getattr(function, "__globals__", {})
            for name in code.co_names:
                if name in namespace:
                    values.append((name, namespace[name]))
            for name, cell in zip(code.co_freevars, function.__closure__ or ()):
                try:
                    values.append((name, cell.cell_contents))
                except ValueError:  # an empty cell
                    continue
        bound = getattr(self._function, "__self__", None)
        if bound is not None:
            roots.append(bound)
        guards = []
        for name, value in values:
            if isinstance(value, _GUARDED_TYPES) or (isinstance(value, tuple) and
                                                      all(isinstance(item, _GUARDED_TYPES) for item in value)):
                guards.append((name, value))
            else:
                roots.append(value)
        guards.extend(_object_guards(roots))
        return tuple(guards)


def _object_guards(roots):
    """Training flags of the modules and the Python options and state of the optimizers among `roots` (and the
    modules and optimizers their attributes hold, one level down)."""
    from .nn.module import Module
    from .optim.optimizer import Optimizer
    guards = []
    seen = set()
    candidates = list(roots)
    for root in roots:
        if isinstance(root, (Module, Optimizer)):
            continue
        attributes = getattr(root, "__dict__", None)
        if isinstance(attributes, dict):
            candidates.extend(value for value in attributes.values() if isinstance(value, (Module, Optimizer)))
    for candidate in candidates:
        if id(candidate) in seen:
            continue
        seen.add(id(candidate))
        if isinstance(candidate, Module):
            guards.append(("training", tuple(module.training for module in candidate.modules())))
        elif isinstance(candidate, Optimizer):
            guards.append(("optimizer", _optimizer_guard(candidate)))
    return guards


def _optimizer_guard(optimizer):
    """An optimizer whose scalars a replay works out again (Optimizer._replays_scalars) is guarded by what
    shapes its graph: which state entries exist and which options are zero; any other by every value."""
    structural = optimizer._replays_scalars
    options = []
    for group in optimizer.param_groups:
        options.append(tuple(sorted((name, _guard_value(value, structural)) for name, value in group.items()
                                    if name != "params")))
    state = []
    for param, values in optimizer.state.items():
        state.append(tuple(sorted((name, _guard_value(value, structural)) for name, value in values.items())))
    return tuple(options), tuple(state)


def _guard_value(value, structural):
    if isinstance(value, Var):  # its values are read at replay
        return ("Var", tuple(value.shape), value.dtype)
    if isinstance(value, (list, tuple)):
        return tuple(_guard_value(item, structural) for item in value)
    if structural and isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == 0
    return value

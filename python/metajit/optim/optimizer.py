"""Optimizer: the base class of metajit's optimizers (PyTorch's interface, Jittor's fused step).

A step builds every parameter's new value and new optimizer state lazily under no_grad, then computes all of
them with one mj.sync together with the gradients and the pending outputs (losses that backward() ran on,
BatchNorm running statistics), so the backward pass and the update run as one fused plan; only then are the
new values assigned to the parameters. ``step(loss)`` (Jittor style) first does zero_grad() and
loss.backward().

A Var computed from a parameter before step() but first read after it (logits kept for an accuracy metric)
still reads the old values, as in PyTorch: the parameter is rebound to its new value, the old node is
untouched (docs/mutation.md). Passing it to mj._autograd.defer_sync(var) computes it in the step's plan.

Hyper-parameters and step-dependent factors (learning rate, bias corrections) enter the kernels as 0-d Var
inputs rather than constants, so changing the learning rate or counting steps compiles no new kernels.
Subclasses must not read values back to the host inside _update (that would split the fused plan) nor put
hyper-parameters into kernels as constants.
"""
import numpy as np

from .. import _autograd, _core
from .._core import Var


class _ParameterState:
    """optimizer.state: per-parameter state dicts keyed by the parameter object itself.

    Vars compare elementwise and hash by their graph node, so this mapping keys by identity instead."""

    def __init__(self):
        self._entries = {}  # id(param) -> (param, state dict)

    def __getitem__(self, param):
        if id(param) not in self._entries:
            self._entries[id(param)] = (param, {})
        return self._entries[id(param)][1]

    def __setitem__(self, param, value):
        self._entries[id(param)] = (param, value)

    def __contains__(self, param):
        return id(param) in self._entries

    def __len__(self):
        return len(self._entries)

    def __iter__(self):
        return (param for param, _ in self._entries.values())

    def get(self, param, default=None):
        entry = self._entries.get(id(param))
        return default if entry is None else entry[1]

    def items(self):
        return list(self._entries.values())

    def clear(self):
        self._entries.clear()


class Optimizer:
    """Base class: holds param_groups (each a dict with 'params' and its options) and per-parameter state.

    params: an iterable of Vars, or of dicts each with a 'params' entry and options overriding `defaults`.
    Subclasses implement _update(group, param, grad, state, scalar) returning the parameter's new value."""

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.state = _ParameterState()
        self.param_groups = []
        if isinstance(params, Var):
            raise TypeError("params argument given to the optimizer should be an iterable of Vars or dicts, but "
                            "got a single Var (wrap it in a list)")
        if isinstance(params, dict):
            raise TypeError("params argument given to the optimizer should be an iterable of Vars or dicts, but "
                            "got a dict (wrap the parameter group in a list)")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        """Adds a group of parameters with its own options (missing options come from the defaults)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        group = dict(param_group)
        if "params" not in group:
            raise ValueError("a parameter group needs a 'params' entry")
        params = group["params"]
        params = [params] if isinstance(params, Var) else list(params)
        if params and all(isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str)
                          for entry in params):
            # PyTorch also takes named_parameters(): the names are kept in the group (and its state dict).
            group["param_names"] = [name for name, _ in params]
            params = [param for _, param in params]
        for index, param in enumerate(params):
            if not isinstance(param, Var):
                raise TypeError(f"optimizer can only optimize metajit Vars, but parameter {index} of the group is "
                                f"a {type(param).__name__}")
            if not param.is_leaf:
                raise ValueError(f"can't optimize a non-leaf Var (parameter {index} of the group is computed from "
                                 "Vars that require grad); use a leaf created with requires_grad=True")
            if not param.dtype.startswith("float"):
                raise TypeError(f"optimizer can only optimize floating-point Vars, parameter {index} has dtype "
                                f"{param.dtype}")
        if len({id(param) for param in params}) != len(params):
            raise ValueError("optimizer parameter group contains the same parameter more than once")
        existing = {id(param) for other in self.param_groups for param in other["params"]}
        if existing & {id(param) for param in params}:
            raise ValueError("some parameters appear in more than one parameter group")
        for name, default in self.defaults.items():
            group.setdefault(name, default)
        group["params"] = params
        self._check_group(group)
        self.param_groups.append(group)

    def _check_group(self, group):
        """Validates a group's options; subclasses raise ValueError naming the bad option."""
        if group.get("lr", 0) < 0:
            raise ValueError(f"Invalid learning rate: {group['lr']}")

    def zero_grad(self, set_to_none=True):
        from .. import zeros_like
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is not None:
                    param.grad = None if set_to_none else zeros_like(param)

    def step(self, loss=None):
        """Updates the parameters from their .grad.

        step(loss) with a Var does zero_grad(), loss.backward() and the update (Jittor style); a callable is a
        PyTorch closure that recomputes the loss (it should call backward itself). Returns the loss."""
        if loss is not None:
            if isinstance(loss, Var):
                self.zero_grad()
                loss.backward()
            elif callable(loss):
                with _autograd.enable_grad():
                    loss = loss()
            else:
                raise TypeError(f"step() expects a loss Var or a closure, got {type(loss).__name__}")
        from .. import sync
        _average_over_ranks(self.param_groups)
        assignments = []
        computed = []
        tracing = _core.trace_recording_active()
        updated = []
        with _autograd.no_grad():
            for group_index, group in enumerate(self.param_groups):
                scalars = {}
                for param in group["params"]:
                    grad = param.grad
                    if grad is None:
                        continue
                    if tuple(grad.shape) != tuple(param.shape):
                        raise ValueError(f"gradient of shape {tuple(grad.shape)} does not match its parameter of "
                                         f"shape {tuple(param.shape)}")
                    state = self.state[param]
                    before = dict(state) if tracing else None
                    if tracing and self._replays_scalars:
                        scalar = _TracedScalars(self, param)
                        updated.append((group_index, param))
                    else:
                        scalar = _ScalarCache(scalars, param.dtype)
                    new_value = self._update(group, param, grad, state, scalar)
                    if tracing:
                        _keep_state_vars(before, state)
                    assignments.append((param, new_value))
                    computed.append(grad)
                    computed.extend(value for value in state.values() if isinstance(value, Var))
        if tracing and self._replays_scalars:
            from .. import jit
            jit._note_replay_hook(lambda: self._replay_scalars(updated))
        computed.extend(_autograd.take_pending_outputs())
        if tracing:
            # One plan for the backward pass, the updates and the pending outputs; the parameters are then rebound
            # to their computed new values (nothing is copied), which mj.trace records as their writes.
            sync([value for _, value in assignments] + computed)
            for param, value in assignments:
                param.assign(value)
            return loss
        # The parameters take their (lazy) new values first, so in the one plan that computes the backward pass,
        # the updates and the pending outputs, each old value is held by the graph alone and its buffer goes as
        # soon as its update has read it (jit/plan/buffer_lifetimes.h): the step never holds every parameter
        # twice, as PyTorch's in-place updates never do. Should the plan fail, the parameters keep the updates'
        # lazy values, and reading them raises the same error.
        params = [param for param, _ in assignments]
        with _autograd.no_grad():
            for param, value in assignments:
                param._write(value, "assign")
        # The new values are the parameters' own now: another handle on one would be a value the user holds,
        # stored by a kernel output of its own.
        assignments = new_value = value = None
        sync(params + computed)
        return loss

    def _update(self, group, param, grad, state, scalar):
        raise NotImplementedError(f"{type(self).__name__} does not implement _update")

    # Whether mj.trace may replay this optimizer's step with its Python numbers (the learning rate, step counts,
    # bias corrections) worked out again before each replay by running _update over stand-ins (_Phantom): true
    # where the update's graph depends on options and state only through which state entries exist and whether
    # options are zero. Otherwise every change of an option or of Python state traces again.
    _replays_scalars = False

    def _replay_scalars(self, updated):
        """Before a replay of a traced step: advances the Python state (step counts) and gives the 0-d inputs
        the values this step's update would have given them, as step() does, without recording anything."""
        with _autograd.no_grad():
            for group_index, param in updated:
                stand_in = _Phantom()
                self._update(self.param_groups[group_index], stand_in, stand_in, _ScalarPassState(self.state[param]),
                             _TracedScalars(self, param))

    # ------------------------------------------------------------------ state dicts

    def state_dict(self):
        """PyTorch's layout: {'state': {index: {...}}, 'param_groups': [{options..., 'params': [indices]}]}.
        Parameters are numbered in group order."""
        index_of = {}
        groups = []
        for group in self.param_groups:
            indices = []
            for param in group["params"]:
                index_of.setdefault(id(param), len(index_of))
                indices.append(index_of[id(param)])
            packed = {name: value for name, value in group.items() if name != "params"}
            packed["params"] = indices
            groups.append(packed)
        state = {index_of[id(param)]: dict(values) for param, values in self.state.items()
                 if id(param) in index_of and values}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restores options and per-parameter state saved by state_dict() (values may be Vars or numpy arrays)."""
        if "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError("optimizer state dict needs 'state' and 'param_groups' entries")
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(saved_groups)} parameter groups, the optimizer has "
                             f"{len(self.param_groups)}")
        params_by_index = {}
        for number, (saved, group) in enumerate(zip(saved_groups, self.param_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(f"loaded parameter group {number} has {len(saved['params'])} parameters, the "
                                 f"optimizer's has {len(group['params'])}")
            for index, param in zip(saved["params"], group["params"]):
                params_by_index[int(index)] = param
        self.state.clear()
        for index, values in state_dict["state"].items():
            index = int(index)
            if index not in params_by_index:
                raise ValueError(f"loaded state refers to parameter {index}, which no parameter group contains")
            param = params_by_index[index]
            self.state[param] = self._restore_state(param, index, values)
        for saved, group in zip(saved_groups, self.param_groups):
            for name, value in saved.items():
                if name != "params":
                    group[name] = tuple(value) if isinstance(value, list) and name == "betas" else value

    def _restore_state(self, param, index, values):
        """One parameter's loaded state: arrays shaped like the parameter become Vars of its dtype, 0-d values
        (PyTorch's step counter, NAdam's mu_product) become Python numbers."""
        from .. import array
        restored = {}
        for name, value in values.items():
            if isinstance(value, (Var, np.ndarray)) and tuple(value.shape) != ():
                value = value if isinstance(value, Var) else array(value)
                if tuple(value.shape) != tuple(param.shape):
                    raise ValueError(f"state '{name}' of parameter {index} has shape {tuple(value.shape)}, the "
                                     f"parameter has shape {tuple(param.shape)}")
                value = value.astype(param.dtype) if value.dtype != param.dtype else value
            elif isinstance(value, (Var, np.ndarray, np.generic)):
                value = np.asarray(value).item()
                if name == "step":
                    value = int(value)
            restored[name] = value
        return restored

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for index, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {index}")
            for name in sorted(group):
                if name != "params":
                    lines.append(f"    {name}: {group[name]}")
        lines.append(")")
        return "\n".join(lines)


class _ScalarCache:
    """0-d Var inputs for hyper-parameters: scalar(name, value), one Var per name and value
    within a group and dtype.

    A number baked into a kernel as a constant would make a new kernel whenever it changes; a 0-d Var is
    read from memory, so schedules and bias corrections reuse the compiled kernels. Keying by name (not by
    value) keeps each kernel's inputs the same from step to step even when two factors happen to be equal."""

    def __init__(self, cache, dtype):
        self._cache = cache
        self._dtype = dtype

    def __call__(self, name, value):
        key = (self._dtype, name, float(value))
        if key not in self._cache:
            from .. import array
            self._cache[key] = array(np.asarray(value, dtype=self._dtype))
        return self._cache[key]


class _TracedScalars:
    """scalar(name, value) under mj.trace: one persistent 0-d Var per parameter and name, given `value` outside the
    recording, so a replay reads whatever the latest scalar pass (Optimizer._replay_scalars) put there."""

    def __init__(self, optimizer, param):
        self._store = optimizer.__dict__.setdefault("_trace_scalar_vars", {})
        self._param = param
        self._dtype = param.dtype

    def __call__(self, name, value):
        from .. import array
        key = (id(self._param), name)
        with _core.TraceSuspension():
            value = array(np.asarray(value, dtype=self._dtype))
            var = self._store.get(key)
            if var is None:
                self._store[key] = var = value
            else:
                var.assign(value)
        return var


class _Phantom:
    """A stand-in for every Var during an optimizer's scalar pass: each op on it gives it back."""

    def _same(self, *args, **kwargs):
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _same
    __truediv__ = __rtruediv__ = __neg__ = __pow__ = __rpow__ = _same

    def __getattr__(self, name):
        return self._same


class _ScalarPassState:
    """A parameter's state during the scalar pass: Python numbers are read and written for real (step counts
    advance), Vars read as stand-ins, and Vars assigned are dropped (the replay computes them)."""

    def __init__(self, state):
        self._state = state

    def __getitem__(self, name):
        value = self._state[name]
        return _Phantom() if isinstance(value, Var) else value

    def get(self, name, default=None):
        return self[name] if name in self._state else default

    def __setitem__(self, name, value):
        if not isinstance(value, (Var, _Phantom)):
            self._state[name] = value

    def __contains__(self, name):
        return name in self._state


def _keep_state_vars(before, state):
    """Under mj.trace: a state Var the update replaced by a new one (state["exp_avg"] = ...) keeps its identity
    and takes the new value in place, so a replay, which runs no Python, updates the Var the next call reads."""
    for name, value in state.items():
        old = before.get(name)
        if isinstance(old, Var) and isinstance(value, Var) and value is not old and tuple(old.shape) == \
                tuple(value.shape) and old.dtype == value.dtype:
            old.assign(value)
            state[name] = old
        elif old is None and isinstance(value, Var):
            value.assign(value)  # new state (a first step): the trace updates it, and the next call traces again


def _zeros_buffer(param):
    """A computed zero array shaped like `param`: a computed buffer (unlike a lazy constant) makes the first
    step use the same kernel as every later one."""
    return _filled_buffer(param, 0.0)


def _filled_buffer(param, value):
    """A computed array shaped like `param` holding `value` everywhere (see _zeros_buffer)."""
    from .. import array
    return array(np.full(tuple(param.shape), value, dtype=param.dtype))


def _check_non_negative(group, *names):
    """Raises PyTorch's ValueError for an option of `group` that is below zero."""
    for name in names:
        if group[name] < 0:
            raise ValueError(f"Invalid {name} value: {group[name]}")


def _check_epsilon(group):
    if group["eps"] < 0:
        raise ValueError(f"Invalid epsilon value: {group['eps']}")


def _check_betas(group):
    """Both betas must lie in [0, 1) (PyTorch's messages)."""
    for index, beta in enumerate(group["betas"]):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {index}: {beta}")


def _decayed_parameter_and_gradient(group, param, grad, scalar):
    """Adam's family: the gradient negated with maximize, and weight decay either decoupled (the parameter
    shrinks by lr * weight_decay, AdamW) or as the L2 penalty added to the gradient. Returns (param, grad)."""
    if group["maximize"]:
        grad = -grad
    weight_decay = group["weight_decay"]
    if weight_decay != 0:
        if group.get("decoupled_weight_decay", False):
            param = param * scalar("decay", 1.0 - group["lr"] * weight_decay)
        else:
            grad = grad + scalar("weight_decay", weight_decay) * param
    return param, grad


def _moments(group, state, grad, scalar):
    """The first and second moment estimates of Adam's family, stored back into `state`."""
    beta1, beta2 = group["betas"]
    state["exp_avg"] = scalar("beta1", beta1) * state["exp_avg"] + scalar("one_minus_beta1", 1.0 - beta1) * grad
    state["exp_avg_sq"] = scalar("beta2", beta2) * state["exp_avg_sq"] + \
        scalar("one_minus_beta2", 1.0 - beta2) * grad * grad
    return state["exp_avg"], state["exp_avg_sq"]


def _penalized_gradient(group, param, grad, scalar):
    """The gradient the update follows: negated with maximize, plus the L2 penalty weight_decay * p."""
    if group["maximize"]:
        grad = -grad
    if group["weight_decay"] != 0:
        grad = grad + scalar("weight_decay", group["weight_decay"]) * param
    return grad


def _average_over_ranks(param_groups):
    """Jittor's convenience under mpirun: gradients are averaged over the ranks before the update, unless a
    DistributedDataParallel already averaged them. Averaging values that already agree changes nothing, so a
    program that all-reduces its gradients itself gets the same update."""
    from .. import distributed
    if distributed.get_world_size() == 1:
        return
    from ..nn.parallel.distributed import average_gradients, averaged_parameters
    averaged = averaged_parameters()
    parameters = [param for group in param_groups for param in group["params"]
                  if param.grad is not None and id(param) not in averaged]
    if parameters:
        average_gradients(parameters)


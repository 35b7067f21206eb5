"""nn.Module: the base class of layers and models, with PyTorch's registration rules and traversal API.

Assigning a Parameter to an attribute registers it as a parameter, assigning a Module registers a sub-module, and
register_buffer() declares state that is saved but not trained (running statistics). state_dict() and
load_state_dict() use PyTorch's dotted names, so a state dict converted from PyTorch (tensor -> numpy) loads.

Parameters and buffers are metajit Vars. to()/float()/double()/half() convert parameters in place (``p.data =
p.data.double()``, as PyTorch does): they stay the same leaf objects, so an optimizer built before still holds
them; their gradients are converted too. Buffers are rebound to new Vars, as in PyTorch.
"""
from collections import OrderedDict, namedtuple

from .._core import Var
from .parameter import Parameter, _mark

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _as_var(value, name):
    """A Var from a Var, numpy array or number (for load_state_dict), with an error naming the entry otherwise."""
    import numpy as np
    from .. import array
    if isinstance(value, Var):
        return value
    if isinstance(value, (np.ndarray, np.generic, int, float, bool, list)):
        return array(np.asarray(value))
    raise TypeError(f"load_state_dict: entry '{name}' is a {type(value).__name__}; expected a metajit Var or a "
                    "numpy array")


class Module:
    """Base class for all neural-network modules; subclasses define forward() and assign sub-modules and
    Parameters as attributes in __init__ (after calling super().__init__())."""

    def __init__(self):
        # object.__setattr__ because our __setattr__ needs these dictionaries to exist.
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_next_hook_id", 0)

    # ------------------------------------------------------------------ attribute registration

    def _check_initialised(self):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign to {type(self).__name__} before Module.__init__() is called "
                                 "(call super().__init__() first in __init__)")

    def __setattr__(self, name, value):
        parameters = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            self._check_initialised()
            self._remove_from(name, keep="_parameters")
            parameters[name] = value
        elif parameters is not None and name in parameters:
            if value is not None:
                raise TypeError(f"cannot assign a {type(value).__name__} as parameter '{name}' (nn.Parameter or "
                                "None expected); use nn.Parameter(value) or parameter.assign(value)")
            parameters[name] = None
        elif isinstance(value, Module):
            self._check_initialised()
            self._remove_from(name, keep="_modules")
            self._modules[name] = value
        elif parameters is not None and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign a {type(value).__name__} as child module '{name}' (nn.Module or "
                                "None expected)")
            self._modules[name] = None
        elif parameters is not None and name in self._buffers:
            if value is not None and not isinstance(value, Var):
                raise TypeError(f"cannot assign a {type(value).__name__} as buffer '{name}' (metajit Var or None "
                                "expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _remove_from(self, name, keep):
        self.__dict__.pop(name, None)
        for store in ("_parameters", "_buffers", "_modules"):
            if store != keep:
                self.__dict__[store].pop(name, None)
        if keep != "_buffers":
            self._non_persistent_buffers.discard(name)

    def __getattr__(self, name):
        # Only called when normal lookup fails: parameters, buffers and sub-modules live in their dictionaries.
        for store in ("_parameters", "_buffers", "_modules"):
            values = self.__dict__.get(store)
            if values is not None and name in values:
                return values[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(store, ()):
                del self.__dict__[store][name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    @staticmethod
    def _check_name(name, kind, owner):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if name == "" or "." in name:
            raise KeyError(f"{kind} name can't be empty or contain '.', got '{name}'")
        if hasattr(owner, name) and name not in owner._parameters and name not in owner._buffers and \
                name not in owner._modules:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name, param):
        """Adds a parameter (a Var made by nn.Parameter, or None for an absent optional parameter)."""
        self._check_initialised()
        self._check_name(name, "parameter", self)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot register a {type(param).__name__} as parameter '{name}' (nn.Parameter or None "
                            "expected)")
        self._remove_from(name, keep="_parameters")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Adds state that is not trained: saved in state_dict() unless persistent=False."""
        self._check_initialised()
        self._check_name(name, "buffer", self)
        if tensor is not None and not isinstance(tensor, Var):
            raise TypeError(f"cannot register a {type(tensor).__name__} as buffer '{name}' (metajit Var or None "
                            "expected)")
        self._remove_from(name, keep="_buffers")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name, module):
        """Adds a child module (or None), reachable as an attribute of this name."""
        self._check_initialised()
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module", self)
        self._remove_from(name, keep="_modules")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        """The module at dotted path `target` ('' is self)."""
        module = self
        if target == "":
            return module
        for part in target.split("."):
            if part not in module._modules or module._modules[part] is None:
                raise AttributeError(f"{type(module).__name__} has no submodule '{part}' (looking up '{target}')")
            module = module._modules[part]
        return module

    # ------------------------------------------------------------------ traversal

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, store, prefix, recurse, remove_duplicate):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else \
            [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, store).items():
                if value is None:
                    continue
                if remove_duplicate:
                    # Vars compare elementwise, so deduplicate by identity.
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, parameter in self.named_parameters(recurse=recurse):
            yield parameter

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    # ------------------------------------------------------------------ modes and helpers

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError(f"training mode is expected to be a bool, got {type(mode).__name__}")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for parameter in self.parameters():
            parameter.requires_grad = requires_grad
        return self

    def apply(self, fn):
        """Calls fn(module) on every sub-module (children first) and then on self; returns self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def zero_grad(self, set_to_none=True):
        from .. import zeros_like
        for parameter in self.parameters():
            if parameter.grad is None:
                continue
            parameter.grad = None if set_to_none else zeros_like(parameter)

    def _convert(self, function):
        """Converts every parameter in place and rebinds every buffer to function(var); returns self."""
        for module in self.modules():
            for parameter in module._parameters.values():
                if parameter is not None:
                    converted = function(parameter.data)
                    if converted is not parameter.data and converted.dtype != parameter.dtype:
                        grad = parameter.grad
                        parameter.data = converted
                        if grad is not None:
                            parameter.grad = function(grad)
            for name, buffer in module._buffers.items():
                if buffer is not None:
                    module._buffers[name] = function(buffer)
        return self

    def to(self, *args, device=None, dtype=None, non_blocking=False, memory_format=None):
        """PyTorch's forms: to(dtype), to(device), to(device, dtype), to(tensor) (its dtype), and the keywords.
        A dtype converts floating-point parameters (in place) and buffers (see the module docstring); a device
        ('cpu', 'cuda', mj.device(...)) moves their values, like cpu() / cuda()."""
        from .. import _DTYPE_NAMES, _dtype_name
        from .._core import Var
        from .._device import checked, device as device_type
        for argument in args:
            if isinstance(argument, Var):
                dtype = argument.dtype
            elif isinstance(argument, device_type) or isinstance(argument, int) or \
                    (isinstance(argument, str) and argument not in _DTYPE_NAMES):
                device = argument
            else:
                dtype = argument
        if dtype is not None:
            name = _dtype_name(dtype)
            if not name.startswith("float"):
                raise TypeError(f"Module.to only accepts floating-point dtypes, got {name}")
            self._convert(lambda var: var.astype(name) if var.dtype.startswith("float") and var.dtype != name
                          else var)
        device = checked(device, "Module.to")
        if device is not None:
            return self.cuda() if device.type == "cuda" else self.cpu()
        return self

    def float(self):
        return self.to("float32")

    def double(self):
        return self.to("float64")

    def half(self):
        return self.to("float16")

    def cpu(self):
        """Copies parameter and buffer values held only by the GPU to the host; returns self."""
        for value in self._values():
            value.cpu()
        return self

    def cuda(self, device=None):
        """Copies parameter and buffer values to the GPU now (they would move at the first GPU kernel that reads
        them); returns self. Kernels run on the GPU while mj.flags.use_cuda is set (docs/cuda.md)."""
        for value in self._values():
            value.cuda()
        return self

    def _values(self):
        for module in self.modules():
            for value in list(module._parameters.values()) + list(module._buffers.values()):
                if value is not None:
                    yield value

    # ------------------------------------------------------------------ state dicts

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """An ordered dict from dotted names to parameters and persistent buffers. Without keep_vars the values
        are detached Vars (save or copy them before the next optimizer step if you need that step's values)."""
        if destination is None:
            destination = OrderedDict()
        for name, parameter in self._parameters.items():
            if parameter is not None:
                destination[prefix + name] = parameter if keep_vars else parameter.detach()
        for name, buffer in self._buffers.items():
            if buffer is not None and name not in self._non_persistent_buffers:
                destination[prefix + name] = buffer if keep_vars else buffer.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination, prefix + name + ".", keep_vars)
        return destination

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies values (metajit Vars or numpy arrays) into parameters and buffers by name.

        strict=True raises if keys are missing or unexpected; a shape mismatch always raises. Values are cast
        to each parameter's dtype. assign=True rebinds parameters to the given Vars instead of copying.
        Returns (missing_keys, unexpected_keys)."""
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"load_state_dict expects a dict, got {type(state_dict).__name__}")
        from .. import sync
        targets = OrderedDict()
        for module_prefix, module in self.named_modules(remove_duplicate=False):
            base = module_prefix + "." if module_prefix else ""
            for name, parameter in module._parameters.items():
                if parameter is not None:
                    targets[base + name] = (module, "_parameters", name, parameter)
            for name, buffer in module._buffers.items():
                if buffer is not None and name not in module._non_persistent_buffers:
                    targets[base + name] = (module, "_buffers", name, buffer)
        # Buffers PyTorch fills in when an older checkpoint lacks them (BatchNorm's num_batches_tracked, absent
        # from torchvision's ImageNet weights): set to zero, never reported missing.
        filled = {key for key, (module, store, name, _) in targets.items()
                  if key not in state_dict and name in getattr(module, "_buffers_zeroed_when_missing", ())}
        missing = [key for key in targets if key not in state_dict and key not in filled]
        unexpected = [key for key in state_dict if key not in targets]
        errors = []
        if strict:
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{key}"' for key in unexpected))
            if missing:
                errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{key}"' for key in missing))
        updates = []
        for key, (module, store, name, current) in targets.items():
            if key in filled:
                updates.append((module, store, name, current, current * 0))
                continue
            if key not in state_dict:
                continue
            value = _as_var(state_dict[key], key)
            if tuple(value.shape) != tuple(current.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape {tuple(value.shape)} from "
                              f"checkpoint, the shape in current model is {tuple(current.shape)}")
                continue
            if value.dtype != current.dtype:
                value = value.astype(current.dtype)
            updates.append((module, store, name, current, value))
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" +
                               "\n\t".join(errors))
        # One fused plan for all conversions, then cheap in-place assignments.
        sync([value for *_, value in updates])
        for module, store, name, current, value in updates:
            if assign:
                if store == "_parameters":
                    value = _mark(_detached_leaf(value, current.requires_grad))
                getattr(module, store)[name] = value
            else:
                current.assign(value)
        return _IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------------ calling

    def register_forward_pre_hook(self, hook):
        """hook(module, args) runs before forward; a non-None result replaces args. Returns a handle."""
        return self._add_hook(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook):
        """hook(module, args, output) runs after forward; a non-None result replaces output. Returns a handle."""
        return self._add_hook(self._forward_hooks, hook)

    def _add_hook(self, hooks, hook):
        hook_id = self._next_hook_id
        object.__setattr__(self, "_next_hook_id", hook_id + 1)
        hooks[hook_id] = hook
        return _RemovableHandle(hooks, hook_id)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        for hook in list(self._forward_pre_hooks.values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            result = hook(self, args, output)
            if result is not None:
                output = result
        return output

    # ------------------------------------------------------------------ printing

    def extra_repr(self):
        """One line of this module's settings, shown in repr(); layers override it."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines.extend(extra.split("\n"))
        for name, module in self._modules.items():
            child = repr(module).replace("\n", "\n  ")
            lines.append(f"({name}): {child}")
        if not lines:
            return f"{self._get_name()}()"
        if len(lines) == 1 and not self._modules:
            return f"{self._get_name()}({lines[0]})"
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class _RemovableHandle:
    def __init__(self, hooks, hook_id):
        self._hooks = hooks
        self._id = hook_id

    def remove(self):
        self._hooks.pop(self._id, None)


def _detached_leaf(var, requires_grad):
    leaf = var.detach()
    leaf.requires_grad = bool(requires_grad)
    return leaf

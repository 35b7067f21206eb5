"""nn.Parameter: a Var leaf that a Module registers as a trainable parameter.

metajit Vars are C++ objects with no Python constructor and no instance dictionary, so a Parameter cannot be a
real subclass of Var. Instead ``Parameter(data)`` returns an ordinary Var (a leaf with requires_grad set) and
remembers it in a weak registry; ``isinstance(x, Parameter)`` asks that registry. The marker lives as long as
the Var object does. Values built from a parameter (``p * 2``) are new Vars and are not parameters, as in
PyTorch; ``p.assign(value)`` keeps the same object, so it stays a parameter.
"""
import weakref

from .._core import Var

# id(var) -> weak reference; the callback drops the entry when the Var dies, so a reused id is never mistaken
# for a parameter.
_parameter_ids = {}


def _forget(var_id):
    def callback(_reference):
        _parameter_ids.pop(var_id, None)
    return callback


def _mark(var):
    var_id = id(var)
    _parameter_ids[var_id] = weakref.ref(var, _forget(var_id))
    return var


def _is_parameter(value):
    if not isinstance(value, Var):
        return False
    reference = _parameter_ids.get(id(value))
    return reference is not None and reference() is value


class _ParameterType(type):
    def __instancecheck__(cls, instance):
        return _is_parameter(instance)


class Parameter(metaclass=_ParameterType):
    """Parameter(data=None, requires_grad=True) -> Var.

    `data` is a Var, numpy array, list or number; a Var is used as is when it is a leaf (so ``Parameter(
    mj.randn(3))`` costs no copy), otherwise it is detached first. A Var that another module already holds can
    be shared (weight tying). ``data=None`` gives an empty float32 tensor, as in PyTorch."""

    def __new__(cls, data=None, requires_grad=True):
        from .. import array, zeros
        if data is None:
            var = zeros(0)
        elif isinstance(data, Var):
            var = data if data.is_leaf else data.detach()
        else:
            var = array(data)
        if requires_grad and not var.dtype.startswith("float"):
            raise TypeError(f"Parameter: only floating-point Vars can require gradients, got dtype {var.dtype}")
        var.requires_grad = bool(requires_grad)
        return _mark(var)

"""mj.Function: an op with a hand-written gradient, both written in ordinary (lazy) ops.

Write it PyTorch's way (static ``forward(ctx, ...)`` / ``backward(ctx, *grads)``, ``ctx.save_for_backward``,
``MyOp.apply(x)``) or Jittor's (methods ``execute`` / ``grad`` on ``self``, ``MyOp()(x)``). Because the backward
is made of ops, gradients of gradients work (unlike a Code op's grad_src, which is first-order)."""
from . import _core
from ._core import Var
from ._autograd import no_grad, is_grad_enabled


class Function:
    """Subclass and define ``forward`` and ``backward`` (or Jittor's ``execute`` and ``grad``)."""

    def __init__(self):
        self.saved_tensors = ()
        self.needs_input_grad = ()

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    @classmethod
    def apply(cls, *args, **kwargs):
        return cls()(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        positions = [index for index, value in enumerate(args) if isinstance(value, Var)]
        inputs = [args[index] for index in positions]
        self.needs_input_grad = tuple(isinstance(value, Var) and value.requires_grad for value in args)
        with no_grad():
            outputs = _call(type(self), ("forward", "execute"), self, *args, **kwargs)
        single = isinstance(outputs, Var)
        values = [outputs] if single else list(outputs)
        for index, value in enumerate(values):
            if not isinstance(value, Var):
                raise TypeError(f"{_name(self)}.forward returned a {type(value).__name__} as output {index}; "
                                f"it must return Vars")
        if not is_grad_enabled() or not any(value.requires_grad for value in inputs):
            return outputs
        _release_context_values(self.__dict__)
        argument_count = len(args)

        def backward(output_grads):
            grads = _call(type(self), ("backward", "grad"), self, *output_grads)
            if isinstance(grads, Var) or grads is None:
                grads = (grads,)
            grads = list(grads)
            if len(grads) != argument_count:
                raise ValueError(f"{_name(self)}.backward returned {len(grads)} gradients, but forward took "
                                 f"{argument_count} arguments; return one per argument (None where there is none)")
            result = []
            for index in positions:
                grad = grads[index]
                if grad is not None and not isinstance(grad, Var):
                    raise TypeError(f"{_name(self)}.backward returned a {type(grad).__name__} for argument "
                                    f"{index}; expected a Var or None")
                result.append(grad)
            return result

        wrapped = _core.custom_function(values, inputs, backward, _name(self))
        if single:
            return wrapped[0]
        return tuple(wrapped) if isinstance(outputs, tuple) else wrapped


def _release_context_values(values):
    """The Vars a context keeps for backward do not count as values the user holds (which a sync would store by
    themselves): the backward reads them fused, as it would read them without the context."""
    if isinstance(values, Var):
        values._stop_counting_as_handle()
    elif isinstance(values, dict):
        for value in values.values():
            _release_context_values(value)
    elif isinstance(values, (list, tuple)):
        for value in values:
            _release_context_values(value)


def _name(instance):
    return f"mj.Function {type(instance).__name__}"


def _find(cls, *names):
    for name in names:
        for klass in cls.__mro__:
            if klass is Function:
                break
            if name in klass.__dict__:
                return klass.__dict__[name]
    raise NotImplementedError(f"{cls.__name__} must define {' or '.join(names)}")


def _call(cls, names, instance, *args, **kwargs):
    """Calls the first of `names` defined by the subclass with the instance as `ctx` / `self`, whether it was
    written as a staticmethod (PyTorch) or a plain method (Jittor)."""
    method = _find(cls, *names)
    if isinstance(method, (staticmethod, classmethod)):
        method = method.__func__
    return method(instance, *args, **kwargs)

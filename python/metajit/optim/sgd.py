"""SGD with momentum, dampening, Nesterov momentum and weight decay (torch.optim.SGD's update rule).

The update is built lazily for the base class's fused step; it must not read values back to the host."""
from .. import _core
from .._core import Var
from .optimizer import Optimizer, _zeros_buffer


class SGD(Optimizer):
    """SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False,
    foreach=None, differentiable=False, fused=None).

    Per step: g = grad + weight_decay * p; with momentum, buf = momentum * buf + (1 - dampening) * g (buf = g
    on the first step), g = g + momentum * buf if nesterov else buf; then p = p - lr * g.
    foreach, differentiable and fused are accepted for PyTorch compatibility and change nothing: every step is
    one fused plan already."""

    _replays_scalars = True  # see Optimizer._replays_scalars

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def _check_group(self, group):
        super()._check_group(group)
        if group["momentum"] < 0:
            raise ValueError(f"Invalid momentum value: {group['momentum']}")
        if group["weight_decay"] < 0:
            raise ValueError(f"Invalid weight_decay value: {group['weight_decay']}")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")

    def _update(self, group, param, grad, state, scalar):
        if group["maximize"]:
            grad = -grad
        weight_decay = scalar("weight_decay", group["weight_decay"]) if group["weight_decay"] != 0 else None
        momentum = group["momentum"]
        buffer = keep = take = nesterov = None
        if momentum != 0:
            first = state.get("momentum_buffer") is None
            buffer = _zeros_buffer(param) if first else state["momentum_buffer"]
            # The first step's buf = g is written as 0 * buf + 1 * g so it uses the later steps' kernel.
            keep = scalar("momentum_keep", 0.0 if first else momentum)
            take = scalar("momentum_take", 1.0 if first else 1.0 - group["dampening"])
            if group["nesterov"]:
                nesterov = scalar("momentum", momentum)
        lr = scalar("lr", group["lr"])
        if not isinstance(param, Var):
            return param  # mj.trace's scalar pass (optimizer._Phantom): only the scalar() calls above matter
        # One call records the update's ops (meta_ops/optimizer_updates.h), not one Python call per op.
        param, new_buffer = _core.sgd_update(param, grad, weight_decay, buffer, keep, take, nesterov, lr)
        if momentum != 0:
            state["momentum_buffer"] = new_buffer
        return param

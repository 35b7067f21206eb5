"""Adam and AdamW (torch.optim.Adam / AdamW update rules, including amsgrad and decoupled weight decay).

The update is built lazily for the base class's fused step; it must not read values back to the host."""
import math

from .. import _core
from .._core import Var
from .optimizer import Optimizer, _decayed_parameter_and_gradient, _zeros_buffer


class Adam(Optimizer):
    """Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *, foreach=None,
    maximize=False, capturable=False, differentiable=False, fused=None, decoupled_weight_decay=False).

    Per step t: g = grad + weight_decay * p (L2 penalty; with decoupled_weight_decay, as in AdamW, the weights
    are decayed instead: p = p * (1 - lr * weight_decay)); m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g^2; v_hat = max(v_hat, v) with amsgrad;
    p = p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
    foreach, capturable, differentiable and fused are accepted for PyTorch compatibility and change nothing."""

    _replays_scalars = True  # see Optimizer._replays_scalars

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _check_group(self, group):
        super()._check_group(group)
        if group["eps"] < 0:
            raise ValueError(f"Invalid epsilon value: {group['eps']}")
        beta1, beta2 = group["betas"]
        if not 0.0 <= beta1 < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {beta1}")
        if not 0.0 <= beta2 < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {beta2}")
        if group["weight_decay"] < 0:
            raise ValueError(f"Invalid weight_decay value: {group['weight_decay']}")

    def _update(self, group, param, grad, state, scalar):
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = _zeros_buffer(param)
            state["exp_avg_sq"] = _zeros_buffer(param)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = _zeros_buffer(param)
        state["step"] += 1
        step = state["step"]
        beta1, beta2 = group["betas"]
        param, grad = _decayed_parameter_and_gradient(group, param, grad, scalar)
        scalars = [scalar("beta1", beta1), scalar("one_minus_beta1", 1.0 - beta1), scalar("beta2", beta2),
                   scalar("one_minus_beta2", 1.0 - beta2),
                   scalar("bias_correction2_sqrt", math.sqrt(1.0 - beta2 ** step)), scalar("eps", group["eps"]),
                   scalar("step_size", group["lr"] / (1.0 - beta1 ** step))]
        if group["amsgrad"] and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = _zeros_buffer(param)
        if not isinstance(param, Var):
            return param  # mj.trace's scalar pass (optimizer._Phantom): only the scalar() calls above matter
        # One call records the update's 10-13 ops (meta_ops/optimizer_updates.h): 20 us a parameter less Python.
        param, state["exp_avg"], state["exp_avg_sq"], maximum = _core.adam_update(
            param, grad, state["exp_avg"], state["exp_avg_sq"], state["max_exp_avg_sq"] if group["amsgrad"] else None,
            scalars)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = maximum
        return param


class AdamW(Adam):
    """AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *, maximize=False,
    foreach=None, capturable=False, differentiable=False, fused=None): Adam with decoupled weight decay,
    p = p * (1 - lr * weight_decay) before the Adam update."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

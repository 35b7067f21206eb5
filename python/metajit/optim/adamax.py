"""Adamax (torch.optim.Adamax's update rule: Adam with the infinity norm).

The update is built lazily for the base class's fused step; it must not read values back to the host nor put
hyper-parameters into kernels as constants."""
from .optimizer import (Optimizer, _check_betas, _check_epsilon, _check_non_negative, _penalized_gradient,
                        _zeros_buffer)


class Adamax(Optimizer):
    """Adamax(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *, maximize=False,
    differentiable=False, capturable=False).

    Per step t: g = grad + weight_decay * p; m = b1 * m + (1 - b1) * g; u = max(b2 * u, |g| + eps);
    p = p - lr / (1 - b1^t) * m / u.
    foreach, differentiable and capturable are accepted for PyTorch compatibility and change nothing."""

    _replays_scalars = True  # see Optimizer._replays_scalars

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _check_group(self, group):
        super()._check_group(group)
        _check_epsilon(group)
        _check_betas(group)
        _check_non_negative(group, "weight_decay")

    def _update(self, group, param, grad, state, scalar):
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = _zeros_buffer(param)
            state["exp_inf"] = _zeros_buffer(param)
        state["step"] += 1
        beta1, beta2 = group["betas"]
        grad = _penalized_gradient(group, param, grad, scalar)
        exp_avg = scalar("beta1", beta1) * state["exp_avg"] + scalar("one_minus_beta1", 1.0 - beta1) * grad
        exp_inf = (scalar("beta2", beta2) * state["exp_inf"]).maximum(grad.abs() + scalar("eps", group["eps"]))
        state["exp_avg"], state["exp_inf"] = exp_avg, exp_inf
        step_size = group["lr"] / (1.0 - beta1 ** state["step"])
        return param - scalar("step_size", step_size) * (exp_avg / exp_inf)

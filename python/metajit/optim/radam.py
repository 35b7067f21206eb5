"""RAdam (torch.optim.RAdam's update rule: Adam with a rectified adaptive learning rate).

The update is built lazily for the base class's fused step; it must not read values back to the host nor put
hyper-parameters into kernels as constants. Whether a step is rectified depends only on the step count; both
cases are one kernel whose 0-d inputs switch between them, so the switch compiles nothing new."""
import math

from .optimizer import (Optimizer, _check_betas, _check_epsilon, _check_non_negative,
                        _decayed_parameter_and_gradient, _moments, _zeros_buffer)


class RAdam(Optimizer):
    """RAdam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False, *,
    foreach=None, maximize=False, capturable=False, differentiable=False).

    Per step t: g = grad + weight_decay * p (or p = p * (1 - lr * weight_decay) when decoupled);
    m = b1 * m + (1 - b1) * g; v = b2 * v + (1 - b2) * g^2; m_hat = m / (1 - b1^t);
    rho_inf = 2 / (1 - b2) - 1; rho_t = rho_inf - 2 t b2^t / (1 - b2^t);
    if rho_t > 5: r = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t)),
    p = p - lr * m_hat * r * sqrt(1 - b2^t) / (sqrt(v) + eps); otherwise p = p - lr * m_hat.
    foreach, capturable and differentiable are accepted for PyTorch compatibility and change nothing."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable))

    def _check_group(self, group):
        super()._check_group(group)
        _check_epsilon(group)
        _check_betas(group)
        _check_non_negative(group, "weight_decay")

    def _update(self, group, param, grad, state, scalar):
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = _zeros_buffer(param)
            state["exp_avg_sq"] = _zeros_buffer(param)
        state["step"] += 1
        step = state["step"]
        beta1, beta2 = group["betas"]
        lr = group["lr"]
        param, grad = _decayed_parameter_and_gradient(group, param, grad, scalar)
        exp_avg, exp_avg_sq = _moments(group, state, grad, scalar)
        bias_correction2 = 1.0 - beta2 ** step
        rho_infinity = 2.0 / (1.0 - beta2) - 1.0
        rho = rho_infinity - 2.0 * step * beta2 ** step / bias_correction2
        step_size = scalar("step_size", lr / (1.0 - beta1 ** step))
        if rho > 5.0:
            rectification = math.sqrt((rho - 4.0) * (rho - 2.0) * rho_infinity /
                                      ((rho_infinity - 4.0) * (rho_infinity - 2.0) * rho))
            adaptive_scale, plain_scale = rectification * math.sqrt(bias_correction2), 0.0
        else:
            adaptive_scale, plain_scale = 0.0, 1.0
        if group["eps"] == 0 and adaptive_scale == 0.0:
            # Without eps the adaptive term could be 0 / 0 before rectification starts; leave it out.
            return param - step_size * exp_avg
        # m_hat * (scale / (sqrt(v) + eps) + plain): one kernel for rectified and unrectified steps.
        factor = scalar("adaptive_scale", adaptive_scale) / (exp_avg_sq.sqrt() + scalar("eps", group["eps"])) + \
            scalar("plain_scale", plain_scale)
        return param - step_size * exp_avg * factor

"""NAdam (torch.optim.NAdam's update rule: Adam with Nesterov momentum and momentum decay).

The update is built lazily for the base class's fused step; it must not read values back to the host nor put
hyper-parameters into kernels as constants. The momentum schedule depends only on the step count, so it is
computed on the host (mu_product is a Python number in the state) and enters the kernel as 0-d Var inputs."""
from .optimizer import (Optimizer, _check_betas, _check_epsilon, _check_non_negative,
                        _decayed_parameter_and_gradient, _moments, _zeros_buffer)


class NAdam(Optimizer):
    """NAdam(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
    decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False, differentiable=False).

    Per step t: g = grad + weight_decay * p (or p = p * (1 - lr * weight_decay) when decoupled);
    mu_t = b1 * (1 - 0.5 * 0.96^(t * momentum_decay)); mu_product = mu_1 * ... * mu_t;
    m = b1 * m + (1 - b1) * g; v = b2 * v + (1 - b2) * g^2; d = sqrt(v / (1 - b2^t)) + eps;
    p = p - lr * (1 - mu_t) / (1 - mu_product) * g / d - lr * mu_{t+1} / (1 - mu_product * mu_{t+1}) * m / d.
    foreach, capturable and differentiable are accepted for PyTorch compatibility and change nothing."""

    _replays_scalars = True  # see Optimizer._replays_scalars

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))

    def _check_group(self, group):
        super()._check_group(group)
        _check_epsilon(group)
        _check_betas(group)
        _check_non_negative(group, "weight_decay", "momentum_decay")

    def _update(self, group, param, grad, state, scalar):
        if "step" not in state:
            state["step"] = 0
            state["mu_product"] = 1.0
            state["exp_avg"] = _zeros_buffer(param)
            state["exp_avg_sq"] = _zeros_buffer(param)
        state["step"] += 1
        step = state["step"]
        beta1, beta2 = group["betas"]
        lr = group["lr"]
        param, grad = _decayed_parameter_and_gradient(group, param, grad, scalar)
        momentum_decay = group["momentum_decay"]
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
        mu_product = state["mu_product"] * mu
        state["mu_product"] = mu_product
        exp_avg, exp_avg_sq = _moments(group, state, grad, scalar)
        denominator = (exp_avg_sq / scalar("bias_correction2", 1.0 - beta2 ** step)).sqrt() + \
            scalar("eps", group["eps"])
        gradient_step = lr * (1.0 - mu) / (1.0 - mu_product)
        momentum_step = lr * mu_next / (1.0 - mu_product * mu_next)
        return param - scalar("gradient_step", gradient_step) * (grad / denominator) - \
            scalar("momentum_step", momentum_step) * (exp_avg / denominator)

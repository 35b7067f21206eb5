"""RMSprop (torch.optim.RMSprop's update rule, with momentum and the centered variant).

The update is built lazily for the base class's fused step; it must not read values back to the host nor put
hyper-parameters into kernels as constants."""
from .optimizer import Optimizer, _check_epsilon, _check_non_negative, _penalized_gradient, _zeros_buffer


class RMSprop(Optimizer):
    """RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
    capturable=False, foreach=None, maximize=False, differentiable=False).

    Per step: g = grad + weight_decay * p; v = alpha * v + (1 - alpha) * g^2; with centered,
    a = alpha * a + (1 - alpha) * g and the denominator uses v - a^2; d = sqrt(v or v - a^2) + eps;
    with momentum, buf = momentum * buf + g / d and p = p - lr * buf, else p = p - lr * g / d.
    capturable, foreach and differentiable are accepted for PyTorch compatibility and change nothing."""

    _replays_scalars = True  # see Optimizer._replays_scalars

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                                      weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    def _check_group(self, group):
        super()._check_group(group)
        _check_epsilon(group)
        _check_non_negative(group, "momentum", "weight_decay", "alpha")

    def _update(self, group, param, grad, state, scalar):
        if "step" not in state:
            state["step"] = 0
            state["square_avg"] = _zeros_buffer(param)
        state["step"] += 1
        grad = _penalized_gradient(group, param, grad, scalar)
        alpha = scalar("alpha", group["alpha"])
        one_minus_alpha = scalar("one_minus_alpha", 1.0 - group["alpha"])
        square_avg = alpha * state["square_avg"] + one_minus_alpha * grad * grad
        state["square_avg"] = square_avg
        if group["centered"]:
            previous = state["grad_avg"] if "grad_avg" in state else _zeros_buffer(param)
            grad_avg = alpha * previous + one_minus_alpha * grad
            state["grad_avg"] = grad_avg
            denominator = (square_avg - grad_avg * grad_avg).sqrt() + scalar("eps", group["eps"])
        else:
            denominator = square_avg.sqrt() + scalar("eps", group["eps"])
        if group["momentum"] > 0:
            buffer = state["momentum_buffer"] if "momentum_buffer" in state else _zeros_buffer(param)
            buffer = scalar("momentum", group["momentum"]) * buffer + grad / denominator
            state["momentum_buffer"] = buffer
            return param - scalar("lr", group["lr"]) * buffer
        return param - scalar("lr", group["lr"]) * (grad / denominator)

"""Adadelta (torch.optim.Adadelta's update rule).

The update is built lazily for the base class's fused step; it must not read values back to the host nor put
hyper-parameters into kernels as constants."""
from .optimizer import Optimizer, _check_epsilon, _check_non_negative, _penalized_gradient, _zeros_buffer


class Adadelta(Optimizer):
    """Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
    maximize=False, differentiable=False).

    Per step: g = grad + weight_decay * p; v = rho * v + (1 - rho) * g^2;
    delta = sqrt(u + eps) / sqrt(v + eps) * g; u = rho * u + (1 - rho) * delta^2; p = p - lr * delta.
    foreach, capturable and differentiable are accepted for PyTorch compatibility and change nothing."""

    _replays_scalars = True  # see Optimizer._replays_scalars

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      capturable=capturable, foreach=foreach, differentiable=differentiable))

    def _check_group(self, group):
        super()._check_group(group)
        if not 0.0 <= group["rho"] <= 1.0:
            raise ValueError(f"Invalid rho value: {group['rho']}")
        _check_epsilon(group)
        _check_non_negative(group, "weight_decay")

    def _update(self, group, param, grad, state, scalar):
        if "step" not in state:
            state["step"] = 0
            state["square_avg"] = _zeros_buffer(param)
            state["acc_delta"] = _zeros_buffer(param)
        state["step"] += 1
        grad = _penalized_gradient(group, param, grad, scalar)
        rho = scalar("rho", group["rho"])
        one_minus_rho = scalar("one_minus_rho", 1.0 - group["rho"])
        eps = scalar("eps", group["eps"])
        square_avg = rho * state["square_avg"] + one_minus_rho * grad * grad
        delta = (state["acc_delta"] + eps).sqrt() / (square_avg + eps).sqrt() * grad
        state["square_avg"] = square_avg
        state["acc_delta"] = rho * state["acc_delta"] + one_minus_rho * delta * delta
        return param - scalar("lr", group["lr"]) * delta

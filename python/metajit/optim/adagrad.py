"""Adagrad (torch.optim.Adagrad's update rule, with learning-rate decay and an initial accumulator value).

The update is built lazily for the base class's fused step; it must not read values back to the host nor put
hyper-parameters into kernels as constants. Sparse gradients are not supported (metajit has none)."""
from .optimizer import Optimizer, _check_epsilon, _check_non_negative, _filled_buffer, _penalized_gradient


class Adagrad(Optimizer):
    """Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
    foreach=None, *, maximize=False, differentiable=False, fused=None).

    Per step t: g = grad + weight_decay * p; lr_t = lr / (1 + (t - 1) * lr_decay); sum = sum + g^2 (sum starts
    at the constructor's initial_accumulator_value, for every group, as in PyTorch);
    p = p - lr_t * g / (sqrt(sum) + eps).
    foreach, differentiable and fused are accepted for PyTorch compatibility and change nothing."""

    _replays_scalars = True  # see Optimizer._replays_scalars

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, fused=fused))

    def _check_group(self, group):
        super()._check_group(group)
        _check_epsilon(group)
        _check_non_negative(group, "lr_decay", "weight_decay", "initial_accumulator_value")

    def _update(self, group, param, grad, state, scalar):
        if "step" not in state:
            state["step"] = 0
            # PyTorch starts every accumulator at the constructor's value, whatever a group says.
            state["sum"] = _filled_buffer(param, self.defaults["initial_accumulator_value"])
        state["step"] += 1
        grad = _penalized_gradient(group, param, grad, scalar)
        decayed_lr = group["lr"] / (1.0 + (state["step"] - 1) * group["lr_decay"])
        accumulated = state["sum"] + grad * grad
        state["sum"] = accumulated
        return param - scalar("decayed_lr", decayed_lr) * (grad / (accumulated.sqrt() + scalar("eps", group["eps"])))

"""ASGD (torch.optim.ASGD's update rule: SGD with a decaying step and a running average of the parameters in
state["ax"]).

The update is built lazily for the base class's fused step; it must not read values back to the host nor put
hyper-parameters into kernels as constants (eta and mu change every step, so they are 0-d inputs)."""
from .optimizer import Optimizer, _check_non_negative, _penalized_gradient, _zeros_buffer


class ASGD(Optimizer):
    """ASGD(params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None, maximize=False,
    differentiable=False, capturable=False).

    Per step t: g = grad + weight_decay * p; p = p * (1 - lambd * eta) - eta * g; ax = ax + mu * (p - ax)
    (ax = p while mu is 1); then eta = lr / (1 + lambd * lr * t)^alpha and mu = 1 / max(1, t - t0)."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None, maximize=False,
                 differentiable=False, capturable=False):
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _check_group(self, group):
        super()._check_group(group)
        _check_non_negative(group, "weight_decay")

    def _update(self, group, param, grad, state, scalar):
        if "step" not in state:
            state["step"] = 0
            state["eta"] = float(group["lr"])
            state["mu"] = 1.0
            state["ax"] = _zeros_buffer(param)
        state["step"] += 1
        grad = _penalized_gradient(group, param, grad, scalar)
        eta, mu = state["eta"], state["mu"]
        param = param * scalar("decay", 1.0 - group["lambd"] * eta) - scalar("eta", eta) * grad
        if mu != 1.0:
            state["ax"] = state["ax"] + scalar("mu", mu) * (param - state["ax"])
        else:
            state["ax"] = param
        step = state["step"]
        state["eta"] = group["lr"] / ((1.0 + group["lambd"] * group["lr"] * step) ** group["alpha"])
        state["mu"] = 1.0 / max(1.0, step - group["t0"])
        return param

"""Rprop (torch.optim.Rprop's update rule: resilient backpropagation, steps follow only the gradient's sign).

The update is built lazily for the base class's fused step; it must not read values back to the host nor put
hyper-parameters into kernels as constants."""
from .. import where
from .optimizer import Optimizer, _filled_buffer, _zeros_buffer


class Rprop(Optimizer):
    """Rprop(params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
    maximize=False, differentiable=False).

    Per element: s = sign(g * previous g); the step size grows by etas[1] where s > 0, shrinks by etas[0] where
    s < 0 (clamped to step_sizes); where s < 0 the gradient counts as 0 (no step, and it is remembered as 0);
    p = p - sign(g) * step size."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), capturable=capturable,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable))

    def _check_group(self, group):
        super()._check_group(group)
        minus, plus = group["etas"]
        if not 0.0 < minus < 1.0 < plus:
            raise ValueError(f"Invalid eta values: {minus}, {plus}")

    def _update(self, group, param, grad, state, scalar):
        if "step" not in state:
            state["step"] = 0
            state["prev"] = _zeros_buffer(param)
            state["step_size"] = _filled_buffer(param, group["lr"])
        state["step"] += 1
        if group["maximize"]:
            grad = -grad
        minus, plus = group["etas"]
        smallest, largest = group["step_sizes"]
        agreement = (grad * state["prev"]).sign()
        factor = where(agreement > 0, scalar("eta_plus", plus), where(agreement < 0, scalar("eta_minus", minus),
                                                                      scalar("one", 1.0)))
        step_size = (state["step_size"] * factor).clamp(scalar("step_min", smallest), scalar("step_max", largest))
        grad = where(agreement < 0, scalar("zero", 0.0), grad)
        state["step_size"], state["prev"] = step_size, grad
        return param - grad.sign() * step_size

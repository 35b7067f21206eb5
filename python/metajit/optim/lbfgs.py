"""LBFGS (torch.optim.LBFGS: limited-memory BFGS, with an optional strong-Wolfe line search).

L-BFGS is sequential and data-dependent (every iteration branches on dot products of the whole gradient), so
the search direction, the line search and the curvature history are computed on the host with numpy, in the
parameters' dtype. Each evaluation of the closure is computed with one sync (loss, gradients and pending
outputs together). Parameters change only by being rebound to new Vars (Var.assign), as in the other
optimizers' steps; this file must not write into a parameter's storage in place, and it keeps no Vars in its
state (the history is numpy arrays).
"""

import numpy as np

from .. import _autograd
from .._core import Var
from .optimizer import Optimizer


class LBFGS(Optimizer):
    """LBFGS(params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
    history_size=100, line_search_fn=None).

    step(closure) runs up to max_iter iterations and at most max_eval closure evaluations (default
    max_iter * 5 // 4; it also bounds each line search). The direction comes from the two-loop recursion over
    the last history_size curvature pairs; the step length is lr (the first iteration ever uses
    min(1, 1 / |g|_1) * lr), or the strong-Wolfe line search's with line_search_fn="strong_wolfe". It stops
    early when max |g| <= tolerance_grad, or the step or the change in loss falls below tolerance_change. Only
    one parameter group is supported, as in PyTorch."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))

    def add_param_group(self, param_group):
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    def _check_group(self, group):
        super()._check_group(group)
        if group["line_search_fn"] not in (None, "strong_wolfe"):
            # PyTorch raises this at the first step(); raising here names the mistake where it is made.
            raise ValueError(f"only 'strong_wolfe' is supported as line_search_fn, got {group['line_search_fn']!r}")

    # ------------------------------------------------------------------ host views of the parameters

    @property
    def _params(self):
        return self.param_groups[0]["params"]

    def _flat_dtype(self):
        return np.result_type(*[np.dtype(param.dtype) for param in self._params])

    def _read_values(self):
        """Copies of the parameters' current values on the host."""
        return [np.array(param.numpy(), copy=True) for param in self._params]

    def _assign(self, values):
        """Rebinds every parameter to a new Var holding `values` (the optimizers' update mechanism)."""
        from .. import array
        for param, value in zip(self._params, values):
            param.assign(array(value))

    def _moved(self, values, length, direction):
        """values + length * direction, each piece in its parameter's dtype (PyTorch's p.add_(d, alpha=t))."""
        moved, offset = [], 0
        for value in values:
            piece = direction[offset:offset + value.size].reshape(value.shape).astype(value.dtype, copy=False)
            moved.append(value + np.asarray(length, dtype=value.dtype) * piece)
            offset += value.size
        return moved

    def _evaluate(self, closure):
        """Runs the closure with gradients on; returns (the closure's result, the loss as a float, the flat
        gradient). Loss, gradients and pending outputs are computed in one sync."""
        from .. import sync
        with _autograd.enable_grad():
            result = closure()
        grads = [param.grad for param in self._params if param.grad is not None]
        pending = [result] if isinstance(result, Var) else []
        sync(pending + grads + _autograd.take_pending_outputs())
        dtype = self._flat_dtype()
        pieces = []
        for param in self._params:
            if param.grad is None:
                pieces.append(np.zeros(int(np.prod(param.shape, dtype=np.int64)), dtype=dtype))
            else:
                pieces.append(np.asarray(param.grad.numpy(), dtype=dtype).ravel())
        loss = float(result.item() if isinstance(result, Var) else result)
        return result, loss, np.concatenate(pieces)

    # ------------------------------------------------------------------ the step

    def step(self, closure=None):
        """Runs one L-BFGS optimization (several closure evaluations); returns the closure's first result."""
        if closure is None or isinstance(closure, Var) or not callable(closure):
            raise TypeError("LBFGS.step needs a closure that clears the gradients, computes the loss, calls "
                            "backward() and returns the loss (it is evaluated several times per step)")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size, line_search_fn = group["history_size"], group["line_search_fn"]

        state = self.state[self._params[0]]  # PyTorch keeps the whole state under the first parameter
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        original_result, loss, flat_grad = self._evaluate(closure)
        evaluations = 1
        state["func_evals"] += 1
        if np.abs(flat_grad).max() <= tolerance_grad:
            return original_result

        direction = state.get("d")
        step_length = state.get("t")
        old_dirs = state.get("old_dirs")
        old_steps = state.get("old_stps")
        inverse_curvatures = state.get("ro")
        hessian_diagonal = state.get("H_diag")
        previous_grad = state.get("prev_flat_grad")
        previous_loss = state.get("prev_loss")

        values = self._read_values()
        iteration = 0
        while iteration < max_iter:
            iteration += 1
            state["n_iter"] += 1

            if state["n_iter"] == 1:
                direction = -flat_grad
                old_dirs, old_steps, inverse_curvatures = [], [], []
                hessian_diagonal = 1
            else:
                change_of_grad = flat_grad - previous_grad
                change_of_params = direction * step_length
                curvature = change_of_grad.dot(change_of_params)
                if curvature > 1e-10:  # keep only pairs that leave the inverse Hessian positive definite
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_steps.pop(0)
                        inverse_curvatures.pop(0)
                    old_dirs.append(change_of_grad)
                    old_steps.append(change_of_params)
                    inverse_curvatures.append(1.0 / curvature)
                    hessian_diagonal = curvature / change_of_grad.dot(change_of_grad)
                direction = _two_loop_direction(flat_grad, old_dirs, old_steps, inverse_curvatures,
                                                hessian_diagonal)

            previous_grad = flat_grad.copy()
            previous_loss = loss

            if state["n_iter"] == 1:
                step_length = min(1.0, 1.0 / np.abs(flat_grad).sum()) * lr
            else:
                step_length = lr

            slope = flat_grad.dot(direction)
            if slope > -tolerance_change:  # not a descent direction any more
                break

            line_evaluations = 0
            if line_search_fn is not None:
                start = values

                def objective(length):
                    # Each trial moves from `start`; the parameters are not put back in between (PyTorch does),
                    # since the next trial or the final assignment below sets them anyway.
                    self._assign(self._moved(start, length, direction))
                    _, trial_loss, trial_grad = self._evaluate(closure)
                    return trial_loss, trial_grad

                # The line search may use what is left of this step's evaluation budget.
                loss, flat_grad, step_length, line_evaluations = _strong_wolfe(
                    objective, step_length, direction, loss, flat_grad, slope,
                    max_line_search=max_eval - evaluations)
                values = self._moved(start, step_length, direction)
                self._assign(values)
                optimal = np.abs(flat_grad).max() <= tolerance_grad
            else:
                values = self._moved(values, step_length, direction)
                self._assign(values)
                optimal = False
                if iteration != max_iter:
                    # The last iteration's loss is not needed: the next step() evaluates it anyway.
                    _, loss, flat_grad = self._evaluate(closure)
                    optimal = np.abs(flat_grad).max() <= tolerance_grad
                    line_evaluations = 1
            evaluations += line_evaluations
            state["func_evals"] += line_evaluations

            if iteration == max_iter or evaluations >= max_eval or optimal:
                break
            if np.abs(direction * step_length).max() <= tolerance_change:
                break
            if abs(loss - previous_loss) < tolerance_change:
                break

        state.update(d=direction, t=step_length, old_dirs=old_dirs, old_stps=old_steps, ro=inverse_curvatures,
                     H_diag=hessian_diagonal, prev_flat_grad=previous_grad, prev_loss=previous_loss)
        return original_result

    def _restore_state(self, param, index, values):
        """LBFGS's state is host data (flat numpy vectors, lists of them, numbers), not parameter-shaped Vars."""
        def to_host(value):
            if isinstance(value, (list, tuple)):
                return [to_host(entry) for entry in value]
            if isinstance(value, Var):
                value = value.numpy()
            if isinstance(value, (np.ndarray, np.generic)):
                value = np.array(value)
                return value.item() if value.ndim == 0 else value
            return value

        restored = {name: to_host(value) for name, value in values.items()}
        for name in ("func_evals", "n_iter"):
            if name in restored:
                restored[name] = int(restored[name])
        return restored


def _two_loop_direction(flat_grad, old_dirs, old_steps, inverse_curvatures, hessian_diagonal):
    """-H g for the L-BFGS inverse-Hessian approximation H built from the stored pairs (Nocedal & Wright,
    algorithm 7.4), with hessian_diagonal * I as the initial matrix."""
    count = len(old_dirs)
    alphas = [None] * count
    q = -flat_grad
    for index in range(count - 1, -1, -1):
        alphas[index] = old_steps[index].dot(q) * inverse_curvatures[index]
        q = q - alphas[index] * old_dirs[index]
    r = q * hessian_diagonal
    for index in range(count):
        beta = old_dirs[index].dot(r) * inverse_curvatures[index]
        r = r + old_steps[index] * (alphas[index] - beta)
    return r


def _cubic_minimizer(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2, clipped to `bounds`
    (default: the interval between x1 and x2); the interval's middle when the cubic has no minimum."""
    low, high = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    # numpy scalars: a degenerate bracket gives inf or nan (as PyTorch's tensors do) rather than an exception.
    x1, f1, g1, x2, f2, g2 = (np.float64(value) for value in (x1, f1, g1, x2, f2, g2))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
        discriminant = d1 * d1 - g1 * g2
        if discriminant >= 0:
            d2 = np.sqrt(discriminant)
            if x1 <= x2:
                position = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
            else:
                position = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
            return float(min(max(position, low), high))
    return (low + high) / 2.0


def _strong_wolfe(objective, step, direction, loss, flat_grad, slope, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_line_search=25):
    """Finds a step length meeting the strong Wolfe conditions along `direction` (Nocedal & Wright,
    algorithms 3.5 and 3.6, with cubic interpolation as in minFunc). objective(length) returns the loss and
    flat gradient there. Returns (loss, flat gradient, step length, evaluations)."""
    direction_size = np.abs(direction).max()
    flat_grad = flat_grad.copy()
    new_loss, new_grad = objective(step)
    evaluations = 1
    new_slope = new_grad.dot(direction)

    # Bracketing: grow the step until an interval is known to hold an acceptable one.
    previous_step, previous_loss, previous_grad, previous_slope = 0, loss, flat_grad, slope
    done = False
    iteration = 0
    bracket_slope = None
    while iteration < max_line_search:
        if new_loss > loss + c1 * step * slope or (iteration > 1 and new_loss >= previous_loss):
            bracket, bracket_loss = [previous_step, step], [previous_loss, new_loss]
            bracket_grad, bracket_slope = [previous_grad, new_grad.copy()], [previous_slope, new_slope]
            break
        if abs(new_slope) <= -c2 * slope:
            bracket, bracket_loss, bracket_grad = [step], [new_loss], [new_grad]
            done = True
            break
        if new_slope >= 0:
            bracket, bracket_loss = [previous_step, step], [previous_loss, new_loss]
            bracket_grad, bracket_slope = [previous_grad, new_grad.copy()], [previous_slope, new_slope]
            break
        shortest, longest = step + 0.01 * (step - previous_step), step * 10
        candidate = _cubic_minimizer(previous_step, previous_loss, previous_slope, step, new_loss, new_slope,
                                     bounds=(shortest, longest))
        previous_step, previous_loss, previous_grad, previous_slope = step, new_loss, new_grad.copy(), new_slope
        step = candidate
        new_loss, new_grad = objective(step)
        evaluations += 1
        new_slope = new_grad.dot(direction)
        iteration += 1
    if iteration == max_line_search:
        bracket, bracket_loss, bracket_grad = [0, step], [loss, new_loss], [flat_grad, new_grad]

    # Zoom: shrink the bracket until a point meets both conditions.
    insufficient_progress = False
    low, high = (0, 1) if bracket_loss[0] <= bracket_loss[-1] else (1, 0)
    while not done and iteration < max_line_search:
        if abs(bracket[1] - bracket[0]) * direction_size < tolerance_change:
            break
        step = _cubic_minimizer(bracket[0], bracket_loss[0], bracket_slope[0],
                                bracket[1], bracket_loss[1], bracket_slope[1])
        # A trial too close to an end of the bracket makes little progress: move it inside, at most every
        # other time.
        margin = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - step, step - min(bracket)) < margin:
            if insufficient_progress or step >= max(bracket) or step <= min(bracket):
                if abs(step - max(bracket)) < abs(step - min(bracket)):
                    step = max(bracket) - margin
                else:
                    step = min(bracket) + margin
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        new_loss, new_grad = objective(step)
        evaluations += 1
        new_slope = new_grad.dot(direction)
        iteration += 1
        if new_loss > loss + c1 * step * slope or new_loss >= bracket_loss[low]:
            bracket[high], bracket_loss[high] = step, new_loss
            bracket_grad[high], bracket_slope[high] = new_grad.copy(), new_slope
            low, high = (0, 1) if bracket_loss[0] <= bracket_loss[1] else (1, 0)
        else:
            if abs(new_slope) <= -c2 * slope:
                done = True
            elif new_slope * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_loss[high] = bracket[low], bracket_loss[low]
                bracket_grad[high], bracket_slope[high] = bracket_grad[low], bracket_slope[low]
            bracket[low], bracket_loss[low] = step, new_loss
            bracket_grad[low], bracket_slope[low] = new_grad.copy(), new_slope
    return bracket_loss[low], bracket_grad[low], bracket[low], evaluations

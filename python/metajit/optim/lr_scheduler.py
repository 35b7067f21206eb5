"""Learning-rate schedules with torch.optim.lr_scheduler's names, arguments and semantics.

LambdaLR, MultiplicativeLR, StepLR, MultiStepLR, ConstantLR, LinearLR, ExponentialLR, PolynomialLR,
CosineAnnealingLR, SequentialLR, ChainedScheduler, ReduceLROnPlateau, CyclicLR, OneCycleLR and
CosineAnnealingWarmRestarts. Creating a schedule sets every group's lr to its value at epoch 0 (as PyTorch
does); step() advances one epoch. Like PyTorch's, step() without an epoch updates each group's *current* lr
(the recursive, chainable form), so several schedules on one optimizer compose; step(epoch) (deprecated in
PyTorch) uses the closed form of the epoch where the schedule has one.

Schedules only write param_groups' "lr" (and "momentum" or "betas" for the cyclic ones); they must not touch
parameters or optimizer state. Optimizers read lr as a 0-d kernel input, so a changing learning rate compiles
no new kernels.
"""
import math
import types
import warnings
from bisect import bisect_right
from collections import Counter

from .optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
           "ExponentialLR", "PolynomialLR", "CosineAnnealingLR", "SequentialLR", "ChainedScheduler",
           "ReduceLROnPlateau", "CyclicLR", "OneCycleLR", "CosineAnnealingWarmRestarts"]

_EPOCH_DEPRECATION = ("The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
                      "possible. Please use `scheduler.step()` to step the scheduler.")


def _check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not a metajit Optimizer")


def _per_group(name, optimizer, value):
    """One value per parameter group: a list or tuple must have one entry per group, anything else repeats."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. {name} has "
                             f"{len(value)} values, param_groups has {len(optimizer.param_groups)}.")
        return list(value)
    return [value] * len(optimizer.param_groups)


class LRScheduler:
    """Base class. Subclasses implement get_lr() (the lrs after last_epoch was advanced, usually computed
    from the groups' current lrs) and may implement _get_closed_form_lr() (the lrs at last_epoch from
    base_lrs alone)."""

    _is_initial = False  # True only during the step made by the constructor

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        for index, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError(f"param 'initial_lr' is not specified in param_groups[{index}] when resuming a "
                               "scheduler (last_epoch != -1); load the optimizer's state dict first")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def _current_lrs(self):
        return [group["lr"] for group in self.optimizer.param_groups]

    def get_lr(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement get_lr")

    def get_last_lr(self):
        """The learning rates set by the last step(), one per parameter group."""
        return list(self._last_lr)

    def step(self, epoch=None):
        self._step_count += 1
        if epoch is not None:
            warnings.warn(_EPOCH_DEPRECATION, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = self._current_lrs()

    def state_dict(self):
        """Every attribute except the optimizer (PyTorch's layout)."""
        return {name: value for name, value in self.__dict__.items() if name != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


class _LRScheduler(LRScheduler):
    """PyTorch's older name for LRScheduler."""


class _LambdaSchedule(LRScheduler):
    """Shared by LambdaLR and MultiplicativeLR: one function of the epoch per parameter group. The state dict
    keeps a callable object's attributes, not plain functions (which cannot be saved)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        _check_optimizer(optimizer)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        for function in self.lr_lambdas:
            if not callable(function):
                raise TypeError(f"lr_lambda should be a function, but got {type(function).__name__}")
        super().__init__(optimizer, last_epoch)

    def state_dict(self):
        state = {name: value for name, value in self.__dict__.items() if name not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(function, types.FunctionType) else dict(function.__dict__)
                               for function in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        saved_functions = state_dict.pop("lr_lambdas", [])
        self.__dict__.update(state_dict)
        for function, attributes in zip(self.lr_lambdas, saved_functions):
            if attributes is not None:
                function.__dict__.update(attributes)


class LambdaLR(_LambdaSchedule):
    """lr = initial_lr * lr_lambda(epoch); lr_lambda is a function or a list with one per parameter group."""

    def get_lr(self):
        return [base_lr * function(self.last_epoch) for function, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaSchedule):
    """lr = lr * lr_lambda(epoch) at every step after the first."""

    def get_lr(self):
        if self._is_initial:
            return self._current_lrs()
        return [group["lr"] * function(self.last_epoch)
                for function, group in zip(self.lr_lambdas, self.optimizer.param_groups)]


class StepLR(LRScheduler):
    """lr is multiplied by gamma every step_size epochs: initial_lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        # PyTorch takes any positive number (the nn.Transformer tutorial passes 1.0): epoch // step_size.
        if isinstance(step_size, bool) or not isinstance(step_size, (int, float)) or not step_size > 0:
            raise ValueError(f"StepLR: step_size must be a positive number, got {step_size!r}")
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current_lrs()
        return [lr * self.gamma for lr in self._current_lrs()]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr is multiplied by gamma at each milestone (twice at a milestone listed twice)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return self._current_lrs()
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [lr * factor for lr in self._current_lrs()]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch) for base_lr in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr is multiplied by factor until epoch total_iters, then restored."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._current_lrs()]
        if self.last_epoch != self.total_iters:
            return self._current_lrs()
        return [lr * (1.0 / self.factor) for lr in self._current_lrs()]

    def _get_closed_form_lr(self):
        restored = 1 - self.factor if self.last_epoch >= self.total_iters else 0
        return [base_lr * (self.factor + restored) for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """The factor on lr goes linearly from start_factor to end_factor over total_iters epochs."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in self._current_lrs()]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current_lrs()
        # The ratio of this epoch's factor to the previous one's.
        change = self.end_factor - self.start_factor
        ratio = 1.0 + change / (self.total_iters * self.start_factor + (self.last_epoch - 1) * change)
        return [lr * ratio for lr in self._current_lrs()]

    def _get_closed_form_lr(self):
        progress = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor) * progress)
                for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr is multiplied by gamma every epoch: initial_lr * gamma ** epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return self._current_lrs()
        return [lr * self.gamma for lr in self._current_lrs()]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = initial_lr * (1 - min(epoch, total_iters) / total_iters) ** power."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current_lrs()
        ratio = ((1.0 - self.last_epoch / self.total_iters) /
                 (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [lr * ratio for lr in self._current_lrs()]

    def _get_closed_form_lr(self):
        return [base_lr * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
                for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr follows eta_min + (initial_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2 (SGDR without
    restarts; past T_max it rises again, as PyTorch's does). Stepping applies the ratio of consecutive
    values to the current lr, so it composes with other schedules."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return self._current_lrs()
        if self._step_count == 1 and self.last_epoch > 0:  # resumed at a later epoch
            return self._get_closed_form_lr()
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            # At the bottom of the cosine the ratio below would divide by zero; add the rise instead.
            rise = (1 - math.cos(math.pi / self.T_max)) / 2
            return [lr + (base_lr - self.eta_min) * rise for lr, base_lr in zip(self._current_lrs(), self.base_lrs)]
        ratio = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / \
            (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max))
        return [ratio * (lr - self.eta_min) + self.eta_min for lr in self._current_lrs()]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]


def _check_composable(owner, optimizer, schedulers):
    for index, scheduler in enumerate(schedulers):
        if not hasattr(scheduler, "optimizer"):
            raise TypeError(f"{owner} at index {index} should have `optimizer` as its attribute.")
        if isinstance(scheduler, ReduceLROnPlateau):
            raise ValueError(f"{owner} does not support `ReduceLROnPlateau` scheduler as it requires additional "
                             f"kwargs to be specified when calling `step`, but got one at index {index} in the "
                             "given schedulers sequence.")
        if scheduler.optimizer is not optimizer:
            raise ValueError(f"{owner} expects all schedulers to belong to the same optimizer, but got scheduler "
                             f"{type(scheduler).__name__} at index {index} with a different optimizer.")


class _ScheduleOfSchedules(LRScheduler):
    """State dicts of SequentialLR and ChainedScheduler hold their schedules' state dicts."""

    def state_dict(self):
        state = {name: value for name, value in self.__dict__.items() if name not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [scheduler.state_dict() for scheduler in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        saved = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for scheduler, scheduler_state in zip(self._schedulers, saved):
            scheduler.load_state_dict(scheduler_state)


class SequentialLR(_ScheduleOfSchedules):
    """Runs schedulers[0] until milestones[0], then schedulers[1] (restarted at its epoch 0), and so on."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler, but got no scheduler.")
        _check_composable("SequentialLR", optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got number of schedulers {len(schedulers)} and the "
                             f"number of milestones to be equal to {len(milestones)}")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # The schedulers' constructors each stepped once: start again from the initial lrs, undo those steps,
        # and make only the scheduler in charge at epoch 0 take its first step.
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        self._undo_initial_steps(self)
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def _undo_initial_steps(self, scheduler):
        if hasattr(scheduler, "_schedulers"):
            for inner in scheduler._schedulers:
                self._undo_initial_steps(inner)
        elif hasattr(scheduler, "last_epoch"):
            scheduler.last_epoch -= 1

    def step(self):
        self.last_epoch += 1
        index = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler._update_lr(0)  # the next schedule starts from its epoch 0
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_ScheduleOfSchedules):
    """Steps every scheduler in the list, in order, at each step (their effects compose)."""

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler expects at least one scheduler to be chained, but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        _check_composable("ChainedScheduler", optimizer, schedulers)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = [group["lr"] for group in self._schedulers[-1].optimizer.param_groups]

    def step(self):
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = [group["lr"] for group in self._schedulers[-1].optimizer.param_groups]


class ReduceLROnPlateau(LRScheduler):
    """Multiplies lr by factor when the metric passed to step(metric) has not improved for more than
    `patience` epochs, then waits `cooldown` epochs; lr never goes below min_lr and changes smaller than eps
    are skipped. Improvement is relative or absolute (threshold_mode) by `threshold`, towards lower values in
    mode "min" and higher in mode "max"."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        _check_optimizer(optimizer)
        self.factor = factor
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = self._current_lrs()
        self._set_comparison(mode, threshold, threshold_mode)
        self._reset()

    def _set_comparison(self, mode, threshold, threshold_mode):
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown!")
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def is_better(self, a, best):
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if self.threshold_mode == "rel" else best - self.threshold)
        return a > (best * (1.0 + self.threshold) if self.threshold_mode == "rel" else best + self.threshold)

    def step(self, metrics, epoch=None):
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(_EPOCH_DEPRECATION, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # epochs in cooldown do not count as bad
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = self._current_lrs()

    def _reduce_lr(self):
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(f"The number of param groups in the optimizer ({len(groups)}) differs from when "
                                   f"ReduceLROnPlateau was created ({len(self.min_lrs)}); set `min_lrs` to match.")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, min_lr)
            if old_lr - new_lr > self.eps:
                group["lr"] = new_lr

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_comparison(self.mode, self.threshold, self.threshold_mode)


def _set_momentum(group, use_beta1, momentum):
    """Cyclic schedules drive SGD's momentum, or beta1 for Adam-like optimizers."""
    if use_beta1:
        group["betas"] = (momentum, *group["betas"][1:])
    else:
        group["momentum"] = momentum


def _momentum_option(optimizer):
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")
    return "betas" in optimizer.defaults


class CyclicLR(LRScheduler):
    """Cyclical learning rate (Smith, 2017): lr goes from base_lr up to max_lr over step_size_up steps and
    back over step_size_down, with the amplitude scaled by mode ("triangular": constant, "triangular2":
    halved each cycle, "exp_range": gamma ** iteration) or by scale_fn. With cycle_momentum, momentum (or
    beta1) cycles inversely between max_momentum and base_momentum. Step it after every batch."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None, mode="triangular",
                 gamma=1.0, scale_fn=None, scale_mode="cycle", cycle_momentum=True, base_momentum=0.8,
                 max_momentum=0.9, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._set_scale_mode()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _momentum_option(optimizer)
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for max_value, base_value, group in zip(self.max_momentums, self.base_momentums,
                                                        optimizer.param_groups):
                    _set_momentum(group, self.use_beta1, max_value)
                    group["max_momentum"] = max_value
                    group["base_momentum"] = base_value
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _set_scale_mode(self):
        # The built-in modes fix their scale mode; a custom scale_fn keeps the one given.
        if self._scale_fn_custom is None:
            self.scale_mode = "iterations" if self.mode == "exp_range" else "cycle"

    def scale_fn(self, x):
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        position = 1.0 + self.last_epoch / self.total_size - cycle  # in [0, 1) within the cycle
        if position <= self.step_ratio:
            scale_factor = position / self.step_ratio
        else:
            scale_factor = (position - 1) / (self.step_ratio - 1)
        amplitude = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base_lr + (max_lr - base_lr) * scale_factor * amplitude
               for base_lr, max_lr in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, base_value, max_value in zip(self.optimizer.param_groups, self.base_momentums,
                                                    self.max_momentums):
                _set_momentum(group, self.use_beta1, max_value - (max_value - base_value) * scale_factor * amplitude)
        return lrs

    def state_dict(self):
        state = super().state_dict()
        function = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None
        if function is not None and not isinstance(function, types.FunctionType):
            state["_scale_fn_custom"] = dict(function.__dict__)
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        attributes = state_dict.pop("_scale_fn_custom", None)
        super().load_state_dict(state_dict)
        if attributes is not None:
            self._scale_fn_custom.__dict__.update(attributes)
        self._set_scale_mode()


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin, 2017): lr rises from max_lr / div_factor to max_lr over the first
    pct_start of total_steps, then anneals to initial_lr / final_div_factor (with three_phase, it first
    returns to the initial lr); anneal_strategy "cos" or "linear". With cycle_momentum, momentum (or beta1)
    moves inversely between max_momentum and base_momentum. Step it after every batch; stepping past
    total_steps raises ValueError."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95,
                 div_factor=25.0, final_div_factor=1e4, three_phase=False, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if not isinstance(pct_start, float) or pct_start < 0 or pct_start > 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        # Each phase anneals between two group entries (names, so the state dict holds no functions) and
        # ends at step end_step.
        warmup_end = float(pct_start * self.total_steps) - 1
        if three_phase:
            self._schedule_phases = [
                dict(end_step=warmup_end, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * self.total_steps) - 2, start_lr="max_lr", end_lr="initial_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum"),
                dict(end_step=self.total_steps - 1, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum"),
            ]
        else:
            self._schedule_phases = [
                dict(end_step=warmup_end, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=self.total_steps - 1, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum"),
            ]
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for group, group_max_lr in zip(optimizer.param_groups, max_lrs):
                group["initial_lr"] = group_max_lr / div_factor
                group["max_lr"] = group_max_lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _momentum_option(optimizer)
            max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for max_value, base_value, group in zip(max_momentums, base_momentums, optimizer.param_groups):
                    _set_momentum(group, self.use_beta1, max_value)
                    group["max_momentum"] = max_value
                    group["base_momentum"] = base_value
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, fraction):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * fraction) + 1)
        return (end - start) * fraction + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps is "
                             f"{self.total_steps}")
        lrs = []
        last_phase = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            phase_start = 0.0
            for index, phase in enumerate(self._schedule_phases):
                if step <= phase["end_step"] or index == last_phase:
                    fraction = (step - phase_start) / (phase["end_step"] - phase_start)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], fraction))
                    if self.cycle_momentum:
                        _set_momentum(group, self.use_beta1, self._anneal(
                            group[phase["start_momentum"]], group[phase["end_momentum"]], fraction))
                    break
                phase_start = phase["end_step"]
        return lrs


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR (Loshchilov & Hutter, 2017): cosine annealing from initial_lr to eta_min over T_i epochs, then a
    restart; T_0 is the first period and each next one is T_mult times longer. step(epoch) also takes
    fractional epochs (call it every batch with epoch + batch / batches)."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base_lr in self.base_lrs]

    def step(self, epoch=None):
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    # Periods T_0, T_0 m, T_0 m^2, ...: restart n begins at T_0 (m^n - 1) / (m - 1).
                    restarts = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** restarts - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** restarts
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = self._current_lrs()


def __getattr__(name):
    """A torch.optim.lr_scheduler name metajit lacks: an AttributeError that names it."""
    from .._absent import absent_name
    raise absent_name(name, "metajit.optim.lr_scheduler", "torch.optim.lr_scheduler")

"""Learning-rate schedules (torch.optim.lr_scheduler): LRScheduler, StepLR, MultiStepLR, ExponentialLR,
CosineAnnealingLR and LambdaLR.

Each schedule is written in closed form of the epoch counter; creating one sets every group's lr to its value
at epoch 0 (as PyTorch does), and step() advances one epoch. Optimizers read lr as a kernel input, so a
changing learning rate compiles no new kernels.
"""
import math

from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LambdaLR"]


class LRScheduler:
    """Base class: subclasses implement _lr_at(base_lr, epoch, group_index)."""

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not a metajit Optimizer")
        self.optimizer = optimizer
        for index, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError(f"param 'initial_lr' is not specified in param_groups[{index}] when resuming a "
                               "scheduler (last_epoch != -1)")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def _lr_at(self, base_lr, epoch, group_index):
        raise NotImplementedError

    def get_last_lr(self):
        """The learning rates set by the last step(), one per parameter group."""
        return list(self._last_lr)

    def get_lr(self):
        return [self._lr_at(base, self.last_epoch, index) for index, base in enumerate(self.base_lrs)]

    def step(self, epoch=None):
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        return {name: value for name, value in self.__dict__.items() if name != "optimizer" and
                not callable(value) and name != "lr_lambdas"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        if not isinstance(step_size, int) or step_size <= 0:
            raise ValueError(f"StepLR: step_size must be a positive integer, got {step_size!r}")
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr, epoch, group_index):
        return base_lr * self.gamma ** (epoch // self.step_size)


class MultiStepLR(LRScheduler):
    """lr = base_lr * gamma ** (number of milestones <= epoch)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = sorted(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr, epoch, group_index):
        return base_lr * self.gamma ** sum(1 for milestone in self.milestones if milestone <= epoch)


class ExponentialLR(LRScheduler):
    """lr = base_lr * gamma ** epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr, epoch, group_index):
        return base_lr * self.gamma ** epoch


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2 (SGDR without restarts; past
    T_max it rises again, as PyTorch's does)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr, epoch, group_index):
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(epoch); lr_lambda is a function or a list with one per parameter group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr, epoch, group_index):
        return base_lr * self.lr_lambdas[group_index](epoch)

"""mj.amp: PyTorch's torch.amp names for its mixed-precision recipe. metajit has no automatic mixed precision
yet, so autocast exists only disabled (the form PyTorch's AMP recipe runs with on a CPU, `enabled=use_amp`) and
says so when enabled; GradScaler scales, unscales and skips steps exactly as PyTorch's does.

Must not change any dtype: enabling autocast is an error, never a silent float32 run.
"""
from ._core import Var
from ._device import device


class autocast:
    """torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None), also a decorator. metajit has
    no automatic mixed precision, so only the disabled form exists: the one PyTorch's AMP recipe runs on a CPU
    (`enabled=use_amp` with use_amp False), where it changes nothing. enabled=True raises NotImplementedError
    naming it rather than silently computing in float32."""

    def __init__(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"autocast: expected device_type of type str, got {type(device_type).__name__}")
        device(device_type)  # an unknown device type is an error, as in PyTorch
        if enabled:
            raise NotImplementedError(
                f"metajit.autocast (torch.autocast) with enabled=True is not supported: metajit has no automatic "
                f"mixed precision (device_type={device_type!r}); run in float32, or convert the model with "
                "model.half() and its inputs with .half()")
        self.device_type, self.fast_dtype, self.enabled = device_type, dtype, False

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        return False

    def __call__(self, function):
        import functools

        @functools.wraps(function)
        def wrapped(*args, **kwargs):
            with self:
                return function(*args, **kwargs)
        return wrapped


class GradScaler:
    """torch.amp.GradScaler: dynamic loss scaling. scale(loss) multiplies by the scale, step(optimizer) divides
    the gradients by it (unscale_) and skips the step when any is inf or NaN, update() halves the scale after a
    skipped step and doubles it after growth_interval good ones. The scale is a power of two, so scaling and
    unscaling float32 gradients is exact and the steps equal unscaled ones. With enabled=False every method is
    PyTorch's pass-through (scale returns its input, step calls optimizer.step())."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if growth_factor <= 1.0:
            raise ValueError("GradScaler: growth_factor should be > 1")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError("GradScaler: backoff_factor should be < 1")
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval, self._growth_tracker = int(growth_interval), 0
        self._found_inf_per_optimizer = {}  # id(optimizer) -> whether its unscaled gradients held inf/NaN

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def scale(self, outputs):
        if not self._enabled:
            return outputs
        if isinstance(outputs, Var):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(output) for output in outputs)
        raise ValueError("GradScaler.scale: outputs must be a Var or a list or tuple of Vars")

    def unscale_(self, optimizer):
        if not self._enabled:
            return
        if id(optimizer) in self._found_inf_per_optimizer:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        inverse = 1.0 / self._scale
        found_inf = False
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                if parameter.grad is None:
                    continue
                parameter.grad.mul_(inverse)
                if not bool(parameter.grad.isfinite().all().item()):
                    found_inf = True
        self._found_inf_per_optimizer[id(optimizer)] = found_inf

    def step(self, optimizer, *args, **kwargs):
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if id(optimizer) not in self._found_inf_per_optimizer:
            self.unscale_(optimizer)
        if self._found_inf_per_optimizer[id(optimizer)]:
            return None  # a step with inf/NaN gradients is skipped; update() lowers the scale
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, Var) else new_scale)
        elif any(self._found_inf_per_optimizer.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        elif self._found_inf_per_optimizer:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                self._scale *= self._growth_factor
                self._growth_tracker = 0
        self._found_inf_per_optimizer = {}

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if not state_dict:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])

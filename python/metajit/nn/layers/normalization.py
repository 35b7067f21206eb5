"""Normalization layers: BatchNorm1d/2d/3d, LayerNorm and GroupNorm.

BatchNorm keeps training lazy: the new running statistics are rebound to the buffers as lazy Vars and
registered with the autograd pending list, so the next optimizer step computes them in its fused plan (no sync
in forward). Outside an optimizer loop, mj.sync(*module.buffers()) computes them.
"""
from ... import _autograd, _core
from .. import functional as F
from ..module import Module
from ..parameter import Parameter
from .. import init
from ._common import check_positive_int, empty_parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "RMSNorm", "LocalResponseNorm"]


def _updated_buffer(buffer, value):
    """A running statistic's new value, computed with the next optimizer step. Under mj.trace the buffer takes it
    in place (as PyTorch updates it), so a replay, which runs no Python, updates the Var the module holds."""
    if _core.trace_recording_active():
        return buffer.assign(value)
    return _autograd.defer_sync(value)


class _BatchNorm(Module):
    _expected_dims = ()
    _buffers_zeroed_when_missing = ("num_batches_tracked",)  # as PyTorch loads checkpoints made before it

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None):
        super().__init__()
        from ... import zeros, ones
        check_positive_int(num_features, "num_features", type(self).__name__)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = empty_parameter((num_features,), dtype)
            self.bias = empty_parameter((num_features,), dtype)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype or "float32"))
            self.register_buffer("running_var", ones(num_features, dtype=dtype or "float32"))
            self.register_buffer("num_batches_tracked", zeros([], dtype="int64"))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _check_input_dim(self, input):
        if input.ndim not in self._expected_dims:
            expected = " or ".join(f"{dims}D" for dims in self._expected_dims)
            raise ValueError(f"{type(self).__name__}: expected {expected} input (got {input.ndim}D input)")

    def forward(self, input):
        # Written for its recording cost (it runs per layer per step): buffers are read and rebound in
        # self._buffers directly, which is what attribute access and __setattr__ do for them.
        self._check_input_dim(input)
        if input.shape[1] != self.num_features:
            raise ValueError(f"{type(self).__name__}: expected {self.num_features} channels in dim 1, got input of "
                             f"shape {tuple(input.shape)}")
        buffers = self._buffers
        training, track = self.training, self.track_running_stats
        running_mean, running_var = buffers["running_mean"], buffers["running_var"]
        use_batch_statistics = training or running_mean is None
        update = training and track
        momentum = self.momentum
        if update:
            buffers["num_batches_tracked"] = _updated_buffer(buffers["num_batches_tracked"],
                                                             buffers["num_batches_tracked"] + 1)
            if momentum is None:
                # A cumulative average needs 1 / batches-seen; momentum=1 yields the batch statistics, which
                # are then averaged in below with that factor as a lazy Var (no sync for the count).
                momentum = 1.0
        if training and not track:
            running_mean = running_var = None
        output, new_mean, new_var = F.batch_norm_with_statistics(
            input, running_mean, running_var, self._parameters["weight"], self._parameters["bias"],
            use_batch_statistics, momentum, self.eps)
        if update:
            if self.momentum is None:
                with _autograd.no_grad():
                    factor = 1.0 / buffers["num_batches_tracked"].astype(running_mean.dtype)
                    new_mean = running_mean + (new_mean - running_mean) * factor
                    new_var = running_var + (new_var - running_var) * factor
            buffers["running_mean"] = _updated_buffer(running_mean, new_mean)
            buffers["running_var"] = _updated_buffer(running_var, new_var)
        return output

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """BatchNorm1d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True): (N, C) or
    (N, C, L) input."""
    _expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """BatchNorm2d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True): NCHW input."""
    _expected_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """BatchNorm3d(num_features, ...): NCDHW input."""
    _expected_dims = (5,)


class LayerNorm(Module):
    """LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True): normalises over the trailing
    dims given by normalized_shape."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        for extent in self.normalized_shape:
            check_positive_int(extent, "normalized_shape", "LayerNorm")
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = empty_parameter(self.normalized_shape, dtype)
            if bias:
                self.bias = empty_parameter(self.normalized_shape, dtype)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """GroupNorm(num_groups, num_channels, eps=1e-5, affine=True): normalises each group of channels."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        check_positive_int(num_groups, "num_groups", "GroupNorm")
        check_positive_int(num_channels, "num_channels", "GroupNorm")
        if num_channels % num_groups != 0:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = empty_parameter((num_channels,), dtype)
            self.bias = empty_parameter((num_channels,), dtype)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _InstanceNorm(Module):
    """Normalises each sample's channel over its spatial positions; affine=False by default, as in PyTorch.
    Running statistics (track_running_stats=True) are not supported."""
    spatial_dims = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None):
        super().__init__()
        check_positive_int(num_features, "num_features", type(self).__name__)
        if track_running_stats:
            raise NotImplementedError(f"{type(self).__name__}: track_running_stats=True is not supported (use "
                                      "BatchNorm for running statistics)")
        self.num_features, self.eps, self.momentum, self.affine = num_features, eps, momentum, affine
        if affine:
            self.weight = empty_parameter((num_features,), dtype)
            self.bias = empty_parameter((num_features,), dtype)
            init.ones_(self.weight)
            init.zeros_(self.bias)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        expected = self.spatial_dims + 2
        if input.ndim not in (expected, expected - 1):
            raise ValueError(f"{type(self).__name__}: expected a {expected}-D (batched) or {expected - 1}-D input, "
                             f"got shape {list(input.shape)}")
        batched = input if input.ndim == expected else input.unsqueeze(0)
        output = F.instance_norm(batched, weight=self.weight, bias=self.bias, eps=self.eps)
        return output if input.ndim == expected else output.squeeze(0)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, affine={self.affine}"


class InstanceNorm1d(_InstanceNorm):
    spatial_dims = 1


class InstanceNorm2d(_InstanceNorm):
    spatial_dims = 2


class InstanceNorm3d(_InstanceNorm):
    spatial_dims = 3


class RMSNorm(Module):
    """RMSNorm(normalized_shape, eps=None, elementwise_affine=True): input / sqrt(mean(input^2) + eps) over the
    trailing dims, times a weight of ones (eps None: the dtype's machine epsilon, as PyTorch)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        from ... import ones
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(*self.normalized_shape, dtype=dtype or "float32"))
        else:
            self.register_parameter("weight", None)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    """LocalResponseNorm(size, alpha=1e-4, beta=0.75, k=1.0): F.local_response_norm over channels."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"

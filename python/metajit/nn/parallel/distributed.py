"""nn.parallel.DistributedDataParallel: data-parallel training over the ranks of an mpirun job
(metajit.distributed). Wrapping a module broadcasts its parameters and buffers from rank 0, so every rank starts
from the same weights; after each backward() the gradients of its parameters are averaged over the ranks (in
buckets of about bucket_cap_mb: one all-reduce per bucket), so p.grad holds the mean gradient as in PyTorch and
clipping or inspecting it before step() sees what the optimizer sees. In a world of one rank it only wraps.

Each rank should see its own share of the data (metajit.data.DistributedSampler, or slicing by rank): N ranks with
batch B each then compute the same update as one process with batch N * B (for losses that average over the
batch). no_sync() skips the averaging for gradient accumulation; the next backward outside it averages the sum.

The averaging is recorded when backward() returns: each bucket's packing, all-reduce and unpacking are lazy, so
the backward kernels, the all-reduces (plan entries, libraries/collective_operation.h) and the optimizer's update
run as one plan at the next sync. In that plan each bucket's all-reduce starts as soon as its gradients are
computed (buckets follow backward's order, last layers first) and moves while the rest of backward runs; the run
loop waits for it before the first kernel that reads the averaged gradients."""
import contextlib
import weakref

import numpy as np

from ... import _autograd, distributed
from ..module import Module

__all__ = ["DistributedDataParallel"]



class DistributedDataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=25, find_unused_parameters=False, gradient_as_bucket_view=False,
                 static_graph=False):
        super().__init__()
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else None
        self.output_device = output_device
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.bucket_bytes = int(bucket_cap_mb * 1024 * 1024)
        self.find_unused_parameters = find_unused_parameters
        self._synchronizing = True
        if distributed.get_world_size() > 1:
            _broadcast_values(list(module.parameters()) + list(module.buffers()))
        _register(self)

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients accumulate locally inside; the first backward after it averages the accumulated sum."""
        previous, self._synchronizing = self._synchronizing, False
        try:
            yield
        finally:
            self._synchronizing = previous

    def _average_gradients(self):
        if not self._synchronizing or distributed.get_world_size() == 1:
            return
        parameters = [parameter for parameter in self.module.parameters()
                      if parameter.requires_grad and parameter.grad is not None]
        average_gradients(parameters, self.bucket_bytes)


def average_gradients(parameters, bucket_bytes=25 * 1024 * 1024):
    """Replaces each parameter's .grad with its mean over the ranks: gradients of one dtype are packed into flat
    buckets of about bucket_bytes, and each bucket is one all-reduce. Buckets go in reverse parameter order, as
    PyTorch's do: backward computes the last layers' gradients first, so the first bucket's all-reduce can start
    (the planner moves it ahead of the kernels it does not need) while the rest of backward runs."""
    from ... import cat
    buckets, current, current_bytes = [], [], 0
    for parameter in reversed(list(parameters)):
        size = parameter.grad.numel() * np.dtype(parameter.grad.dtype).itemsize
        if current and (current_bytes + size > bucket_bytes or current[0].grad.dtype != parameter.grad.dtype):
            buckets.append(current)
            current, current_bytes = [], 0
        current.append(parameter)
        current_bytes += size
    if current:
        buckets.append(current)
    with _autograd.no_grad():
        for bucket in buckets:
            flat = cat([parameter.grad.reshape(-1) for parameter in bucket])
            averaged = distributed._reduced(flat, "mean", "DistributedDataParallel gradient average",
                                            distributed._user_line())
            offset = 0
            for parameter in bucket:
                count = parameter.grad.numel()
                parameter.grad = averaged[offset:offset + count].reshape(list(parameter.shape))
                offset += count


def _broadcast_values(values):
    """Rank 0's values of every parameter and buffer, on every rank (one broadcast per dtype)."""
    from ... import cat
    by_dtype = {}
    for value in values:
        by_dtype.setdefault(value.dtype, []).append(value)
    with _autograd.no_grad():
        for group in by_dtype.values():
            flat = cat([value.reshape(-1) for value in group])
            distributed.broadcast(flat, src=0)
            offset = 0
            for value in group:
                count = value.numel()
                value.copy_(flat[offset:offset + count].reshape(list(value.shape)))
                offset += count


_live_wrappers = weakref.WeakSet()


def _register(wrapper):
    _live_wrappers.add(wrapper)
    _autograd.add_post_backward_hook(_after_backward)


def _after_backward():
    for wrapper in list(_live_wrappers):
        wrapper._average_gradients()


def averaged_parameters():
    """Parameters whose gradients a live DistributedDataParallel averages."""
    return {id(parameter) for wrapper in list(_live_wrappers) for parameter in wrapper.module.parameters()}

"""nn.SyncBatchNorm: batch normalization whose training statistics are over the global batch of an mpirun job,
as torch.nn.SyncBatchNorm. Each rank sums its values and squares per channel; one differentiable all-reduce
(metajit.distributed.nn.functional) makes them the job's, so the gradient also flows through every rank's share
of the statistics. Out of training mode, or in a world of one rank, it is BatchNorm. The running statistics use
the unbiased variance of the global batch, as PyTorch."""
from ... import _autograd, cat, distributed, full
from ...distributed.nn import functional as distributed_functional
from ..layers.normalization import _BatchNorm

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(_BatchNorm):
    _expected_dims = (2, 3, 4, 5)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device=device, dtype=dtype)
        self.process_group = process_group

    def forward(self, input):
        if not self.training or distributed.get_world_size() == 1:
            return super().forward(input)
        self._check_input_dim(input)
        channels = self.num_features
        if input.shape[1] != channels:
            raise ValueError(f"SyncBatchNorm: expected {channels} channels in dim 1, got input of shape "
                             f"{tuple(input.shape)}")
        dims = [0] + list(range(2, input.ndim))
        local_count = input.numel() // channels
        statistics = cat([input.sum(dims), (input * input).sum(dims),
                          full([1], float(local_count), input.dtype)])
        statistics = distributed_functional.all_reduce(statistics)
        count = statistics[2 * channels:]
        mean = statistics[:channels] / count
        variance = statistics[channels:2 * channels] / count - mean * mean
        shape = [1, channels] + [1] * (input.ndim - 2)
        output = (input - mean.reshape(shape)) / (variance.reshape(shape) + self.eps).sqrt()
        if self.affine:
            output = output * self.weight.reshape(shape) + self.bias.reshape(shape)
        if self.track_running_stats:
            with _autograd.no_grad():
                self.num_batches_tracked = _autograd.defer_sync(self.num_batches_tracked + 1)
                momentum = self.momentum
                if momentum is None:
                    momentum = 1.0 / self.num_batches_tracked.astype(self.running_mean.dtype)
                unbiased = variance.detach() * count.detach() / (count.detach() - 1)
                self.running_mean = _autograd.defer_sync(self.running_mean * (1 - momentum) + mean.detach() * momentum)
                self.running_var = _autograd.defer_sync(self.running_var * (1 - momentum) + unbiased * momentum)
        return output

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """module with every BatchNorm*d replaced by a SyncBatchNorm holding the same parameters and buffers."""
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            converted = cls(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats, process_group)
            converted.load_state_dict(module.state_dict())
            converted.train(module.training)
            return converted
        for name, child in list(module.named_children()):
            setattr(module, name, cls.convert_sync_batchnorm(child, process_group))
        return module

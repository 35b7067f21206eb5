"""Lazy layers (nn.LazyLinear, nn.LazyConv*d, nn.LazyConvTranspose*d, nn.LazyBatchNorm*d, nn.LazyInstanceNorm*d):
they take every constructor argument but the input size, read it from the first input, and then become the
ordinary layer (their class changes, as PyTorch's cls_to_become). Until then they hold no parameters, so (as in
PyTorch) run one batch through the model before building its optimizer."""
from ..module import Module
from .convolution import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Linear
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d

__all__ = ["LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


class _LazyModule(Module):
    """Records the constructor arguments; the first forward builds the concrete layer in place."""
    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__()
        self._lazy_arguments = (args, kwargs)

    def _input_size(self, input):
        raise NotImplementedError

    def has_uninitialized_params(self):
        return True

    def initialize_parameters(self, input):
        args, kwargs = self._lazy_arguments
        training = self.training
        del self._lazy_arguments
        size = self._input_size(input)
        self.__class__ = self.cls_to_become  # first: the concrete __init__ calls super() on it
        self.__class__.__init__(self, size, *args, **kwargs)
        self.train(training)

    def forward(self, input, *rest, **options):
        self.initialize_parameters(input)
        return self(input, *rest, **options)


class LazyLinear(_LazyModule):
    """LazyLinear(out_features, bias=True): Linear with in_features = the first input's last dim."""
    cls_to_become = Linear

    def _input_size(self, input):
        return input.shape[-1]


def _channels_first(spatial):
    def input_size(self, input):
        return input.shape[1] if input.ndim == spatial + 2 else input.shape[0]
    return input_size


def _lazy_class(name, concrete, spatial):
    attributes = {"cls_to_become": concrete, "_input_size": _channels_first(spatial),
                  "__doc__": f"{concrete.__name__} taking its channel count from the first input."}
    cls = type(name, (_LazyModule,), attributes)
    cls.__module__ = __name__
    return cls


LazyConv1d = _lazy_class("LazyConv1d", Conv1d, 1)
LazyConv2d = _lazy_class("LazyConv2d", Conv2d, 2)
LazyConv3d = _lazy_class("LazyConv3d", Conv3d, 3)
LazyConvTranspose1d = _lazy_class("LazyConvTranspose1d", ConvTranspose1d, 1)
LazyConvTranspose2d = _lazy_class("LazyConvTranspose2d", ConvTranspose2d, 2)
LazyConvTranspose3d = _lazy_class("LazyConvTranspose3d", ConvTranspose3d, 3)
# BatchNorm1d takes [N, C] or [N, C, L]: channels are dim 1 either way.
LazyBatchNorm1d = _lazy_class("LazyBatchNorm1d", BatchNorm1d, 0)
LazyBatchNorm1d._input_size = lambda self, input: input.shape[1]
LazyBatchNorm2d = _lazy_class("LazyBatchNorm2d", BatchNorm2d, 2)
LazyBatchNorm3d = _lazy_class("LazyBatchNorm3d", BatchNorm3d, 3)
LazyInstanceNorm1d = _lazy_class("LazyInstanceNorm1d", InstanceNorm1d, 1)
LazyInstanceNorm2d = _lazy_class("LazyInstanceNorm2d", InstanceNorm2d, 2)
LazyInstanceNorm3d = _lazy_class("LazyInstanceNorm3d", InstanceNorm3d, 3)

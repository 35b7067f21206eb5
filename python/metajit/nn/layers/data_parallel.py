"""nn.DataParallel on one device: wraps a module as `self.module` and calls it, so a ported program's
`model = nn.DataParallel(model)` and its "module."-prefixed state_dict keys work. metajit runs one device, so
nothing is replicated or scattered; device_ids, output_device and dim are accepted and recorded."""
from ..module import Module

__all__ = ["DataParallel"]


class DataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else [0]
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)

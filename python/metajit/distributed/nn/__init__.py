"""metajit.distributed.nn: PyTorch's torch.distributed.nn path; the differentiable collectives are in .functional."""
from . import functional  # noqa: F401

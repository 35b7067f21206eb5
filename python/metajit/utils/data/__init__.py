"""metajit.utils.data: PyTorch's `torch.utils.data` import path for metajit.data (datasets, samplers, DataLoader).

A re-export only: every name is metajit.data's own object (so `metajit.utils.data.DataLoader is
metajit.data.DataLoader`). Must not define or wrap anything; add new names to metajit.data instead."""
from ...data import *  # noqa: F401,F403
from ...data import __all__  # noqa: F401
from ...data import __getattr__  # noqa: F401,E402  (the error naming an absent torch.utils.data name)

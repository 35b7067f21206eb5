"""metajit.utils: PyTorch's `torch.utils` import path, so that `import metajit.utils.data` and
`mj.utils.data.DataLoader` work in programs ported from PyTorch by changing their imports.

Holds only re-exports: the code lives in metajit.data. Must not import anything heavy or define behaviour here."""
from . import checkpoint, data

__all__ = ["checkpoint", "data"]

"""Dropout: zeroes elements with probability p in training mode and scales the rest by 1 / (1 - p)."""
from .. import functional as F
from ..module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"]


class Dropout(Module):
    """Dropout(p=0.5, inplace=False); the identity in eval mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: probability has to be between 0 and 1, but got {p!r}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(Dropout):
    """Zeroes whole channels of [N, C, L] with probability p in training mode."""

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training)


class Dropout2d(Dropout):
    """Zeroes whole channels of [N, C, H, W] with probability p in training mode."""

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training)


class Dropout3d(Dropout):
    """Zeroes whole channels of [N, C, D, H, W] with probability p in training mode."""

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training)

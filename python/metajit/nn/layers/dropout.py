"""Dropout: zeroes elements with probability p in training mode and scales the rest by 1 / (1 - p)."""
from .. import functional as F
from ..module import Module

__all__ = ["Dropout"]


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

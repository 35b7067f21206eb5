"""Flatten and Unflatten: reshape a range of dims into one, and back."""
from ..module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Flatten(start_dim=1, end_dim=-1): merges dims start_dim..end_dim (the batch dim is kept by default)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Unflatten(dim, unflattened_size): splits dim `dim` into the shape `unflattened_size`."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        dim = self.dim + input.ndim if self.dim < 0 else self.dim
        if not 0 <= dim < input.ndim:
            raise IndexError(f"Unflatten: dim {self.dim} is out of range for an input of rank {input.ndim}")
        size = list(self.unflattened_size)
        if -1 in size:
            known = 1
            for extent in size:
                known *= extent if extent != -1 else 1
            size[size.index(-1)] = input.shape[dim] // known
        product = 1
        for extent in size:
            product *= extent
        if product != input.shape[dim]:
            raise ValueError(f"Unflatten: unflattened_size {self.unflattened_size} does not multiply to the size "
                             f"{input.shape[dim]} of dim {self.dim}")
        return input.reshape(list(input.shape[:dim]) + size + list(input.shape[dim + 1:]))

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"

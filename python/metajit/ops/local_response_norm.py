"""Local response normalisation (F.local_response_norm, AlexNet's): each element divided by
(k + alpha * mean of the squares of `size` neighbouring channels)^beta, with the channel window zero-padded as
PyTorch's. A pad, a sliding-window view and elementwise ops, so the gradient comes from the meta-ops."""
from .rearrange import unfold_windows
from .tensor import _as_var, pad

__all__ = ["local_response_norm"]


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    input = _as_var(input)
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    squares = input * input
    # Channels are dim 1: pad (size // 2 before, (size - 1) // 2 after) along it, then average each window.
    widths = [0, 0] * (input.ndim - 2) + [size // 2, (size - 1) // 2]
    windows = unfold_windows(pad(squares, widths), 1, size, 1)
    divisor = (windows.mean(-1) * alpha + k) ** beta
    return input / divisor

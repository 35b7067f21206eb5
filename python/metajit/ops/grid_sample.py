"""Spatial transformers' sampling (F.affine_grid and F.grid_sample, 2-D, as PyTorch's): affine_grid maps the
output pixels' normalised coordinates through theta; grid_sample reads the input at those coordinates, bilinearly
or from the nearest pixel, with 'zeros' or 'border' padding. The reads are gathers at computed positions and the
weights elementwise ops of the grid, so gradients reach both the input and the grid."""
from .. import _core, linspace, where
from .linalg import matmul
from .tensor import _as_var, gather, stack

__all__ = ["affine_grid", "grid_sample"]


def _base_coordinates(steps, align_corners, dtype):
    if align_corners:
        return linspace(-1.0, 1.0, steps, dtype=dtype)
    # Pixel centres: (2 i + 1) / steps - 1.
    return (_core.arange(0.0, float(steps), 1.0, dtype) * 2.0 + 1.0) / float(steps) - 1.0


def affine_grid(theta, size, align_corners=False):
    """The [N, H, W, 2] sampling grid (x, y) of theta [N, 2, 3] applied to the output's normalised pixel
    coordinates, for an output of size [N, C, H, W]."""
    theta = _as_var(theta)
    if len(size) != 4:
        raise NotImplementedError("affine_grid: only 2-D (4-element size) grids are supported; 3-D grids are not")
    batch, _, height, width = (int(extent) for extent in size)
    if list(theta.shape) != [batch, 2, 3]:
        raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {list(size)}. Got "
                         f"{list(theta.shape)}.")
    xs = _base_coordinates(width, align_corners, theta.dtype).reshape([1, width]).broadcast_to([height, width])
    ys = _base_coordinates(height, align_corners, theta.dtype).reshape([height, 1]).broadcast_to([height, width])
    ones = _core.constant([height, width], theta.dtype, 1.0)
    base = stack([xs, ys, ones], 2).reshape([1, height * width, 3])
    grid = matmul(base, theta.transpose(1, 2))  # [N, H * W, 2]
    return grid.reshape([batch, height, width, 2])


def _pixel_position(coordinate, extent, align_corners):
    if align_corners:
        return (coordinate + 1.0) * (0.5 * (extent - 1))
    return ((coordinate + 1.0) * extent - 1.0) * 0.5


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """output[n, c, h, w] = input[n, c] read at grid[n, h, w] = (x, y) in [-1, 1] (x along width). mode
    'bilinear' or 'nearest'; padding_mode 'zeros' (outside reads 0) or 'border' (clamped to the edge).
    align_corners defaults to False, as PyTorch's."""
    input, grid = _as_var(input), _as_var(grid)
    if input.ndim != 4:
        raise NotImplementedError("grid_sample: only 4-D (N, C, H, W) inputs are supported; 5-D volumes are not")
    if mode not in ("bilinear", "nearest"):
        raise NotImplementedError(f"grid_sample: mode {mode!r} is not supported (use 'bilinear' or 'nearest')")
    if padding_mode not in ("zeros", "border"):
        raise NotImplementedError(f"grid_sample: padding_mode {padding_mode!r} is not supported (use 'zeros' or "
                                  "'border')")
    align_corners = bool(align_corners)
    batch, channels, height, width = input.shape
    if grid.ndim != 4 or grid.shape[0] != batch or grid.shape[3] != 2:
        raise RuntimeError(f"grid_sample: expected grid of shape [{batch}, H_out, W_out, 2], got {list(grid.shape)}")
    out_height, out_width = grid.shape[1], grid.shape[2]
    x = _pixel_position(grid[:, :, :, 0], width, align_corners)
    y = _pixel_position(grid[:, :, :, 1], height, align_corners)
    if padding_mode == "border":
        x, y = x.clamp(0.0, float(width - 1)), y.clamp(0.0, float(height - 1))
    flat = input.reshape([batch, channels, height * width])

    def read(row, column):
        """input at integer positions (0 outside when padding is zeros), [N, C, H_out, W_out]."""
        inside = (row >= 0) & (row <= height - 1) & (column >= 0) & (column <= width - 1)
        index = row.clamp(0, height - 1) * width + column.clamp(0, width - 1)
        index = index.reshape([batch, 1, out_height * out_width]).broadcast_to([batch, channels,
                                                                                 out_height * out_width])
        values = gather(flat, 2, index).reshape([batch, channels, out_height, out_width])
        return where(inside.unsqueeze(1), values, _core.constant([], input.dtype, 0.0))

    if mode == "nearest":
        return read(_core.cast(y.detach().round(), "int64"), _core.cast(x.detach().round(), "int64"))
    left, top = x.detach().floor(), y.detach().floor()
    right_weight, bottom_weight = x - left, y - top
    left_weight, top_weight = 1.0 - right_weight, 1.0 - bottom_weight
    column0, row0 = _core.cast(left, "int64"), _core.cast(top, "int64")
    column1, row1 = column0 + 1, row0 + 1
    return (read(row0, column0) * (top_weight * left_weight).unsqueeze(1)
            + read(row0, column1) * (top_weight * right_weight).unsqueeze(1)
            + read(row1, column0) * (bottom_weight * left_weight).unsqueeze(1)
            + read(row1, column1) * (bottom_weight * right_weight).unsqueeze(1))

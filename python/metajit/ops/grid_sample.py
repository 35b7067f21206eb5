"""Spatial transformers' sampling (F.affine_grid and F.grid_sample, 2-D images and 3-D volumes, as PyTorch's):
affine_grid maps the output's normalised pixel (voxel) coordinates through theta; grid_sample reads the input at
those coordinates, (tri)linearly or from the nearest element, with 'zeros', 'border' or 'reflection' padding.
The reads are gathers at computed positions and the weights elementwise ops of the grid, so gradients reach both
the input and the grid. Bicubic sampling is not implemented; it must raise, never fall back silently."""
import itertools

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
    """The sampling grid of theta applied to the output's normalised coordinates: [N, H, W, 2] (x, y) for theta
    [N, 2, 3] and size [N, C, H, W], or [N, D, H, W, 3] (x, y, z) for theta [N, 3, 4] and size [N, C, D, H, W]."""
    theta = _as_var(theta)
    if not theta.dtype.startswith("float"):
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = [int(extent) for extent in size]
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    spatial = len(size) - 2
    if theta.ndim != 3 or list(theta.shape[1:]) != [spatial, spatial + 1]:
        raise ValueError(f"Expected a batch of {spatial}D affine matrices of shape Nx{spatial}x{spatial + 1} for size "
                         f"{size}. Got {list(theta.shape)}.")
    if not (align_corners and min(size[2:]) == 1) and min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    batch, extents = size[0], size[2:]
    # Coordinate k of the base grid runs along spatial dim spatial-1-k: x along the last (width) dim.
    columns = []
    for k in range(spatial):
        dim = spatial - 1 - k
        shape = [1] * spatial
        shape[dim] = extents[dim]
        columns.append(_base_coordinates(extents[dim], align_corners, theta.dtype).reshape(shape)
                       .broadcast_to(extents))
    columns.append(_core.constant(extents, theta.dtype, 1.0))
    count = 1
    for extent in extents:
        count *= extent
    base = stack(columns, spatial).reshape([1, count, spatial + 1])
    grid = matmul(base, theta.transpose(1, 2))  # [N, count, spatial]
    return grid.reshape([batch] + extents + [spatial])


def _pixel_position(coordinate, extent, align_corners):
    if align_corners:
        return (coordinate + 1.0) * (0.5 * (extent - 1))
    return ((coordinate + 1.0) * extent - 1.0) * 0.5


def _reflect(position, twice_low, twice_high):
    """PyTorch's reflect_coordinates: position folded into [low, high] by reflecting at both ends."""
    if twice_low == twice_high:
        return position * 0.0
    low, span = twice_low / 2.0, (twice_high - twice_low) / 2.0
    distance = (position - low).abs()
    flips = (distance / span).detach().floor()
    extra = distance - flips * span
    even = (flips - 2.0 * (flips * 0.5).floor()) == 0.0
    return where(even, extra + low, span - extra + low)


def _padded_position(position, extent, padding_mode, align_corners):
    if padding_mode == "reflection":
        position = _reflect(position, 0, 2 * (extent - 1)) if align_corners else \
            _reflect(position, -1, 2 * extent - 1)
    if padding_mode in ("border", "reflection"):
        position = position.clamp(0.0, float(extent - 1))
    return position


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """output[n, c, *o] = input[n, c] read at grid[n, *o] in [-1, 1] (x along width, then y, then z along depth
    for volumes): 4-D input [N, C, H, W] with grid [N, H_out, W_out, 2], or 5-D [N, C, D, H, W] with grid
    [N, D_out, H_out, W_out, 3]. mode 'bilinear' (trilinear for volumes) or 'nearest'; padding_mode 'zeros'
    (outside reads 0), 'border' (clamped to the edge) or 'reflection'. align_corners defaults to False, as
    PyTorch's."""
    input, grid = _as_var(input), _as_var(grid)
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if mode == "bicubic":
        raise NotImplementedError("grid_sample: mode 'bicubic' is not supported (use 'bilinear' or 'nearest')")
    if input.ndim not in (4, 5):
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but "
                           f"got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    align_corners = bool(align_corners)
    spatial = input.ndim - 2
    batch, channels = input.shape[0], input.shape[1]
    extents = list(input.shape[2:])
    if grid.ndim != input.ndim or grid.shape[0] != batch or grid.shape[-1] != spatial:
        raise RuntimeError(f"grid_sample: expected grid of shape [{batch}, {', '.join(['*'] * spatial)}, {spatial}] "
                           f"for input of shape {list(input.shape)}, got {list(grid.shape)}")
    out_extents = list(grid.shape[1:-1])
    count = 1
    for extent in out_extents:
        count *= extent
    # positions[d]: the (fractional) index along input spatial dim d; grid coordinate k runs along dim spatial-1-k.
    positions = []
    for dim in range(spatial):
        coordinate = grid[(slice(None),) * (spatial + 1) + (spatial - 1 - dim,)]
        position = _pixel_position(coordinate, extents[dim], align_corners)
        positions.append(_padded_position(position, extents[dim], padding_mode, align_corners))
    plane = 1
    for extent in extents:
        plane *= extent
    flat = input.reshape([batch, channels, plane])
    zero = _core.constant([], input.dtype, 0.0)

    def read(indices):
        """input at integer positions (one int64 Var per spatial dim), 0 outside, [N, C, *out]."""
        inside = None
        index = None
        for dim, (position, extent) in enumerate(zip(indices, extents)):
            within = (position >= 0) & (position <= extent - 1)
            inside = within if inside is None else inside & within
            clamped = position.clamp(0, extent - 1)
            index = clamped if index is None else index * extent + clamped
        index = index.reshape([batch, 1, count]).broadcast_to([batch, channels, count])
        values = gather(flat, 2, index).reshape([batch, channels] + out_extents)
        return where(inside.unsqueeze(1), values, zero)

    if mode == "nearest":
        return read([_core.cast(position.detach().round(), "int64") for position in positions])
    lower = [position.detach().floor() for position in positions]
    upper_weights = [position - low for position, low in zip(positions, lower)]
    lower_weights = [1.0 - weight for weight in upper_weights]
    lower_indices = [_core.cast(low, "int64") for low in lower]
    output = None
    for corner in itertools.product((0, 1), repeat=spatial):
        weight = None
        for dim, bit in enumerate(corner):
            factor = upper_weights[dim] if bit else lower_weights[dim]
            weight = factor if weight is None else weight * factor
        term = read([index + bit for index, bit in zip(lower_indices, corner)]) * weight.unsqueeze(1)
        output = term if output is None else output + term
    return output

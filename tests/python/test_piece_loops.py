"""Piece loops (jit/codegen/cpp/cpp_renderer.cc, piece_loops): a pointwise kernel whose element index is guarded or
clamped against constants (a cat along the last dim, constant padding), or reflected through abs (reflection padding),
runs its element loop once per piece between the edges, with the guards, clamps and abs folded away. Every element
must still be written exactly once with the right piece's value, whatever the pieces' sizes, however the threads cut
the flat range, and in gradients."""
import numpy as np
import pytest

import metajit as mj
import metajit.nn.functional as F


def piece_count(var):
    return sum(kernel["source"].count("// columns [") for kernel in mj.inspect_kernels(var))


@pytest.fixture(params=[1, 2], ids=["1 thread", "2 threads"])
def threads(request):
    saved = mj.flags.num_threads
    mj.flags.num_threads = request.param
    yield request.param
    mj.flags.num_threads = saved


# (1000, 70001, 3): rows long enough that the threads' chunks of the flat range start and end inside a row.
@pytest.mark.parametrize("widths", [(256, 256, 256), (1, 500, 498), (3, 1, 7, 2), (17,), (1000, 70001, 3)])
def test_cat_along_the_last_dim_runs_one_loop_per_piece(rng, threads, widths):
    parts = [rng.standard_normal((5, 3, width)).astype(np.float32) for width in widths]
    result = mj.cat([mj.array(part) * float(index + 1) for index, part in enumerate(parts)], dim=2)
    if len(widths) > 1:
        assert piece_count(result) == len(widths)
    expected = np.concatenate([part * (index + 1) for index, part in enumerate(parts)], axis=2)
    np.testing.assert_array_equal(result.numpy(), expected)


def test_cat_of_a_transposed_piece_matches_numpy(rng, threads):
    # The transformer's q/k/v gradient cat: one piece is read with a stride of 128 along the written dim.
    first = rng.standard_normal((4, 128, 64)).astype(np.float32)
    second = rng.standard_normal((4, 64, 128)).astype(np.float32)
    third = rng.standard_normal((4, 128, 64)).astype(np.float32)
    result = mj.cat([mj.array(first), mj.array(second).permute(0, 2, 1), mj.array(third) * 0.125], dim=2)
    assert piece_count(result) == 3
    expected = np.concatenate([first, second.transpose(0, 2, 1), third * np.float32(0.125)], axis=2)
    np.testing.assert_array_equal(result.numpy(), expected)


@pytest.mark.parametrize("left, right", [(2, 3), (0, 5), (4, 0), (-2, 3)])
def test_constant_padding_of_the_last_dim_matches_numpy(rng, threads, left, right):
    data = rng.standard_normal((6, 37)).astype(np.float32)
    result = F.pad(mj.array(data), (left, right), value=1.5)
    padded = np.pad(data[:, max(-left, 0):], ((0, 0), (max(left, 0), right)), constant_values=1.5)
    np.testing.assert_array_equal(result.numpy(), padded)


def test_gradients_through_a_cat_reach_each_piece(rng):
    pieces = [mj.array(rng.standard_normal((3, width)).astype(np.float32), requires_grad=True) for width in (5, 9, 4)]
    weights = rng.standard_normal((3, 18)).astype(np.float32)
    loss = (mj.cat(pieces, dim=1) * mj.array(weights)).sum()
    gradients = mj.grad(loss, pieces)
    np.testing.assert_array_equal(gradients[0].numpy(), weights[:, :5])
    np.testing.assert_array_equal(gradients[1].numpy(), weights[:, 5:14])
    np.testing.assert_array_equal(gradients[2].numpy(), weights[:, 14:])


def test_many_pieces_are_joined_in_groups_with_a_loop_per_group(rng):
    """12 pieces: joined in groups of 8 and 4 (ops/tensor.py, _join), the kernel runs one loop per group (not
    twelve copies of the body, nor one body reading all twelve pieces at every element)."""
    parts = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(12)]
    result = mj.cat([mj.array(part) + 1.0 for part in parts], dim=1)
    assert piece_count(result) == 2
    np.testing.assert_array_equal(result.numpy(), np.concatenate(parts, axis=1) + np.float32(1.0))


@pytest.mark.parametrize("pool", ["max", "avg"])
@pytest.mark.parametrize("size, kernel, stride, padding", [(112, 3, 2, 1), (63, 3, 2, 1), (64, 5, 3, 2), (40, 2, 1, 1)])
def test_padded_strided_windows_run_their_interior_without_bounds_tests(rng, threads, pool, size, kernel, stride,
                                                                       padding):
    """A pooling window's index, stride * column + position - padding, is clamped and tested against the image's
    bounds; the edges where those tests are decided for the whole window cut the row, so the interior piece reads
    plainly (ResNet's stem max-pool: 1.7 ms -> 0.35 ms)."""
    torch = pytest.importorskip("torch")
    data = rng.standard_normal((2, 3, size, size)).astype(np.float32)
    function = F.max_pool2d if pool == "max" else F.avg_pool2d
    result = function(mj.array(data), kernel, stride, padding)
    reference = getattr(torch.nn.functional, f"{pool}_pool2d")(torch.from_numpy(data), kernel, stride, padding)
    assert piece_count(result) >= 2
    np.testing.assert_allclose(result.numpy(), reference.numpy(), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------------------------ row pieces
def row_piece_count(var):
    return sum(kernel["source"].count("// rows [") for kernel in mj.inspect_kernels(var))


@pytest.mark.parametrize("heights, dim", [((2048, 2048), 0), ((1, 40, 3), 0), ((5, 1, 9, 2), 1), ((3, 700), 1)])
def test_cat_along_an_outer_dim_picks_each_rows_piece(rng, threads, heights, dim):
    """A cat along an outer dim: each row belongs to one piece, so the row runs that piece's copy of the element
    loop (its guards folded): every row written once, with its own piece's values."""
    def shape(height):
        return (height, 64) if dim == 0 else (3, height, 33)
    parts = [rng.standard_normal(shape(height)).astype(np.float32) for height in heights]
    result = mj.cat([mj.array(part) - float(index) for index, part in enumerate(parts)], dim=dim)
    assert row_piece_count(result) == len(heights)
    expected = np.concatenate([part - index for index, part in enumerate(parts)], axis=dim)
    np.testing.assert_array_equal(result.numpy(), expected)


@pytest.mark.parametrize("padding", [[1, 1, 1, 1], [0, 0, 2, 3], [2, 1, -1, 2], [3, 0, 0, 1]])
def test_padding_rows_and_columns_of_images(rng, threads, padding):
    # rows of 300: long enough that the kernel keeps its row dims (short rows are merged into one flat loop)
    data = rng.standard_normal((2, 3, 9, 300)).astype(np.float32)
    result = F.pad(mj.array(data) * 2.0, padding, value=0.5)
    left, right, top, bottom = padding
    cropped = (data * 2.0)[:, :, max(0, -top):9 - max(0, -bottom), max(0, -left):300 - max(0, -right)]
    widths = ((0, 0), (0, 0), (max(0, top), max(0, bottom)), (max(0, left), max(0, right)))
    if max(top, bottom) > 0:
        assert row_piece_count(result) >= 2
    np.testing.assert_array_equal(result.numpy(), np.pad(cropped, widths, constant_values=0.5))


def test_more_row_pieces_than_worth_copying_go_in_groups(rng):
    parts = [rng.standard_normal((2, 5)).astype(np.float32) for _ in range(12)]  # 12 row pieces, more than 8
    result = mj.cat([mj.array(part) for part in parts], dim=0)
    assert row_piece_count(result) == 2  # groups of 8 and 4 (ops/tensor.py, _join): one copy per group
    np.testing.assert_array_equal(result.numpy(), np.concatenate(parts, axis=0))


def abs_in_element_loops(var):
    """How many per-element statements of the kernels computing `var` still take an abs of an index (rendered as
    `(x < 0 ? (int64_t)(0ull - (uint64_t)x) : x)`)."""
    return sum(line.count("(int64_t)(0ull - (uint64_t)") for kernel in mj.inspect_kernels(var)
               for line in kernel["source"].splitlines() if "const float" in line)


@pytest.mark.parametrize("shape, pad", [((2, 3, 16, 16), 1), ((2, 4, 9, 30), 3), ((1, 2, 70, 5), (2, 4, 1, 3))])
def test_reflection_padding_runs_one_loop_per_reflected_piece(rng, threads, shape, pad):
    """Reflection padding reads x[15 - abs(15 - abs(i - 1))]: between the edges where each abs changes sign the
    index is affine, so the row is cut there and each piece reads contiguously (they were per-element gathers,
    3-8x slower: [4, 32, 64, 64] with 1 pixel, 0.52 -> 0.07 ms). Rows are cut the same way."""
    import torch
    pads = (pad,) * 4 if isinstance(pad, int) else pad
    data = rng.standard_normal(shape).astype(np.float32)
    result = F.pad(mj.array(data) * 2.0, pads, mode="reflect")
    assert piece_count(result) >= 3
    assert abs_in_element_loops(result) == 0
    expected = torch.nn.functional.pad(torch.tensor(data) * 2.0, pads, mode="reflect").numpy()
    np.testing.assert_array_equal(result.numpy(), expected)

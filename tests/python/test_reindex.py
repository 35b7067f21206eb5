"""Reindex meta-op family: the general reindex (pad, strided slice, transpose, flip, gather, a 3x3 convolution as
reindex + broadcast + sum) and its affine special cases (reshape, permute, transpose, .T, broadcast_to, Jittor-style
broadcast, basic slicing), each against a numpy reference."""
import numpy as np
import pytest

import metajit as mj
from conftest import assert_close, launched


# ---------------------------------------------------------------------------------------------------- general reindex
def test_reindex_pad(rng):
    data = rng.standard_normal((3, 4)).astype(np.float32)
    padded = mj.reindex(mj.array(data), [5, 8], ["i0-1", "i1-2"], overflow_value=-7.0)
    assert_close(padded, np.pad(data, ((1, 1), (2, 2)), constant_values=-7.0))


def test_reindex_strided_slice(rng):
    data = rng.standard_normal((10, 12)).astype(np.float64)
    result = mj.reindex(mj.array(data), [4, 3], ["i0*2+1", "i1*4"])
    assert_close(result, data[1:9:2, 0:12:4], rtol=0)


def test_reindex_transpose_and_flip(rng):
    data = rng.integers(-100, 100, size=(2, 3, 5)).astype(np.int32)
    x = mj.array(data)
    assert_close(mj.reindex(x, [5, 2, 3], ["i1", "i2", "i0"]), data.transpose(2, 0, 1))
    assert_close(mj.reindex(x, [2, 3, 5], ["i0", "xshape1-1-i1", "yshape2-1-i2"]), data[:, ::-1, ::-1])


def test_reindex_overflow_conditions(rng):
    data = rng.standard_normal((6, 6)).astype(np.float32)
    # keep the lower triangle only (a causal mask written as an overflow condition)
    result = mj.reindex(mj.array(data), [6, 6], ["i0", "i1"], overflow_value=0.0, overflow_conditions=["i1 > i0"])
    assert_close(result, np.tril(data))


def test_reindex_gather_with_extra_input(rng):
    data = rng.standard_normal((7, 3)).astype(np.float32)
    rows = np.array([6, 0, 0, 3, 5, 1], dtype=np.int64)
    result = mj.reindex(mj.array(data), [6, 3], ["@e0(i0)", "i1"], extras=[mj.array(rows)])
    assert_close(result, data[rows])
    # indices outside the source read the overflow value
    bad_rows = np.array([-1, 2, 7], dtype=np.int32)
    result = mj.reindex(mj.array(data), [3, 3], ["@e0(i0)", "i1"], overflow_value=99.0, extras=[mj.array(bad_rows)])
    expected = np.full((3, 3), 99.0, np.float32)
    expected[1] = data[2]
    assert_close(result, expected)


def test_reindex_of_computed_expression_fuses_into_one_kernel(rng):
    data = rng.standard_normal((8, 8)).astype(np.float32)
    x = mj.array(data)
    result, kernels = launched(lambda: mj.reindex((x * 2).exp(), [8, 8], ["i1", "i0"]).numpy())
    np.testing.assert_allclose(result, np.exp(data * 2).T, rtol=1e-6)
    assert kernels == 1


def conv2d_reference(image, weight, padding):
    batch, channels, height, width = image.shape
    out_channels, _, kernel_h, kernel_w = weight.shape
    padded = np.pad(image.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    out_h, out_w = height + 2 * padding - kernel_h + 1, width + 2 * padding - kernel_w + 1
    result = np.zeros((batch, out_channels, out_h, out_w))
    for row in range(kernel_h):
        for column in range(kernel_w):
            patch = padded[:, :, row:row + out_h, column:column + out_w]  # [N, C, H, W]
            result += np.einsum("nchw,oc->nohw", patch, weight[:, :, row, column].astype(np.float64))
    return result


def test_conv3x3_as_reindex_broadcast_sum(rng):
    batch, channels, out_channels, height, width = 2, 3, 4, 6, 5
    image = rng.standard_normal((batch, channels, height, width)).astype(np.float32)
    weight = rng.standard_normal((out_channels, channels, 3, 3)).astype(np.float32)
    x, w = mj.array(image), mj.array(weight)
    # x -> [N, Co, C, H, W, 3, 3]: patches with padding 1 (out-of-range reads give 0)
    patches = mj.reindex(x, [batch, out_channels, channels, height, width, 3, 3],
                         ["i0", "i2", "i3+i5-1", "i4+i6-1"])
    weights = mj.broadcast(w, [batch, out_channels, channels, height, width, 3, 3], dims=[0, 3, 4])
    result = (patches * weights).sum([2, 5, 6])
    assert result.shape == (batch, out_channels, height, width)
    assert_close(result, conv2d_reference(image, weight, padding=1), rtol=1e-5, atol=1e-5)


def test_conv3x3_without_out_channel_dim_in_reindex(rng):
    # the spelling: x -> [N, C, H, W, 3, 3], weight broadcast over a new Co dim
    image = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    weight = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    patches = mj.reindex(mj.array(image), [1, 2, 5, 5, 3, 3], ["i0", "i1", "i2+i4-1", "i3+i5-1"])
    shape = [1, 3, 2, 5, 5, 3, 3]
    product = mj.broadcast(patches, shape, dims=[1]) * mj.broadcast(mj.array(weight), shape, dims=[0, 3, 4])
    assert_close(product.sum([2, 5, 6]), conv2d_reference(image, weight, padding=1), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------------- affine views
def test_reshape_including_minus_one(rng):
    data = rng.standard_normal((4, 6)).astype(np.float32)
    x = mj.array(data)
    assert_close(x.reshape(3, 8), data.reshape(3, 8), rtol=0)
    assert_close(x.reshape([2, -1, 3]), data.reshape(2, -1, 3), rtol=0)
    assert_close(x.reshape(-1), data.reshape(-1), rtol=0)
    assert_close(x.view(24, 1), data.reshape(24, 1), rtol=0)
    assert_close(x.T.reshape(-1, 2), data.T.reshape(-1, 2), rtol=0)  # reshape of a non-contiguous view
    assert_close((x + 1).reshape(6, 4).T, (data + 1).reshape(6, 4).T, rtol=0)


def test_permute_transpose_and_T(rng):
    data = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    x = mj.array(data)
    assert_close(x.permute(3, 1, 0, 2), data.transpose(3, 1, 0, 2), rtol=0)
    assert_close(x.permute([0, -1, 1, 2]), data.transpose(0, 3, 1, 2), rtol=0)
    assert_close(x.transpose(1, 3), data.swapaxes(1, 3), rtol=0)
    assert_close(x.transpose(-1, 0), data.swapaxes(-1, 0), rtol=0)
    assert_close(x.T, data.T, rtol=0)
    assert_close(x.T.T, data, rtol=0)


def test_broadcast_to(rng):
    data = rng.standard_normal((3, 1)).astype(np.float32)
    assert_close(mj.array(data).broadcast_to(2, 3, 4), np.broadcast_to(data, (2, 3, 4)), rtol=0)
    assert_close(mj.broadcast_to(mj.array(data), [3, 5]), np.broadcast_to(data, (3, 5)), rtol=0)


def test_broadcast_jittor_semantics(rng):
    data = rng.standard_normal((3, 4)).astype(np.float32)
    x = mj.array(data)
    # dims lists the new output dims; x's dims map in order onto the rest
    assert_close(mj.broadcast(x, [3, 2, 4], dims=[1]), np.broadcast_to(data[:, None, :], (3, 2, 4)), rtol=0)
    assert_close(mj.broadcast(x, [5, 3, 4], dims=0), np.broadcast_to(data, (5, 3, 4)), rtol=0)
    assert_close(mj.broadcast(x, [3, 4, 2], dims=[-1]), np.broadcast_to(data[..., None], (3, 4, 2)), rtol=0)
    column = rng.standard_normal((3, 1)).astype(np.float32)
    assert_close(mj.broadcast(mj.array(column), [3, 6]), np.broadcast_to(column, (3, 6)), rtol=0)


# ---------------------------------------------------------------------------------------------------- basic slicing
@pytest.mark.parametrize("key", [
    (slice(1, 5, 2), slice(None, None, -1)), (Ellipsis, None), (-1,), (slice(None), -2), (1, slice(2, None), 0),
    (None, 2, Ellipsis, None), (slice(-3, None),), (slice(None, None, -2), slice(1, -1)), (slice(5, 1, -1),),
    (slice(8, 20),), (slice(3, 3),), (Ellipsis, 1), (0, 0, 0),
    # keys the C++ fast path (_core.basic_view) leaves to the general parse: numpy integers, bools
    (np.int64(2), slice(None)), (slice(None), np.int32(-1)), (True,), (1, False),
], ids=repr)
def test_basic_slicing_matches_numpy(key, rng):
    data = rng.standard_normal((7, 6, 5)).astype(np.float32)
    assert_close(mj.array(data)[key], data[key], rtol=0)


def test_a_zero_slice_step_raises_value_error():
    with pytest.raises(ValueError, match="step cannot be zero"):
        mj.array(np.zeros((7, 6), np.float32))[:, ::0]


def test_slicing_of_slices_and_expressions(rng):
    data = rng.standard_normal((9, 8)).astype(np.float32)
    x = mj.array(data)
    assert_close(x[1:8:2][::-1, 2:][1], data[1:8:2][::-1, 2:][1], rtol=0)
    assert_close((x * 2)[..., ::3].T[1:], (data * 2)[..., ::3].T[1:], rtol=0)
    assert_close(x[3, 4], data[3, 4], rtol=0)
    assert x[3, 4].shape == ()


@pytest.mark.parametrize("key", [7, -8, (0, 6), (slice(None), -9), 2 ** 70, (0, -2 ** 70)], ids=repr)
def test_out_of_range_integer_index_raises_index_error(key):
    x = mj.array(np.zeros((7, 6), np.float32))
    with pytest.raises(IndexError, match="out of bounds"):
        x[key]


def test_unsupported_indexes_raise():
    x = mj.array(np.zeros((4, 4), np.float32))
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(TypeError, match="not supported"):
        x["a"]


def test_iteration_and_len(rng):
    data = rng.standard_normal((3, 2)).astype(np.float32)
    rows = list(mj.array(data))
    assert len(mj.array(data)) == 3
    assert len(rows) == 3
    for row, expected in zip(rows, data):
        assert_close(row, expected, rtol=0)


def test_reindex_with_boolean_extra_as_overflow_condition_and_computed_extras(rng):
    data = rng.standard_normal((3, 4)).astype(np.float32)
    mask = np.array([True, False, True, False])
    result = mj.reindex(mj.array(data), [3, 4], ["i0", "i1"], overflow_value=-1.0, overflow_conditions=["@e0(i1)"],
                        extras=[mj.array(mask)])
    assert_close(result, np.where(mask, np.float32(-1), data), rtol=0)
    reversed_columns = mj.arange(4)[::-1]  # a lazy extra: computed in the same plan
    assert_close(mj.reindex(mj.array(data), [3, 4], ["i0", "@e0(i1)"], extras=[reversed_columns]), data[:, ::-1])
    pairs = np.array([[2, 0], [1, 1]], dtype=np.int32)
    result = mj.reindex(mj.array(data), [2, 2], ["@e0(i0, i1)", "@e0(i1, i0) + 1"], extras=[mj.array(pairs)])
    assert_close(result, data[pairs, pairs.T + 1], rtol=0)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "int64", "float16", "float64"])
def test_reindex_overflow_value_in_every_dtype(dtype):
    data = np.arange(1, 5).astype(dtype)
    overflow = 7
    result = mj.reindex(mj.array(data), [6], ["i0-1"], overflow_value=overflow)
    expected = np.concatenate([[overflow], data, [overflow]]).astype(dtype)
    assert_close(result, expected, rtol=0, dtype=dtype)


def test_index_language_floor_semantics_ternary_and_functions(rng):
    data = rng.standard_normal(7).astype(np.float32)
    x = mj.array(data)
    # circular padding: % is a floor modulo, so negative positions wrap around like numpy's "wrap" mode
    assert_close(mj.reindex(x, [13], ["(i0 - 3) % xshape0"]), np.pad(data, 3, mode="wrap"), rtol=0)
    # reflect padding with abs, and symmetric padding with min/max and ?:
    assert_close(mj.reindex(x, [13], ["xshape0 - 1 - abs(xshape0 - 1 - abs(i0 - 3))"]),
                 np.pad(data, 3, mode="reflect"), rtol=0)
    assert_close(mj.reindex(x, [11], ["i0 < 2 ? 1 - i0 : (i0 >= xshape0 + 2 ? 2 * xshape0 + 1 - i0 : i0 - 2)"]),
                 np.pad(data, 2, mode="symmetric"), rtol=0)
    assert_close(mj.reindex(x, [11], ["min(max(i0 - 2, 0), xshape0 - 1)"]), np.pad(data, 2, mode="edge"), rtol=0)
    # / is a floor division: positions -3..3 map to -2, -1, -1, 0, 0, 1, 1 (plus 2 to stay in range)
    positions = np.arange(-3, 4)
    assert_close(mj.reindex(x, [7], ["(i0 - 3) / 2 + 2"]), data[positions // 2 + 2], rtol=0)


def test_parsed_index_expressions_are_shared_only_where_they_mean_the_same():
    """Parses are cached by their strings and what the names in them refer to (meta_ops/reduce.cc): the same text
    over an output of another rank, or with a boolean extra where an integer one was, is parsed (and refused)
    again, not served from the cache."""
    data = np.arange(4.0, dtype=np.float32)
    x = mj.array(data)
    columns = mj.reindex(x, [4, 2], ["yshape1 - 2 + i0"])  # x[i0] in both columns
    assert_close(columns, np.repeat(data[:, None], 2, 1), rtol=0)
    with pytest.raises(ValueError, match="yshape1"):
        mj.reindex(x, [4], ["yshape1 - 2 + i0"])
    picks = mj.array(np.array([2, 0, 1]))
    assert_close(mj.reindex(x, [3], ["@e0(i0)"], extras=[picks]), data[[2, 0, 1]], rtol=0)
    with pytest.raises(ValueError, match="integer index is required"):
        mj.reindex(x, [3], ["@e0(i0)"], extras=[mj.array(np.array([True, False, True]))])

"""Shared by the library-lowering tests of both backends (test_lowering.py: oneDNN, test_cuda_libraries.py: cuBLAS
and cuDNN): every case runs with lowering on and off, and the two must agree with each other and with PyTorch."""
import numpy as np

import metajit as mj

RTOL, ATOL = 1e-4, 1e-4

# conv2d options every backend's lowering must take, forward and both gradients, for [3, 8, 11, 13] images.
CONVOLUTIONS = [
    dict(stride=1, padding=1),
    dict(stride=2, padding=1),
    dict(stride=1, padding=2, dilation=2),
    dict(stride=2, padding=0),            # the last input row is never read
    dict(stride=1, padding=(0, 2)),
    dict(stride=(2, 1), padding=1, dilation=(1, 2)),
]


def floats(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def evaluate(build, *arrays, lowering=True):
    """(numpy results of build(*vars), library calls made) with lowering on or off."""
    mj.flags.lowering = lowering
    try:
        mj.reset_stats()
        results = build(*[mj.array(a) for a in arrays])
        if not isinstance(results, (tuple, list)):
            results = (results,)
        mj.sync(*results)
        values = [r.numpy() for r in results]
        return values, mj.stats()["library_calls"]
    finally:
        mj.flags.lowering = True


def both_ways(build, *arrays):
    """(results with lowering on, library calls it made), after checking that lowering off made none and agrees."""
    lowered, calls = evaluate(build, *arrays, lowering=True)
    plain, plain_calls = evaluate(build, *arrays, lowering=False)
    assert plain_calls == 0, "METAJIT_LOWERING=0 must keep every kernel generated"
    for a, b in zip(lowered, plain):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    return lowered, calls


def check_forward_and_both_gradients(function, torch_function, x, w, options):
    """y = function(x, w, **options) and its gradients (against a random upstream) match PyTorch with lowering on
    and off; returns how many library calls the lowered run made."""
    import torch
    reference = torch_function(torch.from_numpy(x), torch.from_numpy(w), **options)
    upstream = floats(np.random.default_rng(1), *reference.shape)

    def build(x, w, g):
        x.requires_grad = True
        w.requires_grad = True
        y = function(x, w, **options)
        gx, gw = mj.grad((y * g).sum(), [x, w])
        return y, gx, gw
    (y, gx, gw), calls = both_ways(build, x, w, upstream)
    tx, tw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
    ty = torch_function(tx, tw, **options)
    (ty * torch.from_numpy(upstream)).sum().backward()
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=RTOL, atol=1e-3)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=RTOL, atol=1e-3)
    return calls


def check_users_reindex_convolution(rng):
    """A convolution the user writes with reindex/broadcast/sum (no conv op), computed both ways and against
    PyTorch's conv2d; returns the library calls of the lowered run."""
    import torch
    x, w = floats(rng, 2, 4, 9, 9), floats(rng, 5, 4, 3, 3)

    def build(x, w):
        patches = mj.reindex(x, [2, 5, 7, 7, 4, 3, 3], ["i0", "i4", "i2+i5", "i3+i6"])
        weights = mj.broadcast(w, [2, 5, 7, 7, 4, 3, 3], [0, 2, 3])
        return (patches * weights).sum([4, 5, 6])
    (y,), calls = both_ways(build, x, w)
    expected = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w)).numpy()
    np.testing.assert_allclose(y, expected, rtol=RTOL, atol=ATOL)
    return calls

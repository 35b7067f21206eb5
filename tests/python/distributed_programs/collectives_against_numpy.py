"""Run by every rank of `mpirun -np N` (tests/python/test_distributed.py): each collective of metajit.distributed on
every dtype, on 0-size, scalar and uneven shapes, against numpy computed from every rank's inputs (each rank can
make any rank's input: it is a function of the rank). Prints one line "rank R: N checks passed" or raises."""
import numpy as np

import metajit as mj
import metajit.distributed as dist

RANK, SIZE = dist.get_rank(), dist.get_world_size()
DTYPES = ["float32", "float64", "float16", "int8", "uint8", "int32", "int64", "bool"]
SHAPES = [(0,), (), (7,), (3, 5), (2, 1, 3)]


def input_of(rank, shape, dtype, salt=0):
    values = np.random.default_rng(1000 * rank + 17 * salt + len(shape)).integers(0, 5, size=shape)
    if dtype == "bool":
        return values > 2
    return (values + (rank if dtype != "uint8" else 0)).astype(dtype)


checks = 0


def same(actual, expected, what):
    global checks
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (what, actual.dtype, expected.dtype)
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=1e-3 if
                               expected.dtype == np.float16 else 1e-6, err_msg=what)
    checks += 1


for dtype in DTYPES:
    for shape in SHAPES:
        everyone = [input_of(rank, shape, dtype) for rank in range(SIZE)]
        stacked = np.stack(everyone)
        operations = {"sum": stacked.sum(0), "max": stacked.max(0) if stacked.size else stacked.sum(0),
                      "min": stacked.min(0) if stacked.size else stacked.sum(0)}
        if dtype not in ("bool",):
            operations["product"] = stacked.prod(0)
        if dtype.startswith("float"):
            operations["mean"] = stacked.astype(np.float64).mean(0)
        for operation, expected in operations.items():
            tensor = mj.array(everyone[RANK])
            dist.all_reduce(tensor, op=operation)
            if dtype == "bool":
                expected = expected != 0 if operation == "sum" else expected.astype(bool)
            same(tensor.numpy(), expected.astype(everyone[0].dtype), f"all_reduce {operation} {dtype} {shape}")
        source = SIZE - 1
        tensor = mj.array(everyone[RANK])
        dist.broadcast(tensor, src=source)
        same(tensor.numpy(), everyone[source], f"broadcast {dtype} {shape}")
        outputs = [mj.array(np.zeros(shape, everyone[0].dtype)) for _ in range(SIZE)]
        dist.all_gather(outputs, mj.array(everyone[RANK]))
        for rank in range(SIZE):
            same(outputs[rank].numpy(), everyone[rank], f"all_gather {dtype} {shape} piece {rank}")
        if dtype != "bool":
            # reduce_scatter: a first dimension of SIZE pieces of 2 rows each.
            pieces = [input_of(rank, (2 * SIZE,) + shape, dtype, salt=1) for rank in range(SIZE)]
            output = mj.array(np.zeros((2,) + shape, pieces[0].dtype))
            dist.reduce_scatter_tensor(output, mj.array(pieces[RANK]))
            total = np.stack(pieces).sum(0).astype(pieces[0].dtype)
            same(output.numpy(), total[2 * RANK:2 * RANK + 2], f"reduce_scatter {dtype} {shape}")

# The differentiable ones: forward values and gradients against the same sums worked out by hand.
weights = mj.array(np.arange(3, dtype=np.float32) + RANK, requires_grad=True)
gathered = dist.nn.functional.all_gather(weights * 2.0)
loss = sum((piece * (index + 1)).sum() for index, piece in enumerate(gathered))
loss.backward()
# d loss / d weights on this rank: every rank's loss uses this rank's piece with factor (RANK + 1) * 2, summed over
# the SIZE ranks' losses by the reduce-scatter.
same(weights.grad.numpy(), np.full(3, 2.0 * (RANK + 1) * SIZE, np.float32), "all_gather gradient")
value = mj.array([1.0, 2.0], requires_grad=True)
reduced = dist.nn.functional.all_reduce(value * (RANK + 1))
same(reduced.numpy(), np.array([1.0, 2.0], np.float32) * SIZE * (SIZE + 1) / 2, "differentiable all_reduce")
(reduced * mj.array([1.0, 3.0])).sum().backward()
same(value.grad.numpy(), np.array([1.0, 3.0], np.float32) * SIZE * (RANK + 1), "all_reduce gradient")
dist.barrier()
print(f"rank {RANK}: {checks} checks passed", flush=True)

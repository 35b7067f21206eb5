"""Run by every rank of `mpirun -np 2` (tests/python/test_distributed.py): collectives are entries of the lazy plan.
Prints "rank R: plan entries ok" or raises. Each check is one that an eager or unordered implementation fails."""
import numpy as np

import metajit as mj
import metajit.distributed as dist

RANK, SIZE = dist.get_rank(), dist.get_world_size()
assert SIZE == 2

# 1. One sync computes the input, runs the collective and the kernel that reads its result: the plan has a host
#    entry between generated kernels, and nothing ran when the collective was recorded.
a = mj.array(np.arange(6, dtype=np.float32).reshape(2, 3) + RANK)
summed = a * 2
mj.reset_stats()
dist.all_reduce(summed)
assert mj.stats()["kernels_launched"] == 0, "recording the collective ran kernels"
result = (summed + 1).exp()
kinds = [kernel.kind for kernel in mj.inspect(result)]
assert "host" in kinds and kinds.index("host") > 0 and kinds[-1] == "generated", kinds
names = [kernel.ops[0] for kernel in mj.inspect(result) if kernel.kind == "host"]
assert names[0].startswith("all_reduce sum  [2, 3]"), names
expected = np.exp(2 * (2 * np.arange(6, dtype=np.float32).reshape(2, 3) + 1) + 1)
np.testing.assert_allclose(result.numpy(), expected, rtol=1e-6)

# 2. Collectives run in the order they were recorded on every rank, whichever result a rank reads first: rank 0
#    reads the second one first. Run out of order, the ranks would call different collectives (shapes 3 and 5).
first = mj.array(np.full(3, 1.0 + RANK, np.float32))
second = mj.array(np.full(5, 10.0 * (RANK + 1), np.float32))
dist.all_reduce(first)
dist.all_reduce(second)
if RANK == 0:
    np.testing.assert_allclose(second.numpy(), np.full(5, 30.0))
    np.testing.assert_allclose(first.numpy(), np.full(3, 3.0))
else:
    np.testing.assert_allclose(first.numpy(), np.full(3, 3.0))
    np.testing.assert_allclose(second.numpy(), np.full(5, 30.0))

# 3. A collective whose result a rank never reads still runs on that rank (at its next sync), so the rank that
#    reads it does not wait forever: rank 1 reads `unread`, rank 0 only syncs something else.
unread = mj.array(np.full(4, 2.0 + RANK, np.float32))
dist.all_reduce(unread)
if RANK == 1:
    np.testing.assert_allclose(unread.numpy(), np.full(4, 5.0))
else:
    (mj.ones(2) * 3).numpy()  # a sync of an unrelated value runs the pending collective too

# 4. Gradients that feed a collective and the update that reads its result are one plan: averaging gradients and
#    an SGD step on them, as DistributedDataParallel does.
weight = mj.array(np.ones(4, np.float32))
weight.requires_grad = True
loss = (weight * mj.array(np.arange(4, dtype=np.float32) * (RANK + 1))).sum()
gradient, = mj.grad(loss, [weight])
averaged = mj.distributed._reduced(gradient, "mean", "average", "plan_entries.py")
updated = weight.detach() - 0.5 * averaged
kinds = [kernel.kind for kernel in mj.inspect(updated)]
assert kinds.count("host") == 1, kinds
np.testing.assert_allclose(updated.numpy(), 1 - 0.5 * np.arange(4) * 1.5, rtol=1e-6)

# 5. DistributedDataParallel's buckets start early: with a bucket per weight, the later layers' all-reduces are
#    planned ahead of the earlier layers' backward matrix products (they move while those run), and the averaged
#    gradients still equal the mean over the ranks.
from metajit import nn  # noqa: E402
mj.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 8))
wrapped = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=64 * 64 * 4 / 2**20)
inputs = mj.array(np.random.default_rng(RANK).standard_normal((16, 64)).astype(np.float32))
wrapped(inputs).sum().backward()
gradients = [parameter.grad for parameter in model.parameters()]
kinds = [kernel.kind for kernel in mj.inspect(*gradients)]
last_product = max(index for index, kind in enumerate(kinds) if kind.startswith("library"))
assert kinds.count("host") >= 4, kinds
# In recording order only the first bucket's all-reduce comes before the last backward product.
assert kinds[:last_product].count("host") >= 3, kinds
mine = [gradient.numpy() for gradient in gradients]
everyone = [np.zeros_like(value) for value in mine]
for rank in range(SIZE):  # each rank's own gradient, recomputed here without averaging
    mj.manual_seed(0)
    alone = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 8))
    data = mj.array(np.random.default_rng(rank).standard_normal((16, 64)).astype(np.float32))
    alone(data).sum().backward()
    for index, parameter in enumerate(alone.parameters()):
        everyone[index] += parameter.grad.numpy() / SIZE
for value, expected in zip(mine, everyone):
    np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6)

# 6. A collective inside an mj.trace recording is refused on every rank, naming the line, rather than skipped by a
#    replay (which would leave the other ranks waiting for it).
@mj.trace
def traced_all_reduce(x):
    y = x * 2
    dist.all_reduce(y)
    return y


try:
    traced_all_reduce(mj.array(np.ones(4, np.float32)))
except RuntimeError as error:
    assert "inside a traced function is not replayed yet" in str(error) and "plan_entries.py:" in str(error), error
else:
    raise AssertionError("a collective inside mj.trace was not refused")

print(f"rank {RANK}: plan entries ok", flush=True)

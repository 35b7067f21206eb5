"""Trains a small classifier for 6 steps of SGD with momentum on a fixed batch of 24 examples, split evenly over
the ranks of the job (rank r takes rows r, r + N, ...), and writes the final parameters to argv[2] from rank 0.
argv[1]: "ddp" wraps the model in nn.parallel.DistributedDataParallel; "optimizer" relies on the optimizer
averaging gradients over the ranks (Jittor's convenience). Each rank starts from different weights (seeded by
rank) to check that the wrapper broadcasts rank 0's; in "optimizer" mode they are made equal by hand. Run as a
plain process it is the single-process reference with the whole batch."""
import sys

import numpy as np

import metajit as mj
import metajit.distributed as dist
import metajit.nn.functional as F

mode, output = sys.argv[1], sys.argv[2]
rank, size = dist.get_rank(), dist.get_world_size()
rng = np.random.default_rng(0)
images = rng.standard_normal((24, 10)).astype(np.float32)
labels = rng.integers(0, 3, 24)

mj.seed(100 + rank)
model = mj.nn.Sequential(mj.nn.Linear(10, 16), mj.nn.Tanh(), mj.nn.Linear(16, 3))
if mode == "ddp":
    model = mj.nn.parallel.DistributedDataParallel(model)
else:
    for parameter in model.parameters():
        dist.broadcast(parameter.data, src=0)
optimizer = mj.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x, y = mj.array(images[rank::size]), mj.array(labels[rank::size])
for step in range(6):
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if rank == 0:
    np.savez(output, *[parameter.numpy() for parameter in model.parameters()])
print(f"rank {rank}: trained", flush=True)

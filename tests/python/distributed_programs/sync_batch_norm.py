"""Run by every rank of `mpirun -np N`, or alone as the reference: SyncBatchNorm2d in training mode on rank r's
rows r, r + N, ... of a fixed batch of 8 (or all 8 alone), then backward of sum(output * fixed weights). Writes
argv[1] + f".{rank}.npz": the rows it owns, its output, the input's gradient, the weight and bias gradients and the
running statistics."""
import sys

import numpy as np

import metajit as mj
import metajit.distributed as dist

rank, size = dist.get_rank(), dist.get_world_size()
rng = np.random.default_rng(3)
images = rng.standard_normal((8, 3, 4, 5)).astype(np.float32) * 2 + 1
weights = rng.standard_normal((8, 3, 4, 5)).astype(np.float32)
rows = np.arange(8)[rank::size]
layer = mj.nn.SyncBatchNorm(3, momentum=0.3)
with mj.no_grad():
    layer.weight.copy_(mj.array(np.array([1.5, -0.5, 2.0], np.float32)))
    layer.bias.copy_(mj.array(np.array([0.1, 0.2, -0.3], np.float32)))
x = mj.array(images[rows], requires_grad=True)
output = layer(x)
(output * mj.array(weights[rows])).sum().backward()
np.savez(f"{sys.argv[1]}.{rank}.npz", rows=rows, output=output.numpy(), input_grad=x.grad.numpy(),
         weight_grad=layer.weight.grad.numpy(), bias_grad=layer.bias.grad.numpy(),
         running_mean=layer.running_mean.numpy(), running_var=layer.running_var.numpy())

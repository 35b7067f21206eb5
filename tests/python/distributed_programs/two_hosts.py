"""Run by each rank of a job spread over two network namespaces that stand in for two hosts
(tests/python/test_distributed_hosts.py): prints its rank and network namespace, then all-reduces 4 MB so that
the traffic between the "hosts" is measurable on their link."""
import os

import numpy as np

import metajit as mj
import metajit.distributed as dist

tensor = mj.array(np.full(1 << 20, dist.get_rank() + 1.0, np.float32))
dist.all_reduce(tensor)
assert float(tensor.numpy()[0]) == 3.0 and float(tensor.numpy()[-1]) == 3.0
print(f"rank {dist.get_rank()} in {os.readlink('/proc/self/ns/net')}", flush=True)

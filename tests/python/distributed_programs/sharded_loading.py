"""Run by every rank of `mpirun -np N` (tests/python/test_distributed.py): a DataLoader made without a sampler loads
this rank's share of a 10-example dataset (mpirun shards by default), for two epochs with shuffle. Prints
"rank R epoch E: i j k ..." with the example indices it saw."""
import numpy as np

import metajit as mj
import metajit.distributed as dist

dataset = mj.data.TensorDataset(mj.array(np.arange(10)))
loader = mj.data.DataLoader(dataset, batch_size=2, shuffle=True)
for epoch in range(2):
    seen = [int(value) for (batch,) in loader for value in batch.numpy()]
    print(f"rank {dist.get_rank()} epoch {epoch}: " + " ".join(map(str, seen)), flush=True)
for _ in mj.data.DataLoader(dataset, batch_size=5, progress="loading"):
    pass

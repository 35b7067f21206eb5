"""Run by every rank of `mpirun -np 2` (tests/python/test_distributed.py) to make one rank misbehave. Collectives
are lazy: each runs (and fails) at the sync that reads its result, here the .numpy() after it.
  shape  - rank 1 all-reduces a longer tensor than rank 0 (every rank catches the mismatch and says so);
  raise  - rank 1 raises before the collective rank 0 waits in;
  skip   - rank 1 never calls the collective rank 0 waits in, and sleeps;
  kill   - rank 1 is killed (SIGKILL) while rank 0 waits in a collective."""
import sys
import time

import metajit as mj
import metajit.distributed as dist

rank = dist.get_rank()
mode = sys.argv[1]
if mode == "shape":
    try:
        dist.all_reduce(mj.ones(4 + rank)).numpy()
    except dist.CollectiveMismatchError as error:
        print(f"rank {rank} caught: {error}", flush=True)
        sys.exit(3)
elif mode == "raise":
    if rank == 1:
        raise ValueError("rank one fails on purpose")
    dist.all_reduce(mj.ones(4)).numpy()
elif mode == "kill":
    if rank == 1:
        import os
        import signal
        time.sleep(1)
        os.kill(os.getpid(), signal.SIGKILL)
    dist.all_reduce(mj.ones(4)).numpy()
elif mode == "skip":
    if rank == 0:
        dist.all_reduce(mj.ones(4)).numpy()
    time.sleep(120)

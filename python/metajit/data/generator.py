"""Random streams for data loading: which object a `generator=` argument may be (samplers, random_split,
DataLoader) and how a stream is drawn from it, plus Generator, a small seedable stand-in for torch.Generator.

Accepted `generator` values:
  * None: seeds are drawn from metajit's global generator (the one mj.seed / mj.manual_seed set), as PyTorch draws
    from its default generator; the draw advances that generator, so a program seeded once is reproducible.
  * metajit.data.Generator: a stateful stream (manual_seed, seed, initial_seed, get_state, set_state).
  * numpy.random.Generator: used directly, its state advances.
  * numpy.random.RandomState: a fresh stream is seeded from it on every use.
  * any other object with initial_seed() (torch.Generator itself): a stream seeded with its initial_seed(), kept
    per object and restarted when that seed changes (re-seeding with the same value does not restart it).

Must not run metajit's engine: the global draw reads the host-side generator (eager float64 values, no kernel)."""
import os
import threading

import numpy as np

__all__ = ["Generator"]

# torch.Generator's default seed, so an unseeded Generator() is reproducible the same way.
DEFAULT_SEED = 67280421310721
_SEED_BITS = 64


class Generator:
    """Generator(device="cpu"): a seedable random stream for data loading, in place of torch.Generator.

    manual_seed(seed) restarts it (and returns it, as PyTorch does), seed() reseeds it from OS entropy and returns
    the seed, initial_seed() is the last seed, get_state()/set_state() save and restore the position. Only data
    loading reads it: metajit's random ops (mj.rand, dropout) follow mj.seed instead."""

    def __init__(self, device="cpu"):
        self.device = device
        self.manual_seed(DEFAULT_SEED)

    def manual_seed(self, seed):
        seed = int(seed)
        # PyTorch accepts negative seeds by wrapping them into 64 bits.
        self._initial_seed = seed % (1 << _SEED_BITS)
        self.numpy_generator = np.random.default_rng(self._initial_seed)
        return self

    def seed(self):
        fresh = int.from_bytes(os.urandom(8), "little") >> 1
        self.manual_seed(fresh)
        return fresh

    def initial_seed(self):
        return self._initial_seed

    def get_state(self):
        return {"initial_seed": self._initial_seed, "bit_generator": self.numpy_generator.bit_generator.state}

    def set_state(self, state):
        self._initial_seed = state["initial_seed"]
        self.numpy_generator = np.random.default_rng(0)
        self.numpy_generator.bit_generator.state = state["bit_generator"]
        return self

    def __repr__(self):
        return f"metajit.data.Generator(initial_seed={self._initial_seed})"


# Streams kept for foreign objects that only tell their seed (torch.Generator): id -> (object, seed, stream). The
# object is held so that its id cannot be reused by another one.
_foreign_streams = {}
_foreign_lock = threading.Lock()


def global_seed():
    """A 64-bit seed drawn from metajit's global generator (mj.seed), advancing it."""
    from .. import _core
    # Two host-side float64 draws (53 random bits each); rand in float64 is filled eagerly, no kernel runs.
    high, low = (_core.rand([2], "float64").numpy() * float(1 << 32)).astype(np.uint64).tolist()
    return (high << 32) | low


def numpy_stream(generator):
    """The numpy Generator to draw from for one use (an epoch's order, one split), per the rules in the module
    docstring. Raises TypeError for anything else."""
    if generator is None:
        return np.random.default_rng(global_seed())
    if isinstance(generator, Generator):
        return generator.numpy_generator
    if isinstance(generator, np.random.Generator):
        return generator
    if isinstance(generator, np.random.RandomState):
        return np.random.default_rng(int(generator.randint(0, 2 ** 63 - 1, dtype=np.int64)))
    initial_seed = getattr(generator, "initial_seed", None)
    if callable(initial_seed):
        seed = int(initial_seed()) % (1 << _SEED_BITS)
        with _foreign_lock:
            entry = _foreign_streams.get(id(generator))
            if entry is None or entry[1] != seed:
                entry = (generator, seed, np.random.default_rng(seed))
                _foreign_streams[id(generator)] = entry
        return entry[2]
    raise TypeError("generator must be None, a metajit.data.Generator, a numpy.random.Generator, a "
                    "numpy.random.RandomState or an object with initial_seed() (such as torch.Generator), got "
                    f"{type(generator).__name__}")


def check_generator(generator):
    """Raises the TypeError of numpy_stream now (at construction) instead of at the first epoch."""
    if generator is None or isinstance(generator, (Generator, np.random.Generator, np.random.RandomState)):
        return
    if not callable(getattr(generator, "initial_seed", None)):
        numpy_stream(generator)


def draw_seed(generator):
    """One 63-bit seed from `generator` (a worker base seed), advancing it."""
    if generator is None:
        return global_seed() >> 1
    return int(numpy_stream(generator).integers(0, 2 ** 63 - 1))

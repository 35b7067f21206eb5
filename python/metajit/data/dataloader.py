"""DataLoader with PyTorch's torch.utils.data interface: batches from a map-style or iterable dataset as metajit
Vars, loaded in the main process or, with num_workers > 0, in worker processes with prefetching.

Worker processes (metajit.data.worker) produce numpy data only; this module, in the main process, turns their
batches into Vars, keeps them in order, re-raises their errors and shuts them down (end of epoch, break, garbage
collection, errors, interpreter exit) without hanging or leaving shared memory segments behind. It must never let
a worker run metajit's engine."""
import atexit
import gc
import numbers
import os
import pickle
import queue
import sys
import time
import weakref

import numpy as np

from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .fetch import DatasetExhausted, make_fetcher
from .generator import check_generator, draw_seed
from .sampler import BatchSampler, RandomSampler, SequentialSampler, _InfiniteSampler
from . import worker as worker_module

__all__ = ["DataLoader"]

# How long the main process waits for one result before checking that the workers are alive.
STATUS_CHECK_SECONDS = 1.0
# How long a shutdown waits for workers to exit by themselves before terminating them.
SHUTDOWN_SECONDS = 5.0


def _rank():
    from .. import distributed
    return distributed.get_rank()


def _world_size():
    from .. import distributed
    return distributed.get_world_size()


def _shard_seed(generator):
    """The seed every rank's default DistributedSampler shuffles with: the generator's if one was given."""
    seed = getattr(generator, "initial_seed", None)
    return int(seed()) if callable(seed) else 0


class DataLoader:
    """DataLoader(dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
    collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None, multiprocessing_context=None,
    generator=None, *, prefetch_factor=None, persistent_workers=False, pin_memory_device="", in_order=True,
    seed=None, progress=False).

    As torch.utils.data.DataLoader; batches hold Vars. metajit additions: seed=N is generator=
    numpy.random.default_rng(N) (reproducible shuffling); progress=True or a description string shows a tqdm bar
    (under mpirun on rank 0 only).
    pin_memory is accepted and has no effect. num_workers > 0 loads in worker processes (fork by default on Linux),
    which must produce numpy data only: see docs/data.md."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True, seed=None, progress=False):
        iterable = isinstance(dataset, IterableDataset)
        if not iterable and not hasattr(dataset, "__getitem__"):
            raise TypeError("DataLoader needs a map-style dataset (with __getitem__ and __len__) or an "
                            f"IterableDataset, got {type(dataset).__name__}")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral)
                                       or batch_size <= 0):
            raise ValueError(f"batch_size should be a positive integer or None, got {batch_size!r}")
        if not isinstance(num_workers, numbers.Integral) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing. let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if prefetch_factor is not None and (not isinstance(prefetch_factor, numbers.Integral) or prefetch_factor < 1):
            raise ValueError("prefetch_factor option should be a positive integer")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError("collate_fn must be callable")
        if worker_init_fn is not None and not callable(worker_init_fn):
            raise TypeError("worker_init_fn must be callable")
        if seed is not None:
            if generator is not None:
                raise ValueError("give either seed= or generator=, not both")
            generator = np.random.default_rng(seed)
        check_generator(generator)

        if iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified batch_sampler option, but got "
                                 f"batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                             "drop_last")
        self._sharded_by_default = False
        if sampler is None and batch_sampler is None and not iterable and _world_size() > 1:
            # Under mpirun each rank loads its own share (Jittor's default); the epoch advances per iteration.
            from .distributed import DistributedSampler
            sampler = DistributedSampler(dataset, shuffle=bool(shuffle), seed=_shard_seed(generator))
            self._sharded_by_default = True
        if sampler is None:
            if iterable:
                sampler = _InfiniteSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, bool(drop_last))

        self._epochs_started = 0
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = bool(drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = int(num_workers)
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if batch_sampler is not None else default_convert)
        self.pin_memory = pin_memory  # host memory is all there is on the CPU: nothing to pin
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = (2 if prefetch_factor is None else int(prefetch_factor)) if num_workers else None
        self.persistent_workers = bool(persistent_workers)
        self.in_order = bool(in_order)
        self.seed = seed
        self.progress = progress
        self._iterable = iterable
        self._persistent_iterator = None

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    @property
    def multiprocessing_context(self):
        return self._multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context):
        if context is not None and not isinstance(context, str) and not hasattr(context, "Process"):
            raise TypeError("multiprocessing_context should be a start method name ('fork', 'spawn', "
                            f"'forkserver') or a multiprocessing context, got {type(context).__name__}")
        self._multiprocessing_context = context

    def _worker_context(self):
        """The multiprocessing context workers start in (imported here: loading without workers never pays for
        multiprocessing)."""
        import multiprocessing
        context = self._multiprocessing_context
        if isinstance(context, str):
            return multiprocessing.get_context(context)
        if context is None:
            # fork on Linux: cheap starts and the dataset is not pickled; elsewhere the platform's default.
            return multiprocessing.get_context("fork" if sys.platform.startswith("linux") else None)
        return context

    def __len__(self):
        if self._iterable:
            count = len(self.dataset)  # TypeError when the dataset has no length, as in PyTorch
            if self.batch_size is not None:
                count = count // self.batch_size if self.drop_last else -(-count // self.batch_size)
            return count
        return len(self._index_sampler)

    def _make_iterator(self):
        if self.num_workers == 0:
            return _SingleProcessIterator(self)
        if self.persistent_workers:
            if self._persistent_iterator is None or not self._persistent_iterator._usable():
                self._persistent_iterator = _MultiProcessIterator(self)
            else:
                self._persistent_iterator._reset(self)
            return self._persistent_iterator
        return _MultiProcessIterator(self)

    def __iter__(self):
        if self._sharded_by_default:
            self.sampler.set_epoch(self._epochs_started)
            self._epochs_started += 1
        iterator = self._make_iterator()
        if not self.progress or _rank() != 0:  # under mpirun one bar, rank 0's, instead of one per rank
            return iterator
        from tqdm import tqdm
        description = self.progress if isinstance(self.progress, str) else None
        try:
            total = len(self)
        except TypeError:
            total = None
        return iter(tqdm(iterator, total=total, desc=description))


class _BaseIterator:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._iterable = loader._iterable
        self._auto_collation = loader._auto_collation
        self._collate_fn = loader.collate_fn
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._sampler_iterator = iter(self._index_sampler)
        # Drawn for every epoch, workers or not (as PyTorch does), so that the sampler's order from a given
        # generator does not depend on num_workers.
        self._base_seed = draw_seed(loader.generator)
        self._length = None
        try:
            self._length = len(loader)
        except TypeError:
            pass

    def __iter__(self):
        return self

    def __len__(self):
        if self._length is None:
            raise TypeError("this DataLoader's dataset has no length")
        return self._length


class _SingleProcessIterator(_BaseIterator):
    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = make_fetcher(self._iterable, self._dataset, self._auto_collation, self._collate_fn,
                                     self._drop_last)

    def __next__(self):
        indices = next(self._sampler_iterator)
        try:
            return self._fetcher.fetch(indices)
        except DatasetExhausted:
            raise StopIteration from None


# Iterators with live workers, shut down at interpreter exit before multiprocessing's own exit handler runs
# (registered on first use, after multiprocessing.util registered its handler: atexit runs the last one first).
_live_iterators = weakref.WeakSet()
_exit_hook_registered = False


def _shut_down_live_iterators():
    for iterator in list(_live_iterators):
        iterator._shutdown_workers()


def _register_exit_hook():
    global _exit_hook_registered
    if not _exit_hook_registered:
        import multiprocessing.util  # noqa: F401
        atexit.register(_shut_down_live_iterators)
        _exit_hook_registered = True


class _MultiProcessIterator(_BaseIterator):
    """Keeps num_workers * prefetch_factor tasks in flight, hands them out round robin to the active workers and
    yields results in task order (or as they arrive with in_order=False)."""

    def __init__(self, loader):
        super().__init__(loader)
        self._shutdown = True  # until the workers exist: __del__ may run after a failure below
        self._owner_pid = os.getpid()
        self._arrived = {}
        self._num_workers = loader.num_workers
        self._prefetch = loader.num_workers * loader.prefetch_factor
        self._timeout = loader.timeout
        self._in_order = loader.in_order
        self._persistent = loader.persistent_workers
        context = loader._worker_context()
        _register_exit_hook()
        self._epoch = 0
        self._current_epoch = context.Value("q", 0, lock=False)
        self._done_event = context.Event()
        self._result_queue = context.Queue()
        self._index_queues = []
        self._workers = []
        from multiprocessing import resource_tracker
        # Started here so that every worker reports its segments to this process's tracker (a worker starting
        # its own would unlink them when that worker exits).
        resource_tracker.ensure_running()
        # Objects the workers inherit stay out of their garbage collector: collecting a Var there would run
        # engine code in the forked process. (A program that froze objects itself manages its collector.)
        freeze = gc.get_freeze_count() == 0
        if freeze:
            gc.freeze()
        try:
            for worker_id in range(self._num_workers):
                index_queue = context.Queue()
                process = context.Process(
                    target=worker_module.worker_loop,
                    args=(self._iterable, self._dataset, index_queue, self._result_queue, self._done_event,
                          self._auto_collation, self._collate_fn, self._drop_last, self._base_seed + worker_id,
                          loader.worker_init_fn, worker_id, self._num_workers, self._current_epoch),
                    daemon=True)
                process.start()
                self._index_queues.append(index_queue)
                self._workers.append(process)
                self._shutdown = False
        finally:
            if freeze:
                gc.unfreeze()
        _live_iterators.add(self)
        self._start_epoch()

    def _start_epoch(self):
        self._send_index = 0
        self._receive_index = 0
        self._tasks = {}  # task id -> worker id, for tasks whose result is not consumed yet
        self._arrived = {}  # task id -> payload that arrived before its turn
        self._worker_active = [True] * self._num_workers
        self._next_worker = 0
        self._sampler_exhausted = False
        for _ in range(self._prefetch):
            self._put_task()

    def _usable(self):
        return not self._shutdown and all(process.is_alive() for process in self._workers)

    def _reset(self, loader):
        """A new epoch on the same workers (persistent_workers): tasks of the old epoch are dropped."""
        for payload in self._arrived.values():
            worker_module.release(payload)
        self._sampler_iterator = iter(self._index_sampler)
        self._epoch += 1
        self._current_epoch.value = self._epoch
        self._start_epoch()

    def _put_task(self):
        if self._sampler_exhausted:
            return
        for _ in range(self._num_workers):
            worker_id = self._next_worker
            self._next_worker = (self._next_worker + 1) % self._num_workers
            if self._worker_active[worker_id]:
                break
        else:
            return
        try:
            indices = next(self._sampler_iterator)
        except StopIteration:
            self._sampler_exhausted = True
            return
        self._index_queues[worker_id].put((self._epoch, self._send_index, indices))
        self._tasks[self._send_index] = worker_id
        self._send_index += 1

    def _skip_unanswerable(self):
        # Tasks already answered out of order, or sent to a worker whose iterable dataset has ended.
        while self._receive_index < self._send_index:
            task_id = self._receive_index
            if task_id in self._arrived:
                return
            worker_id = self._tasks.get(task_id)
            if worker_id is not None and self._worker_active[worker_id]:
                return
            self._tasks.pop(task_id, None)
            self._receive_index += 1

    def _get_result(self):
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = STATUS_CHECK_SECONDS
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            try:
                return pickle.loads(self._result_queue.get(timeout=wait))
            except queue.Empty:
                pass
            dead = [process for process in self._workers if not process.is_alive()]
            if dead:
                self._shutdown_workers()
                details = ", ".join(f"pid {process.pid} (exit code {process.exitcode})" for process in dead)
                raise RuntimeError(f"DataLoader worker(s) exited unexpectedly: {details}")
            if deadline is not None and time.monotonic() >= deadline:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")

    def _deliver(self, task_id, payload):
        self._tasks.pop(task_id, None)
        self._put_task()
        if isinstance(payload, worker_module.WorkerError):
            payload.reraise()
        return worker_module.unpack(payload)

    def __next__(self):
        while True:
            if self._shutdown:
                raise StopIteration
            self._skip_unanswerable()
            if self._receive_index >= self._send_index:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            if self._receive_index in self._arrived:
                task_id = self._receive_index
                self._receive_index += 1
                return self._deliver(task_id, self._arrived.pop(task_id))
            epoch, task_id, worker_id, payload = self._get_result()
            if epoch != self._epoch:
                worker_module.release(payload)
                continue
            if isinstance(payload, worker_module.Exhausted):
                self._worker_active[worker_id] = False
                self._tasks.pop(task_id, None)
                continue
            if task_id == self._receive_index:
                self._receive_index += 1
                return self._deliver(task_id, payload)
            if not self._in_order:
                return self._deliver(task_id, payload)
            self._arrived[task_id] = payload

    def _shutdown_workers(self):
        """Stops the workers and unlinks every segment still in flight. Safe to call more than once."""
        if getattr(self, "_shutdown", True) or os.getpid() != self._owner_pid:
            return  # already done, or a forked child's copy of this object: the workers are not its to stop
        self._shutdown = True
        if _live_iterators is not None:  # None while the interpreter tears this module down
            _live_iterators.discard(self)
        try:
            self._done_event.set()
            for index_queue in self._index_queues:
                try:
                    index_queue.put(None)
                except (OSError, ValueError):
                    pass
            # Read what the workers still send while they exit: a worker flushes its queue before exiting, and the
            # segments named there are ours to unlink.
            deadline = time.monotonic() + SHUTDOWN_SECONDS
            while any(process.is_alive() for process in self._workers) and time.monotonic() < deadline:
                self._drain(0.05)
            terminated = False
            for process in self._workers:
                if process.is_alive():
                    process.terminate()
                    terminated = True
                process.join(timeout=1.0)
            if not terminated:
                # Everything the workers flushed is in the pipe now; after a terminate a message may be cut.
                while self._drain(0.01):
                    pass
            for payload in self._arrived.values():
                worker_module.release(payload)
            self._arrived.clear()
        finally:
            for index_queue in self._index_queues:
                index_queue.cancel_join_thread()
                index_queue.close()
            self._result_queue.cancel_join_thread()
            self._result_queue.close()

    def _drain(self, wait):
        """Reads one result (waiting up to `wait` seconds) and unlinks its segments; False if there was none."""
        try:
            blob = self._result_queue.get(timeout=wait)
        except (queue.Empty, OSError, EOFError, ValueError):
            return False
        try:
            message = pickle.loads(blob)
        except Exception:
            return True
        worker_module.release(message[3])
        return True

    def __del__(self):
        self._shutdown_workers()

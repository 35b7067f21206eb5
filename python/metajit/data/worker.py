"""DataLoader worker processes: the loop a worker runs, get_worker_info(), and how batches travel to the main
process (numpy arrays through POSIX shared memory segments, everything else pickled).

The rule: metajit's engine (LLVM JIT, thread pools) never runs in a worker. Workers index datasets, collate and
pack numpy data only; the main process turns the marked arrays into Vars. A Var met in a worker is copied out if
its value is already computed, otherwise the worker reports a clear error. Every shared memory segment a worker
creates is unlinked by exactly one side: the main process when it unpacks or discards the message, the worker when
the message is never sent."""
import pickle
import queue
import random
import signal
import traceback

import numpy as np

from .._core import Var
from .collate import CollatedArray, contiguous, host_value
from .fetch import DatasetExhausted, make_fetcher

__all__ = ["WorkerInfo", "get_worker_info"]

# Arrays smaller than this are pickled with the message: a segment costs system calls and a resource tracker
# round trip, more than copying a few kilobytes through the pipe.
SHARED_MEMORY_MIN_BYTES = 4096
# How often a waiting worker checks that the main process still exists.
POLL_SECONDS = 1.0

_worker_info = None
_NO_TASK = object()


class WorkerInfo:
    """What get_worker_info() returns inside a worker: id (0..num_workers-1), num_workers, seed (this worker's
    seed: the loader's base seed + id) and dataset (this worker's copy)."""

    __slots__ = ("id", "num_workers", "seed", "dataset")

    def __init__(self, id, num_workers, seed, dataset):
        for name, value in (("id", id), ("num_workers", num_workers), ("seed", seed), ("dataset", dataset)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise RuntimeError(f"Cannot assign attributes to {type(self).__name__} objects")

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
                f"dataset={type(self.dataset).__name__})")


def get_worker_info():
    """In a DataLoader worker process: its WorkerInfo (id, num_workers, seed, dataset). In the main process: None."""
    return _worker_info


# ---- messages ----

class SharedArray:
    """A numpy array left in the shared memory segment `name`; as_var: the main process makes it a Var."""
    __slots__ = ("name", "shape", "dtype", "as_var")

    def __init__(self, name, shape, dtype, as_var):
        self.name, self.shape, self.dtype, self.as_var = name, shape, dtype, as_var

    def __getstate__(self):
        return (self.name, self.shape, self.dtype, self.as_var)

    def __setstate__(self, state):
        self.name, self.shape, self.dtype, self.as_var = state


class InlineArray:
    """A small numpy array pickled with the message; as_var as in SharedArray."""
    __slots__ = ("array", "as_var")

    def __init__(self, array, as_var):
        self.array, self.as_var = array, as_var

    def __getstate__(self):
        return (self.array, self.as_var)

    def __setstate__(self, state):
        self.array, self.as_var = state


class WorkerError:
    """An exception raised in a worker, carried to the main process with the worker's formatted traceback."""

    def __init__(self, worker_id, error, where="in DataLoader worker process"):
        self.worker_id = worker_id
        self.type_name = type(error).__name__
        lines = traceback.format_exception(type(error), error, error.__traceback__)
        # format_exception starts with "Traceback (most recent call last):"; the message says "Original ..." there.
        self.traceback = "".join(lines[1:] if lines and lines[0].startswith("Traceback") else lines)
        try:  # the type travels if the main process can unpickle it; otherwise RuntimeError stands in
            self.error_type = pickle.loads(pickle.dumps(type(error)))
        except Exception:
            self.error_type = None
        self.where = where

    def reraise(self):
        text = (f"Caught {self.type_name} {self.where} {self.worker_id}.\n"
                f"Original Traceback (most recent call last):\n{self.traceback}")
        error = None
        if self.error_type is not None:
            try:
                error = self.error_type(text)
            except Exception:
                error = None
        if not isinstance(error, BaseException):
            error = RuntimeError(text)
        try:
            raise error
        finally:
            del error  # else this frame and the exception keep each other (and the iterator) alive


class Exhausted:
    """The worker's copy of an iterable dataset ended: it answers no more tasks this epoch."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


# ---- packing (worker side) and unpacking (main side) ----

def _array_message(array, as_var, created):
    from multiprocessing import shared_memory
    array = contiguous(np.asarray(array)).view(np.ndarray)
    if array.dtype.hasobject or array.nbytes < SHARED_MEMORY_MIN_BYTES:
        return InlineArray(array, as_var)
    segment = shared_memory.SharedMemory(create=True, size=array.nbytes)
    created.append(segment.name)
    try:
        target = np.ndarray(array.shape, array.dtype, buffer=segment.buf)
        target[...] = array
        del target  # the mapping cannot close while a view of it exists
    finally:
        segment.close()
    return SharedArray(segment.name, array.shape, array.dtype, as_var)


def pack(data, created):
    """`data` with its numpy arrays (and computed Vars) replaced by SharedArray/InlineArray; names of new segments
    are appended to `created` (for cleanup when the message is not sent)."""
    if isinstance(data, Var):
        return _array_message(host_value(data), True, created)
    if isinstance(data, np.ndarray):
        return _array_message(data, isinstance(data, CollatedArray), created)
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(pack(value, created) for value in data))
    if isinstance(data, (tuple, list, dict)):
        if isinstance(data, dict):
            packed = {key: pack(value, created) for key, value in data.items()}
        else:
            packed = [pack(value, created) for value in data]
        try:  # keep the container's type where it can be rebuilt from its items
            return type(data)(packed)
        except TypeError:
            return packed
    return data


def _unlink(name):
    from multiprocessing import shared_memory
    try:
        segment = shared_memory.SharedMemory(name=name)
    except FileNotFoundError:
        return
    segment.close()
    segment.unlink()


def release_names(names):
    for name in names:
        _unlink(name)


def unpack(message):
    """The main process's value of a packed message: arrays marked as_var become Vars; every segment is read once
    and unlinked, even when building a value fails part way."""
    try:
        return _unpack(message)
    except BaseException:
        release(message)
        raise


def _unpack(message):
    if isinstance(message, SharedArray):
        from multiprocessing import shared_memory
        segment = shared_memory.SharedMemory(name=message.name)
        try:
            view = np.ndarray(message.shape, message.dtype, buffer=segment.buf)
            if message.as_var:
                from .. import array
                value = array(view)  # copies into a metajit buffer
            else:
                value = view.copy()
            del view
        finally:
            segment.close()
            segment.unlink()
        return value
    if isinstance(message, InlineArray):
        if message.as_var:
            from .. import array
            return array(message.array)
        return message.array
    if isinstance(message, tuple) and hasattr(message, "_fields"):
        return type(message)(*(_unpack(value) for value in message))
    if isinstance(message, (tuple, list, dict)):
        if isinstance(message, dict):
            values = {key: _unpack(value) for key, value in message.items()}
        else:
            values = [_unpack(value) for value in message]
        try:
            return type(message)(values)
        except TypeError:
            return values
    return message


def release(message):
    """Unlinks every segment still named in `message` (a message the main process will not use)."""
    if isinstance(message, SharedArray):
        _unlink(message.name)
    elif isinstance(message, (tuple, list)):
        for value in message:
            release(value)
    elif isinstance(message, dict):
        for value in message.values():
            release(value)


# ---- the worker loop ----

def _seed_worker(seed):
    random.seed(seed)
    np.random.seed(seed % (1 << 32))


def worker_loop(iterable, dataset, index_queue, result_queue, done_event, auto_collation, collate_fn, drop_last,
                seed, worker_init_fn, worker_id, num_workers, current_epoch):
    """Runs in the worker process until it reads None from index_queue (or the main process is gone). Each task
    (epoch, task_id, indices) is answered with one pickled (epoch, task_id, worker_id, payload) on result_queue:
    a packed batch, a WorkerError, or Exhausted (iterable datasets)."""
    global _worker_info
    # Ctrl-C reaches the whole process group: the main process handles it and shuts workers down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
    _seed_worker(seed)
    init_error = None
    if worker_init_fn is not None:
        try:
            worker_init_fn(worker_id)
        except Exception as error:
            init_error = WorkerError(worker_id, error, where="in worker_init_fn of DataLoader worker process")
    import multiprocessing
    main_process = multiprocessing.parent_process()  # works for fork, spawn and forkserver alike
    fetcher, fetcher_epoch, exhausted = None, None, False
    while True:
        try:
            task = index_queue.get(timeout=POLL_SECONDS)
        except queue.Empty:
            task = _NO_TASK
        if main_process is not None and not main_process.is_alive():
            result_queue.cancel_join_thread()  # nobody will read what is buffered: do not wait for it at exit
            break
        if task is _NO_TASK:
            continue
        if task is None:
            break
        epoch, task_id, indices = task
        if done_event.is_set() or epoch != current_epoch.value:
            continue  # shutting down, or a task of an epoch the main process has left (persistent workers)
        if epoch != fetcher_epoch:
            fetcher, fetcher_epoch, exhausted = None, epoch, False
        if exhausted:
            continue
        created = []
        try:
            if init_error is not None:
                payload = init_error
            else:
                if fetcher is None:
                    fetcher = make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
                payload = pack(fetcher.fetch(indices), created)
        except DatasetExhausted:
            exhausted = True
            payload = Exhausted(worker_id)
        except Exception as error:
            release_names(created)
            created = []
            payload = WorkerError(worker_id, error)
        try:
            blob = pickle.dumps((epoch, task_id, worker_id, payload))
        except Exception as error:  # pickled here, not in the queue's thread, so the failure reaches the user
            release_names(created)
            created = []
            blob = pickle.dumps((epoch, task_id, worker_id, WorkerError(worker_id, error)))
        if done_event.is_set():
            release_names(created)
            continue
        result_queue.put(blob)
        del payload, blob

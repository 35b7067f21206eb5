"""Batch assembly with PyTorch's rules: default_collate (samples -> one batch, numeric leaves stacked along a new
first dimension) and default_convert (one sample's numpy leaves -> Vars, used when batch_size=None).

Two modes: in the main process numeric leaves become Vars; inside a DataLoader worker they stay numpy arrays,
marked as CollatedArray so that the main process turns exactly those into Vars. Worker code must not run
metajit's engine, so a Var met in a worker is read only if its value is already computed."""
import collections.abc
import numbers

import numpy as np

from .._core import Var

__all__ = ["default_collate", "default_convert", "CollatedArray"]


class CollatedArray(np.ndarray):
    """A numpy array made by default_collate/default_convert inside a worker: the main process makes it a Var
    (where PyTorch would have a tensor); plain numpy arrays a custom collate_fn returns stay numpy."""


def in_worker():
    from .worker import get_worker_info
    return get_worker_info() is not None


class WorkerVarError(RuntimeError):
    """A DataLoader worker met a metajit Var whose value is not computed: computing it would run the engine in the
    worker process, which metajit never does."""


def host_value(var):
    """The numpy value of a Var inside a worker: a copy when it is already computed, else WorkerVarError."""
    if not var.is_computed:
        raise WorkerVarError(
            f"a DataLoader worker got a metajit Var that is not computed yet ({var!r}, created at {var.created_at}). "
            "metajit's engine never runs in worker processes: datasets, transforms and collate_fn used with "
            "num_workers > 0 must produce numpy arrays or numbers (the main process turns batches into Vars); "
            "compute with numpy in __getitem__, or use num_workers=0")
    return np.array(var.numpy())


def _numeric_array(leaf):
    """`leaf` (Var, numpy array or scalar, number) as a numpy array; TypeError for strings and objects."""
    if isinstance(leaf, Var):
        return host_value(leaf) if in_worker() else leaf.numpy()
    array = np.asarray(leaf)
    if array.dtype.kind in "OSUV":
        raise TypeError("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                        f"found {array.dtype}")
    return array


def _stack(leaves):
    first = leaves[0]
    if isinstance(first, numbers.Number) and not isinstance(first, np.generic):
        # Python numbers: floats give float64 and ints int64, as torch.tensor(batch) in PyTorch's collate.
        stacked = np.array(leaves, dtype=np.float64 if isinstance(first, float) else None)
    else:
        if not in_worker() and any(isinstance(leaf, Var) and (leaf.requires_grad or not leaf.is_computed)
                                   for leaf in leaves):
            # Keep the graph (and laziness) as torch.stack would: one fused lazy stack in the main process.
            from .. import array, stack
            return stack([leaf if isinstance(leaf, Var) else array(np.asarray(leaf)) for leaf in leaves])
        arrays = [_numeric_array(leaf) for leaf in leaves]
        shapes = {array.shape for array in arrays}
        if len(shapes) != 1:
            raise RuntimeError("default_collate: stack expects each array to be equal size, but got shapes "
                               f"{[array.shape for array in arrays]}")
        stacked = np.stack(arrays)
    return _finish(stacked)


def contiguous(array):
    # Not np.ascontiguousarray: it turns 0-d arrays into 1-d ones.
    return array if array.flags.c_contiguous else array.copy(order="C")


def _finish(array):
    if in_worker():
        return contiguous(array).view(CollatedArray)
    from .. import array as make_var
    return make_var(contiguous(array))


def _is_leaf(value):
    return isinstance(value, (Var, np.ndarray, np.generic, numbers.Number))


def default_collate(batch):
    """Stacks a list of samples into one batch, as PyTorch's default_collate: Vars, numpy arrays and numpy scalars
    are stacked along a new first dimension, Python floats become a float64 batch, ints int64, bools bool; dicts are
    collated key by key (keys of the first sample), namedtuples field by field, other sequences (tuples too) become
    lists of collated fields; strings and bytes stay as they are, in the sequence of samples. The result holds Vars
    (numpy arrays inside a DataLoader worker, turned into Vars by the main process)."""
    if not isinstance(batch, collections.abc.Sequence) or isinstance(batch, (str, bytes)):
        batch = list(batch)
    first = batch[0]
    if _is_leaf(first):
        return _stack(list(batch))
    if isinstance(first, (str, bytes)):
        return batch  # as PyTorch: the list (or, for a nested field, the tuple) of strings itself
    if isinstance(first, collections.abc.Mapping):
        collated = {key: default_collate([sample[key] for sample in batch]) for key in first}
        try:
            return type(first)(collated) if type(first) is not dict else collated
        except TypeError:
            return collated
    if isinstance(first, tuple) and hasattr(first, "_fields"):  # namedtuple
        return type(first)(*(default_collate(field) for field in zip(*batch)))
    if isinstance(first, collections.abc.Sequence):
        sizes = {len(sample) for sample in batch}
        if len(sizes) != 1:
            raise RuntimeError(f"each element in list of batch should be of equal size (sizes {sorted(sizes)})")
        return [default_collate(field) for field in zip(*batch)]
    raise TypeError(f"default_collate: cannot batch samples of type {type(first).__name__}; batches hold Vars, "
                    "numpy arrays, numbers, strings, dicts, lists and tuples (pass collate_fn= for others)")


def default_convert(data):
    """One sample as PyTorch's default_convert (the collate_fn when batch_size=None): numpy arrays and numpy scalars
    become Vars (numpy inside a worker, turned into Vars by the main process), dicts and namedtuples keep their
    type, other sequences become lists; everything else (Python numbers, strings, Vars) is returned as is."""
    if isinstance(data, Var):
        return data
    if isinstance(data, (np.ndarray, np.generic)):
        array = np.asarray(data)
        if array.dtype.kind in "OSUV":
            return data
        return _finish(array)
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        converted = {key: default_convert(value) for key, value in data.items()}
        try:
            return type(data)(converted) if type(data) is not dict else converted
        except TypeError:
            return converted
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(value) for value in data))
    if isinstance(data, collections.abc.Sequence):
        return [default_convert(value) for value in data]
    return data

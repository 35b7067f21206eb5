"""metajit.data (also metajit.utils.data) against torch.utils.data: samplers, datasets, random_split,
default_collate/default_convert and the DataLoader, in the main process and with worker processes.

Expected values come from PyTorch, numpy or Python, never from the code under test. Random orders cannot match
PyTorch's across generators, so those tests check properties (each index once per epoch, sizes, disjointness).
Worker tests use num_workers=2 and small datasets: the whole file must stay well under a minute on 2 cores."""
import collections
import gc
import multiprocessing
import os
import random
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
import torch.utils.data as torch_data

import metajit as mj
import metajit.data
import metajit.utils.data as data
from metajit.utils.data import DataLoader, TensorDataset


# ---- helpers ----

def tree(value):
    """A comparable description of a batch: Vars and torch tensors become ('tensor', dtype, values)."""
    if isinstance(value, mj.Var):
        return ("tensor", value.dtype, value.numpy().tolist())
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype).replace("torch.", ""), value.numpy().tolist())
    if isinstance(value, np.ndarray):
        return ("ndarray", str(value.dtype), value.tolist())
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (type(value).__name__, [tree(field) for field in value])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [tree(item) for item in value])
    if isinstance(value, dict):
        return ("dict", [(key, tree(item)) for key, item in value.items()])
    return value


def shared_memory_segments():
    return {name for name in os.listdir("/dev/shm") if name.startswith("psm_")}


def assert_no_workers_left():
    assert multiprocessing.active_children() == []


Pair = collections.namedtuple("Pair", "left right")


class Records(data.Dataset):
    """Samples of mixed structure; `wide` arrays are large enough to travel through shared memory."""

    def __init__(self, count=23, wide=2048):
        self.count, self.wide = count, wide

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        return {"image": np.full((self.wide,), index, dtype=np.float32),
                "small": np.arange(3, dtype=np.int32) + index,
                "label": index % 5, "weight": index / 10.0, "flag": index % 2 == 0, "name": f"item{index}",
                "pair": Pair(np.float64(index), [index, -index])}


class TorchRecords(torch_data.Dataset):
    def __init__(self, count=23, wide=2048):
        self.inner = Records(count, wide)

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, index):
        return self.inner[index]


# ---- import paths ----

def test_utils_data_is_the_data_package():
    from metajit.utils.data import DataLoader as imported
    assert imported is metajit.data.DataLoader
    assert mj.utils.data.DataLoader is metajit.data.DataLoader
    for name in ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset", "Subset",
                 "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
                 "WeightedRandomSampler", "BatchSampler", "DataLoader", "default_collate", "default_convert",
                 "get_worker_info"]:
        assert hasattr(torch_data, name) and getattr(data, name) is getattr(metajit.data, name)


def test_mj_utils_data_after_plain_import():
    code = "import metajit as mj; print(mj.utils.data.DataLoader.__module__)"
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(mj.__file__)))  # the metajit under test
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([package_root] + sys.path))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "metajit.data.dataloader"


# ---- samplers ----

def test_sequential_and_batch_samplers_match_torch():
    for drop_last in (False, True):
        for batch_size in (1, 3, 4, 10, 11):
            ours = data.BatchSampler(data.SequentialSampler(range(10)), batch_size, drop_last)
            theirs = torch_data.BatchSampler(torch_data.SequentialSampler(range(10)), batch_size, drop_last)
            assert list(ours) == list(theirs) and len(ours) == len(theirs)
    with pytest.raises(ValueError):
        data.BatchSampler(range(3), 0, False)
    with pytest.raises(ValueError):
        torch_data.BatchSampler(range(3), 0, False)


def test_random_sampler_properties():
    sampler = data.RandomSampler(range(10), generator=np.random.default_rng(0))
    first, second = list(sampler), list(sampler)
    assert sorted(first) == list(range(10)) and sorted(second) == list(range(10))
    assert first != second  # a new order every epoch
    assert len(sampler) == len(torch_data.RandomSampler(range(10)))
    # More samples than the dataset without replacement: whole permutations, then part of one.
    ours = data.RandomSampler(range(10), num_samples=25, generator=np.random.default_rng(1))
    theirs = torch_data.RandomSampler(range(10), num_samples=25)
    ours_counts = sorted(collections.Counter(ours).values())
    assert ours_counts == sorted(collections.Counter(theirs).values()) and len(ours) == len(theirs) == 25
    with_replacement = list(data.RandomSampler(range(4), replacement=True, num_samples=400,
                                               generator=np.random.default_rng(2)))
    assert len(with_replacement) == 400 and set(with_replacement) == {0, 1, 2, 3}
    assert all(isinstance(index, int) for index in with_replacement)
    with pytest.raises(ValueError):
        data.RandomSampler(range(3), num_samples=0)
    with pytest.raises(TypeError):
        data.RandomSampler(range(3), replacement=1)


def test_subset_and_weighted_samplers():
    indices = [3, 8, 11, 40]
    ours = list(data.SubsetRandomSampler(indices, generator=np.random.default_rng(0)))
    assert sorted(ours) == sorted(torch_data.SubsetRandomSampler(indices)) == indices
    weights = [0.0, 1.0, 3.0, 0.0]
    draws = list(data.WeightedRandomSampler(weights, 20000, generator=np.random.default_rng(0)))
    counts = collections.Counter(draws)
    assert set(counts) == {1, 2}
    assert abs(counts[2] / 20000 - 0.75) < 0.02
    unique = list(data.WeightedRandomSampler([1, 2, 3, 4, 5], 5, replacement=False))
    assert sorted(unique) == [0, 1, 2, 3, 4]
    assert len(data.WeightedRandomSampler(weights, 7)) == len(torch_data.WeightedRandomSampler(weights, 7)) == 7
    # Without replacement: positive weights first; more samples than weights is an error.
    assert set(list(data.WeightedRandomSampler(weights, 2, replacement=False))) == {1, 2}
    assert sorted(data.WeightedRandomSampler(weights, 4, replacement=False)) == \
        sorted(torch_data.WeightedRandomSampler(weights, 4, replacement=False))
    for bad_weights, count in ((weights, 5), ([0.0, 0.0], 1), ([-1.0, 2.0], 1)):
        with pytest.raises(RuntimeError):
            list(torch_data.WeightedRandomSampler(bad_weights, count, replacement=False))
        with pytest.raises(RuntimeError):
            list(data.WeightedRandomSampler(bad_weights, count, replacement=False))


def test_generators_accepted_and_reproducible():
    def order(generator):
        return list(data.RandomSampler(range(50), generator=generator))

    assert order(data.Generator().manual_seed(5)) == order(data.Generator().manual_seed(5))
    assert order(data.Generator().manual_seed(5)) != order(data.Generator().manual_seed(6))
    assert order(np.random.default_rng(9)) == order(np.random.default_rng(9))
    assert order(torch.Generator().manual_seed(3)) == order(torch.Generator().manual_seed(3))
    generator = data.Generator().manual_seed(4)
    state = generator.get_state()
    before = order(generator)
    assert order(generator) != before  # the stream advanced
    generator.set_state(state)
    assert order(generator) == before
    # generator=None follows mj.manual_seed, as PyTorch's samplers follow torch.manual_seed.
    mj.manual_seed(11)
    seeded = order(None)
    mj.manual_seed(11)
    assert order(None) == seeded
    with pytest.raises(TypeError, match="generator must be"):
        data.RandomSampler(range(3), generator="seed")


# ---- datasets ----

class Numbers(data.Dataset):
    def __init__(self, values):
        self.values = list(values)

    def __len__(self):
        return len(self.values)

    def __getitem__(self, index):
        return self.values[index]


def test_concat_and_subset_match_torch():
    parts = [[1, 2, 3], [10, 20], [], [7, 8, 9, 10]]
    ours, theirs = data.ConcatDataset([Numbers(p) for p in parts]), torch_data.ConcatDataset(parts)
    assert len(ours) == len(theirs) and ours.cumulative_sizes == theirs.cumulative_sizes
    for index in range(-len(theirs), len(theirs)):
        assert ours[index] == theirs[index]
    with pytest.raises(IndexError):
        ours[len(theirs)]
    added = Numbers([1, 2]) + Numbers([3])
    assert isinstance(added, data.ConcatDataset) and [added[i] for i in range(3)] == [1, 2, 3]
    subset = data.Subset(Numbers(range(10, 20)), [9, 0, 4])
    assert [subset[i] for i in range(3)] == [19, 10, 14] and subset[[0, 2]] == [19, 14]
    with pytest.raises(ValueError):
        data.ConcatDataset([])


@pytest.mark.parametrize("count,lengths", [(10, [3, 7]), (11, [0.3, 0.3, 0.4]), (7, [0.5, 0.5]), (5, [1.0])])
def test_random_split_sizes_and_disjointness(count, lengths):
    expected_sizes = [len(part) for part in torch_data.random_split(range(count), lengths)]
    parts = data.random_split(Numbers(range(100, 100 + count)), lengths, generator=np.random.default_rng(0))
    assert [len(part) for part in parts] == expected_sizes
    values = [part[i] for part in parts for i in range(len(part))]
    assert sorted(values) == list(range(100, 100 + count))  # disjoint and covering
    again = data.random_split(Numbers(range(count)), lengths, generator=np.random.default_rng(0))
    assert [part.indices for part in again] == [part.indices for part in parts]


def test_random_split_rejects_wrong_lengths_like_torch():
    with pytest.raises(ValueError):
        torch_data.random_split(range(10), [3, 4])
    with pytest.raises(ValueError):
        data.random_split(Numbers(range(10)), [3, 4])


def test_tensor_dataset_holds_numpy_copies_and_returns_vars():
    features = np.arange(12, dtype=np.float32).reshape(6, 2)
    dataset = TensorDataset(features, mj.array(np.arange(6)))
    features[0, 0] = 99  # a copy was taken
    x, y = dataset[0]
    assert isinstance(x, mj.Var) and x.numpy().tolist() == [0.0, 1.0]
    assert isinstance(y, mj.Var) and y.dtype == "int64" and y.item() == 0
    assert all(isinstance(array, np.ndarray) for array in dataset.tensors) and len(dataset) == 6
    with pytest.raises(ValueError, match="size mismatch"):
        TensorDataset(np.zeros(3), np.zeros(4))


# ---- collation ----

COLLATE_CASES = [
    [(np.ones(2, dtype=np.float32), 1), (np.zeros(2, dtype=np.float32), 2)],
    [[1, 2.5], [3, 4.0]],
    [{"a": 1, "b": "x", "c": {"d": np.float32(0.5)}}, {"a": 2, "b": "y", "c": {"d": np.float32(1.5)}}],
    [Pair(1, 2.0), Pair(3, 4.0)],
    [True, False, True],
    [np.array(3), np.array(4)],
    [np.uint8(3), np.uint8(250)],
    [b"raw", b"bytes"],
    [(np.arange(6, dtype=np.float64).reshape(2, 3), [np.int64(1), "s"])] * 3,
]


@pytest.mark.parametrize("case", range(len(COLLATE_CASES)))
def test_default_collate_matches_torch(case):
    samples = COLLATE_CASES[case]
    assert tree(data.default_collate(samples)) == tree(torch_data.default_collate(samples))


@pytest.mark.parametrize("samples", [[np.array(["a"]), np.array(["b"])], [None, None], [[1, 2], [1]],
                                     [np.ones(2), np.ones(3)]])
def test_default_collate_errors_like_torch(samples):
    with pytest.raises(Exception) as expected:
        torch_data.default_collate(samples)
    with pytest.raises(expected.type):
        data.default_collate(samples)


def test_default_convert_matches_torch():
    sample = (np.ones(2), 1, np.float32(3), "a", [np.zeros(1, dtype=np.int32)], {"k": np.arange(2)})
    assert tree(data.default_convert(sample)) == tree(torch_data.default_convert(sample))


# ---- DataLoader in the main process ----

@pytest.mark.parametrize("batch_size", [1, 4, 7, 23, 30])
@pytest.mark.parametrize("drop_last", [False, True])
def test_sequential_loader_matches_torch(batch_size, drop_last):
    ours = DataLoader(Records(wide=4), batch_size=batch_size, drop_last=drop_last)
    theirs = torch_data.DataLoader(TorchRecords(wide=4), batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(theirs)
    assert [tree(batch) for batch in ours] == [tree(batch) for batch in theirs]


def test_tensor_dataset_loader_matches_torch():
    features = np.random.default_rng(0).standard_normal((10, 3)).astype(np.float32)
    labels = np.arange(10)
    ours = DataLoader(TensorDataset(features, labels), batch_size=4)
    theirs = torch_data.DataLoader(torch_data.TensorDataset(torch.from_numpy(features), torch.from_numpy(labels)),
                                   batch_size=4)
    assert [tree(batch) for batch in ours] == [tree(batch) for batch in theirs]
    subset = data.Subset(TensorDataset(features, labels), [9, 2, 5])
    torch_subset = torch_data.Subset(torch_data.TensorDataset(torch.from_numpy(features),
                                                              torch.from_numpy(labels)), [9, 2, 5])
    assert tree(list(DataLoader(subset, batch_size=3))) == tree(list(torch_data.DataLoader(torch_subset,
                                                                                            batch_size=3)))


def test_shuffled_epochs_visit_every_index_once():
    dataset = TensorDataset(np.arange(50))
    loader = DataLoader(dataset, batch_size=8, shuffle=True, generator=data.Generator().manual_seed(0))
    torch_loader = torch_data.DataLoader(range(50), batch_size=8, shuffle=True)
    epochs = []
    for _ in range(2):
        batches = [batch[0].numpy().tolist() for batch in loader]
        assert [len(batch) for batch in batches] == [len(batch) for batch in torch_loader]
        epochs.append(sum(batches, []))
        assert sorted(epochs[-1]) == list(range(50))
    assert epochs[0] != epochs[1]


def test_sampler_batch_sampler_and_unbatched():
    dataset = Numbers(range(100, 110))
    assert [b.numpy().tolist() for b in DataLoader(dataset, batch_size=3, sampler=[9, 1, 4, 0])] == \
        [[109, 101, 104], [100]]
    batches = [[0, 1], [5], [2, 3, 4]]
    ours = DataLoader(dataset, batch_sampler=batches)
    theirs = torch_data.DataLoader(list(range(100, 110)), batch_sampler=batches)
    assert len(ours) == len(theirs) and [tree(b) for b in ours] == [tree(b) for b in theirs]
    unbatched = DataLoader(Records(count=3, wide=2), batch_size=None)
    torch_unbatched = torch_data.DataLoader(TorchRecords(count=3, wide=2), batch_size=None)
    assert [tree(s) for s in unbatched] == [tree(s) for s in torch_unbatched]


@pytest.mark.parametrize("arguments", [dict(shuffle=True, sampler=[0]), dict(batch_sampler=[[0]], batch_size=2),
                                       dict(batch_sampler=[[0]], drop_last=True), dict(batch_size=None,
                                                                                       drop_last=True),
                                       dict(num_workers=-1), dict(timeout=-1), dict(prefetch_factor=2),
                                       dict(persistent_workers=True)])
def test_bad_arguments_rejected_like_torch(arguments):
    with pytest.raises(ValueError):
        torch_data.DataLoader(list(range(4)), **arguments)
    with pytest.raises(ValueError):
        DataLoader(Numbers(range(4)), **arguments)


class Stream(data.IterableDataset):
    """0..count-1, split between workers by get_worker_info()."""

    def __init__(self, count):
        self.count = count

    def __len__(self):
        return self.count

    def __iter__(self):
        info = data.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.count, step))


class TorchStream(torch_data.IterableDataset):
    def __init__(self, count):
        self.count = count

    def __iter__(self):
        info = torch_data.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.count, step))


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("batch_size,drop_last", [(3, False), (3, True), (None, False)])
def test_iterable_dataset_matches_torch(num_workers, batch_size, drop_last):
    ours = DataLoader(Stream(11), batch_size=batch_size, drop_last=drop_last, num_workers=num_workers)
    theirs = torch_data.DataLoader(TorchStream(11), batch_size=batch_size, drop_last=drop_last,
                                   num_workers=num_workers)
    assert [tree(batch) for batch in ours] == [tree(batch) for batch in theirs]
    if num_workers == 0 and batch_size:
        assert len(ours) == (11 // 3 if drop_last else 4)
    with pytest.raises(ValueError):
        DataLoader(Stream(3), shuffle=True)
    assert_no_workers_left()


# ---- worker processes ----

def test_workers_give_the_single_process_batches_in_order():
    before = shared_memory_segments()
    serial = [tree(batch) for batch in DataLoader(Records(), batch_size=4)]
    parallel = [tree(batch) for batch in DataLoader(Records(), batch_size=4, num_workers=2)]
    assert parallel == serial
    unordered = [tree(batch) for batch in DataLoader(Records(), batch_size=4, num_workers=2, in_order=False)]
    assert sorted(map(repr, unordered)) == sorted(map(repr, serial))
    unbatched = [tree(sample) for sample in DataLoader(Records(count=5), batch_size=None, num_workers=2)]
    assert unbatched == [tree(sample) for sample in DataLoader(Records(count=5), batch_size=None)]
    assert_no_workers_left()
    assert shared_memory_segments() - before == set()


def test_workers_with_shuffle_and_tensor_dataset_match_single_process():
    features = np.random.default_rng(1).standard_normal((40, 600)).astype(np.float32)
    dataset = TensorDataset(features, np.arange(40))

    def epochs(num_workers):
        loader = DataLoader(dataset, batch_size=6, shuffle=True, generator=data.Generator().manual_seed(3),
                            num_workers=num_workers)
        return [[tree(batch) for batch in loader] for _ in range(2)]

    serial, parallel = epochs(0), epochs(2)
    assert parallel == serial
    labels = [value for batch in serial[0] for value in batch[1][1][2]]
    assert sorted(labels) == list(range(40))
    np.testing.assert_array_equal(np.array(serial[0][0][1][0][2], dtype=np.float32), features[labels[:6]])


class SeedReport(data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        info = data.get_worker_info()
        return {"worker": info.id, "seed": info.seed, "workers": info.num_workers, "numpy": np.random.randint(1 << 30),
                "python": random.random(), "offset": getattr(info.dataset, "offset", -1),
                "same_dataset": info.dataset is self}


def add_offset(worker_id):
    data.get_worker_info().dataset.offset = 100 * worker_id


def test_worker_seeds_distinct_and_reproducible():
    def run(seed):
        loader = DataLoader(SeedReport(), batch_size=2, num_workers=2, worker_init_fn=add_offset,
                            generator=data.Generator().manual_seed(seed))
        return [{key: (value.numpy().tolist() if isinstance(value, mj.Var) else value) for key, value in batch.items()}
                for batch in loader]

    first, again, other = run(1), run(1), run(2)
    assert first == again and first != other
    by_worker = {batch["worker"][0]: batch for batch in first[:2]}
    assert set(by_worker) == {0, 1} and all(batch["workers"] == [2, 2] for batch in first)
    seed_0, seed_1 = by_worker[0]["seed"][0], by_worker[1]["seed"][0]
    assert seed_1 == seed_0 + 1  # base seed + worker id
    for worker, seed in ((0, seed_0), (1, seed_1)):
        batch = by_worker[worker]
        # The first draws of numpy's and Python's generators seeded the documented way.
        assert batch["numpy"][0] == np.random.RandomState(seed % (1 << 32)).randint(1 << 30)
        assert batch["python"][0] == random.Random(seed).random()
        assert batch["offset"] == [100 * worker] * 2 and batch["same_dataset"] == [True, True]
    assert by_worker[0]["numpy"] != by_worker[1]["numpy"]
    assert data.get_worker_info() is None  # the main process is no worker
    assert_no_workers_left()


class Faulty(data.Dataset):
    def __len__(self):
        return 12

    def __getitem__(self, index):
        if index == 5:
            raise ValueError(f"sample {index} is corrupt")
        return np.float32(index)


def test_worker_exception_surfaces_with_its_traceback():
    loader = DataLoader(Faulty(), batch_size=2, num_workers=2)
    with pytest.raises(ValueError, match="sample 5 is corrupt") as caught:
        for _ in loader:
            pass
    message = str(caught.value)
    del caught
    assert "Caught ValueError in DataLoader worker process" in message
    assert "Original Traceback" in message and "in __getitem__" in message  # the worker's own traceback
    assert_no_workers_left()


class LazyVars(data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, index):
        return mj.array(np.ones(2)) * index  # a lazy Var: computing it would run the engine in the worker


class ComputedVars(data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, index):
        return mj.array(np.full(2, index, dtype=np.float32)), index


def test_worker_var_rule():
    with pytest.raises(RuntimeError, match="not computed yet"):
        list(DataLoader(LazyVars(), batch_size=2, num_workers=2))
    assert_no_workers_left()
    parallel = [tree(batch) for batch in DataLoader(ComputedVars(), batch_size=2, num_workers=2)]
    assert parallel == [tree(batch) for batch in DataLoader(ComputedVars(), batch_size=2)]
    assert parallel[1] == ("list", [("tensor", "float32", [[2.0, 2.0], [3.0, 3.0]]), ("tensor", "int64", [2, 3])])


class ItemTypes(data.Dataset):
    def __init__(self):
        self.inner = TensorDataset(np.arange(4))

    def __len__(self):
        return 4

    def __getitem__(self, index):
        return type(self.inner[index][0]).__name__


def test_tensor_dataset_items_are_numpy_in_workers():
    assert list(DataLoader(ItemTypes(), batch_size=4, num_workers=2)) == [["int64"] * 4]
    assert list(DataLoader(ItemTypes(), batch_size=4)) == [["Var"] * 4]


def test_early_break_and_garbage_collection_stop_workers():
    before = shared_memory_segments()
    for batch in DataLoader(Records(count=40, wide=4096), batch_size=2, num_workers=2):
        break
    assert_no_workers_left()
    iterator = iter(DataLoader(Records(count=40, wide=4096), batch_size=2, num_workers=2))
    next(iterator)
    assert len(multiprocessing.active_children()) == 2
    del iterator
    assert_no_workers_left()
    assert shared_memory_segments() - before == set()


class Pids(data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        return os.getpid(), index


def test_persistent_workers_survive_epochs():
    loader = DataLoader(Pids(), batch_size=2, num_workers=2, persistent_workers=True)
    first = [(batch[0].numpy().tolist(), batch[1].numpy().tolist()) for batch in loader]
    iterator = iter(loader)
    next(iterator)  # an epoch left part way
    second = [(batch[0].numpy().tolist(), batch[1].numpy().tolist()) for batch in loader]
    assert [indices for _, indices in first] == [indices for _, indices in second] == \
        [[0, 1], [2, 3], [4, 5], [6, 7]]
    pids = {pid for pids, _ in first for pid in pids}
    assert len(pids) == 2 and pids == {pid for pids, _ in second for pid in pids}
    assert {process.pid for process in multiprocessing.active_children()} == pids
    del loader, iterator
    gc.collect()
    assert_no_workers_left()


class Slow(data.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, index):
        time.sleep(1.0)
        return index


def test_timeout():
    with pytest.raises(RuntimeError, match="timed out after 0.2 seconds"):
        list(DataLoader(Slow(), batch_size=1, num_workers=2, timeout=0.2))
    assert_no_workers_left()


def test_spawn_context():
    dataset = TensorDataset(np.arange(30, dtype=np.float32).reshape(10, 3), np.arange(10))
    spawned = [tree(b) for b in DataLoader(dataset, batch_size=4, num_workers=2, multiprocessing_context="spawn")]
    assert spawned == [tree(b) for b in DataLoader(dataset, batch_size=4)]
    assert_no_workers_left()


class Crashing(data.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, index):
        if index == 3:
            os._exit(3)  # a worker dying without a Python exception (as a segfault would)
        return index


def test_worker_that_dies_is_reported():
    with pytest.raises(RuntimeError, match=r"exited unexpectedly: pid \d+ \(exit code 3\)"):
        list(DataLoader(Crashing(), batch_size=1, num_workers=2))
    assert_no_workers_left()


EXIT_WITH_LIVE_WORKERS = """
import numpy as np
from metajit.data import DataLoader, TensorDataset
loader = DataLoader(TensorDataset(np.zeros((64, 2048), np.float32)), batch_size=2, num_workers=2)
iterator = iter(loader)
next(iterator)
print("left with live workers")
"""


def test_interpreter_exit_with_live_workers_is_clean():
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(mj.__file__)))
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([package_root] + sys.path))
    result = subprocess.run([sys.executable, "-c", EXIT_WITH_LIVE_WORKERS], capture_output=True, text=True,
                            env=environment, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "left with live workers", result.stderr
    assert "leaked" not in result.stderr and "Traceback" not in result.stderr, result.stderr

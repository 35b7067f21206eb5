"""Dataset, TensorDataset and DataLoader: batching, collation, reproducible shuffling, drop_last, len() and the
progress bar."""
import numpy as np
import pytest

import metajit as mj
from metajit.data import DataLoader, Dataset, TensorDataset, default_collate


def make_dataset(count=10):
    features = np.arange(count * 3, dtype=np.float32).reshape(count, 3)
    labels = np.arange(count, dtype=np.int64)
    return features, labels, TensorDataset(features, labels)


def test_tensor_dataset_indexing_and_errors():
    features, labels, dataset = make_dataset()
    assert len(dataset) == 10
    sample = dataset[4]
    np.testing.assert_array_equal(sample[0], features[4])
    assert sample[1] == 4
    from_vars = TensorDataset(mj.array(features), mj.array(labels))
    np.testing.assert_array_equal(from_vars[9][0], features[9])
    with pytest.raises(ValueError, match="size mismatch"):
        TensorDataset(features, labels[:5])
    with pytest.raises(ValueError, match="at least one"):
        TensorDataset()
    with pytest.raises(ValueError, match="0-dimensional"):
        TensorDataset(np.float32(3))


@pytest.mark.parametrize("drop_last,expected_sizes", [(False, [4, 4, 2]), (True, [4, 4])])
def test_batches_in_order(drop_last, expected_sizes):
    features, labels, dataset = make_dataset()
    loader = DataLoader(dataset, batch_size=4, drop_last=drop_last)
    assert len(loader) == len(expected_sizes)
    batches = list(loader)
    assert [batch[1].shape[0] for batch in batches] == expected_sizes
    for index, (x, y) in enumerate(batches):
        assert isinstance(x, mj.Var) and x.dtype == "float32" and y.dtype == "int64"
        np.testing.assert_array_equal(x.numpy(), features[4 * index:4 * index + len(y.numpy())])
        np.testing.assert_array_equal(y.numpy(), labels[4 * index:4 * index + len(y.numpy())])


def test_shuffle_is_a_reproducible_permutation_per_epoch():
    _, labels, dataset = make_dataset(12)

    def epoch_orders(seed, epochs=2):
        loader = DataLoader(dataset, batch_size=5, shuffle=True, seed=seed)
        return [np.concatenate([y.numpy() for _, y in loader]) for _ in range(epochs)]

    first, second = epoch_orders(3), epoch_orders(3)
    for one, other in zip(first, second):
        np.testing.assert_array_equal(one, other)
    assert sorted(first[0].tolist()) == labels.tolist()
    assert first[0].tolist() != labels.tolist()
    assert first[0].tolist() != first[1].tolist()  # a new order every epoch
    assert epoch_orders(4)[0].tolist() != first[0].tolist()


class Squares(Dataset):
    def __len__(self):
        return 5

    def __getitem__(self, index):
        return {"x": np.full(2, index, dtype=np.float32), "y": index * index, "weight": 0.5, "name": f"s{index}"}


def test_default_collate_of_dicts_numbers_and_strings():
    batch = next(iter(DataLoader(Squares(), batch_size=3)))
    np.testing.assert_array_equal(batch["x"].numpy(), [[0, 0], [1, 1], [2, 2]])
    assert batch["y"].dtype == "int64" and batch["y"].numpy().tolist() == [0, 1, 4]
    assert batch["weight"].dtype == "float64"  # Python floats collate to float64, as in PyTorch
    assert batch["name"] == ["s0", "s1", "s2"]
    pair = default_collate([(np.ones(2), 1), (np.zeros(2), 2)])
    # Tuples collate to a list of fields, as torch.utils.data.default_collate does.
    assert isinstance(pair, list) and tuple(pair[0].shape) == (2, 2)
    with pytest.raises(TypeError, match="cannot batch samples of type object"):
        default_collate([object(), object()])
    with pytest.raises(RuntimeError, match="should be of equal size"):
        default_collate([(1, 2), (1,)])


def test_custom_collate_and_unbatched():
    loader = DataLoader(Squares(), batch_size=2, collate_fn=lambda samples: [s["y"] for s in samples])
    assert list(loader) == [[0, 1], [4, 9], [16]]
    single = list(DataLoader(Squares(), batch_size=None))
    assert len(single) == 5 and single[3]["y"] == 9


def test_progress_bar(capsys):
    _, _, dataset = make_dataset()
    count = sum(1 for _ in DataLoader(dataset, batch_size=3, progress="training"))
    assert count == 4
    error = capsys.readouterr().err
    assert "training" in error and "4/4" in error


def test_bad_arguments():
    _, _, dataset = make_dataset()
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(dataset, batch_size=0)
    with pytest.raises(TypeError, match="map-style dataset"):
        DataLoader(5)
    with pytest.raises(TypeError, match="collate_fn must be callable"):
        DataLoader(dataset, collate_fn=3)

"""StackDataset (torch.utils.data.StackDataset): several equally long datasets read together, sample i being
the tuple (or, given keyword datasets, the dict) of their i-th samples. Holds the datasets only; no data is
copied or converted here."""
from .dataset import Dataset

__all__ = ["StackDataset"]


class StackDataset(Dataset):
    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or ``dict``- (via ``kwargs``) like input/"
                             "output, but both types are given.")
        datasets = args or tuple(kwargs.values())
        if not datasets:
            raise ValueError("At least one dataset should be passed")
        self._length = len(datasets[0])
        if any(self._length != len(dataset) for dataset in datasets):
            raise ValueError("Size mismatch between datasets")
        self.datasets = kwargs if kwargs else args

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {key: dataset[index] for key, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __len__(self):
        return self._length

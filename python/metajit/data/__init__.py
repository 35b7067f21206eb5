"""Data loading: Dataset, TensorDataset and DataLoader (PyTorch's torch.utils.data interface, yielding
metajit Vars)."""
from .dataloader import DataLoader, default_collate
from .dataset import Dataset, TensorDataset

__all__ = ["Dataset", "TensorDataset", "DataLoader", "default_collate"]

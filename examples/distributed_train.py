"""Data-parallel training with metajit.distributed: the digits CNN of examples/demo.py, one share of every batch
per rank, gradients averaged by nn.parallel.DistributedDataParallel.

    python examples/distributed_train.py                  # one process
    mpirun -np 2 python examples/distributed_train.py     # two ranks, half of each batch each (as root: add
                                                          # --allow-run-as-root; with few cores: --oversubscribe)

Both reach the same test accuracy: a global batch of 64 split over N ranks computes the same update as one
process with all 64. Only rank 0 prints and shows the progress bar.
"""
import argparse
import time

import numpy as np

import metajit as mj
import metajit.distributed as dist
import metajit.nn.functional as F
from metajit import optim
from metajit.data import DataLoader, DistributedSampler, TensorDataset
from metajit.models import SmallCNN


def load_digits():
    from sklearn.datasets import load_digits as sklearn_digits  # bundled with scikit-learn, no download
    digits = sklearn_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(labels))
    images, labels = images[order], labels[order]
    split = int(0.8 * len(labels))
    return images[:split], labels[:split], images[split:], labels[split:]


def accuracy(model, images, labels):
    model.eval()
    with mj.no_grad():
        predicted = model(mj.array(images)).numpy().argmax(axis=1)
    model.train()
    return float((predicted == labels).mean())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--global-batch", type=int, default=64)
    arguments = parser.parse_args()
    rank, ranks = dist.get_rank(), dist.get_world_size()
    if arguments.global_batch % ranks:
        raise SystemExit(f"--global-batch {arguments.global_batch} does not split over {ranks} ranks")
    train_images, train_labels, test_images, test_labels = load_digits()
    mj.seed(0)
    model = mj.nn.parallel.DistributedDataParallel(
        SmallCNN(in_channels=1, num_classes=10, input_size=8, channels=(16, 32), hidden=64))
    optimizer = optim.Adam(model.parameters(), lr=3e-3)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=arguments.epochs)
    dataset = TensorDataset(train_images, train_labels)
    sampler = DistributedSampler(dataset, shuffle=True, seed=0, drop_last=True)
    loader = DataLoader(dataset, batch_size=arguments.global_batch // ranks, sampler=sampler, drop_last=True)
    start = time.perf_counter()
    epochs = range(arguments.epochs)
    if rank == 0:
        from tqdm import tqdm
        epochs = tqdm(epochs, desc=f"training on {ranks} rank{'s' if ranks > 1 else ''}", unit="epoch")
    for epoch in epochs:
        sampler.set_epoch(epoch)
        for images, labels in loader:
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()  # DistributedDataParallel averages the gradients over the ranks here
            optimizer.step()
        scheduler.step()
    result = accuracy(model, test_images, test_labels)
    if rank == 0:
        print(f"test accuracy {result * 100:.1f}% after {arguments.epochs} epochs on {ranks} rank(s) in "
              f"{time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()

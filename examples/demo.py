"""metajit demo: train a small CNN on scikit-learn's bundled handwritten digits (8x8 images, nothing is
downloaded) with lazy execution and automatic differentiation.

Each training step records the forward pass, loss.backward() records the gradient graph (meta-ops again),
and optimizer.step() computes gradients and the Adam update together as one fused plan of cached kernels.
Run it twice: the second run loads every kernel from the on-disk cache and compiles none.
Writes the training curve to build/demo/training_curve.png.
"""
import os
import time

import numpy as np

import metajit as mj
import metajit.nn.functional as F
from metajit import optim
from metajit.data import DataLoader, TensorDataset
from metajit.models import SmallCNN

OUTPUT_DIRECTORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "build", "demo")


def load_digits():
    from sklearn.datasets import load_digits as sklearn_digits  # bundled with scikit-learn, no download
    digits = sklearn_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]  # N x 1 x 8 x 8
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(labels))
    images, labels = images[order], labels[order]
    split = int(0.8 * len(labels))
    return images[:split], labels[:split], images[split:], labels[split:]


def evaluate(model, images, labels, batch_size=512):
    model.eval()
    correct = 0
    with mj.no_grad():
        for start in range(0, len(labels), batch_size):
            logits = model(mj.array(images[start:start + batch_size]))
            correct += int((logits.numpy().argmax(axis=1) == labels[start:start + batch_size]).sum())
    model.train()
    return correct / len(labels)


def save_curve(losses, accuracies, path):
    import matplotlib
    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt
    figure, loss_axis = plt.subplots(figsize=(6, 4))
    loss_axis.plot(range(1, len(losses) + 1), losses, color="tab:blue", label="training loss")
    loss_axis.set_xlabel("epoch")
    loss_axis.set_ylabel("training loss", color="tab:blue")
    accuracy_axis = loss_axis.twinx()
    accuracy_axis.plot(range(1, len(accuracies) + 1), [100 * a for a in accuracies], color="tab:green")
    accuracy_axis.set_ylabel("test accuracy (%)", color="tab:green")
    figure.suptitle("metajit SmallCNN on scikit-learn digits")
    figure.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main():
    train_images, train_labels, test_images, test_labels = load_digits()
    mj.seed(0)
    model = SmallCNN(in_channels=1, num_classes=10, input_size=8, channels=(16, 32), hidden=64)
    optimizer = optim.Adam(model.parameters(), lr=3e-3)
    epochs = 20
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)  # settles the final accuracy
    loader = DataLoader(TensorDataset(train_images, train_labels), batch_size=64, shuffle=True, drop_last=True,
                        seed=0)
    mj.reset_stats()
    start = time.perf_counter()
    losses, accuracies = [], []
    from tqdm import tqdm
    progress = tqdm(range(epochs), desc="training", unit="epoch")
    for epoch in progress:
        total, batches = 0.0, 0
        for images, labels in loader:
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()  # gradients + Adam update: one fused plan
            total += loss.item()  # already computed by the step
            batches += 1
        scheduler.step()
        losses.append(total / batches)
        accuracies.append(evaluate(model, test_images, test_labels))
        progress.set_postfix(loss=f"{losses[-1]:.4f}", test_accuracy=f"{accuracies[-1] * 100:.1f}%")
    seconds = time.perf_counter() - start
    stats = mj.stats()
    print(f"test accuracy {accuracies[-1] * 100:.1f}% after {epochs} epochs in {seconds:.1f} s")
    print(f"kernels compiled {int(stats['kernels_compiled'])}, loaded from disk cache "
          f"{int(stats['kernels_loaded_from_disk'])}, compile time {stats['compile_seconds']:.2f} s, "
          f"kernels launched {int(stats['kernels_launched'])}, oneDNN calls {int(stats['library_calls'])}")
    print(f"kernel cache: {mj.flags.cache_dir}")
    path = os.path.normpath(os.path.join(OUTPUT_DIRECTORY, "training_curve.png"))
    save_curve(losses, accuracies, path)
    print(f"training curve: {path}")
    if accuracies[-1] < 0.97:
        raise SystemExit(f"demo: test accuracy {accuracies[-1] * 100:.1f}% is below the expected 97%")


if __name__ == "__main__":
    main()

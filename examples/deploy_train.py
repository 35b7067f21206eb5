"""Deployment, step 1 of 2: train the digits CNN, then record the kernels inference needs into a bundle.

Writes into --output-dir (default build/deploy):
    weights.npz           the trained state dict (mj.save)
    model.mjb             every compiled kernel the inference below used (a metajit bundle)
    test_images.npy       the test inputs, N x 1 x 8 x 8 float32
    test_labels.npy       their labels
    expected_logits.npy   the logits computed here, for deploy_infer.py to compare against

Step 2, examples/deploy_infer.py, runs the same inference in a fresh process that is not allowed to compile.
Kernels bake in their shapes, so both scripts run inference through predict() below: fixed batches of
BATCH_SIZE rows, the last one padded with zeros.
"""
import argparse
import os

import numpy as np

import metajit as mj
import metajit.nn.functional as F
from metajit import optim
from metajit.data import DataLoader, TensorDataset
from metajit.models import SmallCNN

BATCH_SIZE = 128
DEFAULT_OUTPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "build", "deploy")


def build_model():
    return SmallCNN(in_channels=1, num_classes=10, input_size=8, channels=(16, 32), hidden=64)


def predict(model, images, batch_size=BATCH_SIZE):
    """Logits for `images` (numpy), computed in batches of exactly `batch_size` rows."""
    model.eval()
    count = len(images)
    padded = -(-count // batch_size) * batch_size
    images = np.concatenate([images, np.zeros((padded - count,) + images.shape[1:], images.dtype)])
    logits = []
    with mj.no_grad():
        for start in range(0, padded, batch_size):
            logits.append(model(mj.array(images[start:start + batch_size])).numpy())
    return np.concatenate(logits)[:count]


def load_digits():
    """scikit-learn's bundled 8x8 digits (no download), shuffled and split 80/20 as in examples/demo.py."""
    from sklearn.datasets import load_digits as sklearn_digits
    digits = sklearn_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(labels))
    images, labels = images[order], labels[order]
    split = int(0.8 * len(labels))
    return images[:split], labels[:split], images[split:], labels[split:]


def train(model, images, labels, epochs):
    optimizer = optim.Adam(model.parameters(), lr=3e-3)
    loader = DataLoader(TensorDataset(images, labels), batch_size=64, shuffle=True, drop_last=True, seed=0)
    model.train()
    for epoch in range(epochs):
        total, batches = 0.0, 0
        for batch_images, batch_labels in loader:
            loss = F.cross_entropy(model(batch_images), batch_labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            batches += 1
        print(f"epoch {epoch + 1}/{epochs}: training loss {total / batches:.4f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", default=DEFAULT_OUTPUT)
    parser.add_argument("--epochs", type=int, default=10)
    arguments = parser.parse_args()
    output = os.path.normpath(arguments.output_dir)
    os.makedirs(output, exist_ok=True)

    train_images, train_labels, test_images, test_labels = load_digits()
    mj.seed(0)
    model = build_model()
    train(model, train_images, train_labels, arguments.epochs)
    weights = os.path.join(output, "weights.npz")
    mj.save(model.state_dict(), weights)

    # Record exactly what deploy_infer.py does: a fresh model, the saved weights, batched inference.
    with mj.cache.record() as recording:
        deployed = build_model()
        deployed.load_state_dict(mj.load(weights))
        logits = predict(deployed, test_images)
    bundle = os.path.join(output, "model.mjb")
    manifest = recording.save(bundle)

    np.save(os.path.join(output, "test_images.npy"), test_images)
    np.save(os.path.join(output, "test_labels.npy"), test_labels)
    np.save(os.path.join(output, "expected_logits.npy"), logits)
    accuracy = float((logits.argmax(axis=1) == test_labels).mean())
    print(f"test accuracy {accuracy * 100:.1f}% on {len(test_labels)} images")
    print(f"wrote {weights}")
    print(f"wrote {bundle}: {len(manifest['entries'])} kernels for cpu={manifest['cpu']}")
    print(f"wrote test_images.npy, test_labels.npy, expected_logits.npy in {output}")


if __name__ == "__main__":
    main()

"""metajit demo: train a softmax classifier on scikit-learn's bundled handwritten digits with lazy execution.

Every step records the forward pass and its hand-derived gradient as a lazy graph of meta-ops; the only sync
is when the updated weights are read back, so each step runs as a few fused, cached kernels. (Automatic
differentiation and the CNN demo arrive with the autodiff issue; this shows the foundation underneath.)
Run it twice: the second run loads every kernel from the on-disk cache and compiles none.
"""
import time

import numpy as np

import metajit as mj


def load_digits():
    from sklearn.datasets import load_digits as sklearn_digits  # bundled with scikit-learn, no download
    digits = sklearn_digits()
    features = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(labels))
    features, labels = features[order], labels[order]
    split = int(0.8 * len(labels))
    return features[:split], labels[:split], features[split:], labels[split:]


def matmul(a, b):
    """[n, k] @ [k, m] as broadcast-multiply-sum: one fused kernel, no [n, k, m] buffer."""
    n, k = a.shape
    m = b.shape[1]
    return (mj.broadcast(a, [n, k, m], [2]) * mj.broadcast(b, [n, k, m], [0])).sum(dim=1)


def softmax(logits):
    shifted = logits - logits.max(dim=1, keepdim=True)
    exps = shifted.exp()
    return exps / exps.sum(dim=1, keepdim=True)


def main():
    train_x, train_y, test_x, test_y = load_digits()
    classes, features = 10, train_x.shape[1]
    mj.seed(0)
    weights = mj.randn(features, classes) * 0.01
    bias = mj.zeros(classes)
    learning_rate, batch_size, epochs = 0.5, 64, 30
    batches = len(train_y) // batch_size
    onehot_table = np.eye(classes, dtype=np.float32)
    mj.reset_stats()
    start = time.perf_counter()
    losses = []
    for epoch in range(epochs):
        order = np.random.default_rng(epoch).permutation(len(train_y))
        epoch_loss = 0.0
        for batch in range(batches):
            index = order[batch * batch_size:(batch + 1) * batch_size]
            x = mj.array(train_x[index])
            target = mj.array(onehot_table[train_y[index]])
            probabilities = softmax(matmul(x, weights) + mj.broadcast(bias, [batch_size, classes], [0]))
            loss = -(target * (probabilities + 1e-9).log()).sum() / batch_size
            # d loss / d logits = (p - target) / batch; chain rule through the linear layer, by hand.
            grad_logits = (probabilities - target) / batch_size
            grad_weights = matmul(x.T, grad_logits)
            grad_bias = grad_logits.sum(dim=0)
            weights = weights - learning_rate * grad_weights
            bias = bias - learning_rate * grad_bias
            mj.sync(weights, bias, loss)  # one fused plan for the whole step
            epoch_loss += loss.item()
        losses.append(epoch_loss / batches)
        if epoch % 5 == 0 or epoch == epochs - 1:
            print(f"epoch {epoch:2d}  loss {losses[-1]:.4f}")
    seconds = time.perf_counter() - start
    logits = matmul(mj.array(test_x), weights) + mj.broadcast(bias, [len(test_y), classes], [0])
    predictions = logits.numpy().argmax(axis=1)
    accuracy = float((predictions == test_y).mean())
    stats = mj.stats()
    print(f"test accuracy {accuracy * 100:.1f}%  ({epochs} epochs in {seconds:.2f} s)")
    print(f"kernels compiled {int(stats['kernels_compiled'])}, loaded from disk cache "
          f"{int(stats['kernels_loaded_from_disk'])}, memory-cache hits {int(stats['kernel_memory_hits'])}, "
          f"launched {int(stats['kernels_launched'])}, compile time {stats['compile_seconds']:.2f} s")
    print(f"kernel cache: {mj.flags.cache_dir}")
    if accuracy < 0.9:
        raise SystemExit(f"accuracy {accuracy:.3f} is below the expected 0.90")


if __name__ == "__main__":
    main()

"""Keeps bench/models_benchmark.py honest: each of its models, at a tiny size, trains in metajit from PyTorch's
initial weights on the same batches with the same losses as in PyTorch (the first loss checks the forward pass,
the second the gradients and the optimizer's update), and its inference output matches."""
import pathlib
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import metajit as mj  # noqa: E402
from models_benchmark import MODELS, Program, batches_for, initial_weights  # noqa: E402


@pytest.mark.parametrize("name", list(MODELS))
def test_training_and_inference_match_pytorch(name):
    size = MODELS[name].tiny_size
    weights, batches = initial_weights(torch, name, size), batches_for(name, size)
    ours, reference = Program(mj, name, size, batches, weights), Program(torch, name, size, batches, weights)
    for _ in range(2):
        np.testing.assert_allclose(ours.train_step(), reference.train_step(), rtol=1e-4)
    np.testing.assert_allclose(ours.infer(), reference.infer(), rtol=1e-4, atol=1e-5)

"""Models: parameter names and shapes as torchvision's ResNets (re-created in torch below, since torchvision is not
a dependency), forward against torch with copied weights on a tiny batch, and one training step that reduces the
loss."""
import numpy as np
import pytest
import torch

import metajit as mj
from metajit import models, nn, optim
from torch_reference_resnet import TorchResNet


def shapes(module):
    return [(name, tuple(value.shape)) for name, value in module.state_dict().items()]


@pytest.mark.parametrize("factory,layers", [(models.resnet18, [2, 2, 2, 2]), (models.resnet34, [3, 4, 6, 3])])
def test_resnet_state_dict_layout_matches_torchvision(factory, layers):
    ours = factory(num_classes=10, stem="cifar", width=8)  # narrow: only names and the layout are checked
    assert shapes(ours) == shapes(TorchResNet(layers, 10, "cifar", width=8))
    standard = sum(p.numel() for p in TorchResNet(layers, 1000, "imagenet").parameters())
    assert standard == {18: 11689512, 34: 21797672}[2 * sum(layers) + 2]  # torchvision's published counts
    # TorchResNet registers maxpool before bn1 (the same state dict: pooling has no parameters), so it gives the
    # set of module names; their order is torchvision's, spelled out here and compared module by module with a
    # torchvision re-creation in test_models_torchvision.py.
    assert sorted(name for name, _ in factory(stem="imagenet", width=8).named_modules()) == \
        sorted(name for name, _ in TorchResNet(layers, 1000, "imagenet", width=8).named_modules())
    for stem in ("imagenet", "cifar"):
        assert [name for name, _ in factory(stem=stem, width=8).named_children()] == \
            ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool", "fc"]


def copy_to_torch(ours, theirs):
    theirs.load_state_dict({name: torch.tensor(np.array(value.numpy())) for name, value in
                            ours.state_dict().items()})


def randomise_batch_norms(model):
    """Non-trivial affine parameters and running statistics, so eval mode exercises them."""
    rng = np.random.default_rng(0)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            channels = module.num_features
            module.weight.assign(mj.array(rng.uniform(0.5, 1.5, channels).astype(np.float32)))
            module.bias.assign(mj.array(rng.uniform(-0.2, 0.2, channels).astype(np.float32)))
            module.running_mean.assign(mj.array(rng.uniform(-0.1, 0.1, channels).astype(np.float32)))
            module.running_var.assign(mj.array(rng.uniform(0.5, 2.0, channels).astype(np.float32)))


def test_resnet18_cifar_forward_matches_torch():
    mj.seed(0)
    ours = models.resnet18(num_classes=10, stem="cifar")
    randomise_batch_norms(ours)
    theirs = TorchResNet([2, 2, 2, 2], 10, "cifar")
    copy_to_torch(ours, theirs)
    # 4 images of 16x16, so the last stage's batch statistics cover 16 values a channel: with 2 images of 8x8
    # they covered 2, and train mode amplified rounding so much that PyTorch's own float32 result was 5.7e-4 off
    # its float64 one (3.3e-6 here).
    x = np.random.default_rng(1).standard_normal((4, 3, 16, 16)).astype(np.float32)
    for mode in ("eval", "train"):
        getattr(ours, mode)()
        getattr(theirs, mode)()
        output = ours(mj.array(x))
        assert tuple(output.shape) == (4, 10)
        expected = theirs(torch.tensor(x)).detach().numpy()
        np.testing.assert_allclose(output.numpy(), expected, rtol=1e-3, atol=1e-4 * np.abs(expected).max())
    mj._autograd.take_pending_outputs()  # the train-mode forward registered running statistics


def test_resnet_imagenet_stem_forward_shape_and_values():
    ours = models.resnet18(num_classes=5, stem="imagenet", width=8).eval()
    randomise_batch_norms(ours)
    theirs = TorchResNet([2, 2, 2, 2], 5, "imagenet", width=8).eval()
    copy_to_torch(ours, theirs)
    x = np.random.default_rng(2).standard_normal((1, 3, 32, 32)).astype(np.float32)
    output = ours(mj.array(x))
    assert tuple(output.shape) == (1, 5)
    np.testing.assert_allclose(output.numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-3, atol=1e-4)
    with pytest.raises(ValueError, match="stem must be"):
        models.resnet18(stem="tiny")


def loss_after_steps(model, x, labels, steps, lr):
    optimizer = optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses = []
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(x), labels)
        optimizer.step(loss)
        losses.append(loss.item())
    losses.append(nn.functional.cross_entropy(model(x), labels).item())
    mj._autograd.take_pending_outputs()
    return losses


def test_resnet_training_step_reduces_loss():
    mj.seed(3)
    rng = np.random.default_rng(3)
    model = models.resnet18(num_classes=4, stem="cifar", width=8)
    x = mj.array(rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
    labels = mj.array(np.array([0, 1, 2, 3]))
    losses = loss_after_steps(model, x, labels, 1, 0.05)
    assert losses[1] < losses[0], losses


@pytest.mark.parametrize("size", [28, 8])
def test_small_cnn_shapes_and_training(size):
    mj.seed(4)
    rng = np.random.default_rng(4)
    model = models.SmallCNN(in_channels=1, num_classes=10, input_size=size)
    x = mj.array(rng.standard_normal((8, 1, size, size)).astype(np.float32))
    assert tuple(model(x).shape) == (8, 10)
    labels = mj.array(rng.integers(0, 10, 8))
    losses = loss_after_steps(model, x, labels, 3, 0.05)
    assert losses[-1] < losses[0], losses
    with pytest.raises(ValueError, match="at least 4"):
        models.SmallCNN(input_size=3)
    with_norm = models.SmallCNN(input_size=size, batch_norm=True, num_classes=3)
    assert tuple(with_norm(x).shape) == (8, 3)
    mj._autograd.take_pending_outputs()

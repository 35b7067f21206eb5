"""mj.models against torchvision's and nanoGPT's definitions: ResNet-18/34/50, MobileNetV2, VGG-11 with batch
norm (and VGG-11 without it through its feature layers, the only part that differs) and a nanoGPT-shaped GPT.

torchvision is not installed here (nor a dependency), so its architectures are re-written below in plain
torch.nn, following torchvision's published definitions: the same class names, attribute names, assignment order
(which is the order of children(), named_modules() and the state dict) and initialisation. Their parameter counts
are checked against the numbers torchvision publishes for its models, which pins the references themselves.

For each model: the state-dict keys, shapes and order, the named_modules() names and classes and children()
are the same as the reference's; every initial tensor has the reference's distribution; the reference's weights
load with load_state_dict(strict=True); forward outputs match in eval mode and in train mode (batch statistics,
and the updated running statistics) in float32; one SGD step (PyTorch's zero_grad / backward / step) gives the
same loss and the same new weights (in float64 where PyTorch's own float32 step is not reproducible, see
STEP_CASES); and nn.Sequential(*list(model.children())[:-1]) computes the same features. GPT: logits and loss,
greedy generation, and two AdamW steps with nanoGPT's parameter groups. Expected values always come from torch.

Must not: compare metajit with itself; take expected numbers from metajit; grow slow (everything is built once
per model and reloaded from a saved state between tests; small inputs).
"""
import functools
import inspect
import math
import os

import numpy as np
import pytest

import metajit as mj
from metajit import models, nn, optim

torch = pytest.importorskip("torch")
F = torch.nn.functional

# The full-size VGG-11-BN (133M parameters) takes about 6 GB and 20 s here: `make test-models-full` runs it
# (METAJIT_TEST_FULL_SIZE_MODELS=1); `make test` keeps to the other models so it fits small CI machines.
FULL_SIZE = os.environ.get("METAJIT_TEST_FULL_SIZE_MODELS") == "1"
FULL_SIZE_ONLY = {"vgg11_bn"}


def cases(names):
    """Parametrize values: the full-size models only under METAJIT_TEST_FULL_SIZE_MODELS=1."""
    skip = pytest.mark.skipif(not FULL_SIZE, reason="full-size VGG-11-BN: run by make test-models-full")
    return [pytest.param(*name, marks=skip) if isinstance(name, tuple) and name[0] in FULL_SIZE_ONLY
            else pytest.param(name, marks=skip) if name in FULL_SIZE_ONLY else name for name in names]

# float32 everywhere; differences come from summation order, which grows with depth (ResNet-50 has 53 layers).
RTOL = 1e-4
ATOL = 1e-4

# torchvision's published parameter counts (the "num_params" of each model's weights documentation).
PUBLISHED_PARAMETER_COUNTS = {"resnet18": 11689512, "resnet34": 21797672, "resnet50": 25557032,
                              "mobilenet_v2": 3504872, "vgg11_bn": 132868840}


# ------------------------------------------------------------------------------ torchvision, re-written in torch

class BasicBlock(torch.nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(planes)
        self.relu = torch.nn.ReLU(inplace=True)
        self.conv2 = torch.nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class Bottleneck(torch.nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(planes)
        self.conv2 = torch.nn.Conv2d(planes, planes, 3, stride, 1, bias=False)  # stride on the 3x3 ("V1.5")
        self.bn2 = torch.nn.BatchNorm2d(planes)
        self.conv3 = torch.nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = torch.nn.BatchNorm2d(planes * 4)
        self.relu = torch.nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


class ResNet(torch.nn.Module):
    def __init__(self, block, layers, num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = torch.nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(64)
        self.relu = torch.nn.ReLU(inplace=True)
        self.maxpool = torch.nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(block, 64, layers[0], 1)
        self.layer2 = self._make_layer(block, 128, layers[1], 2)
        self.layer3 = self._make_layer(block, 256, layers[2], 2)
        self.layer4 = self._make_layer(block, 512, layers[3], 2)
        self.avgpool = torch.nn.AdaptiveAvgPool2d((1, 1))
        self.fc = torch.nn.Linear(512 * block.expansion, num_classes)
        for module in self.modules():
            if isinstance(module, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, torch.nn.BatchNorm2d):
                torch.nn.init.constant_(module.weight, 1)
                torch.nn.init.constant_(module.bias, 0)

    def _make_layer(self, block, planes, blocks, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = torch.nn.Sequential(
                torch.nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                torch.nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return torch.nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class Conv2dNormActivation(torch.nn.Sequential):
    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, groups=1):
        super().__init__(torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride, (kernel_size - 1) // 2,
                                         groups=groups, bias=False),
                         torch.nn.BatchNorm2d(out_channels), torch.nn.ReLU6(inplace=True))
        self.out_channels = out_channels


class InvertedResidual(torch.nn.Module):
    def __init__(self, inp, oup, stride, expand_ratio):
        super().__init__()
        self.stride = stride
        hidden = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers = [Conv2dNormActivation(inp, hidden, kernel_size=1)] if expand_ratio != 1 else []
        layers += [Conv2dNormActivation(hidden, hidden, stride=stride, groups=hidden),
                   torch.nn.Conv2d(hidden, oup, 1, 1, 0, bias=False), torch.nn.BatchNorm2d(oup)]
        self.conv = torch.nn.Sequential(*layers)
        self.out_channels = oup

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(torch.nn.Module):
    """torchvision's MobileNetV2 at width_mult=1 (every channel count is already a multiple of 8)."""

    def __init__(self, num_classes=1000, dropout=0.2):
        super().__init__()
        setting = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2], [6, 96, 3, 1], [6, 160, 3, 2],
                   [6, 320, 1, 1]]
        channels = 32
        features = [Conv2dNormActivation(3, channels, stride=2)]
        for expand_ratio, output, repeats, stride in setting:
            for index in range(repeats):
                features.append(InvertedResidual(channels, output, stride if index == 0 else 1, expand_ratio))
                channels = output
        features.append(Conv2dNormActivation(channels, 1280, kernel_size=1))
        self.features = torch.nn.Sequential(*features)
        self.classifier = torch.nn.Sequential(torch.nn.Dropout(p=dropout), torch.nn.Linear(1280, num_classes))
        for module in self.modules():
            if isinstance(module, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(module.weight, mode="fan_out")
            elif isinstance(module, torch.nn.BatchNorm2d):
                torch.nn.init.ones_(module.weight)
                torch.nn.init.zeros_(module.bias)
            elif isinstance(module, torch.nn.Linear):
                torch.nn.init.normal_(module.weight, 0, 0.01)
                torch.nn.init.zeros_(module.bias)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


class VGG(torch.nn.Module):
    def __init__(self, features, num_classes=1000, dropout=0.5):
        super().__init__()
        self.features = features
        self.avgpool = torch.nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = torch.nn.Sequential(
            torch.nn.Linear(512 * 7 * 7, 4096), torch.nn.ReLU(True), torch.nn.Dropout(p=dropout),
            torch.nn.Linear(4096, 4096), torch.nn.ReLU(True), torch.nn.Dropout(p=dropout),
            torch.nn.Linear(4096, num_classes))
        for module in self.modules():
            if isinstance(module, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
                torch.nn.init.constant_(module.bias, 0)
            elif isinstance(module, torch.nn.BatchNorm2d):
                torch.nn.init.constant_(module.weight, 1)
                torch.nn.init.constant_(module.bias, 0)
            elif isinstance(module, torch.nn.Linear):
                torch.nn.init.normal_(module.weight, 0, 0.01)
                torch.nn.init.constant_(module.bias, 0)

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def vgg_features(batch_norm):
    """VGG-11's ("A") feature layers."""
    layers, channels = [], 3
    for value in [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]:
        if value == "M":
            layers.append(torch.nn.MaxPool2d(2, 2))
            continue
        layers.append(torch.nn.Conv2d(channels, value, 3, padding=1))
        layers += [torch.nn.BatchNorm2d(value), torch.nn.ReLU(True)] if batch_norm else [torch.nn.ReLU(True)]
        channels = value
    return torch.nn.Sequential(*layers)


# name -> (torch reference, metajit model, input image side). Dropout is 0 on both sides so train mode is
# deterministic; the default rates are checked separately. Sides keep at least 2x2 positions in the last
# batch-norm layers: over only 2 values a channel (batch 2, 1x1), train mode's normalisation amplifies rounding.
VISION = {
    "resnet18": (lambda: ResNet(BasicBlock, [2, 2, 2, 2]), lambda: models.resnet18(), 64),
    "resnet34": (lambda: ResNet(BasicBlock, [3, 4, 6, 3]), lambda: models.resnet34(), 64),
    "resnet50": (lambda: ResNet(Bottleneck, [3, 4, 6, 3]), lambda: models.resnet50(), 64),
    "mobilenet_v2": (lambda: MobileNetV2(dropout=0.0), lambda: models.mobilenet_v2(dropout=0.0), 64),
    "vgg11_bn": (lambda: VGG(vgg_features(True), dropout=0.0), lambda: models.vgg11_bn(dropout=0.0), 32),
}
BATCH = 2


def randomise_batch_norms(model, seed):
    """Non-trivial affine parameters and running statistics, so both modes exercise them."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                count = module.num_features
                module.weight.copy_(torch.rand(count, generator=generator) + 0.5)
                module.bias.copy_(torch.rand(count, generator=generator) * 0.4 - 0.2)
                module.running_mean.copy_(torch.rand(count, generator=generator) * 0.2 - 0.1)
                module.running_var.copy_(torch.rand(count, generator=generator) * 1.5 + 0.5)


def sampled(values):
    """Tensors of millions of values are compared on every 97th one (VGG's classifier has 100M): a wrong update
    rule or gradient shows in any such sample, and comparing all of them took longer than the step."""
    flat = np.asarray(values).reshape(-1)
    return flat[::97] if flat.size > 1_000_000 else flat


@functools.lru_cache(maxsize=None)
def built(name):
    """Each model pair is built once (VGG's 100M-weight classifier takes seconds to initialise): the references'
    and ours' initial values, and the state every test starts from (the reference's, batch norms randomised)."""
    make_theirs, make_ours, _ = VISION[name]
    torch.manual_seed(0)
    mj.seed(0)
    theirs, ours = make_theirs(), make_ours()
    # Samples of the initial values (see sampled) keep VGG's copies small.
    torch_initial = {key: sampled(value.detach().numpy()).copy() for key, value in theirs.state_dict().items()}
    ours_initial = {key: sampled(value.numpy()).copy() for key, value in ours.state_dict().items()}
    randomise_batch_norms(theirs, seed=1)
    start = {key: value.detach().clone() for key, value in theirs.state_dict().items()}
    return theirs, ours, torch_initial, ours_initial, start


def as_metajit(state):
    return {key: mj.array(value.numpy()) for key, value in state.items()}


def fresh(name, dtype="float32"):
    """The pair with the start state loaded into both (strict), both in train mode, in `dtype`."""
    theirs, ours, _, _, start = built(name)
    theirs.zero_grad(set_to_none=True)  # the last test's gradients: VGG's take 0.5 GB a side
    ours.zero_grad(set_to_none=True)
    theirs.float().load_state_dict(start)
    result = ours.float().load_state_dict(as_metajit(start), strict=True)
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    if dtype == "float64":
        theirs.double()
        ours.double()
    return theirs.train(), ours.train()


def images(name, seed):
    side = VISION[name][2]
    return np.random.default_rng(seed).standard_normal((BATCH, 3, side, side)).astype(np.float32)


def assert_close(got, expected, rtol=RTOL, atol=ATOL, message=""):
    """Elementwise |got - expected| <= atol * max|expected| + rtol * |expected|: atol is relative to the
    tensor's scale, since logits of different models differ in magnitude by orders."""
    expected = np.asarray(expected)
    scale = max(float(np.abs(expected).max()), 1e-30) if expected.size else 1.0
    np.testing.assert_allclose(np.asarray(got), expected, rtol=rtol, atol=atol * scale, err_msg=message)


def module_layout(module):
    return [(name, type(child).__name__) for name, child in module.named_modules()]


# ------------------------------------------------------------------------------------------------ vision tests

@pytest.mark.parametrize("name", cases(list(VISION)))
def test_names_order_and_classes_match_torchvision(name):
    theirs, ours, _, _, _ = built(name)
    assert [(key, tuple(value.shape)) for key, value in ours.state_dict().items()] == \
        [(key, tuple(value.shape)) for key, value in theirs.state_dict().items()]
    assert [key for key, _ in ours.named_parameters()] == [key for key, _ in theirs.named_parameters()]
    assert module_layout(ours) == module_layout(theirs)
    assert [key for key, _ in ours.named_children()] == [key for key, _ in theirs.named_children()]
    assert [type(child).__name__ for child in ours.children()] == \
        [type(child).__name__ for child in theirs.children()]
    count = sum(parameter.numel() for parameter in theirs.parameters())
    assert count == PUBLISHED_PARAMETER_COUNTS[name]
    assert sum(parameter.numel() for parameter in ours.parameters()) == count


def test_resnet_children_start_like_torchvision():
    """The reported bug: children() began conv1, maxpool, bn1, so children()[:k] built another network."""
    assert [name for name, _ in models.resnet18().named_children()] == \
        ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool", "fc"]


@pytest.mark.parametrize("name", cases(list(VISION)))
def test_default_initialisation_matches_torchvision(name):
    """Each tensor's initial distribution: constants equal, random tensors with the same mean and spread."""
    _, _, torch_initial, ours_initial, _ = built(name)
    for key, expected in torch_initial.items():
        # Every 97th value of the largest tensors (see built): a million values still pin the spread to 0.1%.
        expected = expected.astype(np.float64)
        got = ours_initial[key].astype(np.float64)
        if expected.size < 2 or np.all(expected == expected.flat[0]):
            np.testing.assert_array_equal(got, expected, err_msg=key)
            continue
        # Standard errors of the estimates: std * sqrt(1/n) for the mean, about std * sqrt(1/(2n)) for the std.
        spread = expected.std()
        assert abs(got.mean() - expected.mean()) < 6 * spread / math.sqrt(expected.size), key
        assert abs(got.std() / spread - 1) < 6 / math.sqrt(expected.size) + 1e-3, key
        assert abs(np.abs(got).max() / np.abs(expected).max() - 1) < 0.5, key  # normal vs uniform tails


def test_default_dropout_rates_and_keywords_match_torchvision():
    assert models.mobilenet_v2().classifier[0].p == 0.2
    assert inspect.signature(models.VGG).parameters["dropout"].default == 0.5
    assert models.mobilenet_v2(num_classes=7, width_mult=0.5).classifier[1].out_features == 7
    wide = models.mobilenet_v2(width_mult=0.5)
    assert wide.features[0].out_channels == 16 and wide.last_channel == 1280  # torchvision's rounding
    assert models.resnet18(num_classes=3, zero_init_residual=True).layer1[0].bn2.weight.numpy().max() == 0
    with pytest.raises(ValueError, match="expected value 32"):
        models.resnext50_32x4d(groups=4)
    # ResNeXt's grouped 3x3 convolutions: torchvision's published count. Dilation keeps layer3/4 at stride 8.
    assert sum(p.numel() for p in models.resnext50_32x4d().parameters()) == 25028904
    dilated = models.resnet50(replace_stride_with_dilation=[False, True, True], width=8).eval()
    assert tuple(nn.Sequential(*list(dilated.children())[:-2])(mj.array(images("resnet50", 8))).shape) == \
        (BATCH, 256, 8, 8)


@pytest.mark.parametrize("name", cases(list(VISION)))
def test_forward_eval_and_train_match_torchvision(name):
    theirs, ours = fresh(name)
    x = images(name, seed=2)
    for mode in ("eval", "train"):
        getattr(theirs, mode)()
        getattr(ours, mode)()
        expected = theirs(torch.tensor(x)).detach().numpy()
        got = ours(mj.array(x)).numpy()
        assert got.shape == expected.shape == (BATCH, 1000)
        assert_close(got, expected, message=f"{name} {mode}")
    mj._autograd.take_pending_outputs()  # the running statistics are read below, not left to an optimizer
    # The train-mode forward updated the running statistics (momentum 0.1) on both sides.
    expected_state = theirs.state_dict()
    for key, value in ours.state_dict().items():
        if "running" in key or "num_batches" in key:
            assert_close(value.numpy(), expected_state[key].numpy(), message=key)


def assert_same_step(ours, theirs, start, rtol, atol):
    """Every parameter's and buffer's change (new - start), which has its own scale rather than the weights';
    atol is relative to the largest change in the model, since some changes are rounding noise on both sides
    (a convolution bias followed by batch norm in train mode has a gradient of exactly zero in exact
    arithmetic)."""
    expected_state, got_state, before = {}, {}, {}
    for key, value in theirs.state_dict().items():
        expected_state[key] = sampled(value.detach().numpy()).astype(np.float64)
        before[key] = sampled(start[key].numpy()).astype(np.float64)
    for key, value in ours.state_dict().items():
        got_state[key] = sampled(value.numpy()).astype(np.float64)
    assert list(got_state) == list(expected_state)
    largest = max(np.abs(expected_state[key] - before[key]).max() for key in before if "num_batches" not in key)
    assert largest > 0
    for key in before:
        np.testing.assert_allclose(got_state[key] - before[key], expected_state[key] - before[key], rtol=rtol,
                                   atol=atol * largest, err_msg=key)


# (model, dtype): float32 where PyTorch's own float32 step agrees with its float64 one to about 1e-5; float64
# for ResNet-50 and MobileNetV2, whose first steps PyTorch itself computes in float32 only to 2e-2 and 3e-3 of
# the gradient (deep batch-normalised stacks on 2 images amplify rounding), so only float64 can tell a real
# difference from rounding there. VGG in float64 would take tens of seconds (its 100M-weight classifier).
STEP_CASES = [("resnet18", "float32"), ("resnet34", "float32"), ("resnet50", "float64"),
              ("mobilenet_v2", "float64"), ("vgg11_bn", "float32")]
STEP_TOLERANCES = {"float32": (1e-4, 1e-5), "float64": (1e-8, 1e-11)}


@pytest.mark.parametrize("name,dtype", cases(STEP_CASES))
def test_one_sgd_step_matches_torchvision(name, dtype):
    theirs, ours = fresh(name, dtype)
    x = images(name, seed=3).astype(dtype)
    labels = np.array([3, 917])
    their_optimizer = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    our_optimizer = optim.SGD(ours.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    their_optimizer.zero_grad()
    their_loss = F.cross_entropy(theirs(torch.tensor(x)), torch.tensor(labels))
    their_loss.backward()
    their_optimizer.step()
    our_optimizer.zero_grad()
    our_loss = nn.functional.cross_entropy(ours(mj.array(x)), mj.array(labels))
    assert our_loss.dtype == dtype
    our_loss.backward()
    our_optimizer.step()
    # Gradients and momentum are not compared; VGG's take 2 GB, released before the comparison.
    del their_optimizer, our_optimizer
    theirs.zero_grad(set_to_none=True)
    ours.zero_grad(set_to_none=True)
    rtol, atol = STEP_TOLERANCES[dtype]
    assert_close(our_loss.item(), their_loss.item(), rtol=rtol, atol=0)
    assert_same_step(ours, theirs, built(name)[4], rtol, atol)


@pytest.mark.skipif(not FULL_SIZE, reason="builds the full-size VGG-11-BN: run by make test-models-full")
def test_vgg_without_batch_norm_matches_torchvision(monkeypatch):
    """VGG-11 without batch norm differs from vgg11_bn (tested in full above) only in `features`: its layers,
    names and forward against torchvision's, and which features and keywords each vgg factory passes to VGG
    (building the real models would spend seconds a model initialising the shared 100M-weight classifier)."""
    torch.manual_seed(0)
    theirs = vgg_features(batch_norm=False)
    ours = models.vgg.make_layers(models.vgg.cfgs["A"], batch_norm=False)
    assert module_layout(ours) == module_layout(theirs)
    assert [(key, tuple(value.shape)) for key, value in ours.state_dict().items()] == \
        [(key, tuple(value.shape)) for key, value in theirs.state_dict().items()]
    ours.load_state_dict(as_metajit(theirs.state_dict()), strict=True)
    x = images("vgg11_bn", seed=6)
    assert_close(ours(mj.array(x)).numpy(), theirs(torch.tensor(x)).detach().numpy())
    # torchvision's vgg11 has 132,863,336 parameters: these features and vgg11_bn's classifier.
    classifier = sum(p.numel() for p in built("vgg11_bn")[0].classifier.parameters())
    assert sum(p.numel() for p in theirs.parameters()) + classifier == 132863336
    calls = []
    monkeypatch.setattr(models.vgg, "VGG", lambda features, **keywords: calls.append((features, keywords)))
    for depth, convolutions in ((11, 8), (13, 10), (16, 13), (19, 16)):
        for batch_norm in (False, True):
            getattr(models, f"vgg{depth}{'_bn' if batch_norm else ''}")(num_classes=5)
            features, keywords = calls.pop()
            kinds = [type(layer).__name__ for layer in features]
            assert kinds.count("Conv2d") == convolutions and kinds.count("MaxPool2d") == 5
            assert kinds.count("BatchNorm2d") == (convolutions if batch_norm else 0)
            assert keywords == {"num_classes": 5}


@pytest.mark.parametrize("name", cases(["resnet18", "resnet50", "mobilenet_v2", "vgg11_bn"]))
def test_children_without_the_head_are_torchvision_features(name):
    theirs, ours = fresh(name)
    theirs.eval()
    ours.eval()
    their_features = torch.nn.Sequential(*list(theirs.children())[:-1])
    our_features = nn.Sequential(*list(ours.children())[:-1])
    x = images(name, seed=4)
    expected = their_features(torch.tensor(x)).detach().numpy()
    got = our_features(mj.array(x)).numpy()
    assert got.shape == expected.shape
    assert_close(got, expected)


def test_torch_checkpoint_file_loads_with_mj_load(tmp_path):
    """The documented way to use torchvision weights: torch.save's file read by mj.load, loaded strictly."""
    theirs, ours = fresh("resnet18")
    path = tmp_path / "resnet18.pth"
    torch.save(theirs.state_dict(), path)
    ours.load_state_dict(mj.load(str(path)), strict=True)
    theirs.eval()
    ours.eval()
    x = images("resnet18", seed=5)
    assert_close(ours(mj.array(x)).numpy(), theirs(torch.tensor(x)).detach().numpy())


def test_checkpoint_without_batch_counters_loads_strictly_as_in_pytorch(tmp_path):
    """torchvision's ImageNet weight files predate BatchNorm's num_batches_tracked buffer. PyTorch fills the
    counters in with zero when a state dict lacks them; so does metajit, with strict=True."""
    theirs, ours = fresh("mobilenet_v2")
    path = tmp_path / "mobilenet_v2-old.pth"
    torch.save({key: value for key, value in theirs.state_dict().items() if "num_batches_tracked" not in key}, path)
    state = torch.load(path)
    theirs.load_state_dict(state, strict=True)
    missing, unexpected = ours.load_state_dict(mj.load(str(path)), strict=True)
    assert list(unexpected) == [] and list(missing) == []
    counters = {key: value for key, value in ours.state_dict().items() if key.endswith("num_batches_tracked")}
    assert counters and all(int(value.item()) == int(theirs.state_dict()[key].item()) == 0
                            for key, value in counters.items())
    theirs.eval()
    ours.eval()
    x = images("mobilenet_v2", seed=7)
    assert_close(ours(mj.array(x)).numpy(), theirs(torch.tensor(x)).detach().numpy())


@pytest.mark.parametrize("factory", [models.resnet18, models.resnet50, models.mobilenet_v2, models.vgg11_bn,
                                     models.vgg11])
def test_pretrained_weights_raise_a_clear_error(factory):
    with pytest.raises(NotImplementedError, match=r"mj\.load.*load_state_dict|load_state_dict.*mj\.load"):
        factory(weights="IMAGENET1K_V1")
    with pytest.raises(NotImplementedError, match="cannot download"):
        factory(pretrained=True)


# -------------------------------------------------------------------------------------------- nanoGPT in torch

class TorchLayerNorm(torch.nn.Module):
    """nanoGPT's LayerNorm, whose bias is optional."""

    def __init__(self, size, bias):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(size))
        self.bias = torch.nn.Parameter(torch.zeros(size)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class TorchCausalSelfAttention(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_attn = torch.nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = torch.nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = torch.nn.Dropout(config.dropout)
        self.resid_dropout = torch.nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd

    def forward(self, x):
        batch, time, channels = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (value.view(batch, time, self.n_head, channels // self.n_head).transpose(1, 2)
                   for value in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(batch, time, channels)))


class TorchMLP(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = torch.nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = torch.nn.GELU()
        self.c_proj = torch.nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = torch.nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class TorchBlock(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = TorchLayerNorm(config.n_embd, config.bias)
        self.attn = TorchCausalSelfAttention(config)
        self.ln_2 = TorchLayerNorm(config.n_embd, config.bias)
        self.mlp = TorchMLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TorchGPT(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = torch.nn.ModuleDict(dict(
            wte=torch.nn.Embedding(config.vocab_size, config.n_embd),
            wpe=torch.nn.Embedding(config.block_size, config.n_embd),
            drop=torch.nn.Dropout(config.dropout),
            h=torch.nn.ModuleList([TorchBlock(config) for _ in range(config.n_layer)]),
            ln_f=TorchLayerNorm(config.n_embd, config.bias)))
        self.lm_head = torch.nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for name, parameter in self.named_parameters():
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(parameter, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, torch.nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, torch.nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        positions = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(positions))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is None:
            return self.lm_head(x[:, [-1], :]), None
        logits = self.lm_head(x)
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        parameters = [parameter for parameter in self.parameters() if parameter.requires_grad]
        return torch.optim.AdamW([{"params": [p for p in parameters if p.dim() >= 2], "weight_decay": weight_decay},
                                  {"params": [p for p in parameters if p.dim() < 2], "weight_decay": 0.0}],
                                 lr=learning_rate, betas=betas)


GPT_FIELDS = dict(vocab_size=97, block_size=16, n_layer=2, n_head=4, n_embd=64, dropout=0.0)


def gpt_pair(bias=True, dtype="float32"):
    """nanoGPT's model and ours from the same configuration, ours holding the reference's weights."""
    config = models.GPTConfig(**GPT_FIELDS, bias=bias)
    torch.manual_seed(0)
    mj.seed(0)
    theirs, ours = TorchGPT(config), models.GPT(config)
    if dtype == "float64":
        theirs.double()
    ours.to(dtype).load_state_dict(as_metajit(theirs.state_dict()), strict=True)
    return theirs, ours


def tokens(seed, shape=(2, 12)):
    return np.random.default_rng(seed).integers(0, GPT_FIELDS["vocab_size"], shape)


@pytest.mark.parametrize("bias", [True, False])
def test_gpt_layout_initialisation_and_forward_match_nanogpt(bias):
    config = models.GPTConfig(**GPT_FIELDS, bias=bias)
    torch.manual_seed(0)
    mj.seed(0)
    theirs, ours = TorchGPT(config), models.GPT(config)
    assert [(key, tuple(value.shape)) for key, value in ours.state_dict().items()] == \
        [(key, tuple(value.shape)) for key, value in theirs.state_dict().items()]
    assert [key for key, _ in ours.named_parameters()] == [key for key, _ in theirs.named_parameters()]
    assert module_layout(ours)[1:] == [(name, kind.replace("Torch", "")) for name, kind in module_layout(theirs)[1:]]
    assert [key for key, _ in ours.named_children()] == ["transformer", "lm_head"]
    assert ours.get_num_params() == sum(p.numel() for p in theirs.parameters()) - theirs.transformer.wpe.weight.numel()
    assert ours.transformer.wte.weight is ours.lm_head.weight
    expected_initial = theirs.state_dict()
    for key, value in ours.state_dict().items():
        expected = expected_initial[key].numpy()
        if np.all(expected == expected.flat[0]):
            np.testing.assert_array_equal(value.numpy(), expected, err_msg=key)
        else:
            assert abs(value.numpy().std() / expected.std() - 1) < 0.1, key  # 0.02, or 0.02/sqrt(2 n_layer)

    ours.load_state_dict(as_metajit(theirs.state_dict()), strict=True)
    assert ours.transformer.wte.weight is ours.lm_head.weight  # loading keeps the tie
    idx = tokens(6)
    targets = tokens(7)
    targets[0, :3] = -1  # ignored positions
    expected_logits, expected_loss = theirs(torch.tensor(idx), torch.tensor(targets))
    logits, loss = ours(mj.array(idx), mj.array(targets))
    assert_close(logits.numpy(), expected_logits.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert_close(loss.item(), expected_loss.item(), rtol=1e-5, atol=0)
    expected_last, _ = theirs(torch.tensor(idx))
    last, none = ours(mj.array(idx))
    assert none is None and tuple(last.shape) == (2, 1, GPT_FIELDS["vocab_size"])
    assert_close(last.numpy(), expected_last.detach().numpy(), rtol=1e-5, atol=1e-5)


def adamw_steps(theirs, ours, dtype, steps):
    """`steps` AdamW steps with nanoGPT's groups on both models; returns both sides' losses."""
    idx, targets = tokens(8), tokens(9)
    their_optimizer = theirs.configure_optimizers(0.1, 1e-3, (0.9, 0.95))
    our_optimizer = ours.configure_optimizers(0.1, 1e-3, (0.9, 0.95), "cpu")
    assert [len(group["params"]) for group in our_optimizer.param_groups] == \
        [len(group["params"]) for group in their_optimizer.param_groups]
    their_losses, our_losses = [], []
    for _ in range(steps):
        their_optimizer.zero_grad()
        _, their_loss = theirs(torch.tensor(idx), torch.tensor(targets))
        their_loss.backward()
        their_optimizer.step()
        our_optimizer.zero_grad()
        _, our_loss = ours(mj.array(idx), mj.array(targets))
        assert our_loss.dtype == dtype
        our_loss.backward()
        our_optimizer.step()
        their_losses.append(their_loss.item())
        our_losses.append(our_loss.item())
    _, their_loss = theirs(torch.tensor(idx), torch.tensor(targets))
    _, our_loss = ours(mj.array(idx), mj.array(targets))
    return their_losses + [their_loss.item()], our_losses + [our_loss.item()]


def test_gpt_adamw_steps_match_nanogpt():
    """float64: every weight after two steps. Adam moves each weight by about lr * sign(gradient), so in float32
    a gradient that is rounding noise (the key bias's is zero in exact arithmetic: softmax ignores a constant
    added to a row of scores) moves its weight by a noise-determined amount on either side. float32: the losses
    before, between and after the steps, which every weight's update feeds."""
    theirs, ours = gpt_pair(dtype="float64")
    start = {key: value.detach().clone() for key, value in theirs.state_dict().items()}
    expected_losses, losses = adamw_steps(theirs, ours, "float64", 2)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-12)
    assert losses[2] < losses[1] < losses[0]
    # atol: the key bias's noise gradient (1e-17) still moves it by lr * |g| / (|g| + eps), about 1e-14.
    assert_same_step(ours, theirs, start, rtol=1e-9, atol=1e-9)
    assert ours.transformer.wte.weight is ours.lm_head.weight

    expected_losses, losses = adamw_steps(*gpt_pair(dtype="float32"), "float32", 2)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-5)


def test_nanogpt_training_checkpoint_loads_as_documented(tmp_path):
    """docs/models.md's recipe for nanoGPT's ckpt.pt: the configuration from model_args and the state dict
    with torch.compile's _orig_mod. prefix removed (the rest of the file: optimizer state, counters)."""
    config = models.GPTConfig(**GPT_FIELDS)
    torch.manual_seed(1)
    theirs = TorchGPT(config)
    optimizer = theirs.configure_optimizers(0.1, 1e-3, (0.9, 0.95))
    theirs(torch.tensor(tokens(12)), torch.tensor(tokens(13)))[1].backward()
    optimizer.step()
    path = tmp_path / "ckpt.pt"
    torch.save({"model": {"_orig_mod." + key: value for key, value in theirs.state_dict().items()},
                "optimizer": optimizer.state_dict(), "model_args": dict(vars(config)), "iter_num": 1,
                "best_val_loss": torch.tensor(4.5), "config": {"learning_rate": 1e-3}}, path)
    checkpoint = mj.load(str(path))
    ours = models.GPT(models.GPTConfig(**checkpoint["model_args"]))
    ours.load_state_dict({key.removeprefix("_orig_mod."): value for key, value in checkpoint["model"].items()})
    idx = tokens(14)
    assert_close(ours(mj.array(idx))[0].numpy(), theirs(torch.tensor(idx))[0].detach().numpy(), rtol=1e-5,
                 atol=1e-5)


def test_gpt_generate_greedy_matches_nanogpt_and_checks_its_arguments():
    theirs, ours = gpt_pair()
    ours.eval()
    idx = tokens(10, (2, 14))
    generated = ours.generate(mj.array(idx), 4, top_k=1).numpy()  # top_k=1: sampling is the argmax
    expected = torch.tensor(idx)
    with torch.no_grad():
        for _ in range(4):  # past 16 tokens the context is cropped to the last block_size, as nanoGPT does
            logits, _ = theirs(expected[:, -GPT_FIELDS["block_size"]:])
            expected = torch.cat([expected, logits[:, -1, :].argmax(-1, keepdim=True)], dim=1)
    np.testing.assert_array_equal(generated, expected.numpy())
    sampled_tokens = ours.generate(mj.array(idx), 2, temperature=0.8).numpy()
    assert sampled_tokens.shape == (2, 16)
    assert sampled_tokens.min() >= 0 and sampled_tokens.max() < GPT_FIELDS["vocab_size"]
    np.testing.assert_array_equal(sampled_tokens[:, :14], idx)
    with pytest.raises(ValueError, match="block size"):
        ours(mj.array(tokens(11, (1, 17))))
    with pytest.raises(ValueError, match="divisible"):
        models.gpt(n_embd=30, n_head=4, vocab_size=10, block_size=4, n_layer=1)
    with pytest.raises(TypeError, match="either"):
        models.gpt(models.GPTConfig(), n_layer=1)
    assert isinstance(models.gpt(models.GPTConfig(**GPT_FIELDS)), models.GPT)

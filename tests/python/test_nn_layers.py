"""Every layer's forward (and, for the trainable ones, the gradients) against the same torch.nn layer with the
weights copied over through state dicts, so parameter names and shapes are checked too. Small shapes keep the
kernel compilations few."""
import math

import numpy as np
import pytest
import torch

import metajit as mj
from metajit import nn

RNG = np.random.default_rng(1234)


def random(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def copy_weights(ours, theirs):
    """Copies our parameters and buffers into the torch module (names must match exactly)."""
    state = {name: torch.tensor(np.array(value.numpy())) for name, value in ours.state_dict().items()}
    theirs.load_state_dict(state, strict=True)


def compare(ours, theirs, *inputs, rtol=1e-5, atol=1e-5, grad=True):
    """Runs both modules on the same inputs; compares outputs and, with grad, d(sum(out * r))/d(input and
    parameters)."""
    copy_weights(ours, theirs)
    our_inputs = [mj.array(x, requires_grad=grad and x.dtype.kind == "f") for x in inputs]
    their_inputs = [torch.tensor(x, requires_grad=grad and x.dtype.kind == "f") for x in inputs]
    our_output, their_output = ours(*our_inputs), theirs(*their_inputs)
    if isinstance(their_output, tuple):
        our_output, their_output = our_output[0], their_output[0]
    np.testing.assert_allclose(our_output.numpy(), their_output.detach().numpy(), rtol=rtol, atol=atol)
    if not grad:
        return
    weights = random(*their_output.shape)
    (their_output * torch.tensor(weights)).sum().backward()
    names = [name for name, _ in ours.named_parameters()]
    our_leaves = [x for x in our_inputs if x.requires_grad] + [p for _, p in ours.named_parameters()]
    their_parameters = dict(theirs.named_parameters())
    their_leaves = [x for x in their_inputs if x.requires_grad] + [their_parameters[name] for name in names]
    gradients = mj.grad((our_output * mj.array(weights)).sum(), our_leaves)
    for index, (mine, reference) in enumerate(zip(gradients, their_leaves)):
        np.testing.assert_allclose(mine.numpy(), reference.grad.numpy(), rtol=rtol * 10, atol=atol * 10,
                                   err_msg=f"gradient {index} ({(['input'] * len(inputs) + names)[index]})")


def test_linear():
    compare(nn.Linear(5, 3), torch.nn.Linear(5, 3), random(4, 5))
    compare(nn.Linear(5, 3, bias=False), torch.nn.Linear(5, 3, bias=False), random(2, 3, 5))
    assert repr(nn.Linear(5, 3)) == repr(torch.nn.Linear(5, 3))


def test_default_initialisation_bounds():
    layer = nn.Linear(50, 40)
    weight = layer.weight.numpy()
    bound = 1 / math.sqrt(50)
    assert np.abs(weight).max() <= bound and np.abs(weight).max() > 0.9 * bound
    np.testing.assert_allclose(weight.std(), bound / math.sqrt(3), rtol=0.1)  # uniform(-b, b) has std b/sqrt(3)
    assert np.abs(layer.bias.numpy()).max() <= bound
    conv = nn.Conv2d(4, 6, 3)
    conv_bound = 1 / math.sqrt(4 * 9)
    assert np.abs(conv.weight.numpy()).max() <= conv_bound
    assert np.abs(conv.weight.numpy()).max() > 0.8 * conv_bound
    embedding = nn.Embedding(100, 20, padding_idx=3)
    np.testing.assert_allclose(embedding.weight.numpy().std(), 1.0, rtol=0.1)
    assert not embedding.weight.numpy()[3].any()
    norm = nn.BatchNorm2d(3)
    assert norm.weight.numpy().tolist() == [1, 1, 1] and norm.running_var.numpy().tolist() == [1, 1, 1]


@pytest.mark.parametrize("options", [dict(), dict(stride=2, padding=1, bias=False), dict(padding="same", dilation=2),
                                     dict(groups=2, padding=(1, 0))])
def test_conv2d(options):
    ours, theirs = nn.Conv2d(4, 6, 3, **options), torch.nn.Conv2d(4, 6, 3, **options)
    compare(ours, theirs, random(2, 4, 7, 6), rtol=1e-4, atol=1e-5)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("padding_mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("layer, options, shape", [
    ("Conv2d", dict(padding=1), (2, 4, 7, 6)), ("Conv2d", dict(padding=(2, 1), stride=2), (1, 4, 9, 8)),
    ("Conv2d", dict(padding="same", dilation=2), (1, 4, 8, 9)), ("Conv1d", dict(padding=2), (2, 4, 11)),
    ("Conv3d", dict(padding=1), (1, 4, 5, 4, 6))])
def test_convolution_padding_modes(padding_mode, layer, options, shape):
    """Style-transfer and GAN generators write Conv2d(..., padding_mode='reflect'): the input is padded in the
    mode, then convolved without padding (PyTorch's order), forward and gradients."""
    ours = getattr(nn, layer)(4, 6, 3, padding_mode=padding_mode, **options)
    theirs = getattr(torch.nn, layer)(4, 6, 3, padding_mode=padding_mode, **options)
    compare(ours, theirs, random(*shape), rtol=1e-4, atol=1e-5)
    assert repr(ours) == repr(theirs)


def test_padding_modes_that_do_not_exist_or_do_not_apply_are_refused():
    with pytest.raises(ValueError, match="padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular'"):
        nn.Conv2d(2, 2, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="only padding_mode 'zeros' is supported for transposed"):
        nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")


def test_conv_transpose2d():
    ours = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1)
    theirs = torch.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1)
    compare(ours, theirs, random(2, 4, 3, 4), rtol=1e-4, atol=1e-5)
    assert repr(ours) == repr(theirs)
    plain, reference = nn.ConvTranspose2d(3, 2, 2, stride=2), torch.nn.ConvTranspose2d(3, 2, 2, stride=2)
    copy_weights(plain, reference)
    x = random(1, 3, 3, 3)
    output = plain(mj.array(x), output_size=[7, 7])
    np.testing.assert_allclose(output.numpy(), reference(torch.tensor(x), output_size=[7, 7]).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="not reachable"):
        plain(mj.array(x), output_size=[9, 9])


def test_batch_norm_training_statistics_and_eval():
    ours, theirs = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    ours.weight.assign(mj.array(random(3)))
    ours.bias.assign(mj.array(random(3)))
    compare(ours, theirs, random(4, 3, 2, 2) * 2 + 1, rtol=1e-4, atol=1e-5)
    mj.sync(*ours.buffers())
    mj._autograd.take_pending_outputs()
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(ours, name).numpy(), getattr(theirs, name).numpy(), rtol=1e-5,
                                   atol=1e-6)
    assert ours.num_batches_tracked.item() == 1
    ours.eval()
    theirs.eval()
    x = random(2, 3, 2, 2)
    np.testing.assert_allclose(ours(mj.array(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(ValueError, match="expected 4D input"):
        ours(mj.ones(2, 3))


def test_batch_norm_cumulative_average_and_untracked():
    ours, theirs = nn.BatchNorm1d(4, momentum=None), torch.nn.BatchNorm1d(4, momentum=None)
    for _ in range(3):
        x = random(5, 4) * 3
        ours(mj.array(x))
        theirs(torch.tensor(x))
    mj._autograd.take_pending_outputs()
    np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-5, atol=1e-6)
    untracked = nn.BatchNorm1d(4, affine=False, track_running_stats=False).eval()
    reference = torch.nn.BatchNorm1d(4, affine=False, track_running_stats=False).eval()
    x = random(3, 4, 2)
    np.testing.assert_allclose(untracked(mj.array(x)).numpy(), reference(torch.tensor(x)).numpy(), rtol=1e-5,
                               atol=1e-5)
    assert list(untracked.state_dict()) == list(reference.state_dict()) == []


def test_layer_norm_and_group_norm():
    layer = nn.LayerNorm([3, 4])
    layer.weight.assign(mj.array(random(3, 4)))
    compare(layer, torch.nn.LayerNorm([3, 4]), random(2, 3, 4), rtol=1e-4)
    group = nn.GroupNorm(2, 4)
    group.bias.assign(mj.array(random(4)))
    compare(group, torch.nn.GroupNorm(2, 4), random(2, 4, 3, 2), rtol=1e-4)
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(3, 4)


@pytest.mark.parametrize("ours,theirs", [
    (nn.ReLU(), torch.nn.ReLU()), (nn.GELU(), torch.nn.GELU()), (nn.GELU("tanh"), torch.nn.GELU("tanh")),
    (nn.SiLU(), torch.nn.SiLU()), (nn.Sigmoid(), torch.nn.Sigmoid()), (nn.Tanh(), torch.nn.Tanh()),
    (nn.LeakyReLU(0.2), torch.nn.LeakyReLU(0.2)), (nn.Softmax(dim=1), torch.nn.Softmax(dim=1)),
    (nn.LogSoftmax(dim=-1), torch.nn.LogSoftmax(dim=-1)), (nn.ReLU6(), torch.nn.ReLU6()),
    (nn.ELU(0.5), torch.nn.ELU(0.5)), (nn.Softplus(2.0), torch.nn.Softplus(2.0)), (nn.Identity(), torch.nn.Identity()),
    (nn.Flatten(), torch.nn.Flatten()), (nn.Flatten(0, 1), torch.nn.Flatten(0, 1)),
    (nn.Unflatten(1, (2, -1)), torch.nn.Unflatten(1, (2, -1))),
], ids=lambda module: repr(module))
def test_parameterless_layers(ours, theirs):
    compare(ours, theirs, random(3, 4, 2) * 3, rtol=1e-5, atol=1e-6)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("ours,theirs", [
    (nn.MaxPool2d(2), torch.nn.MaxPool2d(2)),
    (nn.MaxPool2d(3, stride=2, padding=1), torch.nn.MaxPool2d(3, stride=2, padding=1)),
    (nn.AvgPool2d(2, stride=1), torch.nn.AvgPool2d(2, stride=1)),
    (nn.AvgPool2d(3, padding=1, count_include_pad=False), torch.nn.AvgPool2d(3, padding=1, count_include_pad=False)),
    (nn.AdaptiveAvgPool2d((1, 1)), torch.nn.AdaptiveAvgPool2d((1, 1))),
    (nn.AdaptiveAvgPool2d(3), torch.nn.AdaptiveAvgPool2d(3)),
    (nn.AdaptiveMaxPool2d(2), torch.nn.AdaptiveMaxPool2d(2)),
], ids=lambda module: repr(module))
def test_pooling(ours, theirs):
    compare(ours, theirs, random(2, 3, 6, 5))


def test_dropout():
    layer = nn.Dropout(0.25)
    x = np.ones((64, 64), dtype=np.float32)
    output = layer(mj.array(x)).numpy()
    kept = output != 0
    np.testing.assert_allclose(output[kept], 1 / 0.75, rtol=1e-6)
    assert abs(kept.mean() - 0.75) < 0.03
    layer.eval()
    np.testing.assert_array_equal(layer(mj.array(x)).numpy(), x)
    assert repr(layer) == repr(torch.nn.Dropout(0.25))
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


def test_embedding():
    ours, theirs = nn.Embedding(10, 4, padding_idx=0), torch.nn.Embedding(10, 4, padding_idx=0)
    compare(ours, theirs, np.array([[1, 0, 3], [9, 3, 3]], dtype=np.int64))
    pretrained = nn.Embedding.from_pretrained(mj.array(random(5, 2)))
    assert not pretrained.weight.requires_grad and tuple(pretrained.weight.shape) == (5, 2)
    assert repr(ours) == repr(theirs)


def test_containers():
    sequence = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    reference = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    compare(sequence, reference, random(5, 3))
    assert repr(sequence) == repr(reference)
    assert len(sequence) == 3 and isinstance(sequence[-1], nn.Linear)
    assert [type(m).__name__ for m in sequence[1:]] == ["ReLU", "Linear"]
    del sequence[1]
    assert list(dict(sequence.named_children())) == ["0", "1"]
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(2)])
    layers.append(nn.Tanh())
    layers.insert(0, nn.Identity())
    assert [type(m).__name__ for m in layers] == ["Identity", "Linear", "Linear", "Tanh"]
    assert [name for name, _ in layers.named_parameters()] == ["1.weight", "1.bias", "2.weight", "2.bias"]
    with pytest.raises(IndexError, match="out of range"):
        layers[7]
    table = nn.ModuleDict({"a": nn.Linear(1, 1), "b": nn.ReLU()})
    assert list(table) == ["a", "b"] and "a" in table
    assert [name for name, _ in table.named_parameters()] == ["a.weight", "a.bias"]


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention(batch_first):
    ours = nn.MultiheadAttention(8, 2, batch_first=batch_first)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    ours.in_proj_bias.assign(mj.array(random(24)))
    ours.out_proj.bias.assign(mj.array(random(8)))
    x = random(2, 3, 8)
    compare(ours, theirs, x, x, x, rtol=1e-4)  # separate inputs with equal values
    query, key = random(2, 3, 8), random(2, 4, 8)  # (N, L, E) and (N, S, E)
    if not batch_first:
        query, key = query.transpose(1, 0, 2).copy(), key.transpose(1, 0, 2).copy()
    padding = np.array([[False, False, True, False], [False, True, False, False]])  # (N, S)
    attn_mask = np.triu(np.ones((3, 4), dtype=bool), 2)  # (L, S)
    our_output, our_weights = ours(mj.array(query), mj.array(key), mj.array(key), key_padding_mask=mj.array(padding),
                                   attn_mask=mj.array(attn_mask), average_attn_weights=False)
    their_output, their_weights = theirs(torch.tensor(query), torch.tensor(key), torch.tensor(key),
                                         key_padding_mask=torch.tensor(padding), attn_mask=torch.tensor(attn_mask),
                                         average_attn_weights=False)
    np.testing.assert_allclose(our_output.numpy(), their_output.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(our_weights.numpy(), their_weights.detach().numpy(), rtol=1e-4, atol=1e-6)


def test_multihead_attention_self_attention_unbatched_and_errors():
    ours, theirs = nn.MultiheadAttention(4, 1), torch.nn.MultiheadAttention(4, 1)
    copy_weights(ours, theirs)
    x = random(5, 4)
    variable = mj.array(x)
    output, weights = ours(variable, variable, variable)  # one shared input: the packed projection
    their_output, their_weights = theirs(torch.tensor(x), torch.tensor(x), torch.tensor(x))
    np.testing.assert_allclose(output.numpy(), their_output.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(weights.numpy(), their_weights.detach().numpy(), rtol=1e-4, atol=1e-6)
    float_mask = random(5, 5)
    output, _ = ours(variable, variable, variable, attn_mask=mj.array(float_mask), need_weights=False)
    their_output, _ = theirs(torch.tensor(x), torch.tensor(x), torch.tensor(x), attn_mask=torch.tensor(float_mask),
                             need_weights=False)
    np.testing.assert_allclose(output.numpy(), their_output.detach().numpy(), rtol=1e-4, atol=1e-5)
    different = nn.MultiheadAttention(4, 2, kdim=3, vdim=2)
    reference = torch.nn.MultiheadAttention(4, 2, kdim=3, vdim=2)
    compare(different, reference, random(3, 2, 4), random(5, 2, 3), random(5, 2, 2), rtol=1e-4)
    with pytest.raises(ValueError, match="divisible by num_heads"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match="attn_mask must have shape"):
        ours(variable, variable, variable, attn_mask=mj.ones(2, 2, dtype="bool"))


LOSSES = [
    (lambda m: m.CrossEntropyLoss(), "class"),
    (lambda m: m.CrossEntropyLoss(label_smoothing=0.1, reduction="sum"), "class"),
    (lambda m: m.CrossEntropyLoss(weight=WEIGHT(m), ignore_index=1), "class"),
    (lambda m: m.NLLLoss(reduction="none"), "class"),
    (lambda m: m.MSELoss(), "same"),
    (lambda m: m.L1Loss(reduction="sum"), "same"),
    (lambda m: m.BCEWithLogitsLoss(pos_weight=WEIGHT(m)), "binary"),
]


def WEIGHT(module):
    values = np.array([0.5, 2.0, 1.0, 1.5], dtype=np.float32)
    return mj.array(values) if module is nn else torch.tensor(values)


@pytest.mark.parametrize("make,target_kind", LOSSES)
def test_losses(make, target_kind):
    logits = random(5, 4)
    if target_kind == "class":
        target = np.array([0, 3, 1, 2, 1], dtype=np.int64)
    elif target_kind == "binary":
        target = (RNG.random((5, 4)) < 0.5).astype(np.float32)
    else:
        target = random(5, 4)
    ours, theirs = make(nn), make(torch.nn)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    our_input = mj.array(logits, requires_grad=True)
    their_input = torch.tensor(logits, requires_grad=True)
    our_loss, their_loss = ours(our_input, mj.array(target)), theirs(their_input, torch.tensor(target))
    np.testing.assert_allclose(our_loss.numpy(), their_loss.detach().numpy(), rtol=1e-5, atol=1e-6)
    their_loss.sum().backward()
    np.testing.assert_allclose(mj.grad(our_loss.sum(), our_input).numpy(), their_input.grad.numpy(), rtol=1e-4,
                               atol=1e-6)
    with pytest.raises(ValueError, match="reduction"):
        type(ours)(reduction="average")

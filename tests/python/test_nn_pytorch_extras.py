"""Layers ported PyTorch programs reach for, against PyTorch: the margin, embedding and likelihood losses
(metajit/ops/margin_loss.py), Softmax2d, Bilinear and EmbeddingBag (metajit/ops/embedding_bag.py). Values (for
every reduction) and the gradients of every input, float32 at rtol 1e-5."""
import numpy as np
import pytest

import metajit as mj

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-5, 1e-6


def compare(make_loss, arrays, requires_grad, reductions=("mean", "sum", "none")):
    """make_loss(lib, reduction, *tensors) on both libraries: the values, then the gradients of the inputs
    flagged in requires_grad (of the summed loss)."""
    for reduction in reductions:
        ours = [mj.array(a, requires_grad=flag) for a, flag in zip(arrays, requires_grad)]
        theirs = [torch.tensor(a, requires_grad=flag) for a, flag in zip(arrays, requires_grad)]
        got = make_loss(mj, reduction, *ours)
        expected = make_loss(torch, reduction, *theirs)
        np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=reduction)
        got.sum().backward()
        expected.sum().backward()
        for index, flag in enumerate(requires_grad):
            if flag:
                np.testing.assert_allclose(ours[index].grad.numpy(), theirs[index].grad.numpy(), rtol=RTOL,
                                           atol=ATOL, err_msg=f"{reduction}: gradient of input {index}")


@pytest.fixture
def rng():
    return np.random.default_rng(3)


def signs(rng, *shape):
    return np.where(rng.random(shape) < 0.5, -1.0, 1.0).astype(np.float32)


def test_margin_ranking_loss(rng):
    x1, x2 = rng.standard_normal((2, 7)).astype(np.float32)
    for margin in (0.0, 0.5):
        compare(lambda lib, reduction, a, b, y: lib.nn.MarginRankingLoss(margin, reduction=reduction)(a, b, y),
                [x1, x2, signs(rng, 7)], [True, True, False])


def test_hinge_embedding_and_soft_margin_losses(rng):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    y = signs(rng, 4, 5)
    compare(lambda lib, reduction, a, t: lib.nn.HingeEmbeddingLoss(0.7, reduction=reduction)(a, t), [x, y],
            [True, False])
    compare(lambda lib, reduction, a, t: lib.nn.SoftMarginLoss(reduction=reduction)(a, t), [x, y], [True, False])


def test_cosine_embedding_loss_of_rows_and_of_one_pair(rng):
    x1, x2 = rng.standard_normal((2, 6, 4)).astype(np.float32)
    x2[0] = 0.0  # a zero vector: PyTorch's epsilon keeps its cosine finite
    for margin in (0.0, 0.3):
        compare(lambda lib, reduction, a, b, y: lib.nn.CosineEmbeddingLoss(margin, reduction=reduction)(a, b, y),
                [x1, x2, signs(rng, 6)], [True, True, False])
    compare(lambda lib, reduction, a, b, y: lib.nn.functional.cosine_embedding_loss(a, b, y, reduction=reduction),
            [x1[1], x2[1], np.float32(-1.0)], [True, True, False])


@pytest.mark.parametrize("p,swap", [(2.0, False), (1.0, True), (3.0, False)])
def test_triplet_margin_loss(rng, p, swap):
    anchor, positive, negative = rng.standard_normal((3, 5, 8)).astype(np.float32)
    compare(lambda lib, reduction, a, b, c: lib.nn.TripletMarginLoss(margin=1.5, p=p, swap=swap,
                                                                      reduction=reduction)(a, b, c),
            [anchor, positive, negative], [True, True, True])
    with pytest.raises(ValueError, match="greater than 0"):
        mj.nn.TripletMarginLoss(margin=0)


@pytest.mark.parametrize("log_input,full", [(True, False), (True, True), (False, False), (False, True)])
def test_poisson_nll_loss(rng, log_input, full):
    rates = rng.standard_normal((3, 6)).astype(np.float32)
    if not log_input:
        rates = np.abs(rates) + 0.1
    counts = rng.poisson(2.0, (3, 6)).astype(np.float32)
    compare(lambda lib, reduction, x, t: lib.nn.PoissonNLLLoss(log_input=log_input, full=full,
                                                               reduction=reduction)(x, t),
            [rates, counts], [True, False])


@pytest.mark.parametrize("variance_shape", [(4, 3), (4,), (4, 1)])
def test_gaussian_nll_loss_with_every_variance_shape(rng, variance_shape):
    mean = rng.standard_normal((4, 3)).astype(np.float32)
    target = rng.standard_normal((4, 3)).astype(np.float32)
    variance = (np.abs(rng.standard_normal(variance_shape)) + 0.05).astype(np.float32)
    variance.flat[0] = 1e-9  # below eps: clamped for the value, not for the gradient
    for full in (False, True):
        compare(lambda lib, reduction, x, t, v: lib.nn.GaussianNLLLoss(full=full, reduction=reduction)(x, t, v),
                [mean, target, variance], [True, False, True])
    with pytest.raises(ValueError, match="negative"):
        mj.nn.functional.gaussian_nll_loss(mj.array(mean), mj.array(target), mj.array(-variance))


def test_multilabel_soft_margin_loss_with_and_without_class_weights(rng):
    logits = rng.standard_normal((5, 4)).astype(np.float32)
    labels = (rng.random((5, 4)) < 0.5).astype(np.float32)
    weight = rng.random(4).astype(np.float32)
    compare(lambda lib, reduction, x, t: lib.nn.MultiLabelSoftMarginLoss(reduction=reduction)(x, t),
            [logits, labels], [True, False])
    compare(lambda lib, reduction, x, t, w: lib.nn.MultiLabelSoftMarginLoss(weight=w, reduction=reduction)(x, t),
            [logits, labels, weight], [True, False, False])


def test_softmax2d_normalises_the_channels_at_each_position(rng):
    images = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    compare(lambda lib, reduction, x: lib.nn.Softmax2d()(x) * lib.arange(5, dtype=lib.float32), [images], [True],
            reductions=("none",))
    compare(lambda lib, reduction, x: lib.nn.Softmax2d()(x), [images[0]], [True], reductions=("none",))


@pytest.mark.parametrize("leading", [(5,), (2, 3), ()])
def test_bilinear_layer_matches_pytorch_with_its_weights(rng, leading):
    torch.manual_seed(0)
    theirs = torch.nn.Bilinear(4, 3, 6)
    ours = mj.nn.Bilinear(4, 3, 6)
    assert ours.weight.shape == tuple(theirs.weight.shape) and ours.bias.shape == tuple(theirs.bias.shape)
    bound = 1 / np.sqrt(4)
    assert np.abs(ours.weight.numpy()).max() <= bound and np.abs(ours.weight.numpy()).max() > bound / 2
    ours.load_state_dict({name: value.detach().numpy() for name, value in theirs.state_dict().items()})
    first = rng.standard_normal(leading + (4,)).astype(np.float32)
    second = rng.standard_normal(leading + (3,)).astype(np.float32)
    compare(lambda lib, reduction, a, b: (ours if lib is mj else theirs)(a, b), [first, second], [True, True],
            reductions=("none",))
    x1, x2 = mj.array(first, requires_grad=True), mj.array(second)
    ours(x1, x2).sum().backward()
    t1, t2 = torch.tensor(first, requires_grad=True), torch.tensor(second)
    theirs(t1, t2).sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(ours.bias.grad.numpy(), theirs.bias.grad.numpy(), rtol=RTOL, atol=ATOL)
    assert "in1_features=4, in2_features=3, out_features=6" in repr(ours)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("layout", ["offsets", "offsets_last", "rows"])
def test_embedding_bag_matches_pytorch(rng, mode, layout):
    """Bags from offsets (with an empty bag, and with include_last_offset) or as the rows of a 2-D input, with
    a padding index; outputs and the table's gradient against PyTorch with the same table."""
    torch.manual_seed(1)
    include_last = layout == "offsets_last"
    theirs = torch.nn.EmbeddingBag(10, 4, mode=mode, padding_idx=2, include_last_offset=include_last)
    ours = mj.nn.EmbeddingBag(10, 4, mode=mode, padding_idx=2, include_last_offset=include_last)
    ours.load_state_dict({"weight": theirs.weight.detach().numpy()})
    np.testing.assert_array_equal(mj.nn.EmbeddingBag(10, 4, padding_idx=2).weight.numpy()[2], np.zeros(4))
    if layout == "rows":
        indices = rng.integers(0, 10, (3, 5))
        indices[1, 0] = 2
        offsets = None
    else:
        indices = rng.integers(0, 10, 9)
        indices[4] = 2
        offsets = np.array([0, 3, 3, 7] + ([9] if include_last else []))  # bag 1 is empty
    got = ours(mj.array(indices), None if offsets is None else mj.array(offsets))
    expected = theirs(torch.tensor(indices), None if offsets is None else torch.tensor(offsets))
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=RTOL, atol=ATOL)
    scale = rng.standard_normal(tuple(expected.shape)).astype(np.float32)
    (got * mj.array(scale)).sum().backward()
    (expected * torch.tensor(scale)).sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=RTOL, atol=ATOL)


def test_embedding_bag_per_sample_weights_and_errors(rng):
    weight = rng.standard_normal((6, 3)).astype(np.float32)
    indices, offsets = np.array([1, 4, 5, 0, 2]), np.array([0, 2])
    sample_weights = rng.random(5).astype(np.float32)
    got = mj.nn.functional.embedding_bag(mj.array(indices), mj.array(weight), mj.array(offsets), mode="sum",
                                         per_sample_weights=mj.array(sample_weights))
    expected = torch.nn.functional.embedding_bag(torch.tensor(indices), torch.tensor(weight), torch.tensor(offsets),
                                                 mode="sum", per_sample_weights=torch.tensor(sample_weights))
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=RTOL, atol=ATOL)
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        mj.nn.functional.embedding_bag(mj.array(indices), mj.array(weight), mj.array(offsets), mode="mean",
                                       per_sample_weights=mj.array(sample_weights))
    with pytest.raises(ValueError, match="offsets\\[0\\] has to be 0"):
        mj.nn.functional.embedding_bag(mj.array(indices), mj.array(weight), mj.array(np.array([1, 3])))


ELEMENTWISE_LAYERS = {
    "Softmin(dim=1)": lambda lib: lib.nn.Softmin(dim=1), "Threshold(0.1, 20)": lambda lib: lib.nn.Threshold(0.1, 20.0),
    "Hardshrink(0.3)": lambda lib: lib.nn.Hardshrink(0.3), "Softshrink(0.4)": lambda lib: lib.nn.Softshrink(0.4),
    "Tanhshrink": lambda lib: lib.nn.Tanhshrink(),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE_LAYERS))
def test_shrink_threshold_and_softmin_layers(rng, name):
    x = rng.standard_normal((3, 6)).astype(np.float32)
    compare(lambda lib, reduction, a: ELEMENTWISE_LAYERS[name](lib)(a) * lib.arange(6, dtype=lib.float32), [x],
            [True], reductions=("none",))


@pytest.mark.parametrize("shape,affine,eps", [((8,), True, None), ((3, 8), True, 1e-5), ((8,), False, None)])
def test_rms_norm_layer_and_function(rng, shape, affine, eps):
    x = rng.standard_normal((2,) + (3, 8)[-len(shape):]).astype(np.float32) * 3
    torch.manual_seed(0)
    theirs = torch.nn.RMSNorm(shape, eps=eps, elementwise_affine=affine)
    ours = mj.nn.RMSNorm(shape, eps=eps, elementwise_affine=affine)
    assert [name for name, _ in ours.named_parameters()] == [name for name, _ in theirs.named_parameters()]
    if affine:
        with torch.no_grad():
            theirs.weight.uniform_(0.5, 1.5)
        ours.load_state_dict({"weight": theirs.weight.detach().numpy()})
    compare(lambda lib, reduction, a: (ours if lib is mj else theirs)(a) * lib.arange(8, dtype=lib.float32), [x],
            [True], reductions=("none",))
    if affine:
        np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_cosine_similarity_and_pairwise_distance_layers(rng):
    x1, x2 = rng.standard_normal((2, 4, 5)).astype(np.float32)
    compare(lambda lib, reduction, a, b: lib.nn.CosineSimilarity(dim=1)(a, b), [x1, x2], [True, True],
            reductions=("none",))
    compare(lambda lib, reduction, a, b: lib.nn.PairwiseDistance(p=3.0, keepdim=True)(a, b), [x1, x2], [True, True],
            reductions=("none",))


def test_parameter_list_and_dict_register_their_parameters_as_pytorch_names_them():
    def build(lib):
        class Model(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.scales = lib.nn.ParameterList([lib.nn.Parameter(lib.ones(2)) for _ in range(2)])
                self.scales.append(lib.nn.Parameter(lib.zeros(3)))
                self.extras = lib.nn.ParameterDict({"bias": lib.nn.Parameter(lib.zeros(2))})
                self.extras["gain"] = lib.nn.Parameter(lib.ones(1))
        return Model()
    ours, theirs = build(mj), build(torch)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [name for name, _ in ours.named_parameters()] == [name for name, _ in theirs.named_parameters()]
    assert len(ours.scales) == 3 and ours.scales[-1].shape == (3,) and "gain" in ours.extras
    assert all(value.requires_grad for value in ours.parameters())
    loss = (ours.scales[0] * ours.extras["bias"]).sum() + ours.extras["gain"].sum()
    loss.backward()
    np.testing.assert_array_equal(ours.extras["gain"].grad.numpy(), np.ones(1, np.float32))


POOLING_AND_UPSAMPLING = {
    "MaxPool3d(2)": (lambda lib: lib.nn.MaxPool3d(2), (2, 3, 4, 4, 6)),
    "AvgPool3d(2, 1, 1)": (lambda lib: lib.nn.AvgPool3d(2, 1, 1), (2, 3, 4, 4, 6)),
    "AdaptiveAvgPool3d((2, 1, 3))": (lambda lib: lib.nn.AdaptiveAvgPool3d((2, 1, 3)), (2, 3, 4, 4, 6)),
    "AdaptiveMaxPool1d(3)": (lambda lib: lib.nn.AdaptiveMaxPool1d(3), (2, 3, 7)),
    "AdaptiveMaxPool3d(2)": (lambda lib: lib.nn.AdaptiveMaxPool3d(2), (2, 3, 4, 4, 6)),
    "UpsamplingNearest2d(scale 2)": (lambda lib: lib.nn.UpsamplingNearest2d(scale_factor=2), (2, 3, 4, 5)),
    "UpsamplingBilinear2d(size)": (lambda lib: lib.nn.UpsamplingBilinear2d(size=(7, 9)), (2, 3, 4, 5)),
}


@pytest.mark.parametrize("name", sorted(POOLING_AND_UPSAMPLING))
def test_3d_pooling_and_older_upsampling_layers(rng, name):
    make, shape = POOLING_AND_UPSAMPLING[name]
    x = rng.standard_normal(shape).astype(np.float32)
    compare(lambda lib, reduction, a: make(lib)(a), [x], [True], reductions=("none",))

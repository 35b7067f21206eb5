"""RNNCell / LSTMCell / GRUCell, Transformer / TransformerEncoder / TransformerDecoder(Layer) and the dropout
variants against PyTorch: the same state_dict (torch's initial weights copied in), then forward outputs and the
gradients of a loss with respect to the inputs, initial states and every parameter, with dropout=0. Expected
values always come from torch. Dropout masks are random, so for them the shape of the mask (which dimensions
share a draw), the warnings and the errors are compared instead."""
import warnings

import numpy as np
import pytest

import metajit as mj
from metajit import nn

torch = pytest.importorskip("torch")

# PyTorch's notes about its own fast paths and mixed mask types, not about the results compared here.
pytestmark = [pytest.mark.filterwarnings("ignore:enable_nested_tensor is True"),
              pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")]


def load_from(ours, theirs):
    assert sorted(dict(ours.named_parameters())) == sorted(dict(theirs.named_parameters()))
    for name, parameter in theirs.named_parameters():
        assert tuple(dict(ours.named_parameters())[name].shape) == tuple(parameter.shape), name
    ours.load_state_dict({key: mj.array(value.detach().numpy()) for key, value in theirs.state_dict().items()})


def assert_parameter_grads_match(ours, theirs, rtol, atol):
    expected = dict(theirs.named_parameters())
    for name, parameter in ours.named_parameters():
        assert parameter.grad is not None, name
        np.testing.assert_allclose(parameter.grad.numpy(), expected[name].grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=name)


# ---------------------------------------------------------------------------------------------- recurrent cells

CELLS = [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}), ("RNNCell", {"bias": False}), ("LSTMCell", {}),
         ("LSTMCell", {"bias": False}), ("GRUCell", {}), ("GRUCell", {"bias": False})]


def cell_pair(name, arguments):
    torch.manual_seed(0)
    theirs = getattr(torch.nn, name)(5, 6, **arguments)
    ours = getattr(nn, name)(5, 6, **arguments)
    load_from(ours, theirs)
    return ours, theirs


def as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


@pytest.mark.parametrize("name,arguments", CELLS)
def test_cell_two_steps_outputs_and_gradients_match_pytorch(rng, name, arguments):
    """Two steps (the second reads the first's state) from a given initial state: outputs, and the gradients of
    the inputs, the initial state(s) and every parameter."""
    ours, theirs = cell_pair(name, arguments)
    state_count = 2 if name == "LSTMCell" else 1
    steps = [rng.standard_normal((3, 5)).astype(np.float32) for _ in range(2)]
    states = [rng.standard_normal((3, 6)).astype(np.float32) for _ in range(state_count)]
    weights = rng.standard_normal((3, 6)).astype(np.float32)

    def run(module, make):
        inputs = [make(value) for value in steps]
        initial = [make(value) for value in states]
        state = tuple(initial) if state_count == 2 else initial[0]
        outputs = []
        for x in inputs:
            state = module(x, state)
            outputs.append(as_tuple(state)[0])
        loss = sum(((output * output) * make(weights)).sum() for output in outputs)
        for value in as_tuple(state):
            loss = loss + value.sum()
        loss.backward()
        return outputs, state, inputs + initial

    ours_outputs, ours_state, ours_leaves = run(ours, lambda value: mj.array(value, requires_grad=True))
    theirs_outputs, theirs_state, theirs_leaves = run(theirs, lambda value: torch.tensor(value, requires_grad=True))
    for got, expected in zip(ours_outputs + list(as_tuple(ours_state)),
                             theirs_outputs + list(as_tuple(theirs_state))):
        np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-5)
    for got, expected in zip(ours_leaves, theirs_leaves):
        np.testing.assert_allclose(got.grad.numpy(), expected.grad.numpy(), rtol=1e-5, atol=1e-5)
    assert_parameter_grads_match(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cell_unbatched_input_and_default_zero_state_match_pytorch(rng, name):
    ours, theirs = cell_pair(name, {})
    data = rng.standard_normal(5).astype(np.float32)
    got, expected = as_tuple(ours(mj.array(data))), as_tuple(theirs(torch.from_numpy(data)))
    for value, reference in zip(got, expected):
        assert tuple(value.shape) == (6,)
        np.testing.assert_allclose(value.numpy(), reference.detach().numpy(), rtol=1e-5, atol=1e-6)
    batch = rng.standard_normal((4, 5)).astype(np.float32)
    for value, reference in zip(as_tuple(ours(mj.array(batch))), as_tuple(theirs(torch.from_numpy(batch)))):
        np.testing.assert_allclose(value.numpy(), reference.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,gates", [("RNNCell", 1), ("LSTMCell", 4), ("GRUCell", 3)])
def test_cell_parameters_initialisation_repr_and_errors(name, gates):
    cell = getattr(nn, name)(20, 30)
    theirs = getattr(torch.nn, name)(20, 30)
    assert {key: tuple(value.shape) for key, value in cell.named_parameters()} == \
        {key: tuple(value.shape) for key, value in theirs.named_parameters()}
    assert tuple(cell.weight_ih.shape) == (gates * 30, 20)
    bound = 1 / np.sqrt(30)
    values = np.concatenate([parameter.numpy().reshape(-1) for parameter in cell.parameters()])
    assert np.abs(values).max() <= bound and np.abs(values).max() > 0.9 * bound
    assert abs(values.std() - bound / np.sqrt(3)) < 0.1 * bound  # U(-b, b) has std b / sqrt(3)
    assert repr(cell) == repr(theirs)
    assert repr(getattr(nn, name)(2, 3, bias=False)) == repr(getattr(torch.nn, name)(2, 3, bias=False))
    without_bias = getattr(nn, name)(2, 3, bias=False)
    assert without_bias.bias_ih is None and sorted(dict(without_bias.named_parameters())) == ["weight_hh",
                                                                                              "weight_ih"]
    with pytest.raises(ValueError, match="1D or 2D"):
        cell(mj.zeros(2, 3, 20))
    with pytest.raises(ValueError, match="input_size"):
        cell(mj.zeros(2, 7))
    with pytest.raises(ValueError):
        cell(mj.zeros(2, 20), (mj.zeros(3, 30), mj.zeros(3, 30)) if name == "LSTMCell" else mj.zeros(3, 30))
    if name == "RNNCell":
        assert repr(nn.RNNCell(2, 3, nonlinearity="relu")) == repr(torch.nn.RNNCell(2, 3, nonlinearity="relu"))
        with pytest.raises(ValueError, match="nonlinearity"):
            nn.RNNCell(2, 3, nonlinearity="sigmoid")


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_flatten_parameters_is_a_no_op(rng, name):
    module = getattr(nn, name)(3, 4)
    data = mj.array(rng.standard_normal((2, 1, 3)).astype(np.float32))
    before = module(data)[0].numpy()
    assert module.flatten_parameters() is None
    np.testing.assert_array_equal(module(data)[0].numpy(), before)


# ---------------------------------------------------------------------------------------------- transformers

def transformer_pair(batch_first=False, norm_first=False, activation="relu"):
    """activation 'callable' passes each library's gelu function instead of a name."""
    torch.manual_seed(0)
    theirs = torch.nn.Transformer(16, 2, 2, 2, 24, dropout=0.0, batch_first=batch_first, norm_first=norm_first,
                                  activation=torch.nn.functional.gelu if activation == "callable" else activation)
    ours = nn.Transformer(16, 2, 2, 2, 24, dropout=0.0, batch_first=batch_first, norm_first=norm_first,
                          activation=nn.functional.gelu if activation == "callable" else activation)
    load_from(ours, theirs)
    return ours, theirs


def run_transformer(module, make, arrays, masks, weights):
    """module(src, tgt, **masks), then backward of sum(output * weights); returns the output and the inputs."""
    inputs = [make(value, True) for value in arrays]
    output = module(*inputs, **{name: make(value, False) for name, value in masks.items()})
    (output * make(weights, False)).sum().backward()
    return output, inputs


def ours_make(value, requires_grad):
    return mj.array(value, requires_grad=requires_grad)


def theirs_make(value, requires_grad):
    return torch.tensor(value, requires_grad=requires_grad)


TRANSFORMER_CASES = [
    # (batch_first, norm_first, activation, mask kinds)
    (False, False, "relu", "float"),
    (True, False, "gelu", "bool"),
    (True, True, "callable", "float"),
]


@pytest.mark.parametrize("batch_first,norm_first,activation,mask_kind", TRANSFORMER_CASES)
def test_transformer_matches_pytorch_with_masks(rng, batch_first, norm_first, activation, mask_kind):
    """The whole encoder-decoder with a causal target mask (float -inf or boolean), a memory mask, and boolean
    key padding masks for source, target and memory: the output and the gradients of src, tgt and every
    parameter."""
    ours, theirs = transformer_pair(batch_first, norm_first, activation)
    batch, source_length, target_length = 2, 5, 4
    shape = (lambda length: (batch, length, 16)) if batch_first else (lambda length: (length, batch, 16))
    src = rng.standard_normal(shape(source_length)).astype(np.float32)
    tgt = rng.standard_normal(shape(target_length)).astype(np.float32)
    causal = np.triu(np.ones((target_length, target_length), dtype=bool), 1)
    memory_mask = np.zeros((target_length, source_length), dtype=bool)
    memory_mask[0, 3] = True
    if mask_kind == "float":
        causal = np.where(causal, -np.inf, 0).astype(np.float32)
        memory_mask = np.where(memory_mask, -1e9, 0.5 * rng.standard_normal(memory_mask.shape)).astype(np.float32)
    source_padding = np.zeros((batch, source_length), dtype=bool)
    source_padding[1, -1] = True
    target_padding = np.zeros((batch, target_length), dtype=bool)
    target_padding[0, -1] = True
    masks = dict(tgt_mask=causal, memory_mask=memory_mask, src_key_padding_mask=source_padding,
                 tgt_key_padding_mask=target_padding, memory_key_padding_mask=source_padding)
    weights = rng.standard_normal(tgt.shape).astype(np.float32)
    got, ours_inputs = run_transformer(ours, ours_make, [src, tgt], masks, weights)
    expected, theirs_inputs = run_transformer(theirs, theirs_make, [src, tgt], masks, weights)
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-4, atol=1e-4)
    for value, reference in zip(ours_inputs, theirs_inputs):
        np.testing.assert_allclose(value.grad.numpy(), reference.grad.numpy(), rtol=1e-4, atol=1e-4)
    assert_parameter_grads_match(ours, theirs, rtol=1e-4, atol=1e-4)


def test_transformer_decoder_alone_is_causal_and_unbatched(rng):
    """TransformerDecoder with its own norm: tgt_is_causal with the generated mask, then unbatched input."""
    torch.manual_seed(1)
    theirs = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), 2,
                                         norm=torch.nn.LayerNorm(8))
    ours = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), 2, norm=nn.LayerNorm(8))
    load_from(ours, theirs)
    tgt = rng.standard_normal((4, 3, 8)).astype(np.float32)
    memory = rng.standard_normal((6, 3, 8)).astype(np.float32)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(4)
    ours_tgt, theirs_tgt = mj.array(tgt, requires_grad=True), torch.tensor(tgt, requires_grad=True)
    ours_memory, theirs_memory = mj.array(memory, requires_grad=True), torch.tensor(memory, requires_grad=True)
    got = ours(ours_tgt, ours_memory, tgt_mask=nn.Transformer.generate_square_subsequent_mask(4),
               tgt_is_causal=True)
    expected = theirs(theirs_tgt, theirs_memory, tgt_mask=mask, tgt_is_causal=True)
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-4, atol=1e-5)
    (got * got).sum().backward()
    (expected * expected).sum().backward()
    np.testing.assert_allclose(ours_tgt.grad.numpy(), theirs_tgt.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ours_memory.grad.numpy(), theirs_memory.grad.numpy(), rtol=1e-4, atol=1e-4)
    assert_parameter_grads_match(ours, theirs, rtol=1e-4, atol=1e-4)
    # Unbatched (T, E) target and (S, E) memory.
    got = ours(mj.array(tgt[:, 0]), mj.array(memory[:, 0]))
    expected = theirs(torch.from_numpy(tgt[:, 0]), torch.from_numpy(memory[:, 0]))
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_transformer_structure_initialisation_mask_and_errors():
    torch.manual_seed(0)
    model = nn.Transformer(16, 4, 2, 3, 32)
    reference = torch.nn.Transformer(16, 4, 2, 3, 32)
    assert {key: tuple(value.shape) for key, value in model.state_dict().items()} == \
        {key: tuple(value.shape) for key, value in reference.state_dict().items()}
    assert "encoder.layers.0.self_attn.in_proj_weight" in model.state_dict()
    assert "decoder.layers.2.multihead_attn.out_proj.weight" in model.state_dict()
    # Xavier-uniform for every matrix, after the deep copies: the layers differ and stay within the bound.
    first = model.encoder.layers[0].linear1.weight.numpy()
    assert not np.array_equal(first, model.encoder.layers[1].linear1.weight.numpy())
    assert np.abs(first).max() <= np.sqrt(6 / (16 + 32))
    in_projection = model.decoder.layers[0].self_attn.in_proj_weight.numpy()
    assert np.abs(in_projection).max() > 0.9 * np.sqrt(6 / (16 + 48))
    np.testing.assert_array_equal(model.encoder.norm.weight.numpy(), np.ones(16, dtype=np.float32))
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    assert mask.dtype == "float32"
    np.testing.assert_array_equal(mask.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(5).numpy())
    assert nn.Transformer.generate_square_subsequent_mask(3, dtype="float64").dtype == "float64"
    with pytest.raises(RuntimeError, match="batch number"):
        model(mj.zeros(5, 2, 16), mj.zeros(4, 3, 16))
    with pytest.raises(RuntimeError, match="d_model"):
        model(mj.zeros(5, 2, 16), mj.zeros(4, 2, 8))
    with pytest.raises(RuntimeError, match="relu/gelu"):
        nn.TransformerDecoderLayer(8, 2, activation="tanh")
    with pytest.raises(RuntimeError, match="relu/gelu"):
        nn.TransformerEncoderLayer(8, 2, activation="swish")
    # A Module activation is a registered child, as in PyTorch (it holds no parameters).
    layer = nn.TransformerEncoderLayer(8, 2, 16, activation=nn.GELU())
    assert isinstance(dict(layer.named_children())["activation"], nn.GELU)


def test_transformer_encoder_is_causal_without_mask_matches_the_explicit_mask(rng):
    """is_causal=True with no mask builds the causal mask (PyTorch requires the mask as well; the result is what
    the mask gives there)."""
    torch.manual_seed(0)
    theirs = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 1,
                                         enable_nested_tensor=False)
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 1)
    load_from(ours, theirs)
    data = rng.standard_normal((5, 2, 8)).astype(np.float32)
    expected = theirs(torch.from_numpy(data), mask=torch.nn.Transformer.generate_square_subsequent_mask(5),
                      is_causal=True)
    np.testing.assert_allclose(ours(mj.array(data), is_causal=True).numpy(), expected.detach().numpy(), rtol=1e-4,
                               atol=1e-5)


# ---------------------------------------------------------------------------------------------- dropout

def shared_dims(values):
    """The dimensions along which every slice equals the first one (the mask was drawn once along them)."""
    return [dim for dim in range(values.ndim) if values.shape[dim] > 1 and
            np.array_equal(values, np.broadcast_to(np.take(values, [0], axis=dim), values.shape))]


def run_both(name, shape, p=0.5):
    torch.manual_seed(0)
    mj.seed(0)
    with warnings.catch_warnings(record=True) as ours_warnings:
        warnings.simplefilter("always")
        ours = getattr(nn, name)(p)(mj.ones(*shape)).numpy()
    with warnings.catch_warnings(record=True) as theirs_warnings:
        warnings.simplefilter("always")
        theirs = getattr(torch.nn, name)(p)(torch.ones(shape)).numpy()
    return ours, theirs, len(ours_warnings), len(theirs_warnings)


@pytest.mark.parametrize("name,shape", [("Dropout2d", (6, 40, 5)), ("Dropout2d", (6, 40, 3, 3)),
                                        ("Dropout2d", (40, 30)), ("Dropout2d", (3, 20, 2, 2, 2)),
                                        ("Dropout3d", (40, 3, 2, 2)), ("Dropout3d", (6, 20, 2, 2, 2)),
                                        ("Dropout3d", (40, 3, 3)), ("Dropout3d", (60,)),
                                        ("Dropout1d", (40, 5)), ("Dropout1d", (6, 40, 5)),
                                        ("FeatureAlphaDropout", (6, 40, 5))])
def test_channel_dropout_draws_and_warnings_match_pytorch(name, shape):
    ours, theirs, ours_warning_count, theirs_warning_count = run_both(name, shape)
    assert shared_dims(ours) == shared_dims(theirs)
    assert ours_warning_count == theirs_warning_count
    if name != "FeatureAlphaDropout":
        assert set(np.unique(ours)) == set(np.unique(theirs)) == {0.0, 2.0}


@pytest.mark.filterwarnings("ignore:dropout")
@pytest.mark.parametrize("name,shape", [("Dropout1d", (4,)), ("Dropout1d", (2, 3, 4, 5)), ("Dropout2d", (4,)),
                                        ("Dropout3d", ())])
def test_channel_dropout_refuses_the_ranks_pytorch_refuses(name, shape):
    with pytest.raises(RuntimeError):
        getattr(torch.nn, name)(0.5)(torch.ones(shape))
    with pytest.raises(RuntimeError):
        getattr(nn, name)(0.5)(mj.ones(*shape) if shape else mj.ones([]))


def test_alpha_dropout_values_statistics_and_eval(rng):
    torch.manual_seed(0)
    expected_values = np.unique(torch.nn.AlphaDropout(0.2)(torch.zeros(1000)).numpy())
    got = nn.AlphaDropout(0.2)(mj.zeros(1000)).numpy()
    np.testing.assert_allclose(np.unique(got), expected_values, rtol=1e-6)
    data = rng.standard_normal(200000).astype(np.float32)
    output = nn.AlphaDropout(0.3)(mj.array(data)).numpy()
    assert abs(output.mean()) < 0.02 and abs(output.std() - 1) < 0.02  # keeps zero mean and unit variance
    layer = nn.AlphaDropout(0.3).eval()
    np.testing.assert_array_equal(layer(mj.array(data[:10])).numpy(), data[:10])
    np.testing.assert_array_equal(nn.AlphaDropout(1.0)(mj.array(data[:10])).numpy(), np.zeros(10))
    assert repr(nn.AlphaDropout(0.3)) == repr(torch.nn.AlphaDropout(0.3))

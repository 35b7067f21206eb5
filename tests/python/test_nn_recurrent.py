"""RNN, LSTM and GRU against PyTorch's with the same state_dict: outputs and final states (layers, directions,
batch_first, given initial states, unbatched input), parameter gradients, errors, and a training loop that
compiles nothing after its first step."""
import numpy as np
import pytest

import metajit as mj
from metajit import nn

torch = pytest.importorskip("torch")

CONFIGURATIONS = [{}, {"num_layers": 2}, {"bidirectional": True}, {"num_layers": 2, "bidirectional": True,
                                                                   "batch_first": True}, {"bias": False}]


def pair(name, **arguments):
    torch.manual_seed(0)
    theirs = getattr(torch.nn, name)(5, 6, **arguments)
    ours = getattr(nn, name)(5, 6, **arguments)
    assert sorted(dict(ours.named_parameters())) == sorted(dict(theirs.named_parameters()))
    ours.load_state_dict({key: mj.array(value.detach().numpy()) for key, value in theirs.state_dict().items()})
    return ours, theirs


def as_tuple(state):
    return state if isinstance(state, tuple) else (state,)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("arguments", CONFIGURATIONS)
def test_outputs_and_final_states_match_pytorch(rng, name, arguments):
    ours, theirs = pair(name, **arguments)
    data = rng.standard_normal((4, 3, 5)).astype(np.float32)
    output, state = ours(mj.array(data))
    expected_output, expected_state = theirs(torch.from_numpy(data))
    np.testing.assert_allclose(output.numpy(), expected_output.detach().numpy(), rtol=1e-5, atol=1e-6)
    for got, expected in zip(as_tuple(state), as_tuple(expected_state)):
        np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_initial_states_unbatched_input_and_gradients(rng, name):
    ours, theirs = pair(name, num_layers=2)
    states = [rng.standard_normal((2, 6)).astype(np.float32) for _ in range(2 if name == "LSTM" else 1)]
    data = rng.standard_normal((5, 5)).astype(np.float32)  # unbatched (L, H_in)
    ours_state = tuple(mj.array(value) for value in states) if name == "LSTM" else mj.array(states[0])
    theirs_state = tuple(torch.from_numpy(value) for value in states) if name == "LSTM" else torch.from_numpy(states[0])
    output, _ = ours(mj.array(data), ours_state)
    expected, _ = theirs(torch.from_numpy(data), theirs_state)
    np.testing.assert_allclose(output.numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    (output * output).sum().backward()
    (expected * expected).sum().backward()
    for (parameter_name, parameter), (_, reference) in zip(sorted(ours.named_parameters()),
                                                            sorted(theirs.named_parameters())):
        np.testing.assert_allclose(parameter.grad.numpy(), reference.grad.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=parameter_name)


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_gradients_of_inputs_initial_states_and_final_states_match_pytorch(rng, name):
    """The LSTM's backward is written out (backpropagation through time, one weight-gradient product over all
    steps); every gradient matches PyTorch's: parameters, the input, the initial states, with the final states
    in the loss too, over two layers in both directions."""
    ours, theirs = pair(name, num_layers=2, bidirectional=True)
    data = rng.standard_normal((6, 3, 5)).astype(np.float32)
    count = 2 if name == "LSTM" else 1
    states = [rng.standard_normal((4, 3, 6)).astype(np.float32) for _ in range(count)]
    weights = rng.standard_normal((6, 3, 12)).astype(np.float32)
    ours_inputs = [mj.array(value, requires_grad=True) for value in [data] + states]
    theirs_inputs = [torch.tensor(value, requires_grad=True) for value in [data] + states]

    def loss(module, inputs, array):
        hidden = tuple(inputs[1:]) if name == "LSTM" else inputs[1]
        output, final = module(inputs[0], hidden)
        total = (output * array(weights)).sum()
        for value in as_tuple(final):
            total = total + (value * value).sum()
        return total
    loss(ours, ours_inputs, mj.array).backward()
    loss(theirs, theirs_inputs, torch.from_numpy).backward()
    for index, (got, expected) in enumerate(zip(ours_inputs, theirs_inputs)):
        np.testing.assert_allclose(got.grad.numpy(), expected.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=str(index))
    for (parameter_name, parameter), (_, reference) in zip(sorted(ours.named_parameters()),
                                                            sorted(theirs.named_parameters())):
        np.testing.assert_allclose(parameter.grad.numpy(), reference.grad.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=parameter_name)


def test_errors_name_the_shapes():
    layer = nn.LSTM(5, 6)
    with pytest.raises(ValueError, match=r"expected input of shape \(L, N, 5\)"):
        layer(mj.zeros(4, 3, 4))
    with pytest.raises(ValueError, match=r"h_0 must have shape \(1, 3, 6\)"):
        layer(mj.zeros(4, 3, 5), (mj.zeros(2, 3, 6), mj.zeros(1, 3, 6)))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(5, 6, nonlinearity="sigmoid")


def test_training_loop_learns_and_stops_compiling(rng):
    model = nn.GRU(3, 8, batch_first=True)
    head = nn.Linear(8, 1)
    optimizer = mj.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=2e-2)
    data = rng.standard_normal((16, 6, 3)).astype(np.float32)
    target = data.sum(axis=(1, 2))[:, None].astype(np.float32)  # a sum over the sequence
    losses = []
    for step in range(40):
        output, _ = model(mj.array(data))
        loss = ((head(output[:, -1]) - mj.array(target)) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step == 2:
            mj.reset_stats()
    assert losses[-1] < 0.3 * losses[0]
    assert mj.stats()["kernels_compiled"] == 0


def test_truncated_backpropagation_through_time_keeps_no_earlier_graph(rng):
    """The carried state of truncated backpropagation (`h, c = h.detach(), c.detach()` each step) is a value the
    sync that computes it stores, because the user still holds it: before, `c` was only ever computed fused
    inside `h`, so each step's `c.detach()` held the previous step's whole graph (live Vars grew by about 19 a
    step here, the planner re-planned every few dozen steps). Losses match PyTorch's step for step (rtol 1e-4:
    40 SGD steps of float32 sums), live Vars stay flat and no step after the second plans anything."""
    torch.manual_seed(0)
    theirs = torch.nn.LSTMCell(8, 16)
    ours = nn.LSTMCell(8, 16)
    ours.load_state_dict({key: mj.array(value.detach().numpy()) for key, value in theirs.state_dict().items()})
    our_optimizer = mj.optim.SGD(ours.parameters(), lr=0.1)
    their_optimizer = torch.optim.SGD(theirs.parameters(), lr=0.1)
    inputs = rng.standard_normal((40, 3, 4, 8)).astype(np.float32)
    h, c = mj.zeros(4, 16), mj.zeros(4, 16)
    their_h, their_c = torch.zeros(4, 16), torch.zeros(4, 16)
    losses, expected, live, planned = [], [], [], []
    for step in range(40):
        h, c = h.detach(), c.detach()
        their_h, their_c = their_h.detach(), their_c.detach()
        for t in range(3):
            h, c = ours(mj.array(inputs[step, t]), (h, c))
            their_h, their_c = theirs(torch.from_numpy(inputs[step, t]), (their_h, their_c))
        loss = (h - 0.5).pow(2).mean()
        their_loss = (their_h - 0.5).pow(2).mean()
        our_optimizer.zero_grad()
        loss.backward()
        our_optimizer.step()
        their_optimizer.zero_grad()
        their_loss.backward()
        their_optimizer.step()
        stats = mj.stats()
        live.append(stats["vars_live"])
        planned.append(stats["planned_nodes"])
        losses.append(loss.item())
        expected.append(their_loss.item())
    np.testing.assert_allclose(losses, expected, rtol=1e-4)
    assert live[2:] == [live[2]] * 38, f"live Vars per step: {live}"
    assert planned[2:] == [planned[2]] * 38, f"nodes planned, cumulative: {planned}"

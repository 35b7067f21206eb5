"""Recurrent layers RNN, LSTM and GRU with PyTorch's arguments, gate order and parameter names (weight_ih_l0,
weight_hh_l0, bias_ih_l0, bias_hh_l0, ..._reverse), so state_dicts load from PyTorch's.

The time loop runs in Python and records one small graph per step; nothing is computed until a value is
needed, so a whole sequence (and its backward) is planned and fused at once, and a loop over batches of the same
length replays the cached plan."""
import math

from ..._function import Function
from .. import functional as F
from .. import init
from ..module import Module
from ._common import check_positive_int, empty_parameter

__all__ = ["RNN", "LSTM", "GRU"]


class _RecurrentBase(Module):
    gates = 1  # blocks of hidden_size rows in weight_ih / weight_hh

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        check_positive_int(input_size, "input_size", name)
        check_positive_int(hidden_size, "hidden_size", name)
        check_positive_int(num_layers, "num_layers", name)
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{name}: dropout must be in [0, 1], got {dropout}")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout, self.bidirectional = bias, batch_first, dropout, bidirectional
        directions = 2 if bidirectional else 1
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * directions
            for suffix in ("", "_reverse")[:directions]:
                setattr(self, f"weight_ih_l{layer}{suffix}",
                        empty_parameter((self.gates * hidden_size, layer_input), dtype))
                setattr(self, f"weight_hh_l{layer}{suffix}",
                        empty_parameter((self.gates * hidden_size, hidden_size), dtype))
                if bias:
                    setattr(self, f"bias_ih_l{layer}{suffix}", empty_parameter((self.gates * hidden_size,), dtype))
                    setattr(self, f"bias_hh_l{layer}{suffix}", empty_parameter((self.gates * hidden_size,), dtype))
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size)
        for parameter in self.parameters():
            init.uniform_(parameter, -bound, bound)

    def flatten_parameters(self):
        """Does nothing: PyTorch packs the weights into one cuDNN buffer here (a no-op on its CPU path too);
        metajit's layers read the separate parameters, so ported code may call it freely."""

    def _weights(self, layer, suffix):
        get = lambda kind: getattr(self, f"{kind}_l{layer}{suffix}", None)  # noqa: E731
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh")

    def _initial_states(self, hx, batch, batched, like):
        """The per-layer-and-direction initial states: zeros, or slices of the given (L * D, N, H) tensor(s)."""
        from ... import zeros
        count = self.num_layers * (2 if self.bidirectional else 1)
        names = ("h_0", "c_0") if self.state_count == 2 else ("h_0",)
        given = (hx,) if self.state_count == 1 else (hx if hx is not None else (None, None))
        states = []
        for name, value in zip(names, given):
            if value is None:
                value = zeros(count, batch, self.hidden_size, dtype=like.dtype)
            elif not batched:
                value = value.unsqueeze(1)
            if tuple(value.shape) != (count, batch, self.hidden_size):
                raise ValueError(f"{type(self).__name__}: {name} must have shape {(count, batch, self.hidden_size)}"
                                 f", got {tuple(value.shape)}")
            states.append([value[index] for index in range(count)])
        return states

    def forward(self, input, hx=None):
        name = type(self).__name__
        batched = input.ndim == 3
        if input.ndim not in (2, 3) or input.shape[-1] != self.input_size:
            raise ValueError(f"{name}: expected input of shape (L, N, {self.input_size}) (N first with batch_first"
                             f", or (L, {self.input_size}) unbatched), got {tuple(input.shape)}")
        sequence = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            sequence = sequence.transpose(0, 1)
        batch = sequence.shape[1]
        states = self._initial_states(hx, batch, batched, sequence)
        finals = [[] for _ in states]
        directions = ("", "_reverse") if self.bidirectional else ("",)
        layer_input = sequence
        for layer in range(self.num_layers):
            outputs_by_direction = []
            for direction, suffix in enumerate(directions):
                position = layer * len(directions) + direction
                state = [kind[position] for kind in states]
                weight_ih, weight_hh, bias_ih, bias_hh = self._weights(layer, suffix)
                # The input's share of every step's gates at once: one [L * N, gates] matrix product instead of a
                # small one per step (which also made the library calls per step twice as many).
                projected = _affine(layer_input, weight_ih, bias_ih)
                outputs, state = self._sequence(projected, state, weight_hh, bias_hh, bool(suffix))
                outputs_by_direction.append(outputs)
                for kind, value in zip(finals, state):
                    kind.append(value)
            # Whole sequences [L, N, H], never sliced per step: the gradient of each slice would be a zero-padded
            # tensor of the whole sequence's size, one per step, all added up.
            layer_input = outputs_by_direction[0] if len(directions) == 1 else F.cat(outputs_by_direction, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        output = layer_input
        if batched and self.batch_first:
            output = output.transpose(0, 1)
        final = [F.stack(kind, 0) for kind in finals]
        if not batched:
            output = output.squeeze(1)
            final = [value.squeeze(1) for value in final]
        return output, (final[0] if self.state_count == 1 else tuple(final))

    def _sequence(self, projected, state, weight_hh, bias_hh, reverse):
        """(the outputs [L, N, H], the final states) of one layer in one direction; `projected` holds every step's
        input share of the gates."""
        length = projected.shape[0]
        outputs = [None] * length
        for time in (range(length - 1, -1, -1) if reverse else range(length)):
            state = self._cell(projected[time], state, weight_hh, bias_hh)
            outputs[time] = state[0]
        return F.stack(outputs, 0), state

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if self.batch_first:
            text += ", batch_first=True"
        if self.bidirectional:
            text += ", bidirectional=True"
        return text


def _affine(x, weight, bias):
    return F.linear(x, weight, bias)


class RNN(_RecurrentBase):
    """RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True, batch_first=False,
    dropout=0.0, bidirectional=False): h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)."""
    state_count = 1

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device,
                         dtype)

    def _cell(self, projected, state, weight_hh, bias_hh):
        total = projected + _affine(state[0], weight_hh, bias_hh)
        return [total.tanh() if self.nonlinearity == "tanh" else total.relu()]


class LSTM(_RecurrentBase):
    """LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False). forward(input, (h_0, c_0)=None) -> (output, (h_n, c_n)); gates in PyTorch's order
    input, forget, cell, output."""
    gates, state_count = 4, 2

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        if proj_size:
            raise NotImplementedError("LSTM: proj_size is not supported")
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device,
                         dtype)

    def _sequence(self, projected, state, weight_hh, bias_hh, reverse):
        hidden, cell = state
        sequence, final_hidden, final_cell = _LSTMLayer.apply(projected, weight_hh, bias_hh, hidden, cell, reverse)
        return sequence, [final_hidden, final_cell]


class _LSTMLayer(Function):
    """One LSTM layer in one direction over a whole sequence, with backpropagation through time written out. Each
    step's backward is elementwise work and one [N, 4H] x [4H, H] product; the recurrent weight's gradient is then
    one product over all steps ([4H, L * N] x [L * N, H]) where autodiff summed one product per step: for 64 steps
    of [32, 256], the 63 products and the [1024, 256] sum of their results were 24 of a 95 ms training step."""

    @staticmethod
    def forward(ctx, projected, weight_hh, bias_hh, hidden, cell, reverse):
        length, size = projected.shape[0], hidden.shape[-1]
        order = range(length - 1, -1, -1) if reverse else range(length)
        outputs, ctx.gates, ctx.previous, ctx.cell_tanh = ([None] * length for _ in range(4))
        for time in order:
            total = projected[time] + _affine(hidden, weight_hh, bias_hh)
            gates = (total[:, :size].sigmoid(), total[:, size:2 * size].sigmoid(), total[:, 2 * size:3 * size].tanh(),
                     total[:, 3 * size:].sigmoid())
            ctx.previous[time] = (hidden, cell)
            input_gate, forget_gate, candidate, output_gate = gates
            cell = forget_gate * cell + input_gate * candidate
            ctx.gates[time], ctx.cell_tanh[time] = gates, cell.tanh()
            hidden = output_gate * ctx.cell_tanh[time]
            outputs[time] = hidden
        ctx.order, ctx.weight_hh, ctx.has_bias = order, weight_hh, bias_hh is not None
        return F.stack(outputs, 0), hidden, cell

    @staticmethod
    def backward(ctx, output_grad, hidden_grad, cell_grad):
        length = len(ctx.gates)
        gate_grads = [None] * length
        for time in reversed(ctx.order):
            input_gate, forget_gate, candidate, output_gate = ctx.gates[time]
            cell_tanh = ctx.cell_tanh[time]
            hidden_grad = hidden_grad + output_grad[time]
            cell_grad = cell_grad + hidden_grad * output_gate * (1.0 - cell_tanh * cell_tanh)
            gate_grads[time] = F.cat([cell_grad * candidate * input_gate * (1.0 - input_gate),
                                      cell_grad * ctx.previous[time][1] * forget_gate * (1.0 - forget_gate),
                                      cell_grad * input_gate * (1.0 - candidate * candidate),
                                      hidden_grad * cell_tanh * output_gate * (1.0 - output_gate)], 1)
            cell_grad = cell_grad * forget_gate
            hidden_grad = gate_grads[time] @ ctx.weight_hh
        projected_grad = F.stack(gate_grads, 0)
        rows = projected_grad.reshape([-1, projected_grad.shape[-1]])
        previous_hidden = F.stack([ctx.previous[time][0] for time in range(length)], 0)
        weight_grad = rows.T @ previous_hidden.reshape([-1, previous_hidden.shape[-1]])
        bias_grad = rows.sum(0) if ctx.has_bias else None
        return projected_grad, weight_grad, bias_grad, hidden_grad, cell_grad, None


class GRU(_RecurrentBase):
    """GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False); gates in PyTorch's order reset, update, new."""
    gates, state_count = 3, 1

    def _sequence(self, projected, state, weight_hh, bias_hh, reverse):
        sequence, final = _GRULayer.apply(projected, weight_hh, bias_hh, state[0], reverse)
        return sequence, [final]


class _GRULayer(Function):
    """One GRU layer in one direction over a whole sequence, with backpropagation through time written out like
    _LSTMLayer's: per step elementwise work and one [N, 3H] x [3H, H] product, and one weight-gradient product
    over all steps."""

    @staticmethod
    def forward(ctx, projected, weight_hh, bias_hh, hidden, reverse):
        length, size = projected.shape[0], hidden.shape[-1]
        order = range(length - 1, -1, -1) if reverse else range(length)
        outputs, ctx.saved = [None] * length, [None] * length
        for time in order:
            from_input, from_hidden = projected[time], _affine(hidden, weight_hh, bias_hh)
            reset = (from_input[:, :size] + from_hidden[:, :size]).sigmoid()
            update = (from_input[:, size:2 * size] + from_hidden[:, size:2 * size]).sigmoid()
            hidden_share = from_hidden[:, 2 * size:]
            new = (from_input[:, 2 * size:] + reset * hidden_share).tanh()
            ctx.saved[time] = (hidden, reset, update, new, hidden_share)
            hidden = (1.0 - update) * new + update * hidden
            outputs[time] = hidden
        ctx.order, ctx.weight_hh, ctx.has_bias = order, weight_hh, bias_hh is not None
        return F.stack(outputs, 0), hidden

    @staticmethod
    def backward(ctx, output_grad, hidden_grad):
        length = len(ctx.saved)
        input_grads, hidden_share_grads = [None] * length, [None] * length
        for time in reversed(ctx.order):
            previous, reset, update, new, hidden_share = ctx.saved[time]
            hidden_grad = hidden_grad + output_grad[time]
            new_grad = hidden_grad * (1.0 - update) * (1.0 - new * new)
            reset_grad = new_grad * hidden_share * reset * (1.0 - reset)
            update_grad = hidden_grad * (previous - new) * update * (1.0 - update)
            input_grads[time] = F.cat([reset_grad, update_grad, new_grad], 1)
            hidden_share_grads[time] = F.cat([reset_grad, update_grad, new_grad * reset], 1)
            hidden_grad = hidden_grad * update + hidden_share_grads[time] @ ctx.weight_hh
        rows = F.stack(hidden_share_grads, 0)
        rows = rows.reshape([-1, rows.shape[-1]])
        previous_hidden = F.stack([ctx.saved[time][0] for time in range(length)], 0)
        weight_grad = rows.T @ previous_hidden.reshape([-1, previous_hidden.shape[-1]])
        bias_grad = rows.sum(0) if ctx.has_bias else None
        return F.stack(input_grads, 0), weight_grad, bias_grad, hidden_grad, None

"""Single-step recurrent cells RNNCell, LSTMCell and GRUCell with PyTorch's arguments, gate order (the same as
RNN/LSTM/GRU in recurrent.py) and parameter names weight_ih, weight_hh, bias_ih, bias_hh, so state_dicts load
from PyTorch's.

One call computes one time step with ordinary lazy ops; autodiff gives the backward. This file must not hold a
time loop (the sequence layers in recurrent.py own that and their written-out backpropagation through time)."""
import math

from .. import init
from ..module import Module
from ._common import check_positive_int, empty_parameter
from .recurrent import _affine

__all__ = ["RNNCell", "LSTMCell", "GRUCell"]


class _CellBase(Module):
    gates = 1  # blocks of hidden_size rows in weight_ih / weight_hh

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        check_positive_int(input_size, "input_size", name)
        check_positive_int(hidden_size, "hidden_size", name)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = empty_parameter((self.gates * hidden_size, input_size), dtype)
        self.weight_hh = empty_parameter((self.gates * hidden_size, hidden_size), dtype)
        if bias:
            self.bias_ih = empty_parameter((self.gates * hidden_size,), dtype)
            self.bias_hh = empty_parameter((self.gates * hidden_size,), dtype)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        # PyTorch's default for every recurrent weight and bias: U(-1/sqrt(H), 1/sqrt(H)).
        bound = 1.0 / math.sqrt(self.hidden_size)
        for parameter in self.parameters():
            init.uniform_(parameter, -bound, bound)

    def _check_input(self, input):
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise ValueError(f"{name}: input has inconsistent input_size: got {input.shape[-1]} expected "
                             f"{self.input_size}")
        return input.ndim == 2

    def _state(self, value, label, batched, batch, like):
        """`value` as (N, H): zeros when absent, a leading batch dimension added for unbatched input."""
        from ... import zeros
        name = type(self).__name__
        if value is None:
            return zeros(batch, self.hidden_size, dtype=like.dtype)
        if value.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected {label} to be 1D or 2D, got {value.ndim}D instead")
        if value.ndim != (2 if batched else 1):
            raise ValueError(f"{name}: {label} must be {'2' if batched else '1'}-D like the input "
                             f"({'batched' if batched else 'unbatched'}), got shape {tuple(value.shape)}")
        if not batched:
            value = value.unsqueeze(0)
        if tuple(value.shape) != (batch, self.hidden_size):
            raise ValueError(f"{name}: {label} must have shape {(batch, self.hidden_size)}, got "
                             f"{tuple(value.shape)}")
        return value

    def _gates(self, input, hidden):
        return _affine(input, self.weight_ih, self.bias_ih), _affine(hidden, self.weight_hh, self.bias_hh)

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            text += f", nonlinearity={self.nonlinearity}"
        return text


class RNNCell(_CellBase):
    """RNNCell(input_size, hidden_size, bias=True, nonlinearity='tanh'): h' = act(x W_ih^T + b_ih + h W_hh^T +
    b_hh). forward(input (N, H_in) or (H_in), hx=None) -> h' (N, H) or (H); hx defaults to zeros."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        # Checked here rather than at the first forward (where PyTorch checks) so a typo fails at construction.
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: Unknown nonlinearity '{nonlinearity}' (expected 'tanh' or 'relu')")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):
        batched = self._check_input(input)
        x = input if batched else input.unsqueeze(0)
        hidden = self._state(hx, "hidden", batched, x.shape[0], x)
        from_input, from_hidden = self._gates(x, hidden)
        total = from_input + from_hidden
        result = total.tanh() if self.nonlinearity == "tanh" else total.relu()
        return result if batched else result.squeeze(0)


class LSTMCell(_CellBase):
    """LSTMCell(input_size, hidden_size, bias=True). forward(input, (h, c)=None) -> (h', c'); gates in PyTorch's
    order input, forget, cell, output: c' = f * c + i * g, h' = o * tanh(c')."""
    gates = 4

    def forward(self, input, hx=None):
        batched = self._check_input(input)
        x = input if batched else input.unsqueeze(0)
        if hx is None:
            hx = (None, None)
        elif not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise ValueError("LSTMCell: hx must be a tuple (h_0, c_0)")
        hidden = self._state(hx[0], "hx[0]", batched, x.shape[0], x)
        cell = self._state(hx[1], "hx[1]", batched, x.shape[0], x)
        from_input, from_hidden = self._gates(x, hidden)
        total = from_input + from_hidden
        size = self.hidden_size
        input_gate = total[:, :size].sigmoid()
        forget_gate = total[:, size:2 * size].sigmoid()
        candidate = total[:, 2 * size:3 * size].tanh()
        output_gate = total[:, 3 * size:].sigmoid()
        cell = forget_gate * cell + input_gate * candidate
        hidden = output_gate * cell.tanh()
        return (hidden, cell) if batched else (hidden.squeeze(0), cell.squeeze(0))


class GRUCell(_CellBase):
    """GRUCell(input_size, hidden_size, bias=True). forward(input, hx=None) -> h'; gates in PyTorch's order reset,
    update, new: n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn)), h' = (1 - z) * n + z * h."""
    gates = 3

    def forward(self, input, hx=None):
        batched = self._check_input(input)
        x = input if batched else input.unsqueeze(0)
        hidden = self._state(hx, "hidden", batched, x.shape[0], x)
        from_input, from_hidden = self._gates(x, hidden)
        size = self.hidden_size
        reset = (from_input[:, :size] + from_hidden[:, :size]).sigmoid()
        update = (from_input[:, size:2 * size] + from_hidden[:, size:2 * size]).sigmoid()
        new = (from_input[:, 2 * size:] + reset * from_hidden[:, 2 * size:]).tanh()
        result = (1.0 - update) * new + update * hidden
        return result if batched else result.squeeze(0)

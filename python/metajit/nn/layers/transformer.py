"""Transformer, TransformerEncoder(Layer) and TransformerDecoder(Layer) with PyTorch's arguments, submodule and
parameter names (encoder.layers.0.self_attn.in_proj_weight, decoder.layers.0.multihead_attn..., norm1..norm3),
so their state_dicts load from PyTorch's: attention blocks and a feed-forward block, each with a residual
connection and a LayerNorm after it (before it with norm_first=True).

Masks are passed through to MultiheadAttention unchanged (boolean True = may not attend, float masks are added).
PyTorch's inference fast paths (fused kernels, nested tensors) are numerically the same computation and are not
reproduced; this file must not change what a mask means."""
import copy

import numpy as np

from .. import functional as F
from .. import init
from ..module import Module
from .attention import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .normalization import LayerNorm

__all__ = ["TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer", "TransformerDecoder",
           "Transformer"]

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def _activation(activation):
    """A string names relu or gelu (PyTorch's RuntimeError otherwise); a callable (function or Module) is kept."""
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise RuntimeError(f"activation should be relu/gelu, not {activation}")
        return _ACTIVATIONS[activation]
    if not callable(activation):
        raise TypeError(f"activation must be 'relu', 'gelu' or a callable, got {type(activation).__name__}")
    return activation


def _generate_square_subsequent_mask(size, device=None, dtype=None):
    """A (size, size) float mask: -inf above the diagonal (a later position), 0 elsewhere."""
    from ... import _dtype_name, array
    name = "float32" if dtype is None else _dtype_name(dtype)
    return array(np.triu(np.full((size, size), -np.inf), 1).astype(name))


class TransformerEncoderLayer(Module):
    """TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1, activation='relu',
    layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True).

    forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False): src is (S, N, E), (N, S, E) with
    batch_first, or (S, E); masks as in MultiheadAttention (boolean True = may not attend)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def _self_attention(self, x, mask, padding_mask, is_causal):
        attended = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=padding_mask, need_weights=False,
                                  is_causal=is_causal)[0]
        return self.dropout1(attended)

    def _feed_forward(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._self_attention(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._feed_forward(self.norm2(x))
        x = self.norm1(x + self._self_attention(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._feed_forward(x))


class TransformerEncoder(Module):
    """TransformerEncoder(encoder_layer, num_layers, norm=None): num_layers deep copies of encoder_layer (same
    starting weights, as in PyTorch), then `norm` if given."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm
        # Accepted for PyTorch's signature; nested tensors (an inference fast path) do not exist here.
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                           is_causal=bool(is_causal))
        return output if self.norm is None else self.norm(output)


class TransformerDecoderLayer(Module):
    """TransformerDecoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1, activation='relu',
    layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True): self-attention over the target,
    attention from the target to `memory` (multihead_attn), then the feed-forward block.

    forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def _self_attention(self, x, mask, padding_mask, is_causal):
        return self.dropout1(self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=padding_mask,
                                            need_weights=False, is_causal=is_causal)[0])

    def _memory_attention(self, x, memory, mask, padding_mask, is_causal):
        return self.dropout2(self.multihead_attn(x, memory, memory, attn_mask=mask, key_padding_mask=padding_mask,
                                                 need_weights=False, is_causal=is_causal)[0])

    def _feed_forward(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._self_attention(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._memory_attention(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                                           memory_is_causal)
            return x + self._feed_forward(self.norm3(x))
        x = self.norm1(x + self._self_attention(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._memory_attention(x, memory, memory_mask, memory_key_padding_mask,
                                                  memory_is_causal))
        return self.norm3(x + self._feed_forward(x))


class TransformerDecoder(Module):
    """TransformerDecoder(decoder_layer, num_layers, norm=None): num_layers deep copies of decoder_layer, then
    `norm` if given."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        output = tgt
        for layer in self.layers:
            output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask,
                           memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=bool(tgt_is_causal),
                           memory_is_causal=bool(memory_is_causal))
        return output if self.norm is None else self.norm(output)


class Transformer(Module):
    """Transformer(d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
    dropout=0.1, activation='relu', custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
    batch_first=False, norm_first=False, bias=True): an encoder and a decoder stack, each ending in a LayerNorm
    (encoder.norm, decoder.norm); every parameter with more than one dimension starts Xavier-uniform, as in
    PyTorch.

    forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
    tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
    memory_is_causal=False) -> (T, N, E) ((N, T, E) with batch_first)."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation="relu", custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias, dtype=dtype)
            self.encoder = TransformerEncoder(layer, num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias, dtype=dtype)
            self.decoder = TransformerDecoder(layer, num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        self._reset_parameters()

    def _reset_parameters(self):
        # Also makes the deep-copied layers differ from each other.
        for parameter in self.parameters():
            if parameter.ndim > 1:
                init.xavier_uniform_(parameter)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """A causal (sz, sz) float mask: -inf where a position would attend to a later one, 0 elsewhere."""
        return _generate_square_subsequent_mask(sz, device, dtype)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        if src.ndim == 3:
            batch_dim = 0 if self.batch_first else 1
            if tgt.ndim != 3 or src.shape[batch_dim] != tgt.shape[batch_dim]:
                raise RuntimeError(f"the batch number of src and tgt must be equal (src {tuple(src.shape)}, tgt "
                                   f"{tuple(tgt.shape)}, batch_first={self.batch_first})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(f"the feature number of src and tgt must be equal to d_model ({self.d_model}), got "
                               f"{src.shape[-1]} and {tgt.shape[-1]}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

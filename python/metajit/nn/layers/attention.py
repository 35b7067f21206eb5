"""MultiheadAttention: scaled dot-product attention over several heads, built from linear projections, a
batched matmul, softmax and a second matmul (PyTorch's parameter names, so state dicts map)."""
import math

import numpy as np

from ..._core import Var
from .. import functional as F
from .. import init
from ..module import Module
from ._common import check_positive_int, empty_parameter
from .linear import Linear

__all__ = ["MultiheadAttention"]


class MultiheadAttention(Module):
    """MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
    kdim=None, vdim=None, batch_first=False).

    forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) -> (output, weights). Inputs are (L, N, E) ((N, L, E) with
    batch_first, (L, E) unbatched). Boolean masks mark positions that may NOT be attended (True = masked);
    float masks are added to the scores."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        check_positive_int(embed_dim, "embed_dim", "MultiheadAttention")
        check_positive_int(num_heads, "num_heads", "MultiheadAttention")
        if embed_dim % num_heads != 0:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads})")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"MultiheadAttention: dropout must be in [0, 1], got {dropout}")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are not supported")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self._qkv_same_embed_dim:
            self.in_proj_weight = empty_parameter((3 * embed_dim, embed_dim), dtype)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = empty_parameter((embed_dim, embed_dim), dtype)
            self.k_proj_weight = empty_parameter((embed_dim, self.kdim), dtype)
            self.v_proj_weight = empty_parameter((embed_dim, self.vdim), dtype)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = empty_parameter((3 * embed_dim,), dtype)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def _projections(self, query, key, value):
        E = self.embed_dim
        bias = self.in_proj_bias
        biases = (None, None, None) if bias is None else (bias[0:E], bias[E:2 * E], bias[2 * E:3 * E])
        if self._qkv_same_embed_dim:
            if query is key and key is value:
                # Self-attention: one projection to 3E features, split afterwards.
                packed = F.linear(query, self.in_proj_weight, bias)
                return packed[..., 0:E], packed[..., E:2 * E], packed[..., 2 * E:3 * E]
            weights = (self.in_proj_weight[0:E], self.in_proj_weight[E:2 * E], self.in_proj_weight[2 * E:3 * E])
        else:
            weights = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        return tuple(F.linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))

    @staticmethod
    def _check_mask(mask, name):
        if mask is None:
            return None
        if not isinstance(mask, Var):
            from ... import array
            mask = array(mask)
        if mask.dtype != "bool" and not mask.dtype.startswith("float"):
            raise TypeError(f"MultiheadAttention: only bool and floating-point {name} are supported, got "
                            f"{mask.dtype}")
        return mask

    @staticmethod
    def _apply_mask(scores, mask):
        from ... import where
        if mask.dtype == "bool":
            return where(mask, float("-inf"), scores)
        return scores + mask.astype(scores.dtype)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        for name, x in (("query", query), ("key", key), ("value", value)):
            if not isinstance(x, Var):
                raise TypeError(f"MultiheadAttention: {name} must be a metajit Var, got {type(x).__name__}")
        batched = query.ndim == 3
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ValueError("MultiheadAttention: query, key and value must all be 3-D (batched) or 2-D "
                             f"(unbatched), got shapes {tuple(query.shape)}, {tuple(key.shape)}, "
                             f"{tuple(value.shape)}")
        if query.shape[-1] != self.embed_dim:
            raise ValueError(f"MultiheadAttention: query's last dim must be embed_dim={self.embed_dim}, got shape "
                             f"{tuple(query.shape)}")
        if key.shape[-1] != self.kdim or value.shape[-1] != self.vdim:
            raise ValueError(f"MultiheadAttention: key and value must end in kdim={self.kdim} and "
                             f"vdim={self.vdim}, got {tuple(key.shape)} and {tuple(value.shape)}")
        self_attention = query is key and key is value

        def to_batch_major(x):
            # Computation runs on (N, L, E).
            if not batched:
                return x.reshape([1] + list(x.shape))
            return x if self.batch_first else x.transpose(0, 1)

        query_, key_, value_ = (to_batch_major(x) for x in (query, key, value))
        if self_attention:
            key_ = value_ = query_
        batch, target_length, _ = query_.shape
        source_length = key_.shape[1]
        if key_.shape[0] != batch or value_.shape[:2] != key_.shape[:2]:
            raise ValueError(f"MultiheadAttention: key and value must have the same batch size and length, and the "
                             f"batch size of query; got {tuple(query.shape)}, {tuple(key.shape)}, "
                             f"{tuple(value.shape)}")
        heads, head_dim = self.num_heads, self.head_dim
        q, k, v = self._projections(query_, key_, value_)

        def split_heads(x, length):
            return x.reshape([batch, length, heads, head_dim]).permute(0, 2, 1, 3)

        q, k, v = split_heads(q, target_length), split_heads(k, source_length), split_heads(v, source_length)
        scores = F.matmul(q * (1.0 / math.sqrt(head_dim)), k.transpose(2, 3))  # (N, H, L, S)

        attn_mask = self._check_mask(attn_mask, "attn_mask")
        if attn_mask is None and is_causal:
            from ... import array
            attn_mask = array(np.triu(np.ones((target_length, source_length), dtype=bool), 1))
        if attn_mask is not None:
            if tuple(attn_mask.shape) == (target_length, source_length):
                attn_mask = attn_mask.reshape([1, 1, target_length, source_length])
            elif tuple(attn_mask.shape) == (batch * heads, target_length, source_length):
                attn_mask = attn_mask.reshape([batch, heads, target_length, source_length])
            else:
                raise ValueError(f"MultiheadAttention: attn_mask must have shape {(target_length, source_length)} "
                                 f"or {(batch * heads, target_length, source_length)}, got "
                                 f"{tuple(attn_mask.shape)}")
            scores = self._apply_mask(scores, attn_mask)
        key_padding_mask = self._check_mask(key_padding_mask, "key_padding_mask")
        if key_padding_mask is not None:
            expected = (batch, source_length) if batched else (source_length,)
            if tuple(key_padding_mask.shape) != expected:
                raise ValueError(f"MultiheadAttention: key_padding_mask must have shape {expected}, got "
                                 f"{tuple(key_padding_mask.shape)}")
            scores = self._apply_mask(scores, key_padding_mask.reshape([batch, 1, 1, source_length]))

        weights = F.softmax(scores, dim=-1)
        if self.training and self.dropout > 0:
            weights = F.dropout(weights, self.dropout, True)
        output = F.matmul(weights, v).permute(0, 2, 1, 3).reshape([batch, target_length, self.embed_dim])
        output = self.out_proj(output)
        if not batched:
            output = output.reshape([target_length, self.embed_dim])
        elif not self.batch_first:
            output = output.transpose(0, 1)
        if not need_weights:
            return output, None
        if average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            weights = weights.reshape(list(weights.shape[1:]))
        return output, weights

"""scaled_dot_product_attention with PyTorch's signature: softmax(q k^T * scale + mask) v, as two matrix
products (lowered to oneDNN like any product) around a softmax that fuses with the scale and the mask."""
import math

from .. import _core, where
from .activation import softmax
from .dropout import dropout
from .tensor import _as_var, tril

__all__ = ["scaled_dot_product_attention"]


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """query [..., L, E], key [..., S, E], value [..., S, Ev] -> [..., L, Ev]. attn_mask is a bool mask (True
    takes part) or a float mask added to the scores, broadcast to [..., L, S]; is_causal masks every key after
    the query's own position (the top-left aligned lower triangle, as PyTorch); scale defaults to 1/sqrt(E).
    dropout_p drops attention weights (always applied when given, as the functional form does in PyTorch)."""
    query, key, value = _as_var(query), _as_var(key), _as_var(value)
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ValueError("scaled_dot_product_attention: query, key and value need at least 2 dims, got shapes "
                         f"{list(query.shape)}, {list(key.shape)}, {list(value.shape)}")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ValueError("scaled_dot_product_attention: query and key need the same last dim and key and value "
                         f"the same sequence length, got shapes {list(query.shape)}, {list(key.shape)}, "
                         f"{list(value.shape)}")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        groups = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(groups, key.ndim - 3)
        value = value.repeat_interleave(groups, value.ndim - 3)
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: pass either attn_mask or is_causal, not both")
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * factor
    length, source = scores.shape[-2], scores.shape[-1]
    if is_causal:
        attn_mask = tril(_core.constant([length, source], "bool", True))
    if attn_mask is not None:
        attn_mask = _as_var(attn_mask)
        if attn_mask.dtype == "bool":
            scores = where(attn_mask, scores, -math.inf)
        else:
            scores = scores + attn_mask
    weights = softmax(scores, dim=-1)
    if dropout_p > 0:
        weights = dropout(weights, dropout_p, training=True)
    return weights @ value

"""F.gumbel_softmax: softmax((logits + Gumbel noise) / tau), the noise drawn with mj.rand (so it follows
mj.seed, not PyTorch's generator). hard=True returns the one-hot of the argmax with the soft sample's gradient
(the straight-through estimator), as PyTorch's."""
from .. import _core, rand
from .activation import softmax
from .tensor import _as_var, _normalize_dim

__all__ = ["gumbel_softmax"]


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    logits = _as_var(logits)
    dim = _normalize_dim(dim, logits.ndim, "gumbel_softmax")
    uniform = rand(*logits.shape, dtype=logits.dtype if logits.dtype != "float16" else "float32")
    # -log(E) with E ~ Exponential(1) = -log(-log(U)); U is kept away from 0 so neither log overflows.
    smallest = 1e-20 if uniform.dtype == "float64" else 1e-30
    gumbels = -(-(uniform.clamp(smallest, 1.0)).log()).clamp(smallest, None).log()
    soft = softmax((logits + _core.cast(gumbels, logits.dtype)) / tau, dim)
    if not hard:
        return soft
    winner = soft.argmax(dim, True)
    positions = _core.arange(0.0, float(logits.shape[dim]), 1.0, "int64")
    positions = positions.reshape([-1 if axis == dim else 1 for axis in range(logits.ndim)])
    hard_sample = _core.cast(positions == winner, logits.dtype)
    return hard_sample - soft.detach() + soft

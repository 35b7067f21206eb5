"""EmbeddingBag: sums, means or maxima of bags of embedding rows without materialising each row's output (the
layer of PyTorch's text-classification tutorial). It holds the table and calls F.embedding_bag."""
from .. import functional as F
from ..module import Module
from ..parameter import Parameter
from ._common import check_positive_int, empty_parameter
from .embedding import normal_with_zero_row

__all__ = ["EmbeddingBag"]


class EmbeddingBag(Module):
    """EmbeddingBag(num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
    mode='mean', sparse=False, _weight=None, include_last_offset=False, padding_idx=None): weight ~ N(0, 1), the
    padding_idx row zero. forward(input, offsets=None, per_sample_weights=None)."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, device=None,
                 dtype=None):
        super().__init__()
        check_positive_int(num_embeddings, "num_embeddings", "EmbeddingBag")
        check_positive_int(embedding_dim, "embedding_dim", "EmbeddingBag")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"EmbeddingBag: padding_idx must be within num_embeddings ({num_embeddings})")
            padding_idx %= num_embeddings
        if max_norm is not None or scale_grad_by_freq:
            raise NotImplementedError("EmbeddingBag: max_norm and scale_grad_by_freq are not supported")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = empty_parameter((num_embeddings, embedding_dim), dtype)
            self.reset_parameters()
        else:
            self.weight = Parameter(_weight)

    def reset_parameters(self):
        normal_with_zero_row(self.weight, self.padding_idx)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, mode=self.mode, per_sample_weights=per_sample_weights,
                               include_last_offset=self.include_last_offset, padding_idx=self.padding_idx)

    def extra_repr(self):
        text = f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"
        return text + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")

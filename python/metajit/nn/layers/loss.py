"""Loss modules: CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss, HuberLoss, KLDivLoss, BCELoss and
BCEWithLogitsLoss (each calls its functional loss; class weights are registered as buffers, as in PyTorch)."""
from .. import functional as F
from ..module import Module

__all__ = ["CrossEntropyLoss", "NLLLoss", "NLLLoss2d", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "KLDivLoss",
           "BCELoss", "BCEWithLogitsLoss"]

_REDUCTIONS = ("none", "mean", "sum")


def _reduction(size_average, reduce, reduction, owner):
    """PyTorch's deprecated size_average/reduce flags, when given, override `reduction`."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "mean" if size_average and reduce else "sum" if reduce else "none"
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{owner}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    return reduction


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = _reduction(size_average, reduce, reduction, type(self).__name__)

    def extra_repr(self):
        return f"reduction={self.reduction!r}" if self.reduction != "mean" else ""


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """CrossEntropyLoss(weight=None, ignore_index=-100, reduction='mean', label_smoothing=0.0): input logits
    (N, C, ...) and class-index targets (N, ...) or class probabilities (N, C, ...)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], got {label_smoothing}")
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """NLLLoss(weight=None, ignore_index=-100, reduction='mean'): input log-probabilities (N, C, ...)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    """MSELoss(reduction='mean'): (input - target)^2."""

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """L1Loss(reduction='mean'): |input - target|."""

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """SmoothL1Loss(reduction='mean', beta=1.0)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """HuberLoss(reduction='mean', delta=1.0)."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(Module):
    """KLDivLoss(reduction='mean', log_target=False): input log-probabilities; reduction may be 'batchmean'."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__()
        self.reduction = reduction if reduction == "batchmean" else _reduction(size_average, reduce, reduction,
                                                                                "KLDivLoss")
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class BCELoss(_WeightedLoss):
    """BCELoss(weight=None, reduction='mean'): input probabilities in [0, 1]."""

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """BCEWithLogitsLoss(weight=None, reduction='mean', pos_weight=None): binary cross-entropy on logits."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


NLLLoss2d = NLLLoss  # PyTorch's deprecated name for NLLLoss on (N, C, H, W) inputs

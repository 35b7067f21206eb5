"""nn.CTCLoss: the module form of F.ctc_loss (blank, reduction, zero_infinity), as PyTorch's; it holds settings
only and computes nothing itself."""
from .. import functional as F
from .loss import _Loss

__all__ = ["CTCLoss"]


class CTCLoss(_Loss):
    """CTCLoss(blank=0, reduction='mean', zero_infinity=False); forward(log_probs, targets, input_lengths,
    target_lengths)."""

    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                          self.zero_infinity)

"""nn.utils.rnn: pad_sequence and unpad_sequence, as PyTorch's.

metajit's RNN/LSTM/GRU take padded tensors only; PackedSequence and the packing functions are not implemented
and raise an error naming them (module __getattr__, reasons in _absent.py). Nothing here may pretend to pack."""
from ..._core import Var

__all__ = ["pad_sequence", "unpad_sequence"]


def __getattr__(name):
    """PackedSequence and the packing functions: an error naming them (the reason is in _absent.py)."""
    from ..._absent import absent_name
    raise absent_name(name, "metajit.nn.utils.rnn", "torch.nn.utils.rnn")


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks Vars of shape (L_i, *) into (L_max, B, *) ((B, L_max, *) with batch_first), filling the missing
    steps with padding_value after each sequence (before it with padding_side='left'). Differentiable."""
    from ... import full, stack
    from ...ops import cat
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, Var):
        sequences = [sequences[index] for index in range(sequences.shape[0])]
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    for index, sequence in enumerate(sequences):
        if not isinstance(sequence, Var):
            raise TypeError(f"pad_sequence: sequence {index} is a {type(sequence).__name__}, expected a metajit Var")
        if sequence.ndim < 1 or tuple(sequence.shape[1:]) != tuple(sequences[0].shape[1:]):
            raise RuntimeError(f"pad_sequence: every sequence must be (L, *) with the same trailing shape, got "
                               f"{tuple(sequences[0].shape)} and {tuple(sequence.shape)}")
    longest = max(sequence.shape[0] for sequence in sequences)
    padded = []
    for sequence in sequences:
        missing = longest - sequence.shape[0]
        if missing:
            filler = full([missing] + list(sequence.shape[1:]), padding_value, sequence.dtype)
            sequence = cat([sequence, filler] if padding_side == "right" else [filler, sequence], 0)
        padded.append(sequence)
    return stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The inverse of pad_sequence (right padding): a list of B Vars, sequence i cut to lengths[i] steps."""
    import numpy as np
    if isinstance(lengths, Var):
        lengths = lengths.numpy()
    lengths = [int(length) for length in np.asarray(lengths).reshape(-1)]
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    if len(lengths) != padded_sequences.shape[0]:
        raise ValueError(f"unpad_sequence: got {len(lengths)} lengths for a batch of {padded_sequences.shape[0]}")
    return [padded_sequences[index][:length] for index, length in enumerate(lengths)]

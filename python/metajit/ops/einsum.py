"""einsum with PyTorch's (and numpy's) notation, composed from views, a broadcast multiply and sums.

Operands are contracted left to right: each pair is laid out over the union of their subscripts (a permute and
size-1 dims), multiplied, and every subscript no later operand and not the output needs is summed away at once.
A pair that is a matrix product in disguise ("bhqd,bhkd->bhqk") therefore has exactly matmul's broadcast-
multiply-sum form, and the lowering pass sends it to oneDNN like any product; the gradient comes from the
broadcast and sum rules. A subscript repeated within one operand ("ii->i") takes its diagonal by a reindex.
"""
import string

from .. import _core
from .tensor import _as_var

__all__ = ["einsum"]

_FLOAT_DTYPES = ("float16", "float32", "float64")
_LETTERS = set(string.ascii_letters)


def _split_terms(equation, operand_count):
    text = equation.replace(" ", "")
    if text.count("->") > 1:
        raise ValueError(f"einsum: '{equation}' has more than one '->'")
    inputs, arrow, output = text.partition("->")
    terms = inputs.split(",")
    if len(terms) != operand_count:
        raise ValueError(f"einsum: '{equation}' names {len(terms)} operand(s) but {operand_count} were given")
    for term in terms + ([output] if arrow else []):
        rest = term.replace("...", "", 1)
        bad = [character for character in rest if character not in _LETTERS]
        if bad:
            raise ValueError(f"einsum: invalid subscript {bad[0]!r} in '{equation}' (letters a-z, A-Z and one "
                             "'...' per operand)")
    return terms, (output if arrow else None)


def _expand_ellipses(equation, terms, output, operands):
    """Each term as a list of subscripts, '...' replaced by one symbol per broadcast dim (right-aligned)."""
    ellipsis_ranks = []
    for term, operand in zip(terms, operands):
        named = len(term.replace("...", ""))
        if "..." in term:
            if operand.ndim < named:
                raise ValueError(f"einsum: operand of shape {list(operand.shape)} has fewer dims than the "
                                 f"{named} subscripts of '{term}'")
            ellipsis_ranks.append(operand.ndim - named)
        else:
            if operand.ndim != named:
                raise ValueError(f"einsum: subscripts '{term}' name {named} dims but the operand has shape "
                                 f"{list(operand.shape)}")
            ellipsis_ranks.append(0)
    broadcast_rank = max(ellipsis_ranks, default=0)
    symbols = [f"...{position}" for position in range(broadcast_rank)]

    def expand(term, rank):
        before, found, after = term.partition("...")
        return list(before) + (symbols[broadcast_rank - rank:] if found else []) + list(after)

    expanded = [expand(term, rank) for term, rank in zip(terms, ellipsis_ranks)]
    if output is None:  # implicit: the broadcast dims, then the subscripts used once, alphabetically
        counts = {}
        for term in expanded:
            for subscript in term:
                counts[subscript] = counts.get(subscript, 0) + 1
        result = symbols + sorted(s for s, count in counts.items() if count == 1 and not s.startswith("..."))
    else:
        if "..." not in output and broadcast_rank and any(rank for rank in ellipsis_ranks):
            raise ValueError(f"einsum: '{equation}' drops the '...' dims in its output")
        result = expand(output, broadcast_rank)
        seen = set()
        for subscript in result:
            if subscript in seen:
                raise ValueError(f"einsum: output subscript {subscript!r} appears more than once in '{equation}'")
            seen.add(subscript)
            if not any(subscript in term for term in expanded):
                raise ValueError(f"einsum: output subscript {subscript!r} does not appear in any operand of "
                                 f"'{equation}'")
    return expanded, result


def _diagonal(operand, subscripts):
    """An operand whose subscripts repeat, reduced to one dim per distinct subscript (its diagonal)."""
    distinct = list(dict.fromkeys(subscripts))
    if len(distinct) == len(subscripts):
        return operand, subscripts
    extents = {}
    for subscript, extent in zip(subscripts, operand.shape):
        if extents.setdefault(subscript, extent) != extent:
            raise ValueError(f"einsum: subscript {subscript!r} is repeated with extents {extents[subscript]} and "
                             f"{extent}")
    indexes = [f"i{distinct.index(subscript)}" for subscript in subscripts]
    return _core.reindex(operand, [extents[s] for s in distinct], indexes, 0.0, [], []), distinct


def _laid_out(operand, subscripts, order):
    """`operand` permuted to the order of `order` among its subscripts, with size-1 dims for the others."""
    present = [subscript for subscript in order if subscript in subscripts]
    permutation = [subscripts.index(subscript) for subscript in present]
    if permutation != list(range(len(permutation))):
        operand = operand.permute(permutation)
    extents = dict(zip(present, operand.shape))
    shape = [extents.get(subscript, 1) for subscript in order]
    return operand.reshape(shape) if shape != list(operand.shape) else operand


def _sum_over(value, subscripts, dropped):
    if not dropped:
        return value, subscripts
    dims = [subscripts.index(subscript) for subscript in dropped]
    summed = value.sum(dims)
    if value.dtype not in _FLOAT_DTYPES and summed.dtype != value.dtype:
        summed = _core.cast(summed, value.dtype)  # integer sums keep the operands' dtype, as in PyTorch
    return summed, [subscript for subscript in subscripts if subscript not in dropped]


def einsum(equation, *operands):
    """Sums of products over named dims: einsum("bij,bjk->bik", a, b) is a batched matmul, "ii->" a trace,
    "ij->ji" a transpose, "...ij,...jk->...ik" a matmul over any broadcast batch dims. Operands may also be given
    as one list (PyTorch's form). Without '->' the output is the broadcast dims and then the subscripts used
    exactly once, in alphabetical order."""
    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation must be a string, got {type(equation).__name__}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("einsum: at least one operand is needed")
    operands = [_as_var(operand) for operand in operands]
    terms, output = _split_terms(equation, len(operands))
    expanded, result = _expand_ellipses(equation, terms, output, operands)
    pairs = [_diagonal(operand, subscripts) for operand, subscripts in zip(operands, expanded)]
    value, subscripts = pairs[0]
    for position in range(1, len(pairs) + 1):
        if position < len(pairs):
            other, other_subscripts = pairs[position]
            order = subscripts + [s for s in other_subscripts if s not in subscripts]
            for subscript in set(subscripts) & set(other_subscripts):
                mine, theirs = value.shape[subscripts.index(subscript)], other.shape[other_subscripts.index(subscript)]
                if mine != theirs and 1 not in (mine, theirs):
                    raise ValueError(f"einsum: subscript {subscript!r} has extent {mine} in one operand and "
                                     f"{theirs} in another ('{equation}')")
            value = _laid_out(value, subscripts, order) * _laid_out(other, other_subscripts, order)
            subscripts = order
        needed = set(result).union(*[set(later) for _, later in pairs[position + 1:]])
        value, subscripts = _sum_over(value, subscripts, [s for s in subscripts if s not in needed])
    permutation = [subscripts.index(subscript) for subscript in result]
    return value.permute(permutation) if permutation != list(range(len(permutation))) else value

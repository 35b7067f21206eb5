"""sort, argsort and topk with PyTorch's signatures and results.

Ordering is not expressible with the meta-ops, so the order itself comes from a Code op (std::sort or
std::partial_sort per row, on the input moved so the sorted dim is last); the values are then a gather of the
input by that order, so they fuse and differentiate like any gather (the gradient scatters back to where each
value came from). Ties keep their original order (every sort here is stable) and NaN sorts above every number,
as in PyTorch.
"""
import collections

from .. import _core
from .._core import Var
from .._code import code
from .tensor import _as_var, _normalize_dim, gather

__all__ = ["sort", "argsort", "topk"]

SortResult = collections.namedtuple("SortResult", ["values", "indices"])
TopkResult = collections.namedtuple("TopkResult", ["values", "indices"])

# The order of one row of `in0` ([rows, n]) into `out0` ([rows, count]): the first `count` positions of the
# sorted row. Ties break by position, which makes std::sort and std::partial_sort stable.
_ORDER_HEADER = """
#include <algorithm>
#include <numeric>
#include <vector>
template <typename T> static inline bool metajit_is_nan(T value) { return value != value; }
"""
_ORDER_SOURCE = """
const bool descending = data["descending"] != 0;
const int64_t length = in0_shape1, count = out0_shape1;
std::vector<int64_t> order(length);
for (int64_t row = 0; row < in0_shape0; ++row) {
  const in0_type* key = in0_p + row * length;
  std::iota(order.begin(), order.end(), int64_t(0));
  auto before = [key, descending](int64_t left, int64_t right) {
    const in0_type a = key[left], b = key[right];
    const bool a_nan = metajit_is_nan(a), b_nan = metajit_is_nan(b);
    if (a_nan || b_nan) {  // NaN is the largest value
      if (a_nan && b_nan) return left < right;
      return descending ? a_nan : b_nan;
    }
    if (a != b) return descending ? b < a : a < b;
    return left < right;
  };
  if (count < length)
    std::partial_sort(order.begin(), order.begin() + count, order.end(), before);
  else
    std::sort(order.begin(), order.end(), before);
  for (int64_t position = 0; position < count; ++position) out0_p[row * count + position] = order[position];
}
"""


def _order(name, input, dim, descending, count=None):
    """(int64 positions along `dim` of the first `count` elements in order, the input moved to [.., n]), with
    `dim` already the last dim of both."""
    rows = 1
    for extent in input.shape[:-1]:
        rows *= extent
    length = input.shape[-1]
    count = length if count is None else count
    key = input if input.dtype != "float16" else _core.cast(input, "float32")  # float16 is raw bits in C++
    flat = key.reshape([rows, length])
    if rows == 0 or count == 0:
        return _core.constant(list(input.shape[:-1]) + [count], "int64", 0)
    order = code([rows, count], "int64", [flat], _ORDER_SOURCE, cpu_header=_ORDER_HEADER,
                 data={"descending": 1 if descending else 0})
    return order.reshape(list(input.shape[:-1]) + [count])


def _last(input, dim, name):
    """input with `dim` moved last (and a 0-d input as 1 element), and how to move results back."""
    input = _as_var(input)
    if input.ndim == 0:
        return input.reshape([1]), lambda result: result.reshape([])
    dim = _normalize_dim(dim, input.ndim, name)
    last = input.ndim - 1
    if dim == last:
        return input, lambda result: result
    return input.transpose(dim, last), lambda result: result.transpose(dim, last)


def sort(input, dim=-1, descending=False, stable=False):
    """(values, indices) of `input` sorted along `dim`. Always stable; `stable` is accepted for PyTorch."""
    moved, back = _last(input, dim, "sort")
    indices = _order("sort", moved, -1, descending)
    return SortResult(back(gather(moved, moved.ndim - 1, indices)), back(indices))


def argsort(input, dim=-1, descending=False, stable=False):
    """The int64 positions that sort `input` along `dim` (sort(...).indices)."""
    moved, back = _last(input, dim, "argsort")
    return back(_order("argsort", moved, -1, descending))


def topk(input, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the k largest (or smallest) elements along `dim`, in order (also with sorted=False,
    which PyTorch allows to return any order)."""
    moved, back = _last(input, dim, "topk")
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"topk: k must be an integer, got {type(k).__name__}")
    if not 0 <= k <= moved.shape[-1]:
        raise ValueError(f"topk: k ({k}) is out of range for a dim of {moved.shape[-1]} elements")
    indices = _order("topk", moved, -1, largest, k)
    return TopkResult(back(gather(moved, moved.ndim - 1, indices)), back(indices))


def _method_sort(self, dim=-1, descending=False, stable=False):
    return sort(self, dim, descending, stable)


def _method_argsort(self, dim=-1, descending=False, stable=False):
    return argsort(self, dim, descending, stable)


def _method_topk(self, k, dim=-1, largest=True, sorted=True):
    return topk(self, k, dim, largest, sorted)


Var.sort = _method_sort
Var.argsort = _method_argsort
Var.topk = _method_topk

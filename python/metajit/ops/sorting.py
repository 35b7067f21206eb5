"""sort, argsort and topk with PyTorch's signatures and results.

Ordering is not expressible with the meta-ops, so the order itself comes from a Code op (std::sort or
std::partial_sort per row of integer keys, on the input moved so the sorted dim is last; the rows are its
work items, spread over the threads); the values are then a gather of the
input by that order, so they fuse and differentiate like any gather (the gradient scatters back to where each
value came from). Ties keep their original order (every sort here is stable) and NaN sorts above every number,
as in PyTorch.
"""
import collections

from .. import _core
from .._code import code
from .tensor import _as_var, _normalize_dim, gather

__all__ = ["sort", "argsort", "topk"]

SortResult = collections.namedtuple("SortResult", ["values", "indices"])
TopkResult = collections.namedtuple("TopkResult", ["values", "indices"])

# The order of one row of `in0` ([rows, n]) into `out0` ([rows, count]): the first `count` positions of the
# sorted row. Each element becomes an unsigned key in the row's order (NaN the largest, -0 equal to +0,
# complemented for descending) with its position beside it, and those pairs are sorted as plain integers: ties
# break by position, which makes the sort stable, and no comparison looks back into the row (a comparator
# that did was 2.7x slower than PyTorch's sort of [2048, 1024]). Keys of 32 bits or fewer and the position share
# one 64-bit word.
_ORDER_HEADER = """
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>
static inline uint32_t metajit_order_key(float value) {
  if (value != value) return 0xffffffffu;  // NaN above every number
  if (value == 0.0f) value = 0.0f;         // -0 ties with +0
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}
static inline uint64_t metajit_order_key(double value) {
  if (value != value) return ~uint64_t(0);
  if (value == 0.0) value = 0.0;
  uint64_t bits;
  std::memcpy(&bits, &value, 8);
  return (bits >> 63) ? ~bits : (bits | (uint64_t(1) << 63));
}
static inline uint32_t metajit_order_key(int32_t value) { return uint32_t(value) ^ 0x80000000u; }
static inline uint32_t metajit_order_key(int8_t value) { return metajit_order_key(int32_t(value)); }
static inline uint32_t metajit_order_key(uint8_t value) { return value; }
static inline uint32_t metajit_order_key(bool value) { return value; }
static inline uint64_t metajit_order_key(int64_t value) { return uint64_t(value) ^ (uint64_t(1) << 63); }
template <typename Key> struct metajit_keyed { Key key; uint64_t position; };
// Sorts `items` (the first `count` of them when count < their number) by their integer order.
template <typename Item, typename Less>
static void metajit_order(std::vector<Item>& items, int64_t count, Less less) {
  if (count < (int64_t)items.size())
    std::partial_sort(items.begin(), items.begin() + count, items.end(), less);
  else
    std::sort(items.begin(), items.end(), less);
}
"""
_ORDER_SOURCE = """
const bool descending = data["descending"] != 0;
const int64_t length = in0_shape1, count = out0_shape1;
typedef decltype(metajit_order_key(in0_type())) key_type;
std::vector<uint64_t> packed;                      // one row's work space, kept across this call's rows
std::vector<metajit_keyed<uint64_t>> keyed;
for (int64_t row = begin; row < end; ++row) {       // cpu_parallel: the rows are the work items
  const in0_type* values = in0_p + row * length;
  int64_t* order = out0_p + row * count;
  if (sizeof(key_type) <= 4) {  // key and position in one word
    packed.resize(length);
    for (int64_t position = 0; position < length; ++position) {
      uint64_t key = metajit_order_key(values[position]);
      packed[position] = ((descending ? 0xffffffffu - key : key) << 32) | uint64_t(position);
    }
    metajit_order(packed, count, [](uint64_t a, uint64_t b) { return a < b; });
    for (int64_t position = 0; position < count; ++position) order[position] = int64_t(packed[position] & 0xffffffffu);
  } else {
    keyed.resize(length);
    for (int64_t position = 0; position < length; ++position) {
      uint64_t key = metajit_order_key(values[position]);
      keyed[position] = {descending ? ~key : key, uint64_t(position)};
    }
    metajit_order(keyed, count, [](const metajit_keyed<uint64_t>& a, const metajit_keyed<uint64_t>& b) {
      return a.key != b.key ? a.key < b.key : a.position < b.position;
    });
    for (int64_t position = 0; position < count; ++position) order[position] = int64_t(keyed[position].position);
  }
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
                 data={"descending": 1 if descending else 0}, cpu_parallel=rows)
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


VAR_METHODS = {"sort": _method_sort, "argsort": _method_argsort, "topk": _method_topk}  # see _var_method_table.py

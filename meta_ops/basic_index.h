// x[key] for the keys that are a view: integers and slices only (x[t], x[:, a:b], x[::-1]), with Python's rules
// for negative and out-of-range slice bounds. Recurrent layers slice every step, so this parse is the fast path;
// any other key (tensors, lists, None, Ellipsis, bools, an out-of-range integer) is left to
// python/metajit/ops/indexing.py, which handles and reports everything. This file must not know about Python.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "meta_ops/var.h"

namespace metajit {

struct BasicIndexItem {
  enum class Kind : uint8_t { Integer, Slice };
  Kind kind = Kind::Integer;
  int64_t index = 0;            // Integer: as written (negative counts from the end)
  int64_t start = 0, stop = 0;  // Slice: as Python's PySlice_Unpack gives them (defaults already filled in)
  int64_t step = 1;             // Slice: never 0
};

// The affine view step of x[key] on a value of `shape`, or nullopt when the key is not a basic view of it.
std::optional<ViewStep> basic_index_view(const Shape& shape, const std::vector<BasicIndexItem>& key);

}  // namespace metajit

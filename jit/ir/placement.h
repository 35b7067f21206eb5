// Placements: an add-reindex-reduce that sends every element of its source to a target element of its own. The
// gradients of cat, of zero padding and of max pooling over windows that tile the image are such scatters of the
// incoming gradient. Read at a target index, a placement is a gather: the one source element landing there, or
// zero. Lowering inlines it into its readers as such, instead of storing it with a kernel that zero-fills the
// target and then scatters every source element into it.
// This file only reads index expressions; it must not build IR or decide what is stored.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "core/node.h"

namespace metajit {

// One target dimension of a placement: target index = offset + sum of coefficient * i<source_dim> over its terms.
// No terms: the constant `offset`. One term: any non-zero coefficient (a shift, a flip, a stride). Several: source
// dims that nest like the digits of a number, smallest coefficient first, each next coefficient the one before
// times that dim's extent (a pooling window's `2 * i2 + i4` with i4 < 2).
struct PlacedTerm {
  int source_dim = -1;
  int64_t coefficient = 0;
  int64_t extent = 0;  // of the source dim
};
struct PlacedDimension {
  std::vector<PlacedTerm> terms;
  int64_t offset = 0;
};

// The target dimensions of `node` when it is a placement that lowering reads as a gather: an add-reindex-reduce
// of its own dtype with no index buffers and no overflow conditions, each target index affine in its source indices
// as above, and every source dim of more than one element in exactly one target dim; and its last target dim, the
// one a reader's innermost loop walks, a source index unscaled (or flipped), or a constant.
// Not for the identity (same shape, each target dim its own source dim unshifted): that is how an operator asks for
// a value to be stored (python/metajit/ops/tensor.py, `_stored`), and lowering stores it as a plain copy.
std::optional<std::vector<PlacedDimension>> injective_placement(const Node& node);

}  // namespace metajit

// The reindex family's affine special cases: broadcast, permute, strided slicing and reshape. They build View
// and Reshape nodes (index = offset + step * output index per dimension) that fuse into their consumers
// without any index-expression parsing. Shapes and dims are checked at the call.
#pragma once
#include <vector>

#include "core/node.h"

namespace metajit {

// Turns a dims argument (negatives count from the end) into sorted unique dims in [0, rank); throws on
// out-of-range or repeated dims, naming them.
std::vector<int> normalize_dims(const std::vector<int64_t>& dims, int rank, const char* what);

// Jittor semantics: `dims` lists the output dims x does not have; x's own dims map in order onto the rest,
// and size-1 dims of x broadcast too.
NodePtr broadcast(const NodePtr& input, const Shape& shape, const std::vector<int64_t>& dims);
// numpy semantics: align trailing dims.
NodePtr broadcast_to(const NodePtr& input, const Shape& shape);
NodePtr permute(const NodePtr& input, const std::vector<int64_t>& order);
NodePtr transpose(const NodePtr& input, int64_t first, int64_t second);
// The matrix `node` is the transpose of (a pending 2-D view swapping the dims of an [R, C] node), or null. Lets
// matmul write `x @ w.T` as a product over w's own layout, so w's gradient comes out in that layout too.
NodePtr transposed_matrix_source(const NodePtr& node);
// A general affine view: output `shape`, one ViewDimension per input dimension.
NodePtr view(const NodePtr& input, const Shape& shape, std::vector<ViewDimension> dimensions);
// Row-major reshape; one extent may be -1 and is inferred.
NodePtr reshape(const NodePtr& input, Shape shape);

// The same value with no gradient history (detach / stop_grad): gradients do not flow through it. Returns the
// input itself when it carries no gradient.
NodePtr stop_gradient(const NodePtr& input);
// Always a new node with the input's value and no gradient history: a leaf (Node::gradient_leaf) that may be
// given requires_grad without touching the input (detach() and .data of a metajit.Var).
NodePtr detached(const NodePtr& input);

// Writing through a view (x[0, 1:3] = v, a transpose's add_): `base` with the elements the View of `mapping`
// (output `view_shape`) reads replaced by `value` (view-shaped). Throws when the view reads one element at
// several positions (an expanded dim), as PyTorch refuses such writes.
NodePtr write_through_view(const NodePtr& base, const Shape& view_shape, const std::vector<ViewDimension>& mapping,
                           const NodePtr& value);
// The input-shaped tensor holding `walked_value` where the View of `mapping` reads the input, 0 elsewhere.
// walked_value has the view's shape without the dims no input dim moves along. `covers_input` (optional) is set
// when every input element is read exactly once (a permutation or reshape: no masking is needed).
NodePtr place_view_elements(const Shape& input_shape, const std::vector<ViewDimension>& mapping,
                            const Shape& view_shape, const NodePtr& walked_value, bool* covers_input);

// Gradient rules (called by meta_ops/autodiff): reshape back; a view's gradient sums over broadcast dims, then
// is a permute/reshape or, for slices, flips and strides, a gather (reindex) with zeros where nothing was read.
std::vector<NodePtr> reshape_gradient(const NodePtr& node, const NodePtr& grad);
std::vector<NodePtr> view_gradient(const NodePtr& node, const NodePtr& grad);

}  // namespace metajit

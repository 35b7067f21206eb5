// Lowering: one fused group (a root node plus every pending node inlined into it) -> one IrKernel.
// Producers are inlined as expressions evaluated at the indices their consumer needs (views and reindexes
// only transform indices); a reduction whose result is needed at the kernel's own output index becomes a loop
// inside the kernel. When a node cannot be inlined, lowering asks for it to be materialised instead.
#pragma once
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/node.h"
#include "jit/ir/kernel_ir.h"

namespace metajit {

// Where a named kernel value came from: the graph's view of it, for IR-to-IR passes (library lowering) that
// need per-dimension indices rather than flat offsets.
struct ValueOrigin {
  Node* node = nullptr;            // the node whose value this is
  std::vector<IrExprPtr> indices;  // one per dimension of node->shape, over the kernel's loop variables
  int buffer = -1;                 // >= 0: the value is a plain load of this buffer, laid out row-major in node->shape
  // Views of `node` (reshapes, permutes, slices, broadcasts) that pass this value on unchanged, innermost first,
  // each at its own indices. A reshape reads `node` at flattened-and-split (non-affine) indices where the
  // reshape's own indices are plain; once a view is a buffer, a library call can read it at those.
  struct View {
    Node* node;
    std::vector<IrExprPtr> indices;
  };
  std::vector<View> views;
};

struct LoweredKernel {
  IrKernel kernel;
  NodePtr output;                 // buffer 0
  std::vector<NodePtr> siblings;  // further outputs of the same shape (buffers 1..siblings.size()); usually none
  std::vector<NodePtr> inputs;    // the buffers after the outputs; computed before this kernel runs
  std::unordered_map<std::string, ValueOrigin> origins;  // let name -> origin
  std::vector<IrExprPtr> scatter_target;                  // Scatter: the target index per output dimension
  // The ops fused into the kernel, in the order lowering reached them. The planner writes them into
  // kernel.fused_ops for the kernels it keeps (jit/plan/render_kernels.cc): most lowerings are dropped, and
  // writing every one's lines (shapes, source lines) was a good part of their cost.
  std::vector<const Node*> fused_nodes;
};

struct LoweringResult {
  LoweredKernel lowered;                    // incomplete when there are requests (nothing reads it then)
  std::vector<Node*> materialize_requests;  // non-empty: lower again once these are their own kernels
  // Every pending node the lowering reached without loading it from a buffer (in any of the attempts behind
  // the result). Materialising any other node leaves the result as it is, so planning can keep it.
  std::vector<Node*> inlined;
};

// No kernel inlines a chain of more than this many ops: planning stores the value where a chain reaches it
// (jit/plan/cut_deep_chains.cc), and joined siblings may not hold more ops than this between them. Clang's time
// for a kernel grows with the square of its length, and kernels this long gain nothing from more fusion. (The
// depth counts every pending node along a chain, also those planning stores anyway: at a lower limit a training
// step's backward is cut at arbitrary points.)
constexpr int kMaximumFusedDepth = 1000;
// Past this many values a kernel is cut at any elementwise value (jit/ir/lowering.cc): a wide kernel (a tree of
// thousands of sums) is no deeper than the limit above, yet grows with the graph.
constexpr int kMaximumKernelValues = 1000;

// How many pending nodes read each pending node, over the graph being planned.
using ConsumerCounts = std::unordered_map<const Node*, int>;

// `consumers` lets lowering cut a kernel that would build more than kMaxInlinedValues values by inlining (the
// cut value is requested like any other); without it kernels grow as large as the graph.
LoweringResult lower_group(const NodePtr& root, const std::unordered_set<Node*>& materialized,
                           const ConsumerCounts* consumers = nullptr);

// One kernel storing every node of `roots` (all of one shape, every one in `materialized`), each at its own output
// index, in the order given (producers first: a later root reading an earlier one at that index takes its value
// from the register). The caller checks the result: requests, per-row loops, or a root among the inputs (a
// later root reading an earlier one elsewhere) mean the roots cannot share a kernel. With `consumers`, a kernel
// past kMaxInlinedValues asks for a cut too: joining must not rebuild a chain that planning cut.
LoweringResult lower_siblings(const std::vector<NodePtr>& roots, const std::unordered_set<Node*>& materialized,
                              const ConsumerCounts* consumers = nullptr);

}  // namespace metajit

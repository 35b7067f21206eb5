// Lowering: one fused group (a root node plus every pending node inlined into it) -> one IrKernel.
// Producers are inlined as expressions evaluated at the indices their consumer needs (views and reindexes
// only transform indices); a reduction whose result is needed at the kernel's own output index becomes a loop
// inside the kernel. When a node cannot be inlined, lowering asks for it to be materialised instead.
#pragma once
#include <unordered_set>
#include <vector>

#include "core/node.h"
#include "jit/kernel_ir.h"

namespace metajit {

struct LoweredKernel {
  IrKernel kernel;
  NodePtr output;               // buffer 0
  std::vector<NodePtr> inputs;  // buffers 1..; computed before this kernel runs
};

struct LoweringResult {
  LoweredKernel lowered;
  std::vector<Node*> materialize_requests;  // non-empty: lower again once these are their own kernels
};

LoweringResult lower_group(const NodePtr& root, const std::unordered_set<Node*>& materialized);

}  // namespace metajit

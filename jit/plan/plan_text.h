// A plan as readable text, for METAJIT_LOG=plan: its kernels in launch order (generated, library call, library
// call with an epilogue, or Code op; the values each writes and reads; the fused ops), then which buffers go
// back to the allocator early. Values are named #<position in the graph signature>. For people only: never
// parsed back, never keyed.
#pragma once
#include <string>

#include "jit/plan/graph_signature.h"
#include "jit/plan/plan.h"

namespace metajit {

std::string plan_text(const Plan& plan, const GraphSignature& signature);

}  // namespace metajit

#include "jit/plan/plan_description.h"

#include "core/executor.h"
#include "jit/ir/ir_text.h"
#include "jit/plan/planner.h"
#include "jit/toolchain/kernel_cache.h"

namespace metajit {

std::vector<KernelDescription> describe_plan(const std::vector<NodePtr>& nodes) {
  std::vector<KernelDescription> descriptions;
  std::vector<NodePtr> targets = nodes;  // as a sync would: with the values it stores besides them
  for (NodePtr& stored : values_a_sync_stores(nodes)) targets.push_back(std::move(stored));
  for (const PlannedKernel& kernel : plan_kernels(targets)) {
    KernelDescription description;
    description.key = kernel.key;
    description.header = kernel.rendered.header_comment;
    description.body = kernel.rendered.source;
    description.ops = kernel.lowered.kernel.fused_ops;
    description.cached_in_memory = !kernel.key.empty() && KernelCache::instance().in_memory(kernel.key);
    description.cached = kernel.host_operation ? std::string("host")
                         : kernel.key.empty()  ? std::string("library")
                                               : KernelCache::instance().locate(kernel.key);
    description.kind = kernel.code             ? "code"
                       : kernel.host_operation ? "host"
                       : kernel.library        ? (kernel.key.empty() ? "library" : "library+epilogue")
                                               : "generated";
    if (kernel.library) description.library = kernel.library->describe();
    if (!kernel.contraction.empty()) description.contraction = kernel.contraction;
    description.stored_operands = kernel.stored_operands;
    description.buffer_offsets = kernel.buffer_offsets;
    if (!kernel.code && !kernel.host_operation && !(kernel.library && !kernel.epilogue))
      description.ir = ir_text(kernel.lowered.kernel);
    descriptions.push_back(std::move(description));
  }
  return descriptions;
}

}  // namespace metajit

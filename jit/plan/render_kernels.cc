// Pass 6, render and key: each lowered kernel becomes a PlannedKernel. A matched contraction goes to the
// backend, with the most post-ops folded into the call that it takes (else the plain sum and a generated
// epilogue); what is left of the kernel goes through the IR passes (jit/ir/ir_passes.h: the shared ones, then
// on the copy rendered to C++ the launch offsets, so x[0]'s kernel serves x[t], and the C++ scheduling passes),
// is rendered and keyed for the kernel cache (once per distinct kernel: see RenderedSources). A Code op renders
// the user's kernel; a host operation renders nothing.
#include <algorithm>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "core/host_operation.h"
#include "core/log.h"
#include "jit/codegen/code_ops/code_kernel.h"
#include "jit/ir/ir_passes.h"
#include "jit/ir/kernel_equality.h"
#include "jit/ir/launch_offsets.h"
#include "jit/plan/planning_state.h"
#include "jit/toolchain/kernel_cache.h"
#include "meta_ops/code.h"

namespace metajit {
namespace {

// METAJIT_LOG=source: the kernel as rendered, without the prelude every kernel shares (debug prints it whole).
void log_source(const PlannedKernel& planned) {
  const std::string marker = "// ---- end of prelude ----\n";
  const std::string& source = planned.rendered.source;
  size_t end = source.find(marker);
  std::string kernel = end == std::string::npos ? source : source.substr(end + marker.size());
  log_message(LogLevel::Source,
              "kernel " + planned.key + " rendered (prelude omitted):\n" + planned.rendered.header_comment + kernel);
}

PlannedKernel code_kernel(LoweredKernel lowered, bool render_cpu_source) {
  PlannedKernel planned;
  NodePtr output = lowered.output;
  const CodeOp& op = *static_cast<const CodePayload&>(*output->payload).op;
  planned.code = true;
  if (render_cpu_source) {
    planned.rendered = render_code_kernel(op, output->inputs);
    planned.key = KernelCache::instance().key_for(planned.rendered.source);
  }
  planned.lowered = std::move(lowered);
  planned.lowered.kernel.fused_ops = {op.what + "  " + shape_to_string(output->shape) + "  " + op.provenance.to_string()};
  return planned;
}

// Host work runs from its node's payload (which the plan does not keep: a cached plan serves later graphs), on
// the CPU whatever device the plan is for.
PlannedKernel host_operation_kernel(LoweredKernel lowered) {
  PlannedKernel planned;
  planned.host_operation = true;
  planned.on_host = true;
  const Node& output = *lowered.output;
  planned.lowered = std::move(lowered);
  planned.lowered.kernel.fused_ops = {host_operation_of(output).describe() + "  " + shape_to_string(output.shape) +
                                      "  " + output.provenance.to_string()};
  return planned;
}

// The kernel's header lines: each fused op, its shape and the user's line that made it.
std::vector<std::string> fused_op_lines(const LoweredKernel& lowered) {
  std::vector<std::string> lines;
  for (const Node* node : lowered.fused_nodes) {
    std::string line = node->op_name();
    line.resize(std::max<size_t>(line.size(), 16), ' ');
    lines.push_back(line + " " + shape_to_string(node->shape) + "  " + node->provenance.to_string());
  }
  return lines;
}

// Kernels whose IR is the same after the passes render to the same source: once their launch offsets are moved
// out, the steps of an unrolled recurrence are one kernel launched at different offsets. Rendering is pure text,
// so each distinct kernel of a plan is rendered and keyed once, and equal ones take copies.
class RenderedSources {
 public:
  // The rendering of `kernel` and its cache key.
  std::pair<RenderedKernel, std::string> render(IrKernel kernel) {
    uint64_t hash = ir_kernel_hash(kernel);
    auto [begin, end] = by_hash_.equal_range(hash);
    for (auto entry = begin; entry != end; ++entry) {
      const Entry& rendered = entries_[entry->second];
      if (ir_kernels_equal(rendered.kernel, kernel)) return {rendered.rendered, rendered.key};
    }
    Entry rendered;
    rendered.rendered = render_cpp(kernel);
    rendered.key = KernelCache::instance().key_for(rendered.rendered.source);
    rendered.kernel = std::move(kernel);
    by_hash_.emplace(hash, entries_.size());
    entries_.push_back(std::move(rendered));
    return {entries_.back().rendered, entries_.back().key};
  }

 private:
  struct Entry {
    IrKernel kernel;
    RenderedKernel rendered;
    std::string key;
  };
  std::vector<Entry> entries_;
  std::unordered_multimap<uint64_t, size_t> by_hash_;
};

PlannedKernel generated_kernel(LoweredKernel lowered, ContractionMatch match, ContractionBackend backend,
                               bool render_cpu_source, RenderedSources& sources) {
  PlannedKernel planned;
  std::optional<IrKernel>* epilogue = &match.epilogue;
  if (match.contraction) {
    // The most post-ops folded into the call that the backend takes; else the plain sum and the epilogue.
    for (ContractionMatch::Folded& fold : match.folds) {
      if (!(planned.library = backend(fold.contraction))) continue;
      planned.contraction = fold.contraction.describe();
      planned.library_contraction = std::make_shared<const Contraction>(fold.contraction);
      epilogue = &fold.epilogue;
      break;
    }
    if (!planned.library) {
      planned.library = backend(*match.contraction);
      planned.contraction = match.contraction->describe();
      if (planned.library) planned.library_contraction = std::make_shared<const Contraction>(*match.contraction);
    }
  }
  if (planned.library) planned.stored_operands = std::move(match.stored_operands);
  planned.epilogue = planned.library && *epilogue;
  if (planned.epilogue) lowered.kernel = std::move(**epilogue);
  lowered.kernel.fused_ops = fused_op_lines(lowered);
  lowered.fused_nodes.clear();  // the plan outlives the graph
  if (!planned.library || *epilogue) {
    run_shared_passes(lowered.kernel);
    if (render_cpu_source) {
      IrKernel position_independent = lowered.kernel;
      planned.buffer_offsets = run_cpu_passes(position_independent);
      std::string offsets = describe_launch_offsets(position_independent, planned.buffer_offsets);
      std::tie(planned.rendered, planned.key) = sources.render(std::move(position_independent));
      planned.rendered.header_comment += offsets;
      if (log_enabled(LogLevel::Source)) log_source(planned);
    }
  }
  planned.lowered = std::move(lowered);
  return planned;
}

}  // namespace

std::vector<PlannedKernel> render_kernels(std::vector<LoweredKernel> lowered, std::vector<ContractionMatch> matches,
                                          ContractionBackend backend, bool render_cpu_source) {
  std::vector<PlannedKernel> kernels;
  kernels.reserve(lowered.size());
  RenderedSources sources;
  for (size_t index = 0; index < lowered.size(); ++index) {
    if (lowered[index].output->kind == NodeKind::Code)
      kernels.push_back(code_kernel(std::move(lowered[index]), render_cpu_source));
    else if (lowered[index].output->kind == NodeKind::HostOperation)
      kernels.push_back(host_operation_kernel(std::move(lowered[index])));
    else
      kernels.push_back(
          generated_kernel(std::move(lowered[index]), std::move(matches[index]), backend, render_cpu_source, sources));
  }
  return kernels;
}

}  // namespace metajit

// Fusion planning is a fixpoint: start by materialising only the targets, lower every group, and whenever a
// group asks for one of its producers to be materialised (a reduction needed at another index, a scatter, a
// node recomputed too often) add it and lower again. Node ids follow creation order, so sorting by id gives a
// valid launch order.
#include "jit/graph_executor.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

#include "core/stats.h"
#include "core/thread_pool.h"
#include "jit/compiler.h"
#include "jit/kernel_cache.h"

namespace metajit {
namespace {

class JitGraphRunner : public GraphRunner {
 public:
  void run(const std::vector<NodePtr>& targets) override {
    std::vector<PlannedKernel> kernels = plan_kernels(targets);
    KernelCache& cache = KernelCache::instance();
    std::vector<std::pair<std::string, std::string>> sources;
    for (const PlannedKernel& kernel : kernels)
      if (!kernel.key.empty()) sources.push_back({kernel.key, kernel.rendered.source});
    cache.prepare(sources);
    for (PlannedKernel& kernel : kernels) {
      KernelFunction function = nullptr;
      try {
        if (!kernel.key.empty())
          function = cache.get(kernel.key, kernel.rendered.source, kernel.rendered.header_comment);
      } catch (const CompileError& error) {
        const NodePtr& output = kernel.lowered.output;
        throw std::runtime_error("while computing " + output->op_name() + " created at " +
                                 output->provenance.to_string() + ":\n" + error.what());
      }
      launch(kernel, function);
    }
    for (PlannedKernel& kernel : kernels) {
      release_inputs(*kernel.lowered.output);
    }
  }

 private:
  static void launch(PlannedKernel& kernel, KernelFunction function) {
    const NodePtr& output = kernel.lowered.output;
    StoragePtr storage;
    try {
      storage = std::make_shared<Storage>(size_t(output->numel()) * dtype_size(output->dtype));
    } catch (const std::bad_alloc& error) {
      throw AllocationError(std::string(error.what()) + " for the result of " + output->op_name() + " " +
                            shape_to_string(output->shape) + " created at " + output->provenance.to_string());
    }
    std::vector<void*> buffers{storage->data()};
    for (const NodePtr& input : kernel.lowered.inputs) {
      if (!input->storage) throw std::logic_error("kernel input " + input->op_name() + " was not computed");
      buffers.push_back(input->storage->data());
    }
    StoragePtr temporary;
    if (kernel.library) {
      if (function) {  // the library writes a temporary; the epilogue kernel reads it as its last buffer
        temporary = std::make_shared<Storage>(size_t(output->numel()) * sizeof(float));
        buffers[0] = temporary->data();
      }
      try {
        kernel.library->run(buffers.data());
      } catch (const std::exception& error) {
        throw std::runtime_error("while computing " + output->op_name() + " created at " + output->provenance.to_string() +
                                 " with " + kernel.library->describe() + ": " + error.what());
      }
      stats().library_calls++;
      if (!function) {
        publish_storage(*output, std::move(storage));
        return;
      }
      buffers[0] = storage->data();
      buffers.push_back(temporary->data());
    }
    int64_t work = kernel.rendered.work_items;
    if (work > 0) {
      parallel_for(work, kernel.rendered.grain,
                   [&](int64_t begin, int64_t end) { function(buffers.data(), begin, end); });
      stats().kernels_launched++;
    }
    publish_storage(*output, std::move(storage));
  }
};

}  // namespace

std::vector<PlannedKernel> plan_kernels(const std::vector<NodePtr>& targets) {
  std::unordered_set<Node*> materialized;
  std::vector<NodePtr> roots;
  auto add_root = [&](const NodePtr& node) {
    if (node->is_computed() || !materialized.insert(node.get()).second) return;
    roots.push_back(node);
  };
  for (const NodePtr& target : targets) add_root(target);
  // Find NodePtrs for requested raw pointers by walking the pending graph.
  auto find_node = [&](Node* wanted) -> NodePtr {
    std::vector<NodePtr> stack(roots.begin(), roots.end());
    std::unordered_set<Node*> seen;
    while (!stack.empty()) {
      NodePtr node = std::move(stack.back());
      stack.pop_back();
      if (node.get() == wanted) return node;
      if (!seen.insert(node.get()).second || node->is_computed()) continue;
      for (const NodePtr& input : node->inputs) stack.push_back(input);
    }
    throw std::logic_error("requested node not found in graph");
  };
  std::vector<LoweredKernel> lowered;
  std::vector<ContractionMatch> matches;
  ContractionBackend backend = contraction_backend();
  bool use_library = backend && library_lowering_enabled();
  for (int iteration = 0;; ++iteration) {
    if (iteration > 10000) throw std::logic_error("fusion planning did not converge");
    std::sort(roots.begin(), roots.end(), [](const NodePtr& a, const NodePtr& b) { return a->id < b->id; });
    lowered.clear();
    std::vector<Node*> requests;
    matches.clear();
    for (const NodePtr& root : roots) {
      LoweringResult result = lower_group(root, materialized);
      requests.insert(requests.end(), result.materialize_requests.begin(), result.materialize_requests.end());
      ContractionMatch match;
      if (requests.empty() && use_library) {
        match = match_contraction(result.lowered);
        if (!match.materialize.empty()) {
          if (backend(*match.contraction))
            requests.insert(requests.end(), match.materialize.begin(), match.materialize.end());
          match = ContractionMatch();
        }
      }
      lowered.push_back(std::move(result.lowered));
      matches.push_back(std::move(match));
      if (!requests.empty()) break;  // re-plan right away: later groups would change anyway
    }
    if (requests.empty()) break;
    for (Node* request : requests)
      if (!materialized.count(request)) add_root(find_node(request));
  }
  std::vector<PlannedKernel> kernels;
  KernelCache& cache = KernelCache::instance();
  for (size_t index = 0; index < lowered.size(); ++index) {
    PlannedKernel planned;
    ContractionMatch& match = matches[index];
    if (match.contraction) {
      planned.library = backend(*match.contraction);
      planned.contraction = match.contraction->describe();
    }
    if (planned.library && match.epilogue) lowered[index].kernel = std::move(*match.epilogue);
    if (!planned.library || match.epilogue) {
      planned.rendered = render_cpp(lowered[index].kernel);
      planned.key = cache.key_for(planned.rendered.source);
    }
    planned.lowered = std::move(lowered[index]);
    kernels.push_back(std::move(planned));
  }
  return kernels;
}

void install_graph_executor() {
  static JitGraphRunner runner;
  set_graph_runner(&runner);
}

}  // namespace metajit

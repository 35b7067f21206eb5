// Fusion planning is a fixpoint: start by materialising only the targets, lower every group, and whenever a
// group asks for one of its producers to be materialised (a reduction needed at another index, a scatter, a
// node recomputed too often, an operand a library call must read from memory) add all such producers found in
// one pass and lower again. Node ids follow creation order, so sorting by id gives a valid launch order.
#include "jit/graph_executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <unordered_map>
#include <stdexcept>
#include <unordered_set>

#include "core/stats.h"
#include "core/thread_pool.h"
#include "jit/compiler.h"
#include "jit/kernel_cache.h"
#include "jit/plan_cache.h"

namespace metajit {
namespace {

std::atomic<bool> profiling_{false};
std::mutex profile_mutex_;
std::unordered_map<std::string, KernelProfile> profile_;

void record_profile(const PlannedKernel& kernel, const Node& output, double seconds) {
  std::string identity = kernel.key + "|" + (kernel.library ? kernel.library->describe() : std::string());
  std::lock_guard<std::mutex> lock(profile_mutex_);
  KernelProfile& entry = profile_[identity];
  if (entry.launches == 0) {
    entry.key = kernel.key;
    entry.name = (kernel.library ? kernel.library->describe() + (kernel.key.empty() ? "" : " + epilogue") + ": " : "") +
                 output.op_name() + " " + shape_to_string(output.shape) + " at " + output.provenance.to_string();
  }
  entry.launches++;
  entry.seconds += seconds;
}

class JitGraphRunner : public GraphRunner {
 public:
  void run(const std::vector<NodePtr>& targets) override {
    auto planning_start = std::chrono::steady_clock::now();
    GraphSignature signature = graph_signature(targets);
    std::shared_ptr<const CachedPlan> plan = PlanCache::instance().find(signature.text);
    if (!plan) plan = PlanCache::instance().insert(signature, plan_kernels(targets));
    stats().planning_nanoseconds += std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - planning_start).count();
    const std::vector<NodePtr>& nodes = signature.nodes;
    KernelCache& cache = KernelCache::instance();
    // Only kernels not yet in memory go to prepare(): copying every source each sync is wasted in a steady loop.
    std::vector<std::pair<std::string, std::string>> sources;
    for (const PlannedKernel& kernel : plan->kernels)
      if (!kernel.key.empty() && !cache.in_memory(kernel.key)) sources.push_back({kernel.key, kernel.rendered.source});
    if (!sources.empty()) cache.prepare(sources);
    for (size_t index = 0; index < plan->kernels.size(); ++index) {
      const PlannedKernel& kernel = plan->kernels[index];
      const NodePtr& output = nodes[plan->outputs[index]];
      std::vector<NodePtr> inputs;
      for (int position : plan->inputs[index]) inputs.push_back(nodes[position]);
      KernelFunction function = nullptr;
      try {
        if (!kernel.key.empty())
          function = cache.get(kernel.key, kernel.rendered.source, kernel.rendered.header_comment);
      } catch (const CompileError& error) {
        throw std::runtime_error("while computing " + output->op_name() + " created at " +
                                 output->provenance.to_string() + ":\n" + error.what());
      }
      if (profiling_) {
        auto start = std::chrono::steady_clock::now();
        launch(kernel, output, inputs, function);
        record_profile(kernel, *output, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      } else {
        launch(kernel, output, inputs, function);
      }
    }
    for (int position : plan->outputs) release_inputs(*nodes[position]);
  }

 private:
  static void launch(const PlannedKernel& kernel, const NodePtr& output, const std::vector<NodePtr>& inputs,
                     KernelFunction function) {
    StoragePtr storage;
    try {
      storage = std::make_shared<Storage>(size_t(output->numel()) * dtype_size(output->dtype));
    } catch (const std::bad_alloc& error) {
      throw AllocationError(std::string(error.what()) + " for the result of " + output->op_name() + " " +
                            shape_to_string(output->shape) + " created at " + output->provenance.to_string());
    }
    std::vector<void*> buffers{storage->data()};
    for (const NodePtr& input : inputs) {
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
      if (result.materialize_requests.empty() && use_library) {
        match = match_contraction(result.lowered);
        if (!match.materialize.empty()) {
          if (backend(*match.contraction))
            requests.insert(requests.end(), match.materialize.begin(), match.materialize.end());
          match = ContractionMatch();
        }
      }
      lowered.push_back(std::move(result.lowered));
      matches.push_back(std::move(match));
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

void set_kernel_profiling(bool enabled) { profiling_ = enabled; }

std::vector<KernelProfile> kernel_profile() {
  std::vector<KernelProfile> entries;
  {
    std::lock_guard<std::mutex> lock(profile_mutex_);
    for (const auto& [identity, entry] : profile_) entries.push_back(entry);
  }
  std::sort(entries.begin(), entries.end(), [](const KernelProfile& a, const KernelProfile& b) { return a.seconds > b.seconds; });
  return entries;
}

void reset_kernel_profile() {
  std::lock_guard<std::mutex> lock(profile_mutex_);
  profile_.clear();
}

void install_graph_executor() {
  static JitGraphRunner runner;
  set_graph_runner(&runner);
}

}  // namespace metajit

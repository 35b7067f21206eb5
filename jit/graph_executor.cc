// Fusion planning is a fixpoint: start by materialising only the targets, lower every group, and whenever a
// group asks for one of its producers to be materialised (a reduction needed at another index, a scatter, a
// node recomputed too often, an operand a library call must read from memory) add all such producers found in
// one pass and lower again. When nothing more is asked for, values whose recomputation in every reader costs more
// than storing them are added the same way (jit/recompute_policy.h). Node ids follow creation order, so sorting by id gives a valid launch order.
#include "jit/graph_executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <stdexcept>
#include <unordered_set>

#include "core/stats.h"
#include "core/thread_pool.h"
#include "jit/buffer_lifetimes.h"
#include "jit/code_kernel.h"
#include "jit/compiler.h"
#include "jit/cuda_graph_runner.h"
#include "jit/kernel_cache.h"
#include "jit/launch_offsets.h"
#include "jit/plan_cache.h"
#include "jit/recompute_policy.h"
#include "jit/reduce_loop_merging.h"
#include "jit/sibling_kernels.h"

namespace metajit {
namespace {

std::atomic<bool> profiling_{false};
std::atomic<bool> check_non_finite_{[] {
  const char* value = std::getenv("METAJIT_CHECK_NAN");
  return value && *value && std::string(value) != "0";
}()};

// Index of the first NaN or infinity in a buffer of `dtype`, or -1 (also for non-floating dtypes).
int64_t first_non_finite(const void* data, DType dtype, int64_t count) {
  if (dtype == DType::Float32) {
    const float* values = static_cast<const float*>(data);
    for (int64_t index = 0; index < count; ++index)
      if (!std::isfinite(values[index])) return index;
  } else if (dtype == DType::Float64) {
    const double* values = static_cast<const double*>(data);
    for (int64_t index = 0; index < count; ++index)
      if (!std::isfinite(values[index])) return index;
  } else if (dtype == DType::Float16) {
    const uint16_t* values = static_cast<const uint16_t*>(data);
    for (int64_t index = 0; index < count; ++index)
      if ((values[index] & 0x7c00) == 0x7c00) return index;  // exponent all ones: inf or NaN
  }
  return -1;
}

std::string describe_value(const void* data, DType dtype, int64_t index) {
  double value = dtype == DType::Float32   ? static_cast<const float*>(data)[index]
                 : dtype == DType::Float64 ? static_cast<const double*>(data)[index]
                                           : ((static_cast<const uint16_t*>(data)[index] & 0x3ff) ? NAN : INFINITY);
  if (std::isnan(value)) return "NaN";
  if (dtype == DType::Float16) return "an infinity";
  return value > 0 ? "+inf" : "-inf";
}

// Raises when a freshly computed value holds a NaN or infinity, unless one of the kernel's inputs already did
// (then the first place it appeared was a user-provided value, which is named instead).
void check_output(const PlannedKernel& kernel, const Node& output, const std::vector<NodePtr>& inputs) {
  if (!is_floating(output.dtype) || !output.storage) return;
  int64_t index = first_non_finite(output.storage->data(), output.dtype, output.numel());
  if (index < 0) return;
  std::string message = "METAJIT_CHECK_NAN: " + output.op_name() + " " + shape_to_string(output.shape) +
                        " created at " + output.provenance.to_string() + " produced " +
                        describe_value(output.storage->data(), output.dtype, index) + " at flat index " +
                        std::to_string(index);
  for (size_t position = 0; position < inputs.size(); ++position) {
    const Node& input = *inputs[position];
    if (!is_floating(input.dtype) || !input.storage) continue;
    int64_t bad = first_non_finite(input.storage->data(), input.dtype, input.numel());
    if (bad >= 0) {
      message += "; its input " + input.op_name() + " " + shape_to_string(input.shape) + " (created at " +
                 input.provenance.to_string() + ") already held " +
                 describe_value(input.storage->data(), input.dtype, bad) + " at flat index " + std::to_string(bad);
      break;
    }
  }
  if (kernel.library) message += "\nlibrary call: " + kernel.library->describe();
  if (!kernel.lowered.kernel.fused_ops.empty()) {
    message += "\nops computed in this kernel (op, shape, created at):";
    for (const std::string& op : kernel.lowered.kernel.fused_ops) message += "\n  " + op;
  }
  throw NonFiniteError(message);
}
std::mutex profile_mutex_;
std::unordered_map<std::string, KernelProfile> profile_;

void record_profile(const PlannedKernel& kernel, const Node& output, double seconds) {
  // CUDA kernels have no CPU key: their binary's key, or under the emulator (no binaries) their source.
  const std::string& key = !kernel.key.empty() ? kernel.key : !kernel.cuda_key.empty() ? kernel.cuda_key : kernel.cuda.source;
  std::string identity = key + "|" + (kernel.library ? kernel.library->describe() : std::string());
  std::lock_guard<std::mutex> lock(profile_mutex_);
  KernelProfile& entry = profile_[identity];
  if (entry.launches == 0) {
    entry.key = kernel.key.empty() ? kernel.cuda_key : kernel.key;
    entry.name = (kernel.library ? kernel.library->describe() + (kernel.epilogue ? " + epilogue" : "") + ": " : "") +
                 output.op_name() + " " + shape_to_string(output.shape) + " at " + output.provenance.to_string();
    int further_outputs = -1;
    for (const IrBuffer& buffer : kernel.lowered.kernel.buffers) further_outputs += buffer.is_output ? 1 : 0;
    if (!kernel.library && further_outputs > 0)
      entry.name += " (and " + std::to_string(further_outputs) + " more output" + (further_outputs > 1 ? "s)" : ")");
  }
  entry.launches++;
  entry.seconds += seconds;
}

// A Code op's compile error is the user's to fix: show it against their own source. A generated kernel that
// fails to compile is our bug: show everything needed to report it.
std::string describe_compile_error(const PlannedKernel& kernel, const Node& output, const std::string& diagnostics) {
  if (kernel.code) {
    auto* payload = dynamic_cast<const CodePayload*>(output.payload.get());
    if (payload) return describe_code_compile_error(*payload->op, diagnostics);
  }
  return "while computing " + output.op_name() + " created at " + output.provenance.to_string() +
         ":\ninternal error: generated kernel failed to compile (this is a metajit bug; please report it with this "
         "message)\n" + diagnostics + "\n--- kernel source ---\n" + kernel.rendered.header_comment +
         numbered_lines(kernel.rendered.source);
}

}  // namespace

StoragePtr allocate_result(const Node& output, DType dtype, const Shape& shape, bool on_device) {
  size_t bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  try {
    return on_device ? std::make_shared<Storage>(bytes, Storage::OnDevice{}) : std::make_shared<Storage>(bytes);
  } catch (const std::bad_alloc& error) {
    throw AllocationError(std::string(error.what()) + " for the result of " + output.op_name() + " " +
                          dtype_name(dtype) + " " + shape_to_string(shape) + " created at " +
                          output.provenance.to_string());
  }
}

CodeLaunch begin_code_launch(const NodePtr& output, const std::vector<NodePtr>& inputs, bool on_device) {
  CodeLaunch launch;
  if (output->is_computed()) return launch;  // a sibling output's launch earlier in this plan computed it
  launch.payload = dynamic_cast<const CodePayload*>(output->payload.get());
  if (!launch.payload) throw std::logic_error("internal error: a code kernel's output is not a Code op");
  const CodeOp& op = *launch.payload->op;
  for (size_t index = 0; index < op.output_shapes.size(); ++index) {
    launch.storages.push_back(allocate_result(*output, op.output_dtypes[index], op.output_shapes[index], on_device));
    launch.buffers.push_back(on_device ? launch.storages.back()->device_data() : launch.storages.back()->data());
  }
  for (const NodePtr& input : inputs) {
    if (!input->storage) throw std::logic_error("kernel input " + input->op_name() + " was not computed");
    launch.buffers.push_back(on_device ? input->storage->device_data() : input->storage->data());
  }
  return launch;
}

// A Code op runs once for all its outputs; the first of them to be launched publishes every live one.
void run_code_on_host(const NodePtr& output, const std::vector<NodePtr>& inputs, KernelFunction function,
                      int64_t work_items) {
  CodeLaunch launch = begin_code_launch(output, inputs, /*on_device=*/false);
  if (!launch.payload) return;
  const CodeOp& op = *launch.payload->op;
  std::vector<void*>& buffers = launch.buffers;
  std::vector<double> data = op.data_values;
  data.push_back(0);  // the error slot
  buffers.push_back(data.data());
  if (work_items > 1)  // cpu_parallel: the source runs its share [begin, end) of the items on each thread
    parallel_for(work_items, 1, [&](int64_t begin, int64_t end) { function(buffers.data(), begin, end); });
  else
    function(buffers.data(), 0, 1);
  stats().kernels_launched++;
  const char* missing = nullptr;
  std::memcpy(&missing, &data.back(), sizeof(missing));
  if (missing)
    throw std::runtime_error("the " + op.what + " created at " + op.provenance.to_string() + " read data[\"" +
                             missing + "\"], which is not in its data (given: " + code_data_names(op) + ")");
  publish_code_outputs(*launch.payload, output, launch.storages);
}

std::string code_data_names(const CodeOp& op) {
  std::string names;
  for (const std::string& name : op.data_names) names += (names.empty() ? "" : ", ") + name;
  return names.empty() ? "none" : names;
}

void publish_code_outputs(const CodePayload& payload, const NodePtr& output, const std::vector<StoragePtr>& storages) {
  std::vector<NodePtr> outputs = payload.outputs();
  for (size_t index = 0; index < outputs.size(); ++index) {
    const NodePtr& sibling = outputs[index];
    if (!sibling || sibling->is_computed()) continue;
    publish_storage(*sibling, storages[index]);
    if (sibling != output) release_inputs(*sibling);
  }
  if (!output->is_computed()) publish_storage(*output, storages[payload.output_index]);
}

KernelFunction host_kernel_function(const PlannedKernel& kernel, const Node& output) {
  try {
    return KernelCache::instance().get(kernel.key, kernel.rendered.source, kernel.rendered.header_comment);
  } catch (const CompileError& error) {
    throw CompileError(describe_compile_error(kernel, output, error.what()));
  } catch (const MissingKernelError& error) {
    throw MissingKernelError(std::string(error.what()) + "; it computes " + output.op_name() + " " +
                             shape_to_string(output.shape) + " created at " + output.provenance.to_string());
  }
}

namespace {

class JitGraphRunner : public GraphRunner {
 public:
  void run(const std::vector<NodePtr>& targets) override {
    if (cuda_execution() != CudaExecution::Off) return run_on_cuda(targets);
    auto planning_start = std::chrono::steady_clock::now();
    GraphSignature signature = graph_signature(targets);
    std::shared_ptr<const CachedPlan> plan = PlanCache::instance().find(signature.text);
    if (!plan) plan = PlanCache::instance().insert(signature, plan_kernels(targets));
    stats().planning_nanoseconds += std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - planning_start).count();
    const std::vector<NodePtr>& nodes = signature.nodes;
    KernelCache& cache = KernelCache::instance();
    // Only kernels not yet in memory go to prepare(): copying every source each sync is wasted in a steady loop.
    std::vector<KernelRequest> sources;
    for (const PlannedKernel& kernel : plan->kernels)
      if (!kernel.key.empty() && !cache.in_memory(kernel.key))
        sources.push_back({kernel.key, kernel.rendered.source, kernel.rendered.header_comment});
    if (!sources.empty()) cache.prepare(sources);
    bool check_values = check_non_finite_;
    const BufferLifetimes& lifetimes = plan->lifetimes;
    std::vector<uint8_t> releasable = releasable_buffers(lifetimes, nodes);
    std::vector<const LibraryCall*> library_calls;
    for (const PlannedKernel& kernel : plan->kernels)
      if (kernel.library) library_calls.push_back(kernel.library.get());
    LibraryRunScope library_run(library_calls);
    for (size_t index = 0; index < plan->kernels.size(); ++index) {
      check_interrupt();
      const PlannedKernel& kernel = plan->kernels[index];
      const NodePtr& output = nodes[plan->outputs[index]];
      std::vector<NodePtr> inputs, siblings;
      for (int position : plan->inputs[index]) inputs.push_back(nodes[position]);
      for (int position : plan->siblings[index]) siblings.push_back(nodes[position]);
      KernelFunction function = kernel.key.empty() ? nullptr : host_kernel_function(kernel, *output);
      if (profiling_) {
        auto start = std::chrono::steady_clock::now();
        launch(kernel, output, siblings, inputs, function);
        record_profile(kernel, *output, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      } else {
        launch(kernel, output, siblings, inputs, function);
      }
      if (check_values) {
        check_output(kernel, *output, inputs);
        for (const NodePtr& sibling : siblings) check_output(kernel, *sibling, inputs);
      }
      inputs.clear();  // their copies of the node pointers must not count as holders below
      siblings.clear();
      stats().buffers_released_early += release_after_kernel(lifetimes, releasable, nodes, index);
    }
    release_computed_inputs(*plan, nodes);
  }

 private:
  static void launch(const PlannedKernel& kernel, const NodePtr& output, const std::vector<NodePtr>& siblings,
                     const std::vector<NodePtr>& inputs, KernelFunction function) {
    if (kernel.code) return run_code_on_host(output, inputs, function, kernel.rendered.work_items);
    StoragePtr storage = allocate_result(*output, output->dtype, output->shape, /*on_device=*/false);
    std::vector<void*> buffers{storage->data()};
    std::vector<StoragePtr> sibling_storages;
    for (const NodePtr& sibling : siblings) {
      sibling_storages.push_back(allocate_result(*sibling, sibling->dtype, sibling->shape, /*on_device=*/false));
      buffers.push_back(sibling_storages.back()->data());
    }
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
        use_thread_count_in_libraries();
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
    for (size_t index = 0; index < kernel.buffer_offsets.size(); ++index)
      if (kernel.buffer_offsets[index])
        buffers[index] = static_cast<char*>(buffers[index]) +
                         kernel.buffer_offsets[index] * int64_t(dtype_size(kernel.lowered.kernel.buffers[index].dtype));
    int64_t work = kernel.rendered.work_items;
    if (work > 0) {
      parallel_for(work, kernel.rendered.grain,
                   [&](int64_t begin, int64_t end) { function(buffers.data(), begin, end); });
      stats().kernels_launched++;
    }
    publish_storage(*output, std::move(storage));
    for (size_t index = 0; index < siblings.size(); ++index)
      publish_storage(*siblings[index], std::move(sibling_storages[index]));
  }
};

}  // namespace

// The sums inlined into a kernel (not its root) that a library would run as contractions of their own. A kernel
// holds one contraction for a library call; one that adds several (the gradient of an input used as attention's
// query, key and value sums three matrix products) matched none, and ran each product as a generated loop nest
// (with the softmax recomputed inside one of them: 88 ms against PyTorch's 12 for a causal attention step).
template <typename FindNode>
std::vector<Node*> contractions_inside(const LoweredKernel& lowered, const NodePtr& root,
                                       const std::unordered_set<Node*>& materialized, ContractionBackend backend,
                                       FindNode& find_node) {
  std::vector<Node*> found;
  for (const IrStatement& statement : lowered.kernel.body) {
    if (statement.kind != IrStatement::Kind::ReduceLoop || statement.reduce_op != ReduceOp::Add) continue;
    auto origin = lowered.origins.find(statement.name);
    if (origin == lowered.origins.end()) continue;
    Node* sum = origin->second.node;
    if (!sum || sum == root.get() || sum->kind != NodeKind::Reduce || materialized.count(sum)) continue;
    LoweringResult alone = lower_group(find_node(sum), materialized);
    if (!alone.materialize_requests.empty()) continue;
    ContractionMatch match = match_contraction(alone.lowered);
    if (match.contraction && backend(*match.contraction)) found.push_back(sum);
  }
  return found;
}

// No kernel inlines a chain of more than kMaximumFusedDepth ops: where a chain reaches it, the value is stored
// and the rest of the chain reads it from memory. Lowering and rendering walk a kernel's expression
// recursively, so a lazily built chain of 20,000 additions fused whole overflowed the stack; kernels this long
// gain nothing from more fusion. Runs once before the fixpoint, in creation order (inputs first).

template <typename AddRoot>
void store_every_deep_value(const std::unordered_map<Node*, NodePtr>& pending_nodes, AddRoot&& add_root,
                            const std::unordered_set<Node*>& materialized) {
  if (pending_nodes.size() < size_t(kMaximumFusedDepth)) return;
  std::vector<Node*> order;
  order.reserve(pending_nodes.size());
  for (const auto& entry : pending_nodes) order.push_back(entry.first);
  std::sort(order.begin(), order.end(), [](const Node* a, const Node* b) { return a->id < b->id; });
  std::unordered_map<Node*, int> depth;  // ops inlined along the longest chain ending at a node
  depth.reserve(order.size());
  for (Node* node : order) {
    int longest = 1;
    for (const NodePtr& input : node->inputs) {
      auto found = depth.find(input.get());
      if (found != depth.end() && !materialized.count(input.get())) longest = std::max(longest, found->second + 1);
    }
    if (longest >= kMaximumFusedDepth) {
      add_root(pending_nodes.at(node));
      longest = 0;  // its readers read a buffer
    }
    depth.emplace(node, longest);
  }
}

std::vector<PlannedKernel> plan_kernels(const std::vector<NodePtr>& targets, ContractionBackend backend,
                                        bool render_cpu_source, bool multiple_outputs) {
  std::unordered_set<Node*> materialized;
  std::vector<NodePtr> roots;
  auto add_root = [&](const NodePtr& node) {
    if (node->is_computed() || !materialized.insert(node.get()).second) return;
    roots.push_back(node);
  };
  for (const NodePtr& target : targets) add_root(target);
  // NodePtrs for requested raw pointers: every pending node reachable from the targets, found in one walk
  // (planning never adds nodes; a walk per request was quadratic).
  // The same walk counts each pending node's pending readers, where lowering may cut an oversized kernel.
  std::unordered_map<Node*, NodePtr> pending_nodes;
  ConsumerCounts consumers;
  {
    std::vector<NodePtr> stack(targets.begin(), targets.end());
    while (!stack.empty()) {
      NodePtr node = std::move(stack.back());
      stack.pop_back();
      if (node->is_computed() || !pending_nodes.emplace(node.get(), node).second) continue;
      for (const NodePtr& input : node->inputs) {
        if (input->is_computed()) continue;
        ++consumers[input.get()];
        stack.push_back(input);
      }
    }
  }
  auto find_node = [&](Node* wanted) -> NodePtr {
    auto found = pending_nodes.find(wanted);
    if (found == pending_nodes.end()) throw std::logic_error("requested node not found in graph");
    return found->second;
  };
  store_every_deep_value(pending_nodes, add_root, materialized);
  // Each root's latest lowering, kept while nothing it inlined has been materialised since: the fixpoint adds a
  // few values per round, and lowering every root again each round made the first plan of a 64-step LSTM's
  // training step take 14 s (its step kernels inline long chains until the recompute policy cuts them).
  struct RootPlan {
    LoweringResult result;
    ContractionMatch match;
    std::vector<Node*> requests;
  };
  std::unordered_map<Node*, RootPlan> plans;
  std::unordered_set<Node*> added;  // materialised since the previous round
  bool use_library = backend && library_lowering_enabled();
  auto still_valid = [&](const RootPlan& plan) {
    for (Node* node : plan.result.inlined)
      if (added.count(node)) return false;
    return true;
  };
  // A library call's result read by one elementwise value that is stored too (a Linear layer's x @ W^T, then
  // + bias, which many kernels read: an RNN's input projection sliced per step, attention's q, k and v taken
  // from one projection). The fixpoint stores the product first, for a reader that found it inside its
  // kernel, and the sum later, for its many readers: two passes where the call could add the bias itself.
  // When the reader's own kernel, with the product inlined again, folds into the call, it takes the product's
  // place.
  auto fold_stored_consumers_into_calls = [&] {
    std::unordered_set<Node*> target_nodes;
    for (const NodePtr& target : targets) target_nodes.insert(target.get());
    std::unordered_map<Node*, Node*> only_reader;  // pending node -> its one pending reader
    for (const auto& [node, pointer] : pending_nodes)
      for (const NodePtr& input : node->inputs)
        if (consumers.count(input.get()) && consumers.at(input.get()) == 1) only_reader[input.get()] = node;
    std::unordered_set<Node*> folded;
    for (const NodePtr& root : roots) {
      Node* product = root.get();
      auto product_plan = plans.find(product);
      if (product_plan == plans.end() || !product_plan->second.match.contraction ||
          product_plan->second.match.epilogue || target_nodes.count(product) || !only_reader.count(product))
        continue;
      Node* reader = only_reader.at(product);
      if (!materialized.count(reader) || !plans.count(reader) || folded.count(reader)) continue;
      materialized.erase(product);
      RootPlan plan;
      plan.result = lower_group(find_node(reader), materialized, &consumers);
      bool folds = false;
      if (plan.result.materialize_requests.empty()) {
        plan.match = match_contraction(plan.result.lowered);
        if (plan.match.contraction && plan.match.materialize.empty())
          for (const ContractionMatch::Folded& fold : plan.match.folds) folds = folds || backend(fold.contraction);
      }
      if (!folds) {
        materialized.insert(product);
        continue;
      }
      plans[reader] = std::move(plan);
      plans.erase(product);
      folded.insert(product);
    }
    roots.erase(std::remove_if(roots.begin(), roots.end(), [&](const NodePtr& root) { return folded.count(root.get()); }),
                roots.end());
  };
  for (int iteration = 0;; ++iteration) {
    if (iteration > 10000) throw std::logic_error("fusion planning did not converge");
    std::sort(roots.begin(), roots.end(), [](const NodePtr& a, const NodePtr& b) { return a->id < b->id; });
    std::vector<Node*> requests;
    for (const NodePtr& root : roots) {
      if (root->kind == NodeKind::Code) {  // never fused: its inputs become buffers
        for (const NodePtr& input : root->inputs)
          if (!input->is_computed() && !materialized.count(input.get())) requests.push_back(input.get());
        continue;
      }
      auto cached = plans.find(root.get());
      if (cached != plans.end() && still_valid(cached->second)) {
        requests.insert(requests.end(), cached->second.requests.begin(), cached->second.requests.end());
        continue;
      }
      RootPlan plan;
      plan.result = lower_group(root, materialized, &consumers);
      plan.requests = plan.result.materialize_requests;
      if (plan.result.materialize_requests.empty() && use_library) {
        plan.match = match_contraction(plan.result.lowered);
        if (!plan.match.materialize.empty()) {
          if (backend(*plan.match.contraction))
            plan.requests.insert(plan.requests.end(), plan.match.materialize.begin(), plan.match.materialize.end());
          plan.match = ContractionMatch();
        } else if (!plan.match.contraction) {
          for (Node* sum : contractions_inside(plan.result.lowered, root, materialized, backend, find_node))
            plan.requests.push_back(sum);
        }
      }
      requests.insert(requests.end(), plan.requests.begin(), plan.requests.end());
      plans[root.get()] = std::move(plan);
    }
    if (requests.empty()) requests = shared_values_to_store(roots, materialized);
    if (requests.empty()) break;
    added.clear();
    for (Node* request : requests) {
      if (materialized.count(request)) continue;
      add_root(find_node(request));
      added.insert(request);
    }
  }
  if (use_library) fold_stored_consumers_into_calls();
  std::vector<LoweredKernel> lowered;
  std::vector<ContractionMatch> matches;
  for (const NodePtr& root : roots) {
    if (root->kind == NodeKind::Code) {
      LoweredKernel code;
      code.output = root;
      code.inputs = root->inputs;
      lowered.push_back(std::move(code));
      matches.emplace_back();
      continue;
    }
    RootPlan& plan = plans.at(root.get());
    lowered.push_back(std::move(plan.result.lowered));
    matches.push_back(std::move(plan.match));
  }
  if (multiple_outputs && sibling_kernels_enabled()) join_sibling_kernels(lowered, matches, materialized, &consumers);
  std::vector<PlannedKernel> kernels;
  KernelCache& cache = KernelCache::instance();
  for (size_t index = 0; index < lowered.size(); ++index) {
    PlannedKernel planned;
    if (lowered[index].output->kind == NodeKind::Code) {
      NodePtr output = lowered[index].output;  // a copy: lowered[index] is moved below
      const CodeOp& op = *static_cast<const CodePayload&>(*output->payload).op;
      planned.code = true;
      if (render_cpu_source) {
        planned.rendered = render_code_kernel(op, output->inputs);
        planned.key = cache.key_for(planned.rendered.source);
      }
      planned.lowered = std::move(lowered[index]);
      planned.lowered.kernel.fused_ops = {op.what + "  " + shape_to_string(output->shape) + "  " +
                                          op.provenance.to_string()};
      kernels.push_back(std::move(planned));
      continue;
    }
    ContractionMatch& match = matches[index];
    std::optional<IrKernel>* epilogue = &match.epilogue;
    if (match.contraction) {
      // The most post-ops folded into the call that the backend takes; else the plain sum and the epilogue.
      for (ContractionMatch::Folded& fold : match.folds) {
        if (!(planned.library = backend(fold.contraction))) continue;
        planned.contraction = fold.contraction.describe();
        epilogue = &fold.epilogue;
        break;
      }
      if (!planned.library) {
        planned.library = backend(*match.contraction);
        planned.contraction = match.contraction->describe();
      }
    }
    planned.epilogue = planned.library && *epilogue;
    if (planned.epilogue) lowered[index].kernel = std::move(**epilogue);
    if (!planned.library || *epilogue) {
      merge_reduce_loops(lowered[index].kernel);
      if (render_cpu_source) {
        IrKernel position_independent = lowered[index].kernel;
        planned.buffer_offsets = move_constant_offsets_to_launch(position_independent);
        planned.rendered = render_cpp(position_independent);
        planned.rendered.header_comment += describe_launch_offsets(position_independent, planned.buffer_offsets);
        planned.key = cache.key_for(planned.rendered.source);
      }
    }
    planned.lowered = std::move(lowered[index]);
    kernels.push_back(std::move(planned));
  }
  return kernels;
}

void set_kernel_profiling(bool enabled) { profiling_ = enabled; }
bool kernel_profiling() { return profiling_; }
void check_kernel_output(const PlannedKernel& kernel, const Node& output, const std::vector<NodePtr>& inputs) {
  check_output(kernel, output, inputs);
}
void record_kernel_profile(const PlannedKernel& kernel, const Node& output, double seconds) {
  record_profile(kernel, output, seconds);
}
void set_check_non_finite(bool enabled) { check_non_finite_ = enabled; }
bool check_non_finite() { return check_non_finite_; }

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

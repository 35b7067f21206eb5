// Serialises syncs and frees the graph behind every computed target.
#include "core/executor.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <unordered_set>

namespace metajit {
namespace {

GraphRunner* graph_runner = nullptr;

std::mutex& sync_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::shared_mutex& edges_mutex() {
  static std::shared_mutex mutex;
  return mutex;
}

}  // namespace

void release_inputs(Node& node) {
  // A later backward may still walk these edges, unless a backward() without retain_graph already went through.
  if (node.requires_grad && node.any_input_requires_grad() && !node.backward_taken.load(std::memory_order_relaxed))
    return;
  std::unique_lock<std::shared_mutex> lock(edges_mutex());
  node.inputs.clear();
  node.payload.reset();
}

void publish_storage(Node& node, StoragePtr storage) {
  std::unique_lock<std::shared_mutex> lock(edges_mutex());
  node.storage = std::move(storage);
}

StoragePtr take_storage(Node& node) {
  std::unique_lock<std::shared_mutex> lock(edges_mutex());
  return std::move(node.storage);
}

NodePtr pending_source(const Node& node) {
  std::shared_lock<std::shared_mutex> lock(edges_mutex());
  if (node.is_computed() || node.inputs.empty()) return nullptr;
  return node.inputs[0];
}

uint32_t recount_pending_depth(const std::vector<NodePtr>& nodes) {
  // Only depths counted before the latest sync can be stale (that sync may have computed values their chains ran
  // through); the walk stops at depths counted since, and stamps those it counts again. Recounting the whole
  // pending graph each time had walked it 65 times (1.5 million nodes) in a 1000-step LSTMCell's training step.
  std::lock_guard<std::mutex> sync_lock(sync_mutex());  // the walk marks are the sync lock's scratch
  std::shared_lock<std::shared_mutex> lock(edges_mutex());
  uint32_t epoch = uint32_t(sync_epoch());
  auto counted = [epoch](const Node& node) { return node.depth_epoch.load(std::memory_order_relaxed) == epoch; };
  uint64_t mark = next_walk_mark();  // on a node once its inputs are on the stack (a DAG: they finish first)
  uint32_t deepest = 0;
  std::vector<std::pair<Node*, bool>> stack;  // (node, its inputs were pushed)
  for (const NodePtr& node : nodes)
    if (node && !node->is_computed()) stack.push_back({node.get(), false});
  while (!stack.empty()) {
    auto [node, inputs_pushed] = stack.back();
    if (!inputs_pushed) {
      if (node->walk_mark == mark || counted(*node)) {  // counted already, in this walk or since the sync
        deepest = std::max(deepest, node->pending_depth.load(std::memory_order_relaxed));
        stack.pop_back();
        continue;
      }
      node->walk_mark = mark;
      stack.back().second = true;
      for (const NodePtr& input : node->inputs)
        if (input && !input->is_computed() && input->walk_mark != mark && !counted(*input))
          stack.push_back({input.get(), false});
      continue;
    }
    stack.pop_back();
    uint32_t depth = 0;
    for (const NodePtr& input : node->inputs)
      if (input && !input->is_computed()) depth = std::max(depth, input->pending_depth.load(std::memory_order_relaxed));
    node->pending_depth.store(depth + 1, std::memory_order_relaxed);
    node->depth_epoch.store(epoch, std::memory_order_relaxed);
    deepest = std::max(deepest, depth + 1);
  }
  return deepest;
}

void set_graph_runner(GraphRunner* runner) { graph_runner = runner; }

namespace {

// A pending value a user handle holds is stored when it computes something: views, reshapes and index remaps
// are cheap to derive again from their source, and storing a broadcast would cost its full size.
bool store_for_handle(const Node& node) {
  if (node.handles.load(std::memory_order_relaxed) == 0) return false;
  switch (node.kind) {
    case NodeKind::Unary:
    case NodeKind::Binary:
    case NodeKind::Where:
    case NodeKind::Cast:
    case NodeKind::Reduce:
    case NodeKind::ReindexReduce:
    case NodeKind::Code:
    case NodeKind::Custom: return true;
    default: return false;
  }
}

// Pending nodes marked store_when_read, or held by a user handle, that the targets' graph reads become targets
// too (under the sync lock).
void add_values_to_store(std::vector<NodePtr>* targets) {
  uint64_t mark = next_walk_mark();
  std::vector<const NodePtr*> stack;
  for (const NodePtr& target : *targets) {
    target->walk_mark = mark;
    stack.push_back(&target);
  }
  std::vector<NodePtr> stored;
  while (!stack.empty()) {
    const Node& node = **stack.back();
    stack.pop_back();
    for (const NodePtr& input : node.inputs) {
      if (!input || input->is_computed() || input->walk_mark == mark) continue;
      input->walk_mark = mark;
      if (input->store_when_read || store_for_handle(*input)) stored.push_back(input);
      stack.push_back(&input);
    }
  }
  targets->insert(targets->end(), stored.begin(), stored.end());
}

}  // namespace

namespace {
std::atomic<InterruptCheck> interrupt_check{nullptr};
}  // namespace

void set_interrupt_check(InterruptCheck check) { interrupt_check = check; }

void check_interrupt() {
  if (InterruptCheck check = interrupt_check.load(std::memory_order_relaxed)) check();
}

namespace {
thread_local bool syncing = false;
thread_local const char* sync_refusal = nullptr;

// Marks the thread as inside a sync (or a run that holds the sync lock): nodes it makes then start no sync and
// recount no depth, both of which take the sync lock.
struct SyncingScope {
  bool previous = syncing;
  SyncingScope() { syncing = true; }
  ~SyncingScope() { syncing = previous; }
};
}  // namespace

const char* refuse_syncs(const char* reason) {
  const char* previous = sync_refusal;
  sync_refusal = reason;
  return previous;
}

std::vector<NodePtr> values_a_sync_stores(const std::vector<NodePtr>& targets) {
  std::vector<NodePtr> pending;
  for (const NodePtr& target : targets)
    if (target && !target->is_computed()) pending.push_back(target);
  size_t asked = pending.size();
  {
    std::lock_guard<std::mutex> lock(sync_mutex());  // the walk marks are the sync lock's scratch
    add_values_to_store(&pending);
  }
  return std::vector<NodePtr>(pending.begin() + std::ptrdiff_t(asked), pending.end());
}

bool syncs_refused() { return sync_refusal != nullptr; }

void run_exclusively(const std::function<void()>& work) {
  SyncingScope scope;
  std::lock_guard<std::mutex> lock(sync_mutex());
  work();
}

bool inside_sync() { return syncing; }

namespace {
std::atomic<uint64_t> syncs_run{0};
}  // namespace

uint64_t sync_epoch() { return syncs_run.load(std::memory_order_relaxed); }

namespace {
std::mutex ordered_mutex;
std::vector<NodePtr> ordered_nodes;  // pending, in the order added

// The ordered nodes still pending, after `targets`; those computed since are let go.
void add_ordered_targets(std::vector<NodePtr>* targets) {
  std::lock_guard<std::mutex> lock(ordered_mutex);
  std::vector<NodePtr> pending;
  for (NodePtr& node : ordered_nodes)
    if (!node->is_computed()) pending.push_back(std::move(node));
  ordered_nodes = pending;
  if (pending.empty()) return;
  std::unordered_set<const Node*> asked;
  for (const NodePtr& target : *targets) asked.insert(target.get());
  for (const NodePtr& node : pending)
    if (!asked.count(node.get())) targets->push_back(node);
}
}  // namespace

void add_ordered_node(NodePtr node) {
  std::lock_guard<std::mutex> lock(ordered_mutex);
  ordered_nodes.push_back(std::move(node));
}

void sync_ordered_nodes() {
  std::vector<NodePtr> targets;
  {
    std::lock_guard<std::mutex> lock(ordered_mutex);
    targets = ordered_nodes;
  }
  sync(targets);
}

void sync(const std::vector<NodePtr>& targets) {
  SyncingScope scope;
  std::vector<NodePtr> pending;
  for (const NodePtr& target : targets)
    if (target && !target->is_computed()) pending.push_back(target);
  if (pending.empty()) return;
  if (sync_refusal)
    throw std::runtime_error(std::string(sync_refusal) + " (the value asked for was made at " +
                             pending.front()->provenance.to_string() + ")");
  add_ordered_targets(&pending);
  syncs_run.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(sync_mutex());
  std::vector<NodePtr> still_pending;
  for (const NodePtr& target : pending)  // another thread may have computed it meanwhile
    if (!target->is_computed()) still_pending.push_back(target);
  if (still_pending.empty()) return;
  if (!graph_runner) throw std::runtime_error("metajit: no graph runner registered (the JIT is not initialised)");
  add_values_to_store(&still_pending);
  graph_runner->run(still_pending);
  for (const NodePtr& target : still_pending) {
    release_inputs(*target);
  }
}

}  // namespace metajit

// Node lifetime bookkeeping (the live-node gauge behind mj.stats()["vars_live"]).
#include "core/node.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "core/executor.h"
#include "core/stats.h"

namespace metajit {
namespace {

std::atomic<uint64_t> next_node_id{1};
ProvenanceHook provenance_hook = nullptr;
OpNamer op_namer = nullptr;

}  // namespace

const char* node_kind_name(NodeKind kind) {
  switch (kind) {
    case NodeKind::Data: return "data";
    case NodeKind::Constant: return "constant";
    case NodeKind::Arange: return "arange";
    case NodeKind::Unary: return "unary";
    case NodeKind::Binary: return "binary";
    case NodeKind::Where: return "where";
    case NodeKind::Cast: return "cast";
    case NodeKind::View: return "view";
    case NodeKind::Reshape: return "reshape";
    case NodeKind::Reindex: return "reindex";
    case NodeKind::Reduce: return "reduce";
    case NodeKind::ReindexReduce: return "reindex_reduce";
    case NodeKind::Code: return "code";
    case NodeKind::Custom: return "custom";
    case NodeKind::HostOperation: return "host_operation";
  }
  return "?";
}

std::string Provenance::to_string() const {
  if (!file) return "<unknown>";
  return std::string(file) + ":" + std::to_string(line);
}

void set_provenance_hook(ProvenanceHook hook) { provenance_hook = hook; }

Provenance current_provenance() { return provenance_hook ? provenance_hook() : Provenance{}; }

const char* intern_string(const std::string& text) {
  static std::mutex mutex;
  static auto* strings = new std::unordered_set<std::string>();  // leaked: pointers outlive static destruction
  std::lock_guard<std::mutex> lock(mutex);
  return strings->insert(text).first->c_str();
}

void set_op_namer(OpNamer namer) { op_namer = namer; }

Node::Node(NodeKind kind_, DType dtype_, Shape shape_)
    : kind(kind_), dtype(dtype_), shape(std::move(shape_)), id(next_node_id.fetch_add(1, std::memory_order_relaxed)) {
  stats().vars_live.fetch_add(1, std::memory_order_relaxed);
}

Node::~Node() {
  stats().vars_live.fetch_sub(1, std::memory_order_relaxed);
  // Long chains (x = x + 1 a million times) would recurse once per node through shared_ptr destructors;
  // unlink iteratively instead so deep graphs cannot overflow the stack.
  std::vector<NodePtr> pending = std::move(inputs);
  while (!pending.empty()) {
    NodePtr node = std::move(pending.back());
    pending.pop_back();
    if (node && node.use_count() == 1) {
      for (auto& input : node->inputs) pending.push_back(std::move(input));
      node->inputs.clear();
    }
  }
}

std::string Node::op_name() const {
  if (kind == NodeKind::HostOperation && payload) return payload->canonical();  // "all_reduce sum"
  if (op_namer) return op_namer(*this);
  return node_kind_name(kind);
}

namespace {
thread_local bool grad_mode = true;
}  // namespace

bool grad_enabled() { return grad_mode; }
void set_grad_enabled(bool enabled) { grad_mode = enabled; }

bool Node::any_input_requires_grad() const {
  if (gradient_leaf) return false;
  for (const NodePtr& input : inputs)
    if (input && input->requires_grad) return true;
  return false;
}

uint64_t next_node_id_value() { return next_node_id.load(std::memory_order_relaxed); }

uint64_t next_walk_mark() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

const char* const kAmbiguousNoGradViewMessage =
    "A view was created in no_grad mode and its base or another view of its base has been modified inplace with "
    "grad mode enabled. Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "
    "your code by moving both the view and the inplace either both inside the no_grad block (if you don't want "
    "the inplace to be tracked) or both outside (if you want the inplace to be tracked).";

NodePtr make_node(NodeKind kind, DType dtype, Shape shape, std::vector<NodePtr> inputs) {
  // A byte size beyond int64 would wrap the allocation size (and the kernel would write past the buffer).
  int64_t bytes = dtype_size(dtype);
  for (int64_t extent : shape)
    if (extent > 0 && __builtin_mul_overflow(bytes, extent, &bytes))
      throw std::invalid_argument("shape " + shape_to_string(shape) + " is too large: its size in bytes (" +
                                  dtype_name(dtype) + ") does not fit in 64 bits");
  uint32_t depth = 0, epoch = uint32_t(sync_epoch());
  bool counted_since_sync = true;  // every pending input's depth was counted in this sync epoch
  for (const NodePtr& input : inputs) {
    if (!input) continue;
    if (!input->is_computed()) {
      depth = std::max(depth, input->pending_depth.load(std::memory_order_relaxed));
      counted_since_sync = counted_since_sync && input->depth_epoch.load(std::memory_order_relaxed) == epoch;
    }
    if (input->ambiguous_no_grad_view && grad_mode && is_floating(dtype))
      throw std::runtime_error(kAmbiguousNoGradViewMessage);
  }
  // Not while syncs are refused (mj.trace records): the whole chain then goes into the trace's one plan.
  // Depths counted before a sync are counted again first: that sync may have computed values their chains ran
  // through. A backward reading forward values that a prefix sync inlined, not stored, otherwise synced again at
  // almost every step (a 1000-step LSTMCell's training step: 117 plans, most of one kernel).
  if (depth >= kMaximumPendingDepth && !inside_sync() && !syncs_refused() && !counted_since_sync) {
    depth = recount_pending_depth(inputs);
    counted_since_sync = true;
  }
  if (depth >= kMaximumPendingDepth && !inside_sync() && !syncs_refused()) {
    std::vector<NodePtr> pending;
    for (const NodePtr& input : inputs)
      if (input && !input->is_computed()) pending.push_back(input);
    sync(pending);
    depth = 0;
    epoch = uint32_t(sync_epoch());
    counted_since_sync = true;
  }
  auto node = std::make_shared<Node>(kind, dtype, std::move(shape));
  node->inputs = std::move(inputs);
  node->pending_depth.store(depth + 1, std::memory_order_relaxed);
  node->depth_epoch.store(counted_since_sync ? epoch : epoch - 1, std::memory_order_relaxed);
  node->requires_grad = grad_mode && is_floating(node->dtype) && node->any_input_requires_grad();
  node->gradient_history = node->requires_grad;
  node->provenance = current_provenance();
  return node;
}

NodePtr make_data_node(DType dtype, Shape shape) {
  auto node = make_node(NodeKind::Data, dtype, std::move(shape));
  node->storage = std::make_shared<Storage>(size_t(node->numel()) * dtype_size(dtype));
  return node;
}

}  // namespace metajit

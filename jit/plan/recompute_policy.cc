// The cost model counts memory traffic only (these kernels are bandwidth-bound). A value V of W bytes, inlined
// into U kernels and rebuilt there from buffers totalling R bytes, costs U*R to recompute; storing it costs R
// (one kernel computes it) + W (its store) + U*W (each reader loads it). Store when (U-1)*R > (U+1)*W; a small
// value's kernel must also save more than its launch costs, but it can: a recurrence's state (an LSTM's cell)
// is small, and unstored, every step's kernel rebuilt the whole chain from the first step.
// Two greedy orders are tried (see shared_values_to_store) and the one with less modelled traffic is kept.
#include "jit/plan/recompute_policy.h"

#include <algorithm>
#include <unordered_map>

#include "jit/ir/placement.h"

namespace metajit {
namespace {

// Below this many elements, storing a value must also pay for a kernel launch of its own: about 5 us on the
// thread pool, which is this many bytes of traffic at about 30 GB/s.
constexpr int64_t kMinimumElements = 4096, kLaunchBytes = 128 * 1024;

// A shared value whose rebuild runs more arithmetic ops than this is stored whatever the traffic says. Values
// too small for their traffic to count (a loop's state of a few elements, read by the step's reduction and by
// the next step) were otherwise rebuilt from the loop's start in every step's kernel: work growing as the
// square of the loop, and a different kernel to compile at every step (`x = x * 0.5 - x.amax(0, keepdim=True)
// * 0.25` in a loop). Stored at this length, a loop's kernels repeat.
constexpr int64_t kMaximumRecomputedOperations = 32;

bool is_arithmetic(NodeKind kind) {
  return kind == NodeKind::Unary || kind == NodeKind::Binary || kind == NodeKind::Where || kind == NodeKind::Cast;
}

bool is_buffer(Node* node, const std::unordered_set<Node*>& stored) {
  return node->is_computed() || stored.count(node) > 0;
}

int64_t bytes_of(const Node& node) { return node.numel() * dtype_size(node.dtype); }

// Whether every input of `node` (a reindex's source and index buffers) is a buffer.
bool reads_buffers_only(const Node& node, const std::unordered_set<Node*>& stored) {
  for (const NodePtr& input : node.inputs)
    if (!is_buffer(input.get(), stored)) return false;
  return true;
}

// A view (slice, permute, broadcast) reading a buffer reads its own elements, never more than the buffer holds:
// counting the whole buffer made x[t] of a 64-step sequence cost the sequence's 8 MB, so an LSTM step's gate
// pre-activations were stored in a kernel of their own (19 us a step) instead of fused into the gate kernel.
// A placement (jit/ir/placement.h: a piece of cat's gradient) reads its source the same way.
bool is_view_of_a_buffer(const Node& node, const std::unordered_set<Node*>& stored) {
  bool passes_elements =
      node.kind == NodeKind::View || (node.kind == NodeKind::ReindexReduce && injective_placement(node));
  return passes_elements && is_buffer(node.inputs[0].get(), stored);
}

int64_t view_bytes(const Node& view) { return std::min(bytes_of(view), bytes_of(*view.inputs[0])); }

// What a recomputation of a value costs: the bytes of the distinct buffers it reads, and its arithmetic ops.
struct Rebuild {
  int64_t bytes = 0;  // -1: the model does not hold (see recompute_cost)
  int64_t operations = 0;
};

// Bytes of the distinct buffers a recomputation of `value` reads; -1 when it reduces or gathers from a computed
// value on the way, where the kernel's index arithmetic, not its traffic, may set its speed and the model does
// not hold. A gather straight from buffers (an embedding lookup) counts the elements it reads and its index
// buffers: a transformer's residual stream starts with one, and was rebuilt from every earlier block's output
// (21 buffers after 10 blocks) in each kernel that read it.
Rebuild recompute_cost(Node* value, const std::unordered_set<Node*>& stored) {
  Rebuild cost;
  int64_t& total = cost.bytes;
  std::vector<Node*> stack{value};
  std::unordered_set<Node*> seen;
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    if (node != value && is_buffer(node, stored)) {
      total += bytes_of(*node);
      continue;
    }
    if (node != value && is_view_of_a_buffer(*node, stored)) {
      total += view_bytes(*node);
      continue;
    }
    if (node->kind == NodeKind::Reindex && node != value && reads_buffers_only(*node, stored)) {
      total += bytes_of(*node);
      for (size_t extra = 1; extra < node->inputs.size(); ++extra) total += bytes_of(*node->inputs[extra]);
      continue;
    }
    if (node->kind == NodeKind::Reindex || node->kind == NodeKind::Reduce) return {-1, 0};
    if (is_arithmetic(node->kind)) ++cost.operations;
    for (const NodePtr& input : node->inputs) stack.push_back(input.get());
  }
  return cost;
}

}  // namespace

namespace {

// Which groups inline which pending nodes, kept up to date as values are stored: storing a value changes
// only the groups that inlined it (they now read its buffer, and stop inlining what only it needed) and adds its
// own group. Each group counts, per inlined node, the edges that reach it from the root or from other inlined
// nodes, so storing a value removes exactly the nodes whose count drops to zero. Walking every affected group
// again from its root instead made the policy quadratic in a recurrence's length: an LSTM of 64 steps, where each
// step's state is inlined by every later step's kernel, spent 640 ms here.
class ReaderIndex {
 public:
  ReaderIndex(const std::vector<Node*>& groups, const std::unordered_set<Node*>& stored) {
    for (Node* root : groups) add_group(root, stored);
  }

  int64_t readers(Node* node) const {
    auto found = groups_inlining_.find(node);
    return found == groups_inlining_.end() ? 0 : int64_t(found->second.size());
  }

  // `value` was just added to `stored`.
  void store(Node* value, const std::unordered_set<Node*>& stored) {
    auto found = groups_inlining_.find(value);
    std::vector<Node*> affected;
    if (found != groups_inlining_.end()) affected.assign(found->second.begin(), found->second.end());
    for (Node* root : affected) {
      std::unordered_map<Node*, int64_t>& edges = edges_[root];
      // `value` is now a buffer to this group: it and what only it reached leave the group.
      std::vector<Node*> leaving{value};
      edges.erase(value);
      groups_inlining_[value].erase(root);
      while (!leaving.empty()) {
        Node* node = leaving.back();
        leaving.pop_back();
        for (const NodePtr& input : node->inputs) {
          auto edge = edges.find(input.get());
          if (edge == edges.end() || --edge->second > 0) continue;
          edges.erase(edge);
          groups_inlining_[input.get()].erase(root);
          leaving.push_back(input.get());
        }
      }
    }
    add_group(value, stored);
  }

  // Whether the earliest group reading `value` (its root has the lowest id: roots launch in id order) is
  // elementwise over the same shape and reaches `value` through elementwise ops only, reading it at its own
  // index. Stored, `value` then joins that group's kernel as one more output (jit/plan/sibling_kernels.h) and
  // pays no launch of its own.
  bool earliest_reader_takes_it_as_sibling(Node* value) const {
    auto found = groups_inlining_.find(value);
    if (found == groups_inlining_.end() || found->second.empty()) return false;
    Node* earliest =
        *std::min_element(found->second.begin(), found->second.end(), [](Node* a, Node* b) { return a->id < b->id; });
    if (!is_arithmetic(earliest->kind) || earliest->shape != value->shape) return false;
    const std::unordered_map<Node*, int64_t>& inlined = edges_.at(earliest);
    std::vector<Node*> stack{earliest};
    std::unordered_set<Node*> seen;
    while (!stack.empty()) {
      Node* node = stack.back();
      stack.pop_back();
      if (!seen.insert(node).second) continue;
      for (const NodePtr& input : node->inputs) {
        Node* reached = input.get();
        if (reached == value) return true;
        if (inlined.count(reached) && is_arithmetic(reached->kind) && reached->shape == value->shape)
          stack.push_back(reached);
      }
    }
    return false;
  }

  // Whether a group inlining `inner` does not inline `outer` (`inner` is also read on a path that avoids `outer`).
  bool read_elsewhere(Node* inner, Node* outer) const {
    auto inner_groups = groups_inlining_.find(inner), outer_groups = groups_inlining_.find(outer);
    if (inner_groups == groups_inlining_.end()) return false;
    if (outer_groups == groups_inlining_.end()) return !inner_groups->second.empty();
    for (Node* group : inner_groups->second)
      if (!outer_groups->second.count(group)) return true;
    return false;
  }

  std::vector<Node*> shared_nodes() const {
    std::vector<Node*> nodes;
    for (const auto& [node, groups] : groups_inlining_)
      if (groups.size() >= 2) nodes.push_back(node);
    return nodes;
  }

 private:
  // The pending nodes fused into the group of `root` (the root excluded): everything reachable before a buffer,
  // with the number of edges into each from the root and the other inlined nodes.
  void add_group(Node* root, const std::unordered_set<Node*>& stored) {
    std::unordered_map<Node*, int64_t>& edges = edges_[root];
    std::vector<Node*> stack{root};
    while (!stack.empty()) {
      Node* node = stack.back();
      stack.pop_back();
      for (const NodePtr& input : node->inputs) {
        Node* reached = input.get();
        if (reached == root || is_buffer(reached, stored)) continue;
        if (edges[reached]++ > 0) continue;  // already inlined: one more edge into it
        groups_inlining_[reached].insert(root);
        stack.push_back(reached);
      }
    }
  }

  std::unordered_map<Node*, std::unordered_map<Node*, int64_t>> edges_;  // group root -> inlined node -> edges
  std::unordered_map<Node*, std::unordered_set<Node*>> groups_inlining_;  // node -> group roots inlining it
};

// The model's traffic of a whole plan: every group reads its distinct buffers once and writes its output.
int64_t plan_traffic(const std::vector<Node*>& groups, const std::unordered_set<Node*>& stored) {
  int64_t total = 0;
  for (Node* root : groups) {
    total += bytes_of(*root);
    std::unordered_set<Node*> seen{root};
    std::vector<Node*> stack;
    for (const NodePtr& input : root->inputs) stack.push_back(input.get());
    while (!stack.empty()) {
      Node* node = stack.back();
      stack.pop_back();
      if (!seen.insert(node).second) continue;
      if (is_buffer(node, stored)) {
        total += bytes_of(*node);
        continue;
      }
      if (is_view_of_a_buffer(*node, stored)) {
        total += view_bytes(*node);
        continue;
      }
      for (const NodePtr& input : node->inputs) stack.push_back(input.get());
    }
  }
  return total;
}

// Whether rebuilding `value` would also rebuild another value of its shape that a kernel not reading `value`
// reads too: a link of a recurrence (an LSTM's cell state, the gradient flowing back along it). Left to the rebuild,
// each step's kernel carries the chain back to the last stored link, so the steps' kernels differ from one another
// (each one compiled) and grow until kMaximumRecomputedOperations cuts them.
bool rebuilds_a_shared_link(Node* value, const std::unordered_set<Node*>& stored, const ReaderIndex& index) {
  std::vector<Node*> stack;
  for (const NodePtr& input : value->inputs) stack.push_back(input.get());
  std::unordered_set<Node*> seen;
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second || is_buffer(node, stored) || !is_arithmetic(node->kind)) continue;
    if (node->shape == value->shape && index.read_elsewhere(node, value)) return true;
    for (const NodePtr& input : node->inputs) stack.push_back(input.get());
  }
  return false;
}

// Greedy choice in one visiting order: a candidate is stored when the rule holds with the choices so far.
struct Choice {
  std::vector<Node*> stored_values;  // producers first
  int64_t traffic = 0;
};

// `index`: the groups' readers with only `stored` stored (built once, copied for each order).
Choice choose(std::vector<Node*> groups, std::unordered_set<Node*> stored, ReaderIndex index,
              const std::vector<Node*>& order) {
  Choice choice;
  for (Node* node : order) {
    int64_t reading = index.readers(node);
    if (reading < 2) continue;
    Rebuild rebuild = recompute_cost(node, stored);
    int64_t own = bytes_of(*node);
    bool long_chain = rebuild.operations > kMaximumRecomputedOperations;
    int64_t recomputed = (reading - 1) * rebuild.bytes, kept = (reading + 1) * own;
    bool store = rebuild.bytes > 0 && (long_chain || recomputed > kept);
    // A small value's launch is counted only where it decides, since asking whether it is free walks the graph.
    if (store && !long_chain && node->numel() < kMinimumElements && recomputed <= kept + kLaunchBytes)
      store = index.earliest_reader_takes_it_as_sibling(node) || rebuilds_a_shared_link(node, stored, index);
    if (store) {
      stored.insert(node);
      groups.push_back(node);
      choice.stored_values.push_back(node);
      index.store(node, stored);
    }
  }
  std::sort(choice.stored_values.begin(), choice.stored_values.end(), [](Node* a, Node* b) { return a->id < b->id; });
  choice.traffic = plan_traffic(groups, stored);
  return choice;
}

}  // namespace

std::vector<Node*> shared_values_to_store(const std::vector<NodePtr>& roots,
                                          const std::unordered_set<Node*>& materialized) {
  std::vector<Node*> groups;
  for (const NodePtr& root : roots)
    // A user's kernel and host work read buffers only.
    if (root->kind != NodeKind::Code && root->kind != NodeKind::HostOperation) groups.push_back(root.get());
  ReaderIndex index(groups, materialized);
  std::vector<Node*> candidates;
  for (Node* node : index.shared_nodes())
    if (is_arithmetic(node->kind)) candidates.push_back(node);
  if (candidates.empty()) return {};
  // Producers first: storing a link makes the next one cheaper to rebuild. Consumers first: storing the end
  // of a chain leaves its links to one reader. Neither wins everywhere, so the model's traffic decides.
  std::sort(candidates.begin(), candidates.end(), [](Node* a, Node* b) { return a->id < b->id; });
  Choice forward = choose(groups, materialized, index, candidates);
  std::reverse(candidates.begin(), candidates.end());
  Choice backward = choose(groups, materialized, std::move(index), candidates);
  Choice none{{}, plan_traffic(groups, materialized)};
  const Choice* best = &none;
  for (const Choice* option : {&forward, &backward})
    if (option->traffic < best->traffic) best = option;
  return best->stored_values;
}

}  // namespace metajit

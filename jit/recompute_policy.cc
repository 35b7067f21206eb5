// The cost model counts memory traffic only (these kernels are bandwidth-bound). A value V of W bytes, inlined
// into U kernels and rebuilt there from buffers totalling R bytes, costs U*R to recompute; storing it costs R
// (one kernel computes it) + W (its store) + U*W (each reader loads it). Store when (U-1)*R > (U+1)*W.
// Two greedy orders are tried (see shared_values_to_store) and the one with less modelled traffic is kept.
#include "jit/recompute_policy.h"

#include <algorithm>
#include <unordered_map>

namespace metajit {
namespace {

// Below this a value is cheap to recompute and not worth a kernel launch of its own.
constexpr int64_t kMinimumElements = 4096;

bool is_arithmetic(NodeKind kind) {
  return kind == NodeKind::Unary || kind == NodeKind::Binary || kind == NodeKind::Where || kind == NodeKind::Cast;
}

bool is_buffer(Node* node, const std::unordered_set<Node*>& stored) {
  return node->is_computed() || stored.count(node) > 0;
}

int64_t bytes_of(const Node& node) { return node.numel() * dtype_size(node.dtype); }

// The pending nodes fused into the group of `root` (the root excluded): everything reachable before a buffer.
std::vector<Node*> inlined_nodes(Node* root, const std::unordered_set<Node*>& stored) {
  std::vector<Node*> found, stack;
  std::unordered_set<Node*> seen{root};
  for (const NodePtr& input : root->inputs) stack.push_back(input.get());
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second || is_buffer(node, stored)) continue;
    found.push_back(node);
    for (const NodePtr& input : node->inputs) stack.push_back(input.get());
  }
  return found;
}

// Bytes of the distinct buffers a recomputation of `value` reads; -1 when it gathers (a reindex) or reduces on
// the way, where the kernel's index arithmetic, not its traffic, may set its speed and the model does not hold.
int64_t recompute_bytes(Node* value, const std::unordered_set<Node*>& stored) {
  int64_t total = 0;
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
    if (node->kind == NodeKind::Reindex || node->kind == NodeKind::Reduce) return -1;
    for (const NodePtr& input : node->inputs) stack.push_back(input.get());
  }
  return total;
}

}  // namespace

namespace {

// Which groups inline which pending nodes, kept up to date as values are stored: storing a value changes
// only the groups that inlined it (they now read its buffer) and adds its own group.
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
      for (Node* node : inlined_[root]) groups_inlining_[node].erase(root);
      add_group(root, stored);
    }
    add_group(value, stored);
  }

  std::vector<Node*> shared_nodes() const {
    std::vector<Node*> nodes;
    for (const auto& [node, groups] : groups_inlining_)
      if (groups.size() >= 2) nodes.push_back(node);
    return nodes;
  }

 private:
  void add_group(Node* root, const std::unordered_set<Node*>& stored) {
    inlined_[root] = inlined_nodes(root, stored);
    for (Node* node : inlined_[root]) groups_inlining_[node].insert(root);
  }

  std::unordered_map<Node*, std::vector<Node*>> inlined_;             // group root -> nodes it inlines
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
      for (const NodePtr& input : node->inputs) stack.push_back(input.get());
    }
  }
  return total;
}

// Greedy choice in one visiting order: a candidate is stored when the rule holds with the choices so far.
struct Choice {
  std::vector<Node*> stored_values;  // producers first
  int64_t traffic = 0;
};

Choice choose(std::vector<Node*> groups, std::unordered_set<Node*> stored, const std::vector<Node*>& order) {
  Choice choice;
  ReaderIndex index(groups, stored);
  for (Node* node : order) {
    int64_t reading = index.readers(node);
    if (reading < 2) continue;
    int64_t recompute = recompute_bytes(node, stored), own = bytes_of(*node);
    if (recompute > 0 && (reading - 1) * recompute > (reading + 1) * own) {
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
    if (root->kind != NodeKind::Code) groups.push_back(root.get());  // a user's kernel reads buffers only
  std::vector<Node*> candidates;
  for (Node* node : ReaderIndex(groups, materialized).shared_nodes())
    if (is_arithmetic(node->kind) && node->numel() >= kMinimumElements) candidates.push_back(node);
  if (candidates.empty()) return {};
  // Producers first: storing a link makes the next one cheaper to rebuild. Consumers first: storing the end
  // of a chain leaves its links to one reader. Neither wins everywhere, so the model's traffic decides.
  std::sort(candidates.begin(), candidates.end(), [](Node* a, Node* b) { return a->id < b->id; });
  Choice forward = choose(groups, materialized, candidates);
  std::reverse(candidates.begin(), candidates.end());
  Choice backward = choose(groups, materialized, candidates);
  Choice none{{}, plan_traffic(groups, materialized)};
  const Choice* best = &none;
  for (const Choice* option : {&forward, &backward})
    if (option->traffic < best->traffic) best = option;
  return best->stored_values;
}

}  // namespace metajit

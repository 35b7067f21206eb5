// The policy behind mj.flags.memory_budget and the clones it makes. The model is deliberately coarse: a step's peak
// is taken as what is allocated when backward is recorded (parameters, inputs, optimizer state), plus every
// parameter gradient (they wait for the update, which runs last), plus two of the largest forward values (values
// in flight), plus the forward values backward reads. Library scratchpads (oneDNN's Winograd calls take up to
// 44 MB in ResNet-18) are not in it: meta_ops cannot see them. Recomputation shrinks only
// the last term, in two stages (docs/memory.md): first elementwise values are recomputed from the reductions and
// contractions they were computed from (nearly free: the clones fuse into the gradient kernels that read them);
// if that is not enough, Chen et al.'s segments: only some of those reductions are kept, the others recomputed
// from the nearest kept one when backward reaches their segment.
#include "meta_ops/recomputation.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <stdexcept>

#include "core/flags.h"
#include "core/stats.h"
#include "core/storage.h"
#include "meta_ops/autodiff.h"
#include "meta_ops/elementwise.h"

namespace metajit {
namespace {

std::atomic<double> budget_value{-1.0};  // -1: not read from the environment yet
std::mutex report_mutex;
RecomputationReport last_report;

double budget_from_environment() {
  std::optional<std::string> text = flag_text(Flag::MemoryBudget);
  if (!text || text->empty()) return 0;
  std::optional<double> bytes = parse_size_text(*text);
  if (!bytes) {
    std::fprintf(stderr,
                 "metajit: warning: METAJIT_MEMORY_BUDGET='%s' is not a budget (use bytes, a number with K, M, G "
                 "or T, or a fraction between 0 and 1); no budget is used\n",
                 text->c_str());
    return 0;
  }
  return *bytes;
}

// Kinds whose value a clone can recompute from its inputs alone. Data, Code, Custom and host operations are kept:
// they are computed leaves, opaque kernels, or work with effects; random numbers are Data (drawn when recorded),
// so a recomputed dropout mask compares the same draws.
bool recomputable_kind(NodeKind kind) {
  switch (kind) {
    case NodeKind::Constant:
    case NodeKind::Arange:
    case NodeKind::Unary:
    case NodeKind::Binary:
    case NodeKind::Where:
    case NodeKind::Cast:
    case NodeKind::View:
    case NodeKind::Reshape:
    case NodeKind::Reindex:
    case NodeKind::Reduce:
    case NodeKind::ReindexReduce: return true;
    default: return false;
  }
}

// A pending node that a clone may recompute. Not one a user's Var holds (the executor stores it for the user
// anyway, so recomputing it would only cost time), a value stored whenever read, or a gradient stop (detach).
bool recomputable(const Node& node) {
  return !node.is_computed() && recomputable_kind(node.kind) && node.handles.load(std::memory_order_relaxed) == 0 &&
         !node.store_when_read && !node.gradient_leaf && !dynamic_cast<const MultiOutputPayload*>(node.payload.get());
}

// Reductions and contractions (matrix products, convolutions, sums): worth keeping, since recomputing one costs
// a pass over its whole input (or a library call), and each is a buffer in the plan anyway.
bool is_reduction(const Node& node) { return node.kind == NodeKind::Reduce || node.kind == NodeKind::ReindexReduce; }

int64_t bytes_of(const Node& node) { return node.numel() * int64_t(dtype_size(node.dtype)); }

// The node whose buffer a saved value reads. Views and reshapes cost nothing of their own, nor does an index map
// larger than its source (a matrix product's or a convolution's operands are broadcast or windowed copies of
// their source, far larger than it, that the contraction reads in place and nothing stores).
Node* underlying(Node* node) {
  while (!node->inputs.empty() && node->inputs[0] &&
         (node->kind == NodeKind::View || node->kind == NodeKind::Reshape ||
          (node->kind == NodeKind::Reindex && node->numel() > node->inputs[0]->numel())))
    node = node->inputs[0].get();
  return node;
}

void publish(const RecomputationReport& report) {
  std::lock_guard<std::mutex> lock(report_mutex);
  last_report = report;
}

}  // namespace

double memory_budget() {
  double value = budget_value.load(std::memory_order_relaxed);
  if (value < 0) {
    value = budget_from_environment();
    budget_value.store(value, std::memory_order_relaxed);
    set_saving_memory(value > 0);
  }
  return value;
}

void set_memory_budget(double budget) {
  if (!(budget >= 0) || !std::isfinite(budget))
    throw std::invalid_argument(
        "memory_budget must be 0 (off), a fraction between 0 and 1, or a number of bytes, got " +
        std::to_string(budget));
  budget_value.store(budget, std::memory_order_relaxed);
  set_saving_memory(budget > 0);
}

RecomputationReport last_recomputation_report() {
  std::lock_guard<std::mutex> lock(report_mutex);
  return last_report;
}

Recomputation::Recomputation(const NodePtr& output, const std::vector<Node*>& order,
                             const std::vector<NodePtr>& inputs) {
  double budget = memory_budget();
  // A gradient that will be differentiated again (grad mode on) is itself a forward graph for the next walk; its
  // values are kept as they are. Recomputation serves backward(), which records its gradients with grad mode off.
  if (budget <= 0) return;
  RecomputationReport report;
  if (grad_enabled()) {
    publish(report);
    return;
  }

  // The forward nodes a clone could recompute: pending nodes reachable from the output, up to kept values.
  std::vector<Node*> stack{output.get()};
  std::unordered_set<Node*> seen{output.get()};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    // The output is held by the caller's Var; its graph is still the walk's.
    if (node != output.get()) {
      if (!recomputable(*node)) continue;
      recomputable_.insert(node);
    }
    for (const NodePtr& input : node->inputs)
      if (input && seen.insert(input.get()).second) stack.push_back(input.get());
  }
  if (recomputable_.empty()) {
    publish(report);
    return;
  }

  // What backward reads without recomputation: the saved values of each node the walk applies a rule to. An input
  // of a node whose gradient is given from outside (an mj.Function, a Code op) is read by that rule as it is.
  std::unordered_set<Node*> saved;
  for (Node* node : order) {
    if (!node->any_input_requires_grad()) continue;
    if (dynamic_cast<const MultiOutputPayload*>(node->payload.get()) || !recomputable_kind(node->kind)) {
      for (const NodePtr& input : node->inputs)  // read by a rule given from outside: kept
        if (input) recomputable_.erase(input.get());
      continue;
    }
    for (int index : saved_values(*node)) {
      Node* value = index < 0 ? node : node->inputs[size_t(index)].get();
      if (value) value = underlying(value);
      if (value && recomputable_.count(value)) saved.insert(value);
    }
  }
  // Only stored values cost memory. The planner stores reductions and the operands of contractions (a library
  // call reads buffers); any other elementwise value backward reads it mostly rebuilds inside the gradient kernel
  // from those (jit/plan/recompute_policy.cc), so counting it overstated a residual block's saved bytes twofold.
  std::unordered_set<Node*> operands;
  for (Node* node : recomputable_) {
    if (!is_reduction(*node)) continue;
    for (const NodePtr& input : node->inputs) {
      if (!input) continue;
      if (input->kind == NodeKind::Binary && BinaryOp(input->op_code) == BinaryOp::Multiply) {
        for (const NodePtr& factor : input->inputs)
          if (factor) operands.insert(underlying(factor.get()));
      } else if (underlying(input.get()) != input.get()) {
        operands.insert(underlying(input.get()));
      }
    }
  }
  for (auto value = saved.begin(); value != saved.end();)
    value = recomputable_.count(*value) && (is_reduction(**value) || operands.count(*value)) ? std::next(value)
                                                                                             : saved.erase(value);

  // Each elementwise value backward reads hangs off the newest reduction it was computed from (its anchor), from
  // which stage 1 recomputes it. An anchor costs memory without recomputation only when backward reads it too (a
  // convolution's output that BatchNorm's gradient reads; not a matrix product's output that only a ReLU read,
  // whose gradient reads the ReLU's output). A value computed from kept values only (a dropout mask from its
  // random draws) has no anchor and costs nothing to recompute.
  std::unordered_map<Node*, int64_t> hanging_bytes;  // per anchor: the bytes of its elementwise values
  int64_t anchorless_bytes = 0;
  for (Node* value : saved) {
    if (is_reduction(*value)) {
      hanging_bytes.emplace(value, 0);
      continue;
    }
    Node* anchor = nullptr;
    std::vector<Node*> walk{value};
    std::unordered_set<Node*> visited{value};
    while (!walk.empty()) {
      Node* node = walk.back();
      walk.pop_back();
      for (const NodePtr& input : node->inputs) {
        if (!input || !recomputable_.count(input.get()) || !visited.insert(input.get()).second) continue;
        if (!is_reduction(*input)) {
          walk.push_back(input.get());
        } else {
          hanging_bytes.emplace(input.get(), 0);
          if (!anchor || input->id > anchor->id) anchor = input.get();
        }
      }
    }
    if (anchor)
      hanging_bytes[anchor] += bytes_of(*value);
    else
      anchorless_bytes += bytes_of(*value);
  }
  // The largest value a kernel writes (a product inside a contraction is never stored, so only reductions and
  // the values backward reads count).
  int64_t largest = 0;
  for (Node* node : recomputable_)
    if (is_reduction(*node) || saved.count(node)) largest = std::max(largest, bytes_of(*node));
  int64_t gradients_bytes = 0;
  for (const NodePtr& input : inputs) gradients_bytes += bytes_of(*input);
  report.held_bytes = stats().bytes_allocated.load(std::memory_order_relaxed);
  // In flight besides: gradients, the gradients they produce, recomputed values and library calls' reordered copies
  // of them. Two of the largest values (with the recomputed segment counted on its own): under budgets the model
  // planned 48, 37 and 72 MiB where a 16-layer MLP, an 8-block residual MLP and the transformer LM peaked at 42, 33
  // and 60; unconstrained, 84, 65 and 102 where they peaked at 85, 77 and 118. (Four had fitted them within 5%
  // while ReLU's gradient read its input, which kept each ReLU's input too.)
  int64_t base = report.held_bytes + gradients_bytes + 2 * largest;
  std::vector<Node*> sequence;  // the anchors in forward order
  for (const auto& [anchor, bytes] : hanging_bytes) {
    sequence.push_back(anchor);
    report.saved_bytes += bytes + (saved.count(anchor) ? bytes_of(*anchor) : 0);
  }
  std::sort(sequence.begin(), sequence.end(), [](Node* a, Node* b) { return a->id < b->id; });
  report.saved_bytes += anchorless_bytes;
  report.unconstrained_peak_bytes = base + report.saved_bytes;
  report.budget_bytes = budget < 1 ? int64_t(budget * double(report.unconstrained_peak_bytes)) : int64_t(budget);
  report.planned_peak_bytes = report.unconstrained_peak_bytes;
  report.kept_bytes = report.saved_bytes;
  report.stage = "none";
  if (report.unconstrained_peak_bytes <= report.budget_bytes) {
    publish(report);
    return;
  }

  // Stage 1: elementwise values are recomputed from their anchors, which are kept. Backward holds the anchors and,
  // while it differentiates one anchor's ops, that anchor's elementwise values again.
  int64_t anchor_bytes = 0, largest_extra = 0;
  for (Node* anchor : sequence) {
    anchor_bytes += bytes_of(*anchor);
    largest_extra = std::max(largest_extra, hanging_bytes[anchor]);
  }
  kept_.insert(sequence.begin(), sequence.end());
  report.kept_bytes = anchor_bytes;
  report.planned_peak_bytes = base + anchor_bytes + largest_extra;
  report.stage = "elementwise";

  // Stage 2: Chen's greedy segments. A checkpoint must cut the forward graph, or recomputing the next segment
  // would reach back past it: in a residual network the shortcut's sums chain every block to the first, and
  // keeping a convolution's output cuts nothing, while a block's output does. A node cuts the graph when no edge
  // between two forward nodes passes over it (in creation order, which is a topological order). Reductions
  // smaller than 1/64 of the largest value (a BatchNorm's batch statistics) are always kept: they cost little to
  // hold and a pass over a whole activation to recompute.
  if (report.planned_peak_bytes > report.budget_bytes) {
    std::vector<Node*> forward(recomputable_.begin(), recomputable_.end());
    forward.push_back(output.get());
    std::sort(forward.begin(), forward.end(), [](Node* a, Node* b) { return a->id < b->id; });
    std::unordered_map<Node*, uint64_t> reach;  // per node: the newest forward node reading it
    std::unordered_map<Node*, int> readers;
    for (Node* node : forward)
      for (const NodePtr& input : node->inputs)
        if (input && recomputable_.count(input.get())) {
          uint64_t& newest = reach[input.get()];
          newest = std::max(newest, node->id);
          readers[input.get()]++;
        }
    // Of the cuts, reductions, and elementwise values read twice (a residual block's output, read by the next
    // block and by its shortcut): an elementwise checkpoint read once measured worse than the reduction it came
    // from (an MLP's ReLU outputs: 81 MiB against 61 at the same budget).
    std::unordered_set<Node*> cuts;
    uint64_t spanned_to = 0;  // the newest reader of any node before this one
    for (Node* node : forward) {
      if (spanned_to <= node->id && (is_reduction(*node) || readers[node] >= 2)) cuts.insert(node);
      auto found = reach.find(node);
      if (found != reach.end()) spanned_to = std::max(spanned_to, found->second);
    }
    std::unordered_set<Node*> small;
    for (Node* anchor : sequence)
      if (bytes_of(*anchor) * 64 < largest) small.insert(anchor);
    int64_t small_bytes = 0;
    for (Node* anchor : small) small_bytes += bytes_of(*anchor);
    // The values backward would hold without recomputation.
    std::unordered_set<Node*> held;
    for (Node* value : saved)
      if (!small.count(value)) held.insert(value);
    struct Choice {
      int64_t kept = 0, segment = 0;
      std::unordered_set<Node*> checkpoints;
    };
    // Any cut may be a checkpoint, held or not: a transformer's residual stream is read by no gradient rule (its
    // sums and normalisations save other values) yet is the only place its graph can be cut.
    auto segments = [&](int64_t limit) {
      Choice choice;
      int64_t running = 0;
      for (Node* node : forward) {
        int64_t bytes = held.count(node) ? bytes_of(*node) : 0;
        running += bytes;
        if (running > limit && cuts.count(node) && node != output.get()) {
          choice.checkpoints.insert(node);
          choice.kept += bytes_of(*node);
          choice.segment = std::max(choice.segment, running - bytes);
          running = 0;
        }
      }
      choice.segment = std::max(choice.segment, running);
      choice.checkpoints.insert(small.begin(), small.end());
      choice.kept += small_bytes;
      return choice;
    };
    // Of the limits whose model fits, the one keeping the most bytes (the least recomputation) wins; when none
    // fits, the one with the smallest modelled peak.
    bool found = false, any = false;
    Choice best;
    int64_t best_peak = 0;
    for (double limit = double(std::max<int64_t>(largest, 1)); limit <= 2.0 * double(report.saved_bytes);
         limit *= 1.1) {
      Choice choice = segments(int64_t(limit));
      int64_t peak = base + choice.kept + choice.segment;
      if (peak <= report.budget_bytes) {
        if (!found || choice.kept > best.kept) best = std::move(choice), best_peak = peak, found = true;
      } else if (!found && (!any || peak < best_peak)) {
        best = std::move(choice), best_peak = peak;
      }
      any = true;
    }
    kept_ = std::move(best.checkpoints);
    report.kept_bytes = best.kept;
    report.planned_peak_bytes = best_peak;
    report.stage = "segments";
  }
  report.fits = report.planned_peak_bytes <= report.budget_bytes;
  active_ = true;
  report.active = true;
  report_ = report;
  publish(report);
}

Recomputation::~Recomputation() {
  if (active_) publish(report_);  // with the clones counted
}

bool Recomputation::is_kept(Node* node) const { return !recomputable_.count(node) || kept_.count(node); }

NodePtr Recomputation::value_for(const NodePtr& node) {
  if (!active_ || !node || is_kept(node.get())) return node;
  auto found = clones_.find(node.get());
  if (found != clones_.end()) return found->second;
  // Post-order over the inputs still to clone, with a work list: forward chains can be thousands of ops deep.
  std::vector<std::pair<Node*, bool>> stack{{node.get(), false}};
  while (!stack.empty()) {
    auto [current, expanded] = stack.back();
    stack.pop_back();
    if (clones_.count(current)) continue;
    if (!expanded) {
      stack.push_back({current, true});
      for (const NodePtr& input : current->inputs)
        if (input && !is_kept(input.get()) && !clones_.count(input.get())) stack.push_back({input.get(), false});
      continue;
    }
    std::vector<NodePtr> inputs;
    inputs.reserve(current->inputs.size());
    for (const NodePtr& input : current->inputs)
      inputs.push_back(!input || is_kept(input.get()) ? input : clones_.at(input.get()));
    NodePtr clone = make_node(current->kind, current->dtype, current->shape, std::move(inputs));
    clone->op_code = current->op_code;
    clone->keepdim = current->keepdim;
    clone->reduce_mask = current->reduce_mask;
    clone->scalar = current->scalar;
    clone->integer_scalar = current->integer_scalar;
    clone->scalar_step = current->scalar_step;
    clone->view = current->view;
    clone->payload = current->payload;
    clone->provenance = current->provenance;  // kernel comments name the user's forward line
    // Rules skip the gradients of inputs that do not require grad, so a clone says what its original says. No
    // walk goes through a clone, so once computed it may drop its inputs like any value backward() went through.
    clone->requires_grad = current->requires_grad;
    clone->gradient_history = current->gradient_history;
    if (clone->requires_grad) clone->backward_taken.store(true, std::memory_order_relaxed);
    report_.recomputed_nodes++;
    if (is_reduction(*clone)) report_.recomputed_contractions++;
    clones_.emplace(current, std::move(clone));
  }
  NodePtr result = clones_.at(node.get());
  return result;
}

}  // namespace metajit

// Builds the IR of one kernel by walking the graph from its root. Values are memoised per (node, indices) so
// diamonds in the graph are computed once per kernel; reductions found at the output index are hoisted into
// loops at the top level of the kernel body, and reductions the kernel reads once per row (one result per row,
// like softmax's max and sum) into loops run once per row, before the row's elements.
#include "jit/ir/lowering.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "jit/ir/placement.h"

namespace metajit {
namespace {

constexpr int kMaxInstancesPerNode = 16;  // more distinct index patterns than this: materialise instead
// Past this many values (a node at one index pattern) built by inlining, a kernel is cut at the next state
// (see cuttable). Lowering costs a few microseconds a value, and before the recompute policy cuts them, a
// recurrence's kernels inline its whole chain: planning a 2-layer bidirectional LSTM's gradients took 65 s,
// now 2.5 s. The kernels left after the recompute policy are far smaller, so final plans hardly change
// (ResNet-18's training step: 430 stored values instead of 416, at the same step time).
constexpr int64_t kMaxInlinedValues = 256;
// Per-row reductions (see is_row_index): a row of at most 16K elements (64 KB of float32) stays in L2 between the
// passes over it; at least 16 rows, unless the whole kernel is too small to be worth splitting.
constexpr int64_t kMaxRowElements = 16384, kMinRows = 16, kSmallKernelElements = 32768;

// Broadcast values (see broadcast_recomputes): a value of at least this many operations (libm functions count
// 8, division and square roots 4) that a kernel of at least 2^18 elements rebuilds for at least 16 iterations of
// the outer loops it does not depend on gets a small kernel of its own.
constexpr int64_t kBroadcastMinimumCost = 8, kBroadcastMinimumWork = int64_t(1) << 18, kBroadcastMinimumRepeats = 16;

// Values gathered along their last dim (see gathers_again) of at least this many elements are stored rather than
// gathered again at a second index pattern.
constexpr int64_t kGatherStoreMinimumElements = 4096;

// A view of a view composes their index arithmetic, and a reshape's source indices each use the whole flat
// offset, so `y = y.flip([0]).t().reshape(4, 2)` repeated doubles the written-out index at every step: keys,
// range checks and C++ text grow as 2^steps. Past this many nodes written out, the view is stored and the
// chain goes on from a buffer; ordinary indexing stays far below it.
constexpr int64_t kMaxIndexTreeSize = 1000;

// Whether `expression` reads an index buffer (`@e0(...)`).
bool reads_extra(const IndexExpression& expression) {
  if (expression->kind == IndexNodeKind::ExtraRead) return true;
  for (const IndexExpression& operand : expression->operands)
    if (reads_extra(operand)) return true;
  return false;
}

// What one evaluation of an elementwise op costs, roughly, in simple operations.
int64_t operation_cost(const Node& node) {
  if (node.kind == NodeKind::Unary) {
    switch (UnaryOp(node.op_code)) {
      case UnaryOp::Negate: case UnaryOp::Abs: case UnaryOp::Relu: case UnaryOp::Floor: case UnaryOp::Ceil:
      case UnaryOp::Round: case UnaryOp::LogicalNot: case UnaryOp::BitwiseNot:
        return 1;
      case UnaryOp::Sqrt: case UnaryOp::Rsqrt:
        return 4;
      default:  // exp, log, the trigonometric and hyperbolic functions, erf, sigmoid
        return 8;
    }
  }
  if (node.kind == NodeKind::Binary) {
    switch (BinaryOp(node.op_code)) {
      case BinaryOp::Divide: case BinaryOp::FloorDivide: case BinaryOp::Modulo: case BinaryOp::Power:
        return 4;
      default:
        return 1;
    }
  }
  return node.kind == NodeKind::Where || node.kind == NodeKind::Cast || node.kind == NodeKind::Arange ? 1 : 0;
}

using RowReductions = std::vector<std::pair<NodePtr, std::vector<IrExprPtr>>>;

// Values built in one scope of a kernel, by node and index pattern; index expressions that ir_key writes alike
// are one pattern (ir_equal), so diamonds in the graph are built once. Open addressing over flat arrays: a
// kernel looks up and adds a value for every node it reaches, and a node-based map's allocations per entry were
// a large part of lowering's cost.
class ValueMemo {
 public:
  const IrExprPtr* find(const Node* node, const std::vector<IrExprPtr>& indices) const {
    if (slots_.empty()) return nullptr;
    int entry = slot_of(hash_of(node, indices), node, indices);
    return entry < 0 ? nullptr : &entries_[size_t(entry)].value;
  }

  void set(const Node* node, const std::vector<IrExprPtr>& indices, IrExprPtr value) {
    uint64_t hash = hash_of(node, indices);
    if (!slots_.empty()) {
      int entry = slot_of(hash, node, indices);
      if (entry >= 0) {
        entries_[size_t(entry)].value = std::move(value);
        return;
      }
    }
    if ((entries_.size() + 1) * 2 > slots_.size()) grow();
    entries_.push_back({node, hash, index_pool_.size(), indices.size(), std::move(value)});
    index_pool_.insert(index_pool_.end(), indices.begin(), indices.end());
    place(int(entries_.size() - 1));
  }

 private:
  struct Entry {
    const Node* node;
    uint64_t hash;
    size_t first_index, index_count;  // the indices, in index_pool_
    IrExprPtr value;
  };

  static uint64_t hash_of(const Node* node, const std::vector<IrExprPtr>& indices) {
    uint64_t hash = std::hash<const Node*>()(node) * 0x9e3779b97f4a7c15ULL;
    for (const IrExprPtr& index : indices) hash = (hash ^ ir_hash(index)) * 0x9e3779b97f4a7c15ULL;
    return hash ^ (hash >> 29);
  }

  bool matches(const Entry& entry, uint64_t hash, const Node* node, const std::vector<IrExprPtr>& indices) const {
    if (entry.hash != hash || entry.node != node || entry.index_count != indices.size()) return false;
    for (size_t position = 0; position < indices.size(); ++position)
      if (!ir_equal(index_pool_[entry.first_index + position], indices[position])) return false;
    return true;
  }

  // The entry stored under this key, or -1.
  int slot_of(uint64_t hash, const Node* node, const std::vector<IrExprPtr>& indices) const {
    size_t mask = slots_.size() - 1;
    for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
      int entry = slots_[slot];
      if (entry < 0) return -1;
      if (matches(entries_[size_t(entry)], hash, node, indices)) return entry;
    }
  }

  void place(int entry) {
    size_t mask = slots_.size() - 1;
    size_t slot = entries_[size_t(entry)].hash & mask;
    while (slots_[slot] >= 0) slot = (slot + 1) & mask;
    slots_[slot] = entry;
  }

  void grow() {
    slots_.assign(std::max<size_t>(16, slots_.size() * 2), -1);
    for (size_t entry = 0; entry < entries_.size(); ++entry) place(int(entry));
  }

  std::vector<Entry> entries_;
  std::vector<IrExprPtr> index_pool_;
  std::vector<int> slots_;  // -1: empty; the table is at most half full
};

class Lowerer {
 public:
  // `first_rows`: per-row reductions (and the indices they are read at) to lower before anything else, so their
  // kept terms are there when the elements need them.
  // `merged`: loop over the computed node's last `merged` dims as one (0 or 1: no merging).
  // `computed`: the node whose value the kernel computes and stores: the root, or the source of a root that
  // only reshapes it (the same row-major elements, so the same flat offsets in the root's buffer).
  // `siblings`: further nodes of the root's shape that the kernel also stores, each at the same index as the
  // root (buffers out1, out2, ...); a value they share is computed once (lower_siblings).
  // `consumers`: how many pending nodes read each pending node (null: kernels are not cut at kMaxInlinedValues).
  Lowerer(const NodePtr& root, const std::unordered_set<Node*>& materialized, const ConsumerCounts* consumers,
          RowReductions first_rows = {}, int merged = 0, NodePtr computed = nullptr, std::vector<NodePtr> siblings = {})
      : root_(root), computed_(computed ? std::move(computed) : root), materialized_(materialized),
        consumers_(consumers), first_rows_(std::move(first_rows)), merged_(merged), siblings_(std::move(siblings)) {}

  const RowReductions& row_reductions() const { return row_reductions_; }
  // Whether a lowering with merged dims stopped early: a statement split its merged index again, so
  // merge_short_rows would not take it.
  bool abandoned() const { return abandoned_; }

  LoweringResult run() {
    LoweringResult result;
    result_ = &result;
    IrKernel& kernel = result.lowered.kernel;
    kernel_ = &kernel;
    kernel.buffers.push_back(IrBuffer::output("out0", root_->dtype, root_->shape));
    for (size_t position = 0; position < siblings_.size(); ++position)
      kernel.buffers.push_back(IrBuffer::output("out" + std::to_string(position + 1), siblings_[position]->dtype,
                                                siblings_[position]->shape));
    scopes_.push_back({&kernel.row_body, {}});  // kRowScope
    scopes_.push_back({&kernel.body, {}});      // kElementScope
    if (root_->kind == NodeKind::ReindexReduce && computed_ == root_ && !injective_placement(*root_)) {
      lower_scatter();
    } else {
      kernel.kind = IrKernel::Kind::Pointwise;
      kernel.domain = computed_->shape;
      std::vector<IrExprPtr> indices = domain_indices();
      if (merged_ >= 2) {
        indices = merge_trailing_dims();
        merged_index_ = "i" + std::to_string(kernel.domain.size() - 1);
      }
      for (const auto& [node, node_indices] : first_rows_) node_value(node, node_indices);
      IrExprPtr value = node_value(computed_, indices, /*is_root=*/true);
      emit(IrStatement::store(0, offset_of(computed_->shape, indices), value));
      for (size_t position = 0; position < siblings_.size(); ++position) {
        IrExprPtr sibling = node_value(siblings_[position], indices, /*is_root=*/true);
        emit(IrStatement::store(int(position + 1), offset_of(computed_->shape, indices), sibling));
      }
    }
    result.lowered.output = root_;
    result.lowered.siblings = siblings_;
    result.inlined = std::move(inlined_);
    result.lowered.inputs = std::move(inputs_);
    result.materialize_requests = std::move(requests_);
    return result;
  }

 private:
  struct Scope {
    std::vector<IrStatement>* statements;
    ValueMemo values;
  };
  static constexpr size_t kRowScope = 0, kElementScope = 1;

  // The kernel loops over the computed node's last merged_ dims as one index m; its own indices are m split by
  // floor division and modulo, which the index simplifier joins back where a buffer is read in that order.
  std::vector<IrExprPtr> merge_trailing_dims() {
    const Shape& shape = computed_->shape;
    size_t first = shape.size() - size_t(merged_);
    Shape domain(shape.begin(), shape.begin() + first);
    int64_t extent = 1;
    for (size_t dim = first; dim < shape.size(); ++dim) extent *= shape[dim];
    domain.push_back(extent);
    kernel_->domain = domain;
    std::vector<IrExprPtr> loop = domain_indices();
    std::vector<IrExprPtr> indices(loop.begin(), loop.begin() + first);
    const IrExprPtr& flat = loop.back();
    int64_t stride = extent;
    for (size_t dim = first; dim < shape.size(); ++dim) {
      stride /= shape[dim];
      IrExprPtr index = ir_index(IndexOperator::FloorDivide, flat, ir_int(stride));
      if (dim > first) index = ir_index(IndexOperator::FloorModulo, index, ir_int(shape[dim]));
      indices.push_back(index);
    }
    return indices;
  }

  std::vector<IrExprPtr> domain_indices() {
    std::vector<IrExprPtr> indices;
    for (size_t dim = 0; dim < kernel_->domain.size(); ++dim)
      indices.push_back(ir_loop_variable("i" + std::to_string(dim), kernel_->domain[dim]));
    return indices;
  }

  void emit(IrStatement statement) {
    std::vector<IrStatement>* statements = scopes_.back().statements;
    bool top_level = statements == &kernel_->body || statements == &kernel_->row_body;
    // Once a value is requested, the kernel is lowered again after it is stored: nothing reads this one's
    // top-level statements (a loop's body is read: see runs_across_rows).
    if (top_level && !requests_.empty()) return;
    if (statements == &kernel_->body && !merged_index_.empty() && splits_merged_index(statement)) {
      abandoned_ = true;
      return;
    }
    statements->push_back(std::move(statement));
  }

  bool splits_merged_index(const IrStatement& statement) const {
    for (const IrExprPtr* part : {&statement.value, &statement.offset, &statement.condition})
      if (*part && splits_variable(*part, merged_index_)) return true;
    return statements_split_variable(statement.body, merged_index_);
  }

  IrExprPtr let(const std::string& base, IrExprPtr value) {
    if (value->kind == IrKind::Variable || value->kind == IrKind::IntConstant || value->kind == IrKind::FloatConstant)
      return value;
    std::string name = base;
    name += '_';
    name += std::to_string(next_name_++);
    IrExprPtr variable = ir_let_variable(name, value);
    DType dtype = value->dtype;
    emit(IrStatement::let(std::move(name), dtype, std::move(value)));
    return variable;
  }

  static IrExprPtr offset_of(const Shape& shape, const std::vector<IrExprPtr>& indices) {
    IrExprPtr offset = ir_int(0);
    int64_t stride = 1;
    for (int dim = int(shape.size()) - 1; dim >= 0; --dim) {
      if (shape[dim] != 1) offset = ir_index(IndexOperator::Add, offset, ir_index(IndexOperator::Multiply, indices[dim], ir_int(stride)));
      stride *= shape[dim];
    }
    return offset;
  }

  void note_fused(const Node& node) {
    if (!requests_.empty()) return;
    NodeUse& use = uses_[&node];
    if (use.noted) return;
    use.noted = true;
    result_->lowered.fused_nodes.push_back(&node);
  }

  int buffer_for(const NodePtr& node) {
    NodeUse& use = uses_[node.get()];
    if (use.buffer >= 0) return use.buffer;
    int index = int(kernel_->buffers.size());
    kernel_->buffers.push_back(
        IrBuffer::input("in" + std::to_string(index - 1 - int(siblings_.size())), node->dtype, node->shape));
    use.buffer = index;
    inputs_.push_back(node);
    return index;
  }

  void request(Node* node) {
    for (Node* existing : requests_)
      if (existing == node) return;
    requests_.push_back(node);
  }

  // `node` is stored by a kernel of its own, planned again once it is; this kernel's use of it is discarded.
  IrExprPtr stored_instead(const NodePtr& node) {
    request(node.get());
    return constant_of(0, node->dtype);
  }

  static bool indices_too_large(const std::vector<IrExprPtr>& indices) {
    return ir_tree_size(indices, kMaxIndexTreeSize + 1) > kMaxIndexTreeSize;
  }

  // Whether `node`, an elementwise value read at `indices`, would be rebuilt over and over: it varies along the
  // innermost loop (so it cannot be hoisted out of it) but not along outer loops that repeat it at least
  // kBroadcastMinimumRepeats times, and it costs at least kBroadcastMinimumCost operations. Interpolation's
  // source indices and weights, and sinusoidal position codes broadcast over a batch, are such values:
  // stored once by a small kernel, they are loaded instead.
  bool broadcast_recomputes(const NodePtr& node, const std::vector<IrExprPtr>& indices) const {
    if (node->kind != NodeKind::Unary && node->kind != NodeKind::Binary && node->kind != NodeKind::Where &&
        node->kind != NodeKind::Cast)
      return false;
    const Shape& domain = kernel_->domain;
    size_t rank = domain.size();
    if (kernel_->kind != IrKernel::Kind::Pointwise || context_ != kElementScope || rank < 2 ||
        shape_numel(domain) < kBroadcastMinimumWork)
      return false;
    std::vector<bool> used(rank, false);
    bool only_loop_variables = true;
    std::function<void(const IrExprPtr&)> visit = [&](const IrExprPtr& expression) {
      if (expression->kind == IrKind::Variable) {
        bool matched = false;
        for (size_t dim = 0; dim < rank; ++dim)
          if (expression->name == "i" + std::to_string(dim)) used[dim] = matched = true;
        only_loop_variables &= matched;  // a let (a loaded index) may hide which loops the value follows
      }
      for (const IrExprPtr& argument : expression->args) visit(argument);
    };
    for (const IrExprPtr& index : indices) visit(index);
    if (!only_loop_variables || !used[rank - 1]) return false;
    int64_t repeats = 1;
    for (size_t dim = 0; dim + 1 < rank; ++dim)
      if (!used[dim]) repeats *= domain[dim];
    return repeats >= kBroadcastMinimumRepeats && recompute_cost(node.get()) >= kBroadcastMinimumCost;
  }

  // Where a kernel past kMaxInlinedValues may be cut: an elementwise value no larger than the kernel's own
  // iteration space, so storing it costs at most one more output-sized buffer (never a matrix product's
  // broadcast terms, which are the size of the whole product), and read by several nodes: a recurrence's
  // state, which the recompute policy would store anyway, rather than a point inside one step.
  // Past kMaximumKernelValues values, a kernel is wide rather than deep (a tree of thousands of sums, each read
  // once): any such elementwise value is cut, or the kernel grows with the graph and its compile time faster. So
  // is a sum then: a running total of small matrix products' gradients adds one inlined sum per step, and the
  // walk reaches the sums only after the whole chain of additions, past any elementwise value it could cut (1500
  // steps made one kernel that took 100 s to compile).
  bool cuttable(Node* node) const {
    bool elementwise = node->kind == NodeKind::Unary || node->kind == NodeKind::Binary ||
                       node->kind == NodeKind::Where || node->kind == NodeKind::Cast;
    // A value larger than the kernel's output is left inlined, unless the kernel is already past
    // kMaximumKernelValues: a contraction with a small output (an unrolled LSTMCell's [8, 10] head, once per
    // step) otherwise inlined the whole cell-state chain behind its operand, back to the first step, in every
    // step's kernel, and planning grew with the square of the steps.
    if (!consumers_ || (node->numel() > shape_numel(kernel_->domain) && inlined_values_ <= kMaximumKernelValues))
      return false;
    if (node->kind == NodeKind::Reduce) return inlined_values_ > kMaximumKernelValues;
    if (!elementwise) return false;
    if (inlined_values_ > kMaximumKernelValues) return true;
    auto found = consumers_->find(node);
    return found != consumers_->end() && found->second >= 2;
  }

  // Whether `node` is needed at a second index pattern in this kernel and rebuilding it gathers again through an
  // index buffer along a source's last dim (`x[..., @e0(i3)]`: interpolation's column corners, torch.gather along
  // the last dim). Such loads become vector gathers or scalar loads, one per element and instance. Stored by a
  // kernel of its own, the value is gathered once and read back with plain loads: bilinear resampling done as a
  // column pass and a row pass, which reads the column pass at two rows, runs 2.4x faster than with both passes
  // fused into one kernel of four gathers per element.
  bool gathers_again(const NodePtr& node) {
    if (node->kind != NodeKind::Unary && node->kind != NodeKind::Binary && node->kind != NodeKind::Where &&
        node->kind != NodeKind::Cast && node->kind != NodeKind::Reindex)
      return false;
    auto found = uses_.find(node.get());
    if (found == uses_.end() || found->second.instances < 2 || node->numel() < kGatherStoreMinimumElements)
      return false;
    return gathers_along_last_dim(node.get());
  }

  // Whether rebuilding `value` reaches a reindex whose last-dim index reads an index buffer, through pending
  // elementwise ops, views and reindex sources. Memoised per node: asked at every second instance of every value,
  // a fresh walk each time was quadratic along a recurrence's chain (an LSTM's backward, 64 steps).
  bool gathers_along_last_dim(Node* start) {
    std::vector<std::pair<Node*, bool>> stack{{start, false}};  // (node, its inputs are done)
    while (!stack.empty()) {
      auto [value, inputs_done] = stack.back();
      stack.pop_back();
      if (gathers_below_.count(value)) continue;
      if (value != start && (value->is_computed() || materialized_.count(value))) {
        gathers_below_[value] = false;
        continue;
      }
      std::vector<Node*> sources;
      bool gathers = false;
      switch (value->kind) {
        case NodeKind::Reindex: {
          const auto& payload = static_cast<const IndexPayload&>(*value->payload);
          gathers = value->inputs.size() > 1 && !payload.indexes.empty() && reads_extra(payload.indexes.back());
          sources.push_back(value->inputs[0].get());  // its index buffers are small: only the source matters
          break;
        }
        case NodeKind::Unary: case NodeKind::Binary: case NodeKind::Where: case NodeKind::Cast:
        case NodeKind::View: case NodeKind::Reshape:
          for (const NodePtr& input : value->inputs) sources.push_back(input.get());
          break;
        default:
          break;
      }
      if (!gathers && !inputs_done) {
        stack.push_back({value, true});
        for (Node* source : sources)
          if (!gathers_below_.count(source)) stack.push_back({source, false});
        continue;
      }
      for (Node* source : sources) {
        auto below = gathers_below_.find(source);
        gathers = gathers || (below != gathers_below_.end() && below->second);
      }
      gathers_below_[value] = gathers;
    }
    return gathers_below_[start];
  }

  // Operations one evaluation of `value` runs, through the pending elementwise ops it is built from (buffers,
  // gathers and reductions end the walk); stops counting at kBroadcastMinimumCost.
  int64_t recompute_cost(Node* value) const {
    int64_t cost = 0;
    std::vector<Node*> stack{value};
    std::unordered_set<Node*> seen;
    while (!stack.empty() && cost < kBroadcastMinimumCost) {
      Node* node = stack.back();
      stack.pop_back();
      if (!seen.insert(node).second) continue;
      if (node != value && (node->is_computed() || materialized_.count(node))) continue;
      cost += operation_cost(*node);
      bool passes_through = node->kind == NodeKind::Unary || node->kind == NodeKind::Binary ||
                            node->kind == NodeKind::Where || node->kind == NodeKind::Cast ||
                            node->kind == NodeKind::View || node->kind == NodeKind::Reshape;
      if (passes_through)
        for (const NodePtr& input : node->inputs) stack.push_back(input.get());
    }
    return cost;
  }

  // Whether a reduction read at `indices` has one result per row of this kernel: every index is an outer loop
  // variable (not the last) or 0 on a size-1 dim, and every outer dim with more than one index appears exactly
  // once. Then computing it once per row costs what its own kernel would, without the round trip to memory.
  // Only for rows that stay in cache between their passes (at most kMaxRowElements), and with rows enough to
  // keep the threads busy, as the kernel is then split by rows.
  bool is_row_index(const NodePtr& node, const std::vector<IrExprPtr>& indices) const {
    const Shape& domain = kernel_->domain;
    if (kernel_->kind != IrKernel::Kind::Pointwise || domain.size() < 2 || node->kind != NodeKind::Reduce) return false;
    size_t rank = domain.size();
    int64_t row_length = domain.back(), rows = row_length ? shape_numel(domain) / row_length : 0;
    // A row of one element gains nothing, and its reduction may be a contraction for the library (a 1x1
    // convolution's weight gradient, reshaped to [O, C, 1, 1]), which only a kernel of its own is matched as.
    if (row_length < 2 || row_length > kMaxRowElements) return false;
    if (rows < kMinRows && shape_numel(domain) > kSmallKernelElements) return false;
    std::vector<int> uses(rank, 0);
    for (size_t position = 0; position < indices.size(); ++position) {
      const IrExprPtr& index = indices[position];
      if (index->kind == IrKind::IntConstant && index->integer == 0 && node->shape[position] == 1) continue;
      if (index->kind != IrKind::Variable) return false;
      bool matched = false;
      for (size_t dim = 0; dim + 1 < rank; ++dim) {
        if (index->name == "i" + std::to_string(dim) && node->shape[position] == domain[dim]) {
          ++uses[dim];
          matched = true;
        }
      }
      if (!matched) return false;
    }
    for (size_t dim = 0; dim + 1 < rank; ++dim)
      if (domain[dim] > 1 ? uses[dim] != 1 : uses[dim] > 1) return false;
    return true;
  }

  bool is_output_index(const NodePtr& node, const std::vector<IrExprPtr>& indices) const {
    if (node->shape != kernel_->domain || kernel_->kind != IrKernel::Kind::Pointwise) return false;
    for (size_t dim = 0; dim < indices.size(); ++dim) {
      const IrExprPtr& index = indices[dim];
      bool is_loop = index->kind == IrKind::Variable && index->name == "i" + std::to_string(dim);
      bool is_zero = kernel_->domain[dim] == 1 && index->kind == IrKind::IntConstant && index->integer == 0;
      if (!is_loop && !is_zero) return false;
    }
    return true;
  }

  // float16 results are computed in float32 and rounded like a stored value, op by op, as PyTorch does: then a
  // value recomputed in one kernel equals the same value stored by another (argmin compares them).
  static IrExprPtr half_rounded(IrExprPtr value) {
    return value->dtype == DType::Float16 ? ir_round_to_half(std::move(value)) : value;
  }

  IrExprPtr constant_of(double value, DType dtype) {
    if (is_floating(dtype)) return ir_float(value, dtype);
    if (dtype == DType::Bool) return ir_bool(value != 0);
    return ir_cast(dtype, ir_int(int64_t(value)));
  }

  // The value of `node` at `indices`, memoised per scope.
  IrExprPtr node_value(const NodePtr& node, const std::vector<IrExprPtr>& indices, bool is_root = false) {
    if (abandoned_) return constant_of(0, node->dtype);
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope)
      if (const IrExprPtr* found = scope->values.find(node.get(), indices)) return *found;
    IrExprPtr value = compute_value(node, indices, is_root);
    if (value->kind == IrKind::Variable) record_origin(value->name, node.get(), indices, -1);
    // Hoisted reductions have also registered in the scope that holds their loop; everything is registered in
    // the current scope.
    scopes_.back().values.set(node.get(), indices, value);
    return value;
  }

  // The innermost node of a view chain registers first and keeps the name; each node around it that passes the
  // value on (its input being the chain's outermost so far) is one more view of it.
  void record_origin(const std::string& name, Node* node, const std::vector<IrExprPtr>& indices, int buffer) {
    if (!requests_.empty()) return;  // the result is lowered again (see emit)
    auto& origins = result_->lowered.origins;
    auto found = origins.find(name);
    if (found == origins.end()) {
      origins[name] = {node, indices, buffer, {}};
      return;
    }
    ValueOrigin& origin = found->second;
    Node* outermost = origin.views.empty() ? origin.node : origin.views.back().node;
    if (node != outermost && !node->inputs.empty() && node->inputs[0].get() == outermost)
      origin.views.push_back({node, indices});
  }

  IrExprPtr compute_value(const NodePtr& node, const std::vector<IrExprPtr>& indices, bool is_root) {
    if (!is_root && (node->is_computed() || materialized_.count(node.get()))) {
      int buffer = buffer_for(node);
      IrExprPtr value = let(kernel_->buffers[buffer].name, ir_load(buffer, node->dtype, offset_of(node->shape, indices)));
      if (value->kind == IrKind::Variable) record_origin(value->name, node.get(), indices, buffer);
      return value;
    }
    NodeUse& use = uses_[node.get()];
    if (!use.inlined) {
      use.inlined = true;
      inlined_.push_back(node.get());
    }
    if (!is_root && ++inlined_values_ > kMaxInlinedValues && cuttable(node.get())) {
      request(node.get());
      return constant_of(0, node->dtype);
    }
    // Past the limit the node is stored, and what this kernel makes of it is discarded: lowering it again would
    // only walk its producers at yet another index pattern (a stack of 64 LSTM steps' gradients walked every
    // step's chain back to the last step at every pattern: 0.3 s per kernel).
    if (!is_root && node->kind != NodeKind::Constant && node->kind != NodeKind::View &&
        node->kind != NodeKind::Reshape && node->kind != NodeKind::Custom && ++use.instances > kMaxInstancesPerNode) {
      request(node.get());
      return constant_of(0, node->dtype);
    }
    if (!is_root && (broadcast_recomputes(node, indices) || gathers_again(node))) {
      request(node.get());  // planned again once it is stored: what this kernel makes of it now is discarded
      return constant_of(0, node->dtype);
    }
    switch (node->kind) {
      case NodeKind::Data:
        throw std::logic_error("uncomputed data node");
      case NodeKind::Constant:  // integer constants are exact beyond 2^53, where the double rounds
        return is_integral(node->dtype) ? ir_cast(node->dtype, ir_int(node->integer_scalar))
                                        : constant_of(node->scalar, node->dtype);
      case NodeKind::Arange: {
        note_fused(*node);
        IrExprPtr index = indices[0];
        if (!is_floating(node->dtype) && node->scalar == int64_t(node->scalar) && node->scalar_step == int64_t(node->scalar_step))
          return ir_cast(node->dtype, ir_index(IndexOperator::Add, ir_int(int64_t(node->scalar)),
                                               ir_index(IndexOperator::Multiply, ir_int(int64_t(node->scalar_step)), index)));
        IrExprPtr scaled = ir_binary(BinaryOp::Multiply, DType::Float64, ir_float(node->scalar_step, DType::Float64),
                                     ir_cast(DType::Float64, index));
        return let("arange", ir_cast(node->dtype, ir_binary(BinaryOp::Add, DType::Float64,
                                                              ir_float(node->scalar, DType::Float64), scaled)));
      }
      case NodeKind::Unary: {
        note_fused(*node);
        IrExprPtr operand = node_value(node->inputs[0], indices);
        return let(node->op_name(), half_rounded(ir_unary(UnaryOp(node->op_code), node->dtype, operand)));
      }
      case NodeKind::Binary: {
        note_fused(*node);
        IrExprPtr left = node_value(node->inputs[0], indices);
        IrExprPtr right = node_value(node->inputs[1], indices);
        return let(node->op_name(), half_rounded(ir_binary(BinaryOp(node->op_code), node->dtype, left, right)));
      }
      case NodeKind::Where: {
        note_fused(*node);
        IrExprPtr condition = node_value(node->inputs[0], indices);
        IrExprPtr if_true = node_value(node->inputs[1], indices);
        IrExprPtr if_false = node_value(node->inputs[2], indices);
        return let("where", ir_select(condition, if_true, if_false));
      }
      case NodeKind::Cast: {
        note_fused(*node);
        return let("cast", ir_cast(node->dtype, node_value(node->inputs[0], indices)));
      }
      case NodeKind::View: {
        std::vector<IrExprPtr> source;
        for (const ViewDimension& dimension : node->view) {
          IrExprPtr index = ir_int(dimension.offset);
          if (dimension.output_dim >= 0)
            index = ir_index(IndexOperator::Add, index,
                             ir_index(IndexOperator::Multiply, ir_int(dimension.step), indices[dimension.output_dim]));
          source.push_back(index);
        }
        if (!is_root && indices_too_large(source)) return stored_instead(node);
        return node_value(node->inputs[0], source);
      }
      case NodeKind::Reshape: {
        const NodePtr& input = node->inputs[0];
        const Shape& input_shape = input->shape;
        IrExprPtr flat = offset_of(node->shape, indices);
        if (input->is_computed() || materialized_.count(input.get())) {
          // Buffers are row-major, so a reshape of one reads the same flat offset: no index arithmetic.
          int buffer = buffer_for(input);
          IrExprPtr value = let(kernel_->buffers[buffer].name, ir_load(buffer, input->dtype, flat));
          if (value->kind == IrKind::Variable) record_origin(value->name, node.get(), indices, buffer);
          return value;
        }
        std::vector<IrExprPtr> source(input_shape.size());
        int64_t stride = 1;
        for (int dim = int(input_shape.size()) - 1; dim >= 0; --dim) {
          IrExprPtr index = ir_index(IndexOperator::FloorDivide, flat, ir_int(stride));
          if (dim > 0) index = ir_index(IndexOperator::FloorModulo, index, ir_int(input_shape[dim]));
          source[dim] = input_shape[dim] == 1 ? ir_int(0) : index;
          stride *= input_shape[dim];
        }
        if (!is_root && indices_too_large(source)) return stored_instead(node);
        return node_value(node->inputs[0], source);
      }
      case NodeKind::Reindex:
        note_fused(*node);
        return reindex_value(node, indices, is_root);
      case NodeKind::Reduce: {
        // Inside a per-row loop only another per-row reduction can be inlined: the row body runs before, and
        // outside, the element loop.
        bool at_output = !is_root && context_ == kElementScope && is_output_index(node, indices);
        bool per_row = !is_root && !at_output && is_row_index(node, indices);
        if (!is_root && !per_row && !at_output) {
          request(node.get());
          return constant_of(0, node->dtype);
        }
        note_fused(*node);
        if (per_row) {
          if (!row_reductions_seen_.find(node.get(), indices)) {
            row_reductions_seen_.set(node.get(), indices, nullptr);
            row_reductions_.push_back({node, indices});
          }
        }
        return reduce_value(node, indices, per_row);
      }
      case NodeKind::ReindexReduce:
        if (auto placement = injective_placement(*node)) {
          note_fused(*node);
          return placed_value(node, indices, *placement);
        }
        [[fallthrough]];
      case NodeKind::Code:           // a user's kernel writes whole buffers: never inlined
      case NodeKind::HostOperation:  // nor is work that runs on the host between kernels
        if (is_root && (node->kind == NodeKind::Code || node->kind == NodeKind::HostOperation))
          throw std::logic_error("internal error: " + node->op_name() + " reached fused lowering");
        request(node.get());
        return constant_of(0, node->dtype);
      case NodeKind::Custom:  // mj.Function's output: the forward's value; its gradient rule is elsewhere
        return node_value(node->inputs[0], indices);
    }
    throw std::logic_error("unknown node kind");
  }

  // Index expression -> IR over the given loop indices. Extra reads are clamped into the extra's bounds so a
  // wild index can never read outside memory.
  IrExprPtr translate(const IndexExpression& expression, const std::vector<IrExprPtr>& loop, const Shape& x_shape,
                      const Shape& y_shape, const std::vector<NodePtr>& extras) {
    switch (expression->kind) {
      case IndexNodeKind::Integer:
        return expression->type == IndexType::Boolean ? ir_bool(expression->value) : ir_int(expression->value);
      case IndexNodeKind::LoopIndex: return loop[expression->value];
      case IndexNodeKind::InputShape: return ir_int(x_shape[expression->value]);
      case IndexNodeKind::OutputShape: return ir_int(y_shape[expression->value]);
      case IndexNodeKind::ExtraRead: {
        const NodePtr& extra = extras[expression->value];
        if (extra->numel() == 0) return expression->type == IndexType::Boolean ? ir_bool(false) : ir_int(0);
        std::vector<IrExprPtr> args;
        for (size_t dim = 0; dim < expression->operands.size(); ++dim)
          args.push_back(clamp(translate(expression->operands[dim], loop, x_shape, y_shape, extras), extra->shape[dim]));
        IrExprPtr value = node_value(extra, args);
        return expression->type == IndexType::Boolean ? ir_cast(DType::Bool, value) : ir_cast(DType::Int64, value);
      }
      case IndexNodeKind::Unary:
        return ir_index(expression->op, translate(expression->operands[0], loop, x_shape, y_shape, extras));
      case IndexNodeKind::Binary:
        return ir_index(expression->op, translate(expression->operands[0], loop, x_shape, y_shape, extras),
                        translate(expression->operands[1], loop, x_shape, y_shape, extras));
      case IndexNodeKind::Ternary:
        return ir_select(translate(expression->operands[0], loop, x_shape, y_shape, extras),
                         translate(expression->operands[1], loop, x_shape, y_shape, extras),
                         translate(expression->operands[2], loop, x_shape, y_shape, extras));
    }
    throw std::logic_error("unknown index node");
  }

  static IrExprPtr clamp(IrExprPtr index, int64_t extent) {
    IrRange range = ir_range(index);
    if (range.low >= 0 && range.high < extent) return index;
    return ir_index(IndexOperator::Minimum, ir_index(IndexOperator::Maximum, index, ir_int(0)), ir_int(extent - 1));
  }

  // In-bounds test for a target/source index vector plus the user's overflow conditions.
  IrExprPtr validity(const std::vector<IrExprPtr>& target, const Shape& shape, const std::vector<IrExprPtr>& conditions) {
    IrExprPtr valid = ir_bool(true);
    for (size_t dim = 0; dim < target.size(); ++dim) {
      IrRange range = ir_range(target[dim]);
      if (range.low >= 0 && range.high < shape[dim]) continue;
      valid = ir_index(IndexOperator::LogicalAnd, valid,
                       ir_index(IndexOperator::LogicalAnd, ir_index(IndexOperator::GreaterEqual, target[dim], ir_int(0)),
                                ir_index(IndexOperator::Less, target[dim], ir_int(shape[dim]))));
    }
    for (const IrExprPtr& condition : conditions)
      valid = ir_index(IndexOperator::LogicalAnd, valid, ir_index(IndexOperator::Not, condition));
    return valid;
  }

  IrExprPtr reindex_value(const NodePtr& node, const std::vector<IrExprPtr>& indices, bool is_root) {
    const auto& payload = static_cast<const IndexPayload&>(*node->payload);
    const NodePtr& source = node->inputs[0];
    std::vector<NodePtr> extras(node->inputs.begin() + 1, node->inputs.end());
    IrExprPtr overflow = constant_of(node->scalar, node->dtype);
    if (source->numel() == 0) return overflow;
    std::vector<IrExprPtr> target, conditions;
    for (const IndexExpression& index : payload.indexes)
      target.push_back(translate(index, indices, source->shape, node->shape, extras));
    for (const IndexExpression& condition : payload.overflow_conditions)
      conditions.push_back(translate(condition, indices, source->shape, node->shape, extras));
    if (!is_root && (indices_too_large(target) || indices_too_large(conditions))) return stored_instead(node);
    IrExprPtr valid = validity(target, source->shape, conditions);
    if (valid->kind == IrKind::IntConstant && !valid->integer) return overflow;
    std::vector<IrExprPtr> clamped;
    for (size_t dim = 0; dim < target.size(); ++dim) clamped.push_back(clamp(target[dim], source->shape[dim]));
    IrExprPtr value = node_value(source, clamped);
    if (valid->kind == IrKind::IntConstant) return value;
    IrExprPtr condition = let("in_bounds", valid);
    return let("reindex", ir_select(condition, value, overflow));
  }

  // A placement (jit/ir/placement.h) read at a target index: the source element that lands there, or zero. The
  // gradient of cat along channels was two kernels that zero-filled each piece's gradient and scattered the whole
  // incoming gradient into it (half of it dropped as out of range); now each reader reads its slice.
  IrExprPtr placed_value(const NodePtr& node, const std::vector<IrExprPtr>& indices,
                         const std::vector<PlacedDimension>& placement) {
    const NodePtr& source = node->inputs[0];
    IrExprPtr zero = constant_of(0, node->dtype);
    if (source->numel() == 0) return zero;
    std::vector<IrExprPtr> source_indices(source->shape.size(), ir_int(0));
    IrExprPtr lands = ir_bool(true);  // the target index is one some source element goes to
    for (size_t dim = 0; dim < placement.size(); ++dim) {
      const PlacedDimension& placed = placement[dim];
      IrExprPtr shifted = ir_index(IndexOperator::Subtract, indices[dim], ir_int(placed.offset));
      if (placed.terms.empty()) {
        lands = ir_index(IndexOperator::LogicalAnd, lands, ir_index(IndexOperator::Equal, shifted, ir_int(0)));
        continue;
      }
      // The number the source indices are the digits of, least significant first (one term: the index itself).
      int64_t step = placed.terms.front().coefficient;
      IrExprPtr number = shifted;
      if (step == -1) {
        number = ir_index(IndexOperator::Subtract, ir_int(0), shifted);
      } else if (step != 1) {
        lands = ir_index(
            IndexOperator::LogicalAnd, lands,
            ir_index(IndexOperator::Equal, ir_index(IndexOperator::FloorModulo, shifted, ir_int(step)), ir_int(0)));
        number = ir_index(IndexOperator::FloorDivide, shifted, ir_int(step));
      }
      int64_t below = 1;  // product of the extents of the digits before
      for (size_t term = 0; term < placed.terms.size(); ++term) {
        const PlacedTerm& digit = placed.terms[term];
        IrExprPtr index = below == 1 ? number : ir_index(IndexOperator::FloorDivide, number, ir_int(below));
        if (term + 1 < placed.terms.size()) index = ir_index(IndexOperator::FloorModulo, index, ir_int(digit.extent));
        source_indices[size_t(digit.source_dim)] = index;  // the last digit is range-checked below
        below *= digit.extent;
      }
    }
    IrExprPtr valid = ir_index(IndexOperator::LogicalAnd, lands, validity(source_indices, source->shape, {}));
    if (valid->kind == IrKind::IntConstant && !valid->integer) return zero;
    std::vector<IrExprPtr> clamped;
    for (size_t dim = 0; dim < source_indices.size(); ++dim)
      clamped.push_back(clamp(source_indices[dim], source->shape[dim]));
    IrExprPtr value = node_value(source, clamped);
    if (valid->kind == IrKind::IntConstant) return value;
    return let("placed", ir_select(let("lands", valid), value, zero));
  }

  // A per-row reduction that is a running sum along a row index (cumsum's scan of its block totals, read once per
  // block): computed per row it costs up to its whole length every row; in a kernel of its own it is one pass.
  bool runs_across_rows(const IrStatement& loop) const {
    for (size_t dim = 0; dim + 1 < kernel_->domain.size(); ++dim)
      if (ir_running_sum_guard(loop, "i" + std::to_string(dim))) return true;
    return false;
  }

  IrExprPtr reduce_value(const NodePtr& node, const std::vector<IrExprPtr>& indices, bool per_row) {
    const NodePtr& source = node->inputs[0];
    std::string loop_name =
        std::string(node->op_name() == "reduce_add" ? "sum" : reduce_op_name(ReduceOp(node->op_code))) + "_" +
        std::to_string(next_name_++);
    std::vector<std::pair<std::string, int64_t>> loops;
    std::vector<IrExprPtr> source_indices;
    int output_dim = 0;
    int64_t iterations = 1;
    for (size_t dim = 0; dim < source->shape.size(); ++dim) {
      if (node->reduce_mask >> dim & 1) {
        std::string name = "r" + std::to_string(dim);
        loops.push_back({name, source->shape[dim]});
        source_indices.push_back(ir_loop_variable(name, source->shape[dim]));
        iterations *= source->shape[dim];
        if (node->keepdim) ++output_dim;
      } else {
        source_indices.push_back(indices[output_dim++]);
      }
    }
    (per_row ? kernel_->row_work : kernel_->inner_work) += iterations;
    // Hoist: the loop lives at the top level of the row or element body, whatever scope asked for it. Its body
    // sees only the scopes outside that level (a per-row loop never reads a per-element value).
    size_t home = per_row ? kRowScope : kElementScope;
    std::vector<Scope> saved = std::move(scopes_);
    scopes_.clear();
    for (size_t level = 0; level <= home; ++level) scopes_.push_back(std::move(saved[level]));
    std::vector<IrStatement> body;
    scopes_.push_back({&body, {}});
    size_t outer_context = context_;
    context_ = home;
    size_t earlier_requests = requests_.size();
    IrExprPtr value = node_value(source, source_indices);
    context_ = outer_context;
    scopes_.pop_back();
    IrStatement loop = IrStatement::reduce_loop(std::move(loop_name), node->dtype, ReduceOp(node->op_code),
                                                std::move(loops), std::move(value), std::move(body));
    if (per_row && runs_across_rows(loop)) {
      for (size_t level = 0; level <= home; ++level) saved[level] = std::move(scopes_[level]);
      scopes_ = std::move(saved);
      requests_.resize(earlier_requests);  // what its terms needed is its own kernel's business
      request(node.get());
      return constant_of(0, node->dtype);
    }
    // A per-row sum over the row's own dim whose terms are computed (not plain loads): the row's elements will
    // likely need the same terms at their own index, so keep them in a row-sized array.
    int last = int(kernel_->domain.size()) - 1;
    std::vector<IrExprPtr> element_indices;
    if (per_row && loop.loops.size() == 1 && loop.reduce_op == ReduceOp::Add && loop.value->kind == IrKind::Variable &&
        source->shape.back() == kernel_->domain.back() && (node->reduce_mask >> (source->shape.size() - 1) & 1) &&
        !source->is_computed() && !materialized_.count(source.get()) && source->kind != NodeKind::View &&
        source->kind != NodeKind::Reshape && source->kind != NodeKind::Constant) {
      loop.spill = loop.name + "_terms";
      element_indices = source_indices;
      element_indices.back() = ir_loop_variable("i" + std::to_string(last), kernel_->domain[last]);
    }
    std::string name = loop.name, spill = loop.spill;
    DType term_type = loop.value->dtype;
    scopes_[home].statements->push_back(std::move(loop));
    IrExprPtr result = half_rounded(ir_variable(name, node->dtype));
    scopes_[home].values.set(node.get(), indices, result);
    for (size_t level = 0; level <= home; ++level) saved[level] = std::move(scopes_[level]);
    scopes_ = std::move(saved);
    if (!spill.empty())  // rendered as an array element: "<spill>[i<last>]"
      scopes_[kElementScope].values.set(source.get(), element_indices,
                                        ir_variable(spill + "[i" + std::to_string(last) + "]", term_type));
    return result;
  }

  void lower_scatter() {
    IrKernel& kernel = *kernel_;
    kernel.kind = IrKernel::Kind::Scatter;
    kernel.scatter_op = ReduceOp(root_->op_code);
    const NodePtr& source = root_->inputs[0];
    note_fused(*root_);
    kernel.domain = source->shape;
    const auto& payload = static_cast<const IndexPayload&>(*root_->payload);
    std::vector<NodePtr> extras(root_->inputs.begin() + 1, root_->inputs.end());
    std::vector<IrExprPtr> indices = domain_indices();
    IrExprPtr value = node_value(source, indices);
    std::vector<IrExprPtr> target, conditions;
    for (const IndexExpression& index : payload.indexes)
      target.push_back(let("target", translate(index, indices, source->shape, root_->shape, extras)));
    for (const IndexExpression& condition : payload.overflow_conditions)
      conditions.push_back(translate(condition, indices, source->shape, root_->shape, extras));
    IrExprPtr valid = validity(target, root_->shape, conditions);
    result_->lowered.scatter_target = target;
    emit(IrStatement::scatter_accumulate(0, offset_of(root_->shape, target), root_->dtype, value,
                                         valid->kind == IrKind::IntConstant && valid->integer ? nullptr : valid));
    int which = -1;
    kernel.scatter_split_rows = !source->shape.empty() && !root_->shape.empty() && is_loop_index(payload.indexes[0], &which) &&
                                which == 0 && source->shape[0] == root_->shape[0] && source->shape[0] > 1;
  }

  const NodePtr& root_;
  NodePtr computed_;
  const std::unordered_set<Node*>& materialized_;
  const ConsumerCounts* consumers_;
  RowReductions first_rows_, row_reductions_;
  int merged_ = 0;
  std::string merged_index_;  // with merged_ >= 2: the loop variable of the merged dims
  bool abandoned_ = false;
  std::vector<NodePtr> siblings_;
  size_t context_ = kElementScope;  // the level whose values the code being lowered can see: row or element
  ValueMemo row_reductions_seen_;   // row_reductions_ by node and indices (the values are unused)
  IrKernel* kernel_ = nullptr;
  LoweringResult* result_ = nullptr;
  std::vector<Scope> scopes_;
  // What the kernel has made of each node it reached: one entry per node, not a map per question.
  struct NodeUse {
    int buffer = -1;    // >= 0: the node is this input buffer
    int instances = 0;  // distinct index patterns it was built at (for kMaxInstancesPerNode)
    bool inlined = false;
    bool noted = false;  // in fused_nodes
  };
  std::unordered_map<const Node*, NodeUse> uses_;
  std::vector<Node*> inlined_;  // the nodes with `inlined` set, in the order reached
  std::unordered_map<Node*, bool> gathers_below_;
  int64_t inlined_values_ = 0;  // values built by inlining (node and index pattern), for kMaxInlinedValues
  std::vector<NodePtr> inputs_;
  std::vector<Node*> requests_;
  int next_name_ = 0;
};

}  // namespace

// Short rows (NCHW images of 32x32 and less) make the element loop short and the per-row overhead dominant.
// When every buffer is read in the order of the output's trailing dims, loop over those dims as one.
constexpr int64_t kShortRow = 256;

// `chosen`, also counting the nodes an attempt not taken reached (its choice depended on them too).
LoweringResult with_inlined_of(LoweringResult chosen, const LoweringResult& other) {
  chosen.inlined.insert(chosen.inlined.end(), other.inlined.begin(), other.inlined.end());
  return chosen;
}

LoweringResult merge_short_rows(const NodePtr& root, const NodePtr& computed,
                                const std::unordered_set<Node*>& materialized, const ConsumerCounts* consumers,
                                LoweringResult plain, const std::vector<NodePtr>& siblings = {}) {
  const IrKernel& kernel = plain.lowered.kernel;
  int rank = int(computed->shape.size());
  // A lowering that asks for values to be stored is lowered again once they are, whatever its loops.
  if (!plain.materialize_requests.empty() || kernel.kind != IrKernel::Kind::Pointwise || rank < 2 ||
      !kernel.row_body.empty() || computed->shape.back() >= kShortRow || shape_numel(computed->shape) == 0)
    return plain;
  // Reductions (and the contractions among them, which the library matcher reads by their loop structure) keep
  // their shape; this is for elementwise and gather kernels.
  for (const IrStatement& statement : kernel.body)
    if (statement.kind == IrStatement::Kind::ReduceLoop) return plain;
  for (int merged = rank; merged >= 2; --merged) {
    Lowerer lowerer(root, materialized, consumers, {}, merged, computed, siblings);
    LoweringResult candidate = lowerer.run();
    if (lowerer.abandoned()) continue;
    const IrKernel& merged_kernel = candidate.lowered.kernel;
    std::string flat = "i" + std::to_string(merged_kernel.domain.size() - 1);
    if (candidate.materialize_requests != plain.materialize_requests || !merged_kernel.row_body.empty() ||
        statements_split_variable(merged_kernel.body, flat))
      continue;
    return with_inlined_of(std::move(candidate), plain);
  }
  return plain;
}

static LoweringResult lower_group_computing(const NodePtr& root, const NodePtr& computed,
                                            const std::unordered_set<Node*>& materialized,
                                            const ConsumerCounts* consumers) {
  Lowerer first(root, materialized, consumers, {}, 0, computed);
  LoweringResult result = first.run();
  if (first.row_reductions().empty()) return merge_short_rows(root, computed, materialized, consumers, std::move(result));
  // Again, with the per-row reductions first: an element may have computed a term before the reduction that
  // keeps it was reached (softmax's numerator is lowered before its denominator).
  return with_inlined_of(Lowerer(root, materialized, consumers, first.row_reductions(), 0, computed).run(), result);
}

// An add-scatter of a pending value onto its own indices, each element landing once (cat and stack compute a
// join of many pieces into a buffer this way when gradients flow): the value itself, stored. As a scatter it
// zeroed the output first and then added each element in: stacking 64 pieces of [32, 1024] (an LSTM's gate
// gradients; groups of 8, each stored, then the groups) took 1.66 ms, as pointwise kernels 1.02.
bool stores_its_source_unchanged(const Node& root, const std::unordered_set<Node*>& materialized) {
  if (root.kind != NodeKind::ReindexReduce || ReduceOp(root.op_code) != ReduceOp::Add || root.inputs.size() != 1)
    return false;
  const Node& source = *root.inputs[0];
  if (source.is_computed() || materialized.count(const_cast<Node*>(&source)) || source.shape != root.shape ||
      source.dtype != root.dtype || source.kind == NodeKind::Code || source.kind == NodeKind::HostOperation ||
      source.kind == NodeKind::ReindexReduce)
    return false;
  const auto& payload = static_cast<const IndexPayload&>(*root.payload);
  if (!payload.overflow_conditions.empty() || payload.indexes.size() != root.shape.size()) return false;
  for (size_t dim = 0; dim < payload.indexes.size(); ++dim) {
    int which = -1;
    if (!is_loop_index(payload.indexes[dim], &which) || which != int(dim)) return false;
  }
  return true;
}

LoweringResult lower_group(const NodePtr& root, const std::unordered_set<Node*>& materialized,
                           const ConsumerCounts* consumers) {
  if (stores_its_source_unchanged(*root, materialized))
    return lower_group_computing(root, root->inputs[0], materialized, consumers);
  LoweringResult result = lower_group_computing(root, root, materialized, consumers);
  if (result.materialize_requests.empty() || root->kind != NodeKind::Reshape) return result;
  // A root that only reshapes a pending value: computed at the reshape's indices, a reduction inside it is read
  // at split indices and has to become a kernel of its own (cumsum's blocks, scanned and offset, then reshaped
  // back to the row). Looping over the source's own shape instead stores the same elements at the same offsets;
  // take that kernel when it asks for fewer values to be materialised.
  NodePtr source = root->inputs[0];
  while (source->kind == NodeKind::Reshape && !source->is_computed() && !materialized.count(source.get()))
    source = source->inputs[0];
  if (source->is_computed() || materialized.count(source.get()) || source->kind == NodeKind::ReindexReduce ||
      source->kind == NodeKind::Code || source->kind == NodeKind::HostOperation || source->kind == NodeKind::Data)
    return result;
  LoweringResult peeled = lower_group_computing(root, source, materialized, consumers);
  if (peeled.materialize_requests.size() < result.materialize_requests.size()) return with_inlined_of(std::move(peeled), result);
  return with_inlined_of(std::move(result), peeled);
}

LoweringResult lower_siblings(const std::vector<NodePtr>& roots, const std::unordered_set<Node*>& materialized,
                              const ConsumerCounts* consumers) {
  std::vector<NodePtr> siblings(roots.begin() + 1, roots.end());
  Lowerer plain(roots[0], materialized, consumers, {}, 0, roots[0], siblings);
  LoweringResult result = plain.run();
  if (!result.materialize_requests.empty() || !plain.row_reductions().empty()) return result;
  return merge_short_rows(roots[0], roots[0], materialized, consumers, std::move(result), siblings);
}

}  // namespace metajit

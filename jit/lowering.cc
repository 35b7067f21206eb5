// Builds the IR of one kernel by walking the graph from its root. Values are memoised per (node, indices) so
// diamonds in the graph are computed once per kernel; reductions found at the output index are hoisted into
// loops at the top level of the kernel body.
#include "jit/lowering.h"

#include <functional>
#include <stdexcept>
#include <unordered_map>

namespace metajit {
namespace {

constexpr int kMaxInstancesPerNode = 16;  // more distinct index patterns than this: materialise instead

class Lowerer {
 public:
  Lowerer(const NodePtr& root, const std::unordered_set<Node*>& materialized) : root_(root), materialized_(materialized) {}

  LoweringResult run() {
    LoweringResult result;
    result_ = &result;
    IrKernel& kernel = result.lowered.kernel;
    kernel_ = &kernel;
    kernel.buffers.push_back({"out0", root_->dtype, root_->shape, true});
    scopes_.push_back({&kernel.body, {}});
    if (root_->kind == NodeKind::ReindexReduce) {
      lower_scatter();
    } else {
      kernel.kind = IrKernel::Kind::Pointwise;
      kernel.domain = root_->shape;
      std::vector<IrExprPtr> indices = domain_indices();
      IrExprPtr value = node_value(root_, indices, /*is_root=*/true);
      emit({IrStatement::Kind::Store, "", root_->dtype, value, offset_of(root_->shape, indices), nullptr, 0});
    }
    result.lowered.output = root_;
    result.lowered.inputs = std::move(inputs_);
    result.materialize_requests = std::move(requests_);
    return result;
  }

 private:
  struct Scope {
    std::vector<IrStatement>* statements;
    std::unordered_map<std::string, IrExprPtr> values;
  };

  std::vector<IrExprPtr> domain_indices() {
    std::vector<IrExprPtr> indices;
    for (size_t dim = 0; dim < kernel_->domain.size(); ++dim)
      indices.push_back(ir_loop_variable("i" + std::to_string(dim), kernel_->domain[dim]));
    return indices;
  }

  void emit(IrStatement statement) { scopes_.back().statements->push_back(std::move(statement)); }

  IrExprPtr let(const std::string& base, IrExprPtr value) {
    if (value->kind == IrKind::Variable || value->kind == IrKind::IntConstant || value->kind == IrKind::FloatConstant)
      return value;
    std::string name = base + "_" + std::to_string(next_name_++);
    IrStatement statement{IrStatement::Kind::Let, name, value->dtype, value, nullptr, nullptr, -1};
    emit(std::move(statement));
    return ir_variable(name, value->dtype);
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
    if (!noted_.insert(&node).second) return;
    std::string line = node.op_name();
    line.resize(std::max<size_t>(line.size(), 16), ' ');
    kernel_->fused_ops.push_back(line + " " + shape_to_string(node.shape) + "  " + node.provenance.to_string());
  }

  int buffer_for(const NodePtr& node) {
    auto found = buffers_.find(node.get());
    if (found != buffers_.end()) return found->second;
    int index = int(kernel_->buffers.size());
    kernel_->buffers.push_back({"in" + std::to_string(index - 1), node->dtype, node->shape, false});
    buffers_[node.get()] = index;
    inputs_.push_back(node);
    return index;
  }

  void request(Node* node) {
    for (Node* existing : requests_)
      if (existing == node) return;
    requests_.push_back(node);
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

  IrExprPtr constant_of(double value, DType dtype) {
    if (is_floating(dtype)) return ir_float(value, dtype);
    if (dtype == DType::Bool) return ir_bool(value != 0);
    return ir_cast(dtype, ir_int(int64_t(value)));
  }

  // The value of `node` at `indices`, memoised per scope.
  IrExprPtr node_value(const NodePtr& node, const std::vector<IrExprPtr>& indices, bool is_root = false) {
    std::string key = std::to_string(reinterpret_cast<uintptr_t>(node.get())) + "@";
    for (const IrExprPtr& index : indices) key += ir_key(index) + ";";
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      auto found = scope->values.find(key);
      if (found != scope->values.end()) return found->second;
    }
    IrExprPtr value = compute_value(node, indices, is_root);
    if (value->kind == IrKind::Variable) record_origin(value->name, node.get(), indices, -1);
    // Hoisted reductions register themselves in the top scope; everything else in the current one.
    scopes_.back().values[key] = value;
    return value;
  }

  // The innermost node of a view chain registers first and keeps the name.
  void record_origin(const std::string& name, Node* node, const std::vector<IrExprPtr>& indices, int buffer) {
    auto& origins = result_->lowered.origins;
    auto found = origins.find(name);
    if (found == origins.end()) {
      origins[name] = {node, indices, buffer, nullptr, {}};
    } else if (node->kind == NodeKind::Reshape && node->inputs[0].get() == found->second.node && !found->second.reshape) {
      found->second.reshape = node;
      found->second.reshape_indices = indices;
    }
  }

  IrExprPtr compute_value(const NodePtr& node, const std::vector<IrExprPtr>& indices, bool is_root) {
    if (!is_root && (node->is_computed() || materialized_.count(node.get()))) {
      int buffer = buffer_for(node);
      IrExprPtr value = let(kernel_->buffers[buffer].name, ir_load(buffer, node->dtype, offset_of(node->shape, indices)));
      if (value->kind == IrKind::Variable) record_origin(value->name, node.get(), indices, buffer);
      return value;
    }
    if (!is_root && node->kind != NodeKind::Constant && node->kind != NodeKind::View && node->kind != NodeKind::Reshape &&
        node->kind != NodeKind::Custom && ++instances_[node.get()] > kMaxInstancesPerNode) {
      request(node.get());
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
        return let(node->op_name(), ir_unary(UnaryOp(node->op_code), node->dtype, operand));
      }
      case NodeKind::Binary: {
        note_fused(*node);
        IrExprPtr left = node_value(node->inputs[0], indices);
        IrExprPtr right = node_value(node->inputs[1], indices);
        return let(node->op_name(), ir_binary(BinaryOp(node->op_code), node->dtype, left, right));
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
        return node_value(node->inputs[0], source);
      }
      case NodeKind::Reindex:
        note_fused(*node);
        return reindex_value(node, indices);
      case NodeKind::Reduce:
        if (!is_root && !is_output_index(node, indices)) {
          request(node.get());
          return constant_of(0, node->dtype);
        }
        note_fused(*node);
        return reduce_value(node, indices);
      case NodeKind::ReindexReduce:
      case NodeKind::Code:  // a user's kernel writes whole buffers: never inlined
        if (is_root && node->kind == NodeKind::Code) throw std::logic_error("internal error: a Code op reached fused lowering");
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

  IrExprPtr reindex_value(const NodePtr& node, const std::vector<IrExprPtr>& indices) {
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
    IrExprPtr valid = validity(target, source->shape, conditions);
    if (valid->kind == IrKind::IntConstant && !valid->integer) return overflow;
    std::vector<IrExprPtr> clamped;
    for (size_t dim = 0; dim < target.size(); ++dim) clamped.push_back(clamp(target[dim], source->shape[dim]));
    IrExprPtr value = node_value(source, clamped);
    if (valid->kind == IrKind::IntConstant) return value;
    IrExprPtr condition = let("in_bounds", valid);
    return let("reindex", ir_select(condition, value, overflow));
  }

  IrExprPtr reduce_value(const NodePtr& node, const std::vector<IrExprPtr>& indices) {
    const NodePtr& source = node->inputs[0];
    IrStatement loop;
    loop.kind = IrStatement::Kind::ReduceLoop;
    loop.name = std::string(node->op_name() == "reduce_add" ? "sum" : reduce_op_name(ReduceOp(node->op_code))) + "_" +
                std::to_string(next_name_++);
    loop.dtype = node->dtype;
    loop.reduce_op = ReduceOp(node->op_code);
    std::vector<IrExprPtr> source_indices;
    int output_dim = 0;
    int64_t iterations = 1;
    for (size_t dim = 0; dim < source->shape.size(); ++dim) {
      if (node->reduce_mask >> dim & 1) {
        std::string name = "r" + std::to_string(dim);
        loop.loops.push_back({name, source->shape[dim]});
        source_indices.push_back(ir_loop_variable(name, source->shape[dim]));
        iterations *= source->shape[dim];
        if (node->keepdim) ++output_dim;
      } else {
        source_indices.push_back(indices[output_dim++]);
      }
    }
    kernel_->inner_work += iterations;
    // Hoist: the loop lives at the top level of the kernel body, whatever scope asked for it.
    std::vector<Scope> saved = std::move(scopes_);
    scopes_.clear();
    scopes_.push_back(std::move(saved.front()));
    scopes_.push_back({&loop.body, {}});
    loop.value = node_value(source, source_indices);
    scopes_.pop_back();
    scopes_.front().statements->push_back(std::move(loop));
    saved.front() = std::move(scopes_.front());
    scopes_ = std::move(saved);
    return ir_variable(scopes_.front().statements->back().name, node->dtype);
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
    IrStatement statement{IrStatement::Kind::ScatterAccumulate, "", root_->dtype, value, offset_of(root_->shape, target),
                          valid->kind == IrKind::IntConstant && valid->integer ? nullptr : valid, 0};
    emit(std::move(statement));
    int which = -1;
    kernel.scatter_split_rows = !source->shape.empty() && !root_->shape.empty() && is_loop_index(payload.indexes[0], &which) &&
                                which == 0 && source->shape[0] == root_->shape[0] && source->shape[0] > 1;
  }

  const NodePtr& root_;
  const std::unordered_set<Node*>& materialized_;
  IrKernel* kernel_ = nullptr;
  LoweringResult* result_ = nullptr;
  std::vector<Scope> scopes_;
  std::unordered_map<Node*, int> buffers_;
  std::unordered_map<Node*, int> instances_;
  std::unordered_set<const Node*> noted_;
  std::vector<NodePtr> inputs_;
  std::vector<Node*> requests_;
  int next_name_ = 0;
};

}  // namespace

LoweringResult lower_group(const NodePtr& root, const std::unordered_set<Node*>& materialized) {
  return Lowerer(root, materialized).run();
}

}  // namespace metajit

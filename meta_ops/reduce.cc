// Shape and dtype rules of reduce, reindex and reindex_reduce; index strings are parsed and validated here so
// a bad expression raises at the user's call, never at execution time.
#include "meta_ops/reduce.h"

#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "meta_ops/broadcast.h"
#include "meta_ops/elementwise.h"

namespace metajit {
namespace {

const char* const kReduceNames[] = {"add", "mul", "max", "min", "and", "or"};
constexpr int64_t kSplitReductionThreshold = int64_t(1) << 20;
constexpr int64_t kSplitReductionMaxChunks = 64;

// Chunk count for a split reduction: the largest divisor of `count` in [8, 64], so no padding is needed;
// 0 when there is none (then the reduction stays in one piece).
int64_t split_reduction_chunks(int64_t count) {
  for (int64_t chunks = kSplitReductionMaxChunks; chunks >= 8; --chunks)
    if (count % chunks == 0) return chunks;
  return 0;
}

IndexContext make_context(int loop_rank, int x_rank, int y_rank, const std::vector<NodePtr>& extras) {
  IndexContext context;
  context.loop_rank = loop_rank;
  context.x_rank = x_rank;
  context.y_rank = y_rank;
  for (const NodePtr& extra : extras) {
    if (is_floating(extra->dtype))
      throw std::invalid_argument("extra inputs of an index expression must be integer or bool tensors, got " +
                                  std::string(dtype_name(extra->dtype)));
    context.extra_ranks.push_back(int(extra->shape.size()));
    context.extra_is_boolean.push_back(extra->dtype == DType::Bool);
  }
  return context;
}

// The cache key of a parse: everything it depends on (not the shapes: `xshape0` stays a name). Each string is
// preceded by its length, so no two parses share a key.
std::string payload_key(const std::vector<std::string>& indexes, const std::vector<std::string>& conditions,
                        const IndexContext& context) {
  std::string key = std::to_string(context.loop_rank) + "," + std::to_string(context.x_rank) + "," +
                    std::to_string(context.y_rank) + ",";
  for (size_t extra = 0; extra < context.extra_ranks.size(); ++extra)
    key += std::to_string(context.extra_ranks[extra]) +
           (extra < context.extra_is_boolean.size() && context.extra_is_boolean[extra] ? "b," : "i,");
  for (const std::vector<std::string>* texts : {&indexes, &conditions}) {
    key += "|";
    for (const std::string& text : *texts) key += std::to_string(text.size()) + ":" + text;
  }
  return key;
}

// Parsed payloads by payload_key. A loop records the same reindexes every step (cat and stack place each piece
// with one; a 64-step LSTM's training step records about 475), and parsing and simplifying took 2-3 us of the
// 3-4 us each cost. Payloads are immutable, so nodes share them. Emptied when full, like the plan cache.
std::shared_ptr<const IndexPayload> cached_payload(const std::string& key, std::shared_ptr<const IndexPayload> parsed) {
  constexpr size_t kMaximumPayloads = 4096;
  static std::mutex mutex;
  static std::unordered_map<std::string, std::shared_ptr<const IndexPayload>> payloads;
  std::lock_guard<std::mutex> lock(mutex);
  if (!parsed) {
    auto found = payloads.find(key);
    return found == payloads.end() ? nullptr : found->second;
  }
  if (payloads.size() >= kMaximumPayloads) payloads.clear();
  payloads.emplace(key, parsed);
  return parsed;
}

std::shared_ptr<const IndexPayload> parse_payload(const char* what, const std::vector<std::string>& indexes,
                                                  size_t expected_indexes, const std::vector<std::string>& conditions,
                                                  const IndexContext& context) {
  if (indexes.size() != expected_indexes)
    throw std::invalid_argument(std::string(what) + ": expected " + std::to_string(expected_indexes) +
                                " index expressions (one per " + (std::string(what) == "reindex" ? "input" : "output") +
                                " dimension), got " + std::to_string(indexes.size()));
  std::string key = payload_key(indexes, conditions, context);
  if (std::shared_ptr<const IndexPayload> found = cached_payload(key, nullptr)) return found;
  auto payload = std::make_shared<IndexPayload>();
  for (const std::string& text : indexes)
    payload->indexes.push_back(simplify(parse_index_expression(text, context, IndexType::Integer)));
  for (const std::string& text : conditions)
    payload->overflow_conditions.push_back(simplify(parse_index_expression(text, context, IndexType::Boolean)));
  return cached_payload(key, std::move(payload));
}

void check_shape(const Shape& shape) {
  for (int64_t extent : shape)
    if (extent < 0) throw std::invalid_argument("negative dimension in shape " + shape_to_string(shape));
}

}  // namespace

const char* reduce_op_name(ReduceOp op) { return kReduceNames[int(op)]; }

ReduceOp reduce_op_from_name(const std::string& name) {
  for (int index = 0; index < 6; ++index)
    if (name == kReduceNames[index]) return ReduceOp(index);
  if (name == "sum") return ReduceOp::Add;
  if (name == "prod" || name == "multiply") return ReduceOp::Multiply;
  if (name == "maximum") return ReduceOp::Maximum;
  if (name == "minimum") return ReduceOp::Minimum;
  throw std::invalid_argument("unknown reduce op '" + name + "' (expected add, mul, max, min, and, or)");
}

DType reduce_result_dtype(ReduceOp op, DType input) {
  if (op == ReduceOp::LogicalAnd || op == ReduceOp::LogicalOr) return DType::Bool;
  if ((op == ReduceOp::Add || op == ReduceOp::Multiply) && !is_floating(input)) return DType::Int64;
  return input;
}

std::string IndexPayload::describe() const {
  std::string text = "indexes=[";
  for (size_t index = 0; index < indexes.size(); ++index)
    text += (index ? ", " : "") + to_canonical_string(indexes[index]);
  text += "]";
  if (!overflow_conditions.empty()) {
    text += " overflow_conditions=[";
    for (size_t index = 0; index < overflow_conditions.size(); ++index)
      text += (index ? ", " : "") + to_canonical_string(overflow_conditions[index]);
    text += "]";
  }
  return text;
}

NodePtr reduce(const NodePtr& input, ReduceOp op, const std::vector<int64_t>& dims, bool keepdim) {
  int rank = int(input->shape.size());
  std::vector<int> reduced = normalize_dims(dims, rank, "reduce");
  if (rank > 64) throw std::invalid_argument("reduce supports tensors of rank at most 64");
  uint64_t mask = 0;
  for (int dim : reduced) mask |= uint64_t(1) << dim;
  Shape shape;
  for (int dim = 0; dim < rank; ++dim) {
    if (mask >> dim & 1) {
      if (keepdim) shape.push_back(1);
    } else {
      shape.push_back(input->shape[dim]);
    }
  }
  DType result = reduce_result_dtype(op, input->dtype);
  // Nothing to reduce (a 0-d input, or no dims): the value is the input, but in the reduction's result type, so
  // an int8 or bool sum is int64 whatever the rank.
  if (mask == 0) return result == input->dtype ? input : make_node(NodeKind::Cast, result, input->shape, {input});
  NodePtr operand = input;
  if (result != input->dtype && result != DType::Bool) operand = make_node(NodeKind::Cast, result, input->shape, {input});
  int64_t chunk_count = split_reduction_chunks(input->numel());
  if (shape_numel(shape) == 1 && input->numel() >= kSplitReductionThreshold && chunk_count) {
    // A reduction to one value would run on one thread: reduce equal chunks in parallel first, then the
    // partial results. The chunk count depends only on the size, so kernels and cache keys are host-independent.
    NodePtr chunks = reshape(operand, {chunk_count, input->numel() / chunk_count});
    NodePtr partial = reduce(chunks, op, {1}, false);
    NodePtr total = reduce(partial, op, {0}, false);
    return keepdim ? reshape(total, shape) : total;
  }
  auto node = make_node(NodeKind::Reduce, result, shape, {operand});
  node->op_code = uint16_t(op);
  node->reduce_mask = mask;
  node->keepdim = keepdim;
  return node;
}

NodePtr reindex_reduce(const NodePtr& input, ReduceOp op, const Shape& shape, const std::vector<std::string>& indexes,
                       const std::vector<std::string>& overflow_conditions, const std::vector<NodePtr>& extras) {
  check_shape(shape);
  IndexContext context = make_context(int(input->shape.size()), int(input->shape.size()), int(shape.size()), extras);
  return reindex_reduce_parsed(input, op, shape,
                               parse_payload("reindex_reduce", indexes, shape.size(), overflow_conditions, context), extras);
}

NodePtr reindex(const NodePtr& input, const Shape& shape, const std::vector<std::string>& indexes, double overflow_value,
                const std::vector<std::string>& overflow_conditions, const std::vector<NodePtr>& extras) {
  check_shape(shape);
  IndexContext context = make_context(int(shape.size()), int(input->shape.size()), int(shape.size()), extras);
  return reindex_parsed(input, shape, parse_payload("reindex", indexes, input->shape.size(), overflow_conditions, context),
                        overflow_value, extras);
}

NodePtr reindex_parsed(const NodePtr& input, const Shape& shape, std::shared_ptr<const IndexPayload> payload,
                       double overflow_value, const std::vector<NodePtr>& extras) {
  std::vector<NodePtr> inputs{input};
  inputs.insert(inputs.end(), extras.begin(), extras.end());
  auto node = make_node(NodeKind::Reindex, input->dtype, shape, std::move(inputs));
  node->scalar = overflow_value;
  node->payload = std::move(payload);
  return node;
}

NodePtr reindex_reduce_parsed(const NodePtr& input, ReduceOp op, const Shape& shape,
                              std::shared_ptr<const IndexPayload> payload, const std::vector<NodePtr>& extras) {
  DType result = reduce_result_dtype(op, input->dtype);
  NodePtr operand = input;
  if (result != input->dtype && result != DType::Bool) operand = make_node(NodeKind::Cast, result, input->shape, {input});
  std::vector<NodePtr> inputs{operand};
  inputs.insert(inputs.end(), extras.begin(), extras.end());
  auto node = make_node(NodeKind::ReindexReduce, result, shape, std::move(inputs));
  node->op_code = uint16_t(op);
  node->payload = std::move(payload);
  return node;
}

namespace {

std::shared_ptr<const IndexPayload> swapped_payload(const Node& node) {
  auto original = std::static_pointer_cast<const IndexPayload>(node.payload);
  auto swapped = std::make_shared<IndexPayload>();
  for (const IndexExpression& index : original->indexes) swapped->indexes.push_back(swap_input_output_shapes(index));
  for (const IndexExpression& condition : original->overflow_conditions)
    swapped->overflow_conditions.push_back(swap_input_output_shapes(condition));
  return swapped;
}

std::vector<NodePtr> extras_of(const Node& node) { return {node.inputs.begin() + 1, node.inputs.end()}; }

// A reduced-shape value (the output or its gradient) broadcast back over the reduced input.
NodePtr expand_reduced(const Node& node, const NodePtr& value, const Shape& input_shape) {
  if (node.keepdim) return broadcast_to(value, input_shape);
  std::vector<int64_t> dims;
  for (int dim = 0; dim < int(input_shape.size()); ++dim)
    if (node.reduce_mask >> dim & 1) dims.push_back(dim);
  return broadcast(value, input_shape, dims);
}

NodePtr zeros_like(const NodePtr& like) { return constant(like->shape, like->dtype, 0.0); }

}  // namespace

std::vector<NodePtr> reduce_gradient(const NodePtr& node, const NodePtr& grad) {
  const NodePtr& input = node->inputs[0];
  ReduceOp op = ReduceOp(node->op_code);
  NodePtr spread = expand_reduced(*node, grad, input->shape);
  switch (op) {
    case ReduceOp::Add:
      return {spread};
    case ReduceOp::Multiply: {
      // d(prod)/dx is the product of the other elements. prod / x gives it only where no element is 0, so: with
      // no zero, prod / x; with exactly one zero, that element gets the product of the rest and every other 0;
      // with more, all 0 (as PyTorch). Each quotient divides by 1 where x is 0, so the unused side stays finite.
      std::vector<int64_t> dims;
      for (int dim = 0; dim < int(input->shape.size()); ++dim)
        if (node->reduce_mask >> dim & 1) dims.push_back(dim);
      NodePtr zero = constant(input->shape, input->dtype, 0.0), one = constant(input->shape, input->dtype, 1.0);
      NodePtr is_zero = binary(BinaryOp::Equal, input, zero);
      NodePtr safe = where(is_zero, one, input);
      NodePtr zeros_here = expand_reduced(*node, reduce(cast(is_zero, input->dtype), ReduceOp::Add, dims, node->keepdim),
                                          input->shape);
      NodePtr others = expand_reduced(*node, reduce(safe, ReduceOp::Multiply, dims, node->keepdim), input->shape);
      NodePtr none = binary(BinaryOp::Equal, zeros_here, zero);
      NodePtr only_this = binary(BinaryOp::LogicalAnd, binary(BinaryOp::Equal, zeros_here, one), is_zero);
      NodePtr slope = where(none, binary(BinaryOp::Divide, others, safe), where(only_this, others, zero));
      return {binary(BinaryOp::Multiply, spread, slope)};
    }
    case ReduceOp::Maximum:
    case ReduceOp::Minimum: {
      NodePtr ties = cast(binary(BinaryOp::Equal, input, expand_reduced(*node, node, input->shape)), input->dtype);
      std::vector<int64_t> dims;
      for (int dim = 0; dim < int(input->shape.size()); ++dim)
        if (node->reduce_mask >> dim & 1) dims.push_back(dim);
      NodePtr count = expand_reduced(*node, reduce(ties, ReduceOp::Add, dims, node->keepdim), input->shape);
      return {binary(BinaryOp::Divide, binary(BinaryOp::Multiply, spread, ties), count)};
    }
    default:
      return {nullptr};
  }
}

std::vector<NodePtr> reindex_gradient(const NodePtr& node, const NodePtr& grad) {
  const NodePtr& input = node->inputs[0];
  std::vector<NodePtr> result(node->inputs.size());
  result[0] = reindex_reduce_parsed(grad, ReduceOp::Add, input->shape, swapped_payload(*node), extras_of(*node));
  return result;
}

std::vector<NodePtr> reindex_reduce_gradient(const NodePtr& node, const NodePtr& grad) {
  const NodePtr& input = node->inputs[0];
  std::vector<NodePtr> result(node->inputs.size());
  auto payload = swapped_payload(*node);
  std::vector<NodePtr> extras = extras_of(*node);
  NodePtr gathered = reindex_parsed(grad, input->shape, payload, 0.0, extras);
  switch (ReduceOp(node->op_code)) {
    case ReduceOp::Add:
      result[0] = gathered;
      break;
    case ReduceOp::Multiply:
      result[0] = binary(BinaryOp::Divide,
                         binary(BinaryOp::Multiply, gathered, reindex_parsed(node, input->shape, payload, 0.0, extras)),
                         input);
      break;
    case ReduceOp::Maximum:
    case ReduceOp::Minimum: {
      NodePtr target = reindex_parsed(node, input->shape, payload, 0.0, extras);
      result[0] = where(binary(BinaryOp::Equal, input, target), gathered, zeros_like(gathered));
      break;
    }
    default:
      break;
  }
  return result;
}

}  // namespace metajit

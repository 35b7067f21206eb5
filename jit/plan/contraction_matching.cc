// Contraction matching works on resolved expressions: every let is substituted back, so the shape of an index
// does not depend on how the lowering happened to name its parts. Padding shows up as a clamped load under a
// select whose condition is exactly the range test of the clamped indices; anything else (a user's overflow
// condition, a division in an index) is not a contraction and stays a generated loop.
#include "jit/plan/contraction_matching.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <iomanip>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/flags.h"
#include "jit/ir/placement.h"

namespace metajit {
namespace {

// The longest post-op chain offered to a backend: oneDNN refuses longer ones (its post_ops_limit), and each
// prefix offered is an epilogue kernel built and a primitive tried. A sum of 2000 products that reaches a
// library call (an unrolled recurrence's weight gradient, some terms stored by earlier syncs) built 2000
// epilogues of 2000 statements and tried 1968 primitives before this limit.
constexpr size_t kMostPostOps = 32;

bool is_index_op(const IrExprPtr& expression, IndexOperator op) {
  return expression->kind == IrKind::IndexBinary && IndexOperator(expression->op) == op;
}

bool int_constant(const IrExprPtr& expression, int64_t* value) {
  if (expression->kind != IrKind::IntConstant) return false;
  *value = expression->integer;
  return true;
}

class Matcher {
 public:
  explicit Matcher(const LoweredKernel& lowered) : lowered_(lowered), kernel_(lowered.kernel) {}

  ContractionMatch run() {
    ContractionMatch match;
    // Per-row reductions (a softmax's max and sum) are not a library's business. A contraction that reads them
    // through an operand computed here (attention's probabilities @ values) still is, once that operand is a
    // buffer: only the request to materialise it is returned. Fused, the product recomputed the softmax's exp for
    // every output column (inference attention 6x slower than PyTorch).
    bool row_reductions = !kernel_.row_body.empty();
    if (kernel_.kind == IrKernel::Kind::Pointwise && !has_one_float_sum()) return match;
    for (size_t dim = 0; dim < kernel_.domain.size(); ++dim) extents_["i" + std::to_string(dim)] = kernel_.domain[dim];
    collect_lets(kernel_.body);
    find_split_variables();
    if (kernel_.buffers[0].dtype != DType::Float32) return match;
    Contraction contraction;
    contraction.dtype = DType::Float32;
    IrExprPtr product;
    if (kernel_.kind == IrKernel::Kind::Pointwise) {
      if (!match_pointwise(&contraction, &product, &match)) return match;
    } else {
      if (!match_scatter(&contraction, &product)) return match;
    }
    const IrExprPtr resolved = resolve_variable(product);
    if (resolved->kind != IrKind::Binary || BinaryOp(resolved->op) != BinaryOp::Multiply ||
        resolved->dtype != DType::Float32)
      return match;
    operand_number_ = 1;
    if (!operand(resolved->args[0], &contraction.left, &match.materialize)) return {};
    operand_number_ = 2;
    if (!operand(resolved->args[1], &contraction.right, &match.materialize)) return {};
    for (Node* node : match.materialize) match.stores.push_back(stores_.at(node));
    for (const auto& [name, extent] : extents_) {
      if (extent <= 0) return {};
      auto split = split_factors_.find(name);
      if (split != split_factors_.end()) {
        contraction.extents[group_name(name)] = extent / split->second;
        contraction.extents[member_name(name)] = split->second;
      } else if (extent > 1) {
        contraction.extents[name] = extent;
      }
    }
    match.contraction = std::move(contraction);
    if (row_reductions) {
      if (match.materialize.empty()) return {};
      match.epilogue.reset();  // planned again once the operands are buffers
      return match;
    }
    if (match.epilogue) fold_post_ops(&match);
    return match;
  }

 private:
  void collect_lets(const std::vector<IrStatement>& statements) {
    for (const IrStatement& statement : statements) {
      if (statement.kind == IrStatement::Kind::Let) lets_[statement.name] = statement.value;
      if (statement.kind == IrStatement::Kind::ReduceLoop) {
        for (const auto& [name, extent] : statement.loops) extents_[name] = extent;
        collect_lets(statement.body);
      }
    }
  }

  // A loop variable read only as v / k (never v % k or v / j for another j) is split into v / k and v % k: a
  // grouped convolution reads its image channel (o / Og) * Cg + c, which is affine in the group o / Og and in
  // c, and writes its output channel o = Og * (o / Og) + o % Og. Variables also read modulo something are left
  // alone: those are reshapes of split dims (attention's heads), which view_operand materialises instead.
  void find_split_variables() {
    std::unordered_map<std::string, std::set<int64_t>> divisors;
    std::set<std::string> unsplittable;
    std::set<const IrExpr*> seen;
    std::function<void(const IrExprPtr&)> scan = [&](const IrExprPtr& expression) {
      if (!expression || !seen.insert(expression.get()).second) return;
      if (expression->kind == IrKind::IndexBinary && (is_index_op(expression, IndexOperator::FloorDivide) ||
                                                      is_index_op(expression, IndexOperator::FloorModulo))) {
        IrExprPtr dividend = resolve_variable(expression->args[0]);
        int64_t divisor;
        if (dividend->kind == IrKind::Variable && extents_.count(dividend->name)) {
          if (is_index_op(expression, IndexOperator::FloorDivide) && int_constant(expression->args[1], &divisor))
            divisors[dividend->name].insert(divisor);
          else
            unsplittable.insert(dividend->name);
        }
      }
      if (expression->kind == IrKind::Variable && !extents_.count(expression->name)) {
        auto let = lets_.find(expression->name);
        if (let != lets_.end()) scan(let->second);
      }
      for (const IrExprPtr& argument : expression->args) scan(argument);
    };
    std::function<void(const std::vector<IrStatement>&)> scan_statements = [&](const std::vector<IrStatement>& body) {
      for (const IrStatement& statement : body) {
        scan(statement.value);
        scan(statement.offset);
        scan(statement.condition);
        scan_statements(statement.body);
      }
    };
    scan_statements(kernel_.body);
    for (const auto& [name, origin] : lowered_.origins) {
      for (const IrExprPtr& index : origin.indices) scan(index);
      for (const ValueOrigin::View& view : origin.views)
        for (const IrExprPtr& index : view.indices) scan(index);
    }
    for (const IrExprPtr& index : lowered_.scatter_target) scan(index);
    for (const auto& [name, factors] : divisors) {
      int64_t extent = extents_.at(name), factor = *factors.begin();
      if (factors.size() == 1 && !unsplittable.count(name) && factor > 1 && factor < extent && extent % factor == 0)
        split_factors_[name] = factor;
    }
  }
  static std::string group_name(const std::string& variable) { return variable + "/"; }
  static std::string member_name(const std::string& variable) { return variable + "%"; }

  // A loop variable as an affine index: itself, or k * (v / k) + v % k when it is split.
  AffineIndex variable_index(const std::string& name, int64_t extent) const {
    AffineIndex index;
    auto split = split_factors_.find(name);
    if (split != split_factors_.end()) {
      index.terms[group_name(name)] = split->second;
      index.terms[member_name(name)] = 1;
    } else if (extent > 1) {
      index.terms[name] = 1;
    }
    return index;
  }

  int64_t term_extent(const std::string& term) const {
    for (const auto& [name, factor] : split_factors_) {
      if (term == group_name(name)) return extents_.at(name) / factor;
      if (term == member_name(name)) return factor;
    }
    return extents_.at(term);
  }

  // Whether an affine index stays in [0, size) over all its variables' ranges.
  bool always_within(const AffineIndex& index, int64_t size) const {
    int64_t low = index.constant, high = index.constant;
    for (const auto& [term, coefficient] : index.terms) {
      int64_t reach = coefficient * (term_extent(term) - 1);
      (reach < 0 ? low : high) += reach;
    }
    return low >= 0 && high < size;
  }

  // Follows variables that name lets (not loop variables) to their values.
  IrExprPtr resolve_variable(IrExprPtr expression) const {
    while (expression->kind == IrKind::Variable && !extents_.count(expression->name)) {
      auto found = lets_.find(expression->name);
      if (found == lets_.end()) break;
      expression = found->second;
    }
    return expression;
  }

  // The expression with every let substituted, for comparing index expressions by their text.
  IrExprPtr substitute(const IrExprPtr& expression) const {
    IrExprPtr resolved = resolve_variable(expression);
    if (resolved->args.empty()) return resolved;
    auto copy = std::make_shared<IrExpr>(*resolved);
    copy->key.clear();
    for (IrExprPtr& argument : copy->args) argument = substitute(argument);
    return copy;
  }

  bool affine(const IrExprPtr& raw, AffineIndex* result) const {
    IrExprPtr expression = resolve_variable(raw);
    int64_t value;
    if (int_constant(expression, &value)) {
      result->constant = value;
      return true;
    }
    if (expression->kind == IrKind::Variable) {
      auto found = extents_.find(expression->name);
      if (found == extents_.end()) return false;
      *result = variable_index(found->first, found->second);
      return true;
    }
    if (expression->kind != IrKind::IndexBinary) return false;
    IndexOperator op = IndexOperator(expression->op);
    if (op == IndexOperator::FloorDivide) {  // only a split variable's group, v / k
      IrExprPtr dividend = resolve_variable(expression->args[0]);
      auto split = dividend->kind == IrKind::Variable ? split_factors_.find(dividend->name) : split_factors_.end();
      int64_t divisor;
      if (split == split_factors_.end() || !int_constant(expression->args[1], &divisor) || divisor != split->second)
        return false;
      result->terms[group_name(dividend->name)] = 1;
      return true;
    }
    AffineIndex left, right;
    if (!affine(expression->args[0], &left) || !affine(expression->args[1], &right)) return false;
    if (op == IndexOperator::Add || op == IndexOperator::Subtract) {
      int64_t sign = op == IndexOperator::Add ? 1 : -1;
      *result = left;
      result->constant += sign * right.constant;
      for (const auto& [name, coefficient] : right.terms) result->terms[name] += sign * coefficient;
    } else if (op == IndexOperator::Multiply) {
      const AffineIndex* scaled = &left;
      int64_t factor;
      if (left.terms.empty()) {
        factor = left.constant;
        scaled = &right;
      } else if (right.terms.empty()) {
        factor = right.constant;
      } else {
        return false;
      }
      result->constant = scaled->constant * factor;
      for (const auto& [name, coefficient] : scaled->terms) result->terms[name] = coefficient * factor;
    } else {
      return false;
    }
    for (auto term = result->terms.begin(); term != result->terms.end();)
      term = term->second == 0 ? result->terms.erase(term) : std::next(term);
    return true;
  }

  // Range tests joined by &&: key of the tested index -> (has >= 0, upper bound of < n or -1).
  struct RangeTest {
    bool lower = false;
    int64_t upper = -1;
  };
  bool range_tests(const IrExprPtr& raw, std::unordered_map<std::string, RangeTest>* tests) const {
    IrExprPtr condition = resolve_variable(raw);
    if (is_index_op(condition, IndexOperator::LogicalAnd))
      return range_tests(condition->args[0], tests) && range_tests(condition->args[1], tests);
    int64_t bound;
    if (is_index_op(condition, IndexOperator::GreaterEqual) && int_constant(condition->args[1], &bound) && bound == 0) {
      (*tests)[ir_key(substitute(condition->args[0]))].lower = true;
      return true;
    }
    if (is_index_op(condition, IndexOperator::Less) && int_constant(condition->args[1], &bound)) {
      (*tests)[ir_key(substitute(condition->args[0]))].upper = bound;
      return true;
    }
    return false;
  }

  // Per-dimension coordinates of an access. A clamped index (min(max(x, 0), n - 1)) is x, guarded: it needs the
  // range test of x in `tests`, and every test must belong to some guarded dimension.
  bool coordinates(const std::vector<IrExprPtr>& indices, const Shape& shape,
                   std::unordered_map<std::string, RangeTest> tests, bool clamped_form, TensorAccess* access) const {
    access->shape = shape;
    access->coordinates.assign(indices.size(), {});
    access->guarded.assign(indices.size(), false);
    for (size_t dim = 0; dim < indices.size(); ++dim) {
      IrExprPtr index = resolve_variable(indices[dim]);
      int64_t high, low;
      if (clamped_form && is_index_op(index, IndexOperator::Minimum) && int_constant(index->args[1], &high) &&
          is_index_op(resolve_variable(index->args[0]), IndexOperator::Maximum)) {
        IrExprPtr inner = resolve_variable(index->args[0]);
        if (!int_constant(inner->args[1], &low) || low != 0 || high != shape[dim] - 1) return false;
        index = inner->args[0];
        access->guarded[dim] = true;
      } else if (!clamped_form) {
        // The output of a scatter: the raw target index, guarded when the condition tests it.
        access->guarded[dim] = tests.count(ir_key(substitute(index))) != 0;
      }
      if (access->guarded[dim]) {
        auto test = tests.find(ir_key(substitute(index)));
        if (test == tests.end() || !test->second.lower || test->second.upper != shape[dim]) return false;
        tests.erase(test);
      }
      if (!affine(index, &access->coordinates[dim])) return false;
      // A test the index always passes guards nothing (a grouped convolution's scattered channel, Cg * g + c).
      if (access->guarded[dim] && always_within(access->coordinates[dim], shape[dim])) access->guarded[dim] = false;
    }
    return tests.empty();
  }

  bool plain_origin(const IrExprPtr& value, const ValueOrigin** origin) const {
    if (value->kind != IrKind::Variable) return false;
    auto found = lowered_.origins.find(value->name);
    if (found == lowered_.origins.end()) return false;
    *origin = &found->second;
    return true;
  }

  // An operand is a load of a buffer, or a zero-padded (reindexed) load. A value computed inside the kernel
  // would first have to become a buffer: the access then has buffer -1 and its producer is listed.
  bool operand(const IrExprPtr& value, TensorAccess* access, std::vector<Node*>* materialize) {
    if (value->dtype != DType::Float32) return false;
    const ValueOrigin* origin = nullptr;
    if (!plain_origin(value, &origin)) return false;
    IrExprPtr resolved = resolve_variable(value);
    if (origin->buffer < 0 && resolved->kind == IrKind::Select && resolved->args[2]->kind == IrKind::FloatConstant &&
        resolved->args[2]->floating == 0.0) {
      // A zero-padded read (a reindex out of range); anything else that picks zero is an ordinary value.
      const ValueOrigin* inner = nullptr;
      std::unordered_map<std::string, RangeTest> tests;
      if (plain_origin(resolved->args[1], &inner) && range_tests(resolved->args[0], &tests)) {
        std::vector<Node*> inner_requests;
        if (inner->buffer >= 0 || storable(inner->node, &inner_requests)) {
          access->buffer = inner->buffer;
          if (coordinates(inner->indices, inner->node->shape, tests, true, access)) {
            materialize->insert(materialize->end(), inner_requests.begin(), inner_requests.end());
            return true;
          }
        }
        // Padding around a value read at non-affine indices (an upsampled image): the view that reads it at
        // affine ones becomes a buffer of its own.
        for (const ValueOrigin::View& view : inner->views) {
          TensorAccess candidate;
          candidate.buffer = -1;
          if (!small_enough_to_store(view.node, inner->node) ||
              !coordinates(view.indices, view.node->shape, tests, true, &candidate))
            continue;
          *access = std::move(candidate);
          store(view.node, "zero padding around a value read at indices that are not affine (an upsampled image)",
                materialize);
          return true;
        }
      }
    }
    if (origin->buffer >= 0) {
      access->buffer = origin->buffer;
      if (coordinates(origin->indices, origin->node->shape, {}, false, access) && !access->any_guarded()) return true;
      return view_operand(*origin, access, materialize);
    }
    std::vector<Node*> requests;
    if (storable(origin->node, &requests)) {
      bool plain = coordinates(origin->indices, origin->node->shape, {}, false, access) && !access->any_guarded();
      // Read through a reshape: once materialised, the reshape reads the buffer at its own (affine) indices.
      if (!plain && !origin->views.empty() && origin->views.front().node->kind == NodeKind::Reshape) {
        const ValueOrigin::View& reshape = origin->views.front();
        plain = coordinates(reshape.indices, reshape.node->shape, {}, false, access) && !access->any_guarded();
      }
      if (plain) {
        materialize->insert(materialize->end(), requests.begin(), requests.end());
        return true;
      }
    }
    // Read through a reindex at indices that are not affine (a computed image, reflected once the lowering knows
    // the reflection stays in range, so with no padding test left): the view reading it at plain indices is stored.
    return view_operand(*origin, access, materialize);
  }

  // A buffer read at split indices (a permute, then a reshape that merges the permuted dims: attention's heads
  // joined again) or at clamped ones (an image padded by repeating its edge) is no strided matrix. The innermost
  // view that reads at plain indices is: it becomes a buffer of its own (one copy, not much larger than the
  // source) and the library reads that.
  bool view_operand(const ValueOrigin& origin, TensorAccess* access, std::vector<Node*>* materialize) {
    for (const ValueOrigin::View& view : origin.views) {
      if (view.node->dtype != DType::Float32 ||
          (view.node->numel() > origin.node->numel() && !small_enough_to_store(view.node, origin.node)))
        continue;
      TensorAccess candidate;
      candidate.buffer = -1;
      if (!coordinates(view.indices, view.node->shape, {}, false, &candidate) || candidate.any_guarded()) continue;
      *access = std::move(candidate);
      store(view.node,
            origin.buffer >= 0 ? "a buffer read at indices that are not affine (split by a reshape, clamped, reflected)"
            : view.node->kind == NodeKind::Reindex
                ? "a reindex whose indices are not affine (a reflection, a clamp, a division)"
                : "a value read at indices that are not affine",
            materialize);
      return true;
    }
    return false;
  }

  // A view or reindex stored for a library call: at most kMaximumStoredGrowth times its source, and a small part
  // of the contraction's multiply-adds, so a patch tensor (an image repeated per kernel tap) is never written out.
  bool small_enough_to_store(const Node* view, const Node* source) const {
    constexpr int64_t kMaximumStoredGrowth = 16, kMinimumWorkPerStoredElement = 8;
    double work = 1;
    for (const auto& [name, extent] : extents_) work *= double(extent);
    return view->dtype == DType::Float32 &&
           view->numel() <= kMaximumStoredGrowth * std::max<int64_t>(source->numel(), 1) &&
           double(view->numel()) * kMinimumWorkPerStoredElement <= work;
  }

  // What materializable takes, and also a reindex not much larger than its source (a reflected, replicated or
  // upsampled image): one pass to store it is worth it when the library then runs the contraction, where the
  // generated loop nest recomputed its indices at every multiply-add (a convolution after ReflectionPad2d ran 100x
  // slower than oneDNN).
  bool storable(Node* node, std::vector<Node*>* materialize) {
    // A placement (jit/ir/placement.h, a piece of cat's gradient) read where the library cannot follow it: stored
    // by a gather of its own, as it was by a scatter before lowering inlined placements.
    bool placement = node->kind == NodeKind::ReindexReduce && injective_placement(*node);
    if ((node->kind == NodeKind::Reindex || placement) && small_enough_to_store(node, node->inputs[0].get())) {
      store(node,
            placement ? "a scatter of each element to its own place, read at indices that are not affine"
                      : "a reindex whose indices are not affine (a reflection, a clamp, a division)",
            materialize);
      return true;
    }
    return materializable(node, materialize);
  }

  // Elementwise producers only: a reduction has its own kernel already, and materialising a reindex (a patch
  // tensor with a user condition, say) could be many times the size of its source.
  bool materializable(Node* node, std::vector<Node*>* materialize) {
    if (node->kind == NodeKind::Reduce || node->kind == NodeKind::ReindexReduce || node->kind == NodeKind::Reindex ||
        node->kind == NodeKind::Constant || node->dtype != DType::Float32)
      return false;
    store(node, "a value computed inside the kernel (it reads operands from memory)", materialize);
    return true;
  }

  // `node` is to be stored for operand operand_number_, for the reason `why` (mj.inspect shows it).
  void store(Node* node, const char* why, std::vector<Node*>* materialize) {
    materialize->push_back(node);
    stores_.insert({node, {node, operand_number_, why}});
  }

  // A pointwise kernel can only be a contraction with exactly one top-level loop, a float32 sum, and no scatter
  // (what match_pointwise asks first). Checked before the passes over every let: elementwise kernels are most
  // of a plan, and a long one took milliseconds to reject.
  bool has_one_float_sum() const {
    const IrStatement* loop = nullptr;
    for (const IrStatement& statement : kernel_.body) {
      if (statement.kind == IrStatement::Kind::ScatterAccumulate) return false;
      if (statement.kind != IrStatement::Kind::ReduceLoop) continue;
      if (loop) return false;
      loop = &statement;
    }
    return loop && loop->reduce_op == ReduceOp::Add && loop->dtype == DType::Float32 && !kernel_.body.empty() &&
           kernel_.body.back().kind == IrStatement::Kind::Store;
  }

  bool match_pointwise(Contraction* contraction, IrExprPtr* product, ContractionMatch* match) {
    const IrStatement* loop = nullptr;
    size_t loop_position = 0;
    for (size_t position = 0; position < kernel_.body.size(); ++position) {
      const IrStatement& statement = kernel_.body[position];
      if (statement.kind == IrStatement::Kind::ScatterAccumulate) return false;
      if (statement.kind != IrStatement::Kind::ReduceLoop) continue;
      if (loop) return false;  // one contraction per kernel
      loop = &statement;
      loop_position = position;
    }
    if (!loop || loop->reduce_op != ReduceOp::Add || loop->dtype != DType::Float32) return false;
    const IrStatement& store = kernel_.body.back();
    if (store.kind != IrStatement::Kind::Store) return false;
    *product = loop->value;
    TensorAccess& output = contraction->output;
    output.buffer = 0;
    output.shape = kernel_.domain;
    for (size_t dim = 0; dim < kernel_.domain.size(); ++dim) {
      output.coordinates.push_back(variable_index("i" + std::to_string(dim), kernel_.domain[dim]));
      output.guarded.push_back(false);
    }
    bool direct = store.value->kind == IrKind::Variable && store.value->name == loop->name;
    if (!direct) {
      match->epilogue = epilogue_reading_result(loop_position, loop->name, {});
      loop_position_ = loop_position;
    }
    return true;
  }

  // The kernel with its sum replaced by a load of one more input buffer, which holds the library's result: the
  // let `name` (the sum, or the last post-op folded into the call) reads it, in place of the loop, and the lets
  // in `dropped` (the folded post-ops before it) go.
  IrKernel epilogue_reading_result(size_t loop_position, const std::string& name,
                                   const std::set<std::string>& dropped) const {
    IrKernel epilogue = kernel_;
    int buffer = int(epilogue.buffers.size());
    epilogue.buffers.push_back(IrBuffer::input("in" + std::to_string(buffer - 1), DType::Float32, kernel_.domain));
    IrExprPtr offset = ir_int(0);
    int64_t stride = 1;
    for (int dim = int(kernel_.domain.size()) - 1; dim >= 0; --dim) {
      if (kernel_.domain[dim] != 1)
        offset = ir_index(IndexOperator::Add, offset,
                          ir_index(IndexOperator::Multiply,
                                   ir_loop_variable("i" + std::to_string(dim), kernel_.domain[dim]), ir_int(stride)));
      stride *= kernel_.domain[dim];
    }
    IrStatement replacement = IrStatement::let(name, DType::Float32, ir_load(buffer, DType::Float32, offset));
    epilogue.body.clear();
    for (size_t position = 0; position < kernel_.body.size(); ++position) {
      const IrStatement& statement = kernel_.body[position];
      if (position == loop_position)
        epilogue.body.push_back(replacement);
      else if (statement.kind != IrStatement::Kind::Let || !dropped.count(statement.name))
        epilogue.body.push_back(statement);
    }
    epilogue.inner_work = 1;
    return epilogue;
  }

  // Element-wise work after the sum that a library can apply itself: starting from the sum, each let that is
  // the only user of the previous value and adds, subtracts or multiplies by a tensor (a buffer), applies ReLU,
  // or scales and shifts by constants. Adds a fold to match->folds for each prefix of that chain, longest first.
  void fold_post_ops(ContractionMatch* match) const {
    const std::vector<IrStatement>& body = kernel_.body;
    std::unordered_map<std::string, int> uses;
    std::function<void(const IrExprPtr&)> count = [&](const IrExprPtr& expression) {
      if (!expression) return;
      if (expression->kind == IrKind::Variable) uses[expression->name]++;
      for (const IrExprPtr& argument : expression->args) count(argument);
    };
    for (size_t position = loop_position_ + 1; position < body.size(); ++position) {
      count(body[position].value);
      count(body[position].offset);
      count(body[position].condition);
    }
    std::vector<PostOp> post_ops;
    bool has_linear = false;
    std::set<std::string> folded;
    std::string current = body[loop_position_].name;
    struct Prefix {
      std::vector<PostOp> post_ops;
      std::string last;              // the let holding the library's result
      std::set<std::string> folded;  // the lets it replaces
    };
    std::vector<Prefix> prefixes;
    for (size_t position = loop_position_ + 1;
         position < body.size() && uses[current] == 1 && post_ops.size() < kMostPostOps; ++position) {
      const IrStatement& statement = body[position];
      if (statement.kind != IrStatement::Kind::Let || !statement.value) continue;
      bool reads_current = false;
      for (const IrExprPtr& argument : statement.value->args)
        reads_current |= argument->kind == IrKind::Variable && argument->name == current;
      if (!reads_current) continue;
      PostOp op;
      if (statement.dtype != DType::Float32 || !post_op(statement.value, current, &op)) break;
      if (op.kind == PostOp::Kind::Linear && !post_ops.empty() && post_ops.back().kind == PostOp::Kind::Linear) {
        PostOp& previous = post_ops.back();  // (x * a + b) * c + d = x * (a * c) + (b * c + d)
        previous.shift = previous.shift * op.scale + op.shift;
        previous.scale *= op.scale;
      } else if (op.kind == PostOp::Kind::Linear && has_linear) {
        // oneDNN 2.6 computes a chain with two separate linear post-ops wrongly (relu(relu(x + 1) - 3) came out
        // off by up to 4 in its brgemm matmul, found by tools/fuzz.py seed 8443): one per call.
        break;
      } else {
        post_ops.push_back(op);
      }
      has_linear |= op.kind == PostOp::Kind::Linear;
      folded.insert(statement.name);
      current = statement.name;
      prefixes.push_back({post_ops, current, folded});
    }
    const IrStatement& store = body.back();
    for (auto prefix = prefixes.rbegin(); prefix != prefixes.rend(); ++prefix) {
      ContractionMatch::Folded result{*match->contraction, std::nullopt};
      result.contraction.post_ops = prefix->post_ops;
      bool whole = store.value->kind == IrKind::Variable && store.value->name == prefix->last;
      if (!whole) result.epilogue = epilogue_reading_result(loop_position_, prefix->last, prefix->folded);
      match->folds.push_back(std::move(result));
    }
  }

  // One post-op applied to the variable `current`, if `value` is one a library has.
  bool post_op(const IrExprPtr& value, const std::string& current, PostOp* op) const {
    auto is_current = [&](const IrExprPtr& argument) {
      return argument->kind == IrKind::Variable && argument->name == current;
    };
    auto constant = [&](const IrExprPtr& argument, double* number) {
      IrExprPtr resolved = resolve_variable(argument);
      if (resolved->kind != IrKind::FloatConstant) return false;
      *number = resolved->floating;
      return true;
    };
    double number;
    if (value->kind == IrKind::Unary && UnaryOp(value->op) == UnaryOp::Relu && is_current(value->args[0])) {
      op->kind = PostOp::Kind::Relu;
      return true;
    }
    if (value->kind != IrKind::Binary) return false;
    BinaryOp binary = BinaryOp(value->op);
    const IrExprPtr& left = value->args[0];
    const IrExprPtr& right = value->args[1];
    const IrExprPtr& other = is_current(left) ? right : left;
    op->kind = PostOp::Kind::Linear;
    switch (binary) {
      case BinaryOp::Add:
      case BinaryOp::Multiply:  // by a constant: a shift or a scale; else by a tensor
        if (constant(other, &number)) {
          (binary == BinaryOp::Add ? op->shift : op->scale) = number;
          return true;
        }
        op->kind = binary == BinaryOp::Add ? PostOp::Kind::Add : PostOp::Kind::Multiply;
        return tensor_operand(other, &op->operand);
      case BinaryOp::Subtract:
        if (constant(other, &number)) {
          if (is_current(left))
            op->shift = -number;
          else
            op->scale = -1, op->shift = number;
          return true;
        }
        op->kind = PostOp::Kind::Subtract;  // libraries subtract the operand from the result, not the other way
        return is_current(left) && tensor_operand(other, &op->operand);
      case BinaryOp::Divide:
        if (!is_current(left) || !constant(right, &number) || number == 0) return false;
        op->scale = 1 / number;
        return true;
      default: return false;
    }
  }

  // A plain float32 load of an input buffer at affine, unguarded indices: what a library takes as a post-op's
  // tensor (a bias, a residual).
  bool tensor_operand(const IrExprPtr& value, TensorAccess* access) const {
    const ValueOrigin* origin = nullptr;
    if (!plain_origin(value, &origin) || origin->buffer <= 0 || kernel_.buffers[origin->buffer].dtype != DType::Float32)
      return false;
    access->buffer = origin->buffer;
    return coordinates(origin->indices, origin->node->shape, {}, false, access) && !access->any_guarded();
  }

  bool match_scatter(Contraction* contraction, IrExprPtr* product) {
    if (kernel_.scatter_op != ReduceOp::Add) return false;
    const IrStatement& statement = kernel_.body.back();
    if (statement.kind != IrStatement::Kind::ScatterAccumulate) return false;
    for (const IrStatement& other : kernel_.body)
      if (other.kind != IrStatement::Kind::Let && &other != &statement) return false;
    std::unordered_map<std::string, RangeTest> tests;
    if (statement.condition && !range_tests(statement.condition, &tests)) return false;
    contraction->output.buffer = 0;
    if (!coordinates(lowered_.scatter_target, kernel_.buffers[0].shape, tests, false, &contraction->output))
      return false;
    *product = statement.value;
    return true;
  }

  const LoweredKernel& lowered_;
  const IrKernel& kernel_;
  std::unordered_map<std::string, int64_t> extents_;
  std::unordered_map<std::string, IrExprPtr> lets_;
  std::unordered_map<std::string, int64_t> split_factors_;  // loop variable -> k, read as v / k (see above)
  size_t loop_position_ = 0;                        // of the sum in the kernel's body, when there is an epilogue
  int operand_number_ = 0;                          // the operand being matched: 1 (left) or 2 (right)
  std::unordered_map<Node*, OperandStore> stores_;  // why each value asked to be stored is
};

}  // namespace

std::string describe_operand_store(const OperandStore& store, double work) {
  const Node& node = *store.node;
  std::ostringstream text;
  text << "operand " << store.operand << " (" << node.op_name() << " " << shape_to_string(node.shape);
  bool passes_elements = node.kind == NodeKind::View || node.kind == NodeKind::Reshape ||
                         node.kind == NodeKind::Reindex || node.kind == NodeKind::ReindexReduce;
  if (passes_elements && !node.inputs.empty()) text << " of " << shape_to_string(node.inputs[0]->shape);
  text << " at " << node.provenance.to_string() << ") stored first: the library cannot read " << store.why
       << "; storing ";
  double bytes = double(node.numel()) * double(dtype_size(node.dtype));
  text << std::fixed << std::setprecision(1);
  if (bytes >= 1024.0 * 1024.0)
    text << bytes / (1024.0 * 1024.0) << " MiB";
  else
    text << bytes / 1024.0 << " KiB";
  text << std::scientific << std::setprecision(1) << " costs less than a generated loop nest of " << work
       << " multiply-adds";
  return text.str();
}

ContractionMatch match_contraction(const LoweredKernel& lowered) { return Matcher(lowered).run(); }

}  // namespace metajit

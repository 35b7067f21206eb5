// Edges come from three kinds of index expression, each found by its own walk over a statement's value, offset
// and condition: the element index plus a constant compared with (or clamped to) a constant; an affine index of
// several variables (a strided window) compared with a constant, decided per element from its range over the
// others; and an abs of the element index (a reflection), whose sign is evaluated along the row.
#include "jit/ir/loop_pieces.h"

#include <set>

namespace metajit {
namespace {

constexpr size_t kMostPieces = 8;       // more pieces of one loop than this: not worth a copy of the body each
constexpr size_t kMostLoopCopies = 16;  // row pieces times column pieces: each is a copy of the body to compile

// Whether `node` is `element + offset` for a constant offset.
bool element_plus_constant(const IrExprPtr& node, const std::string& element, int64_t* offset) {
  if (node->kind == IrKind::Variable && node->name == element) return *offset = 0, true;
  if (node->kind != IrKind::IndexBinary) return false;
  IndexOperator op = IndexOperator(node->op);
  if (op != IndexOperator::Add && op != IndexOperator::Subtract) return false;
  const IrExprPtr& left = node->args[0];
  const IrExprPtr& right = node->args[1];
  if (right->kind == IrKind::IntConstant && element_plus_constant(left, element, offset))
    return *offset += op == IndexOperator::Add ? right->integer : -right->integer, true;
  if (op == IndexOperator::Add && left->kind == IrKind::IntConstant && element_plus_constant(right, element, offset))
    return *offset += left->integer, true;
  return false;
}

// Where a guard or clamp of the element index changes value: `element + c` compared with, or clamped to, a
// constant k flips at element = k - c (k - c + 1 for <=, > and min). A cat (pieces read through padded reindexes,
// then added) has one such edge per piece boundary.
void guard_edges(const IrExprPtr& node, const std::string& element, std::set<int64_t>& edges) {
  if (node->kind == IrKind::IndexBinary) {
    IndexOperator op = IndexOperator(node->op);
    bool flips_after = op == IndexOperator::LessEqual || op == IndexOperator::Greater;
    bool compares = op == IndexOperator::Less || op == IndexOperator::GreaterEqual || flips_after ||
                    op == IndexOperator::Minimum || op == IndexOperator::Maximum;
    int64_t offset, constant;
    for (int side = 0; compares && side < 2; ++side) {
      if (!element_plus_constant(node->args[side], element, &offset) ||
          node->args[1 - side]->kind != IrKind::IntConstant)
        continue;
      constant = node->args[1 - side]->integer;
      // With the constant on the left, `k < e + c` flips where `e + c <= k` does. A clamp is continuous, so
      // its edge goes where the piece boundary would be: max(e + c, k) at the first e above k, min past it.
      bool after = op == IndexOperator::Minimum || (op != IndexOperator::Maximum && (side == 0) == flips_after);
      edges.insert(constant - offset + (after ? 1 : 0));
    }
  }
  for (const IrExprPtr& argument : node->args) guard_edges(argument, element, edges);
}

// Sums and differences of variables, constants and their products with constants: an index whose range at
// each element is exact. Clamped or reflected parts (min, max, abs) have edges of their own.
bool affine(const IrExprPtr& node) {
  if (node->kind == IrKind::Variable || node->kind == IrKind::IntConstant) return true;
  if (node->kind != IrKind::IndexBinary) return false;
  IndexOperator op = IndexOperator(node->op);
  if (op == IndexOperator::Multiply)
    return (node->args[0]->kind == IrKind::IntConstant || node->args[1]->kind == IrKind::IntConstant) &&
           affine(node->args[0]) && affine(node->args[1]);
  return (op == IndexOperator::Add || op == IndexOperator::Subtract) && affine(node->args[0]) && affine(node->args[1]);
}

// Where a guard or clamp of a strided or windowed index changes value: `2 * e + r - 1` (a pooling window with
// stride 2, r its position in the window) compared with, or clamped to, a constant k. For each element of the
// row the index's range over the other variables (ir_range) says whether the comparison is decided, and which
// way; the edges are where that changes. A padded max-pool's clamps and bounds tests then fold away in the
// interior piece.
void window_edges(const IrExprPtr& node, const std::string& element, int64_t last, std::set<const IrExpr*>& seen,
                  std::set<int64_t>& edges) {
  constexpr int64_t kLongestScannedRow = 1024;  // a scan rebuilds the index once per element
  if (!seen.insert(node.get()).second) return;
  if (node->kind == IrKind::IndexBinary && last <= kLongestScannedRow) {
    IndexOperator op = IndexOperator(node->op);
    bool compares = op == IndexOperator::Less || op == IndexOperator::GreaterEqual || op == IndexOperator::LessEqual ||
                    op == IndexOperator::Greater || op == IndexOperator::Minimum || op == IndexOperator::Maximum;
    int64_t offset;
    for (int side = 0; compares && side < 2; ++side) {
      const IrExprPtr& index = node->args[side];
      if (node->args[1 - side]->kind != IrKind::IntConstant || element_plus_constant(index, element, &offset) ||
          !mentions_variable(index, element) || !affine(index))
        continue;
      int64_t constant = node->args[1 - side]->integer;
      // Which side of the constant the index's value falls for every value of the other variables: -1 and 1
      // decide the operation, 0 leaves it to the element. Where equality goes is the operation's: `x < k`
      // (and `x >= k`, `k <= x`, `k > x`, max(x, k)) splits below k from k and above, the others at or below
      // k from above; so an index that reaches k exactly makes no edge of its own.
      bool splits_below = ((op == IndexOperator::Less || op == IndexOperator::GreaterEqual) && side == 0) ||
                          ((op == IndexOperator::LessEqual || op == IndexOperator::Greater) && side == 1) ||
                          op == IndexOperator::Maximum;
      int previous = 2;
      for (int64_t at = 0; at < last; ++at) {
        IrRange range = ir_range(ir_substitute(index, element, ir_int(at)));
        int state = splits_below ? (range.high < constant   ? -1
                                    : range.low >= constant ? 1
                                                            : 0)
                                 : (range.high <= constant ? -1
                                    : range.low > constant ? 1
                                                           : 0);
        if (at > 0 && state != previous) edges.insert(at);
        previous = state;
      }
    }
  }
  for (const IrExprPtr& argument : node->args) window_edges(argument, element, last, seen, edges);
}

// The value of an index expression of the element index alone at element = `at`; false for anything else.
bool element_value(const IrExprPtr& node, const std::string& element, int64_t at, int64_t* value) {
  if (node->kind == IrKind::IntConstant) return *value = node->integer, true;
  if (node->kind == IrKind::Variable) return node->name == element && (*value = at, true);
  int64_t left, right;
  if (node->kind == IrKind::IndexUnary) {
    if (!element_value(node->args[0], element, at, &left) || left == INT64_MIN) return false;
    IndexOperator op = IndexOperator(node->op);
    if (op == IndexOperator::Negate) return *value = -left, true;
    if (op == IndexOperator::Abs) return *value = left < 0 ? -left : left, true;
    return false;
  }
  if (node->kind != IrKind::IndexBinary || !element_value(node->args[0], element, at, &left) ||
      !element_value(node->args[1], element, at, &right))
    return false;
  switch (IndexOperator(node->op)) {  // indices of a row: far from overflowing
    case IndexOperator::Add: return *value = left + right, true;
    case IndexOperator::Subtract: return *value = left - right, true;
    case IndexOperator::Multiply: return *value = left * right, true;
    case IndexOperator::Minimum: return *value = std::min(left, right), true;
    case IndexOperator::Maximum: return *value = std::max(left, right), true;
    default: return false;
  }
}

// Where an abs of the element index changes sign along the row: a reflected row (reflection padding reads
// 15 - abs(15 - abs(e - 1))) is affine between those edges, and each piece then folds its abs away
// (ir_fold_by_ranges) and reads contiguously instead of through per-element gathers. Found by evaluating the
// operand along the row, so nested abs and shifts need no algebra.
void abs_edges(const IrExprPtr& node, const std::string& element, int64_t last, std::set<const IrExpr*>& seen,
               std::set<int64_t>& edges) {
  constexpr int64_t kLongestScannedRow = 1 << 16;
  if (!seen.insert(node.get()).second) return;
  int64_t value;
  if (node->kind == IrKind::IndexUnary && IndexOperator(node->op) == IndexOperator::Abs && last <= kLongestScannedRow &&
      element_value(node->args[0], element, 0, &value)) {
    bool negative = value < 0;
    for (int64_t at = 1; at < last; ++at) {
      element_value(node->args[0], element, at, &value);
      if ((value < 0) != negative) edges.insert(at);
      negative = value < 0;
    }
  }
  for (const IrExprPtr& argument : node->args) abs_edges(argument, element, last, seen, edges);
}

void statement_edges(const IrStatement& statement, const std::string& element, int64_t last, std::set<int64_t>& edges) {
  for (const IrExprPtr& node : {statement.value, statement.offset, statement.condition}) {
    if (!node) continue;
    guard_edges(node, element, edges);
    std::set<const IrExpr*> window_seen;
    window_edges(node, element, last, window_seen, edges);
    std::set<const IrExpr*> seen;
    abs_edges(node, element, last, seen, edges);
  }
  for (const IrStatement& inner : statement.body) statement_edges(inner, element, last, edges);
}

// 0, the edges inside the loop of `element` over [0, last), and `last`: the pieces of that loop; just {0, last}
// when there are none, or too many to be worth a copy of the loop body each.
std::vector<int64_t> piece_edges(const std::vector<IrStatement>& body, const std::string& element, int64_t last) {
  std::set<int64_t> edges;
  for (const IrStatement& statement : body) statement_edges(statement, element, last, edges);
  std::vector<int64_t> pieces{0};
  for (int64_t edge : edges)
    if (edge > 0 && edge < last) pieces.push_back(edge);
  pieces.push_back(last);
  if (pieces.size() > kMostPieces + 1) return {0, last};
  return pieces;
}

// The edges of a loop cut into pieces; empty for one piece (the schedule's "not cut").
std::vector<int64_t> cut_or_empty(std::vector<int64_t> edges) {
  if (edges.size() <= 2) return {};
  return edges;
}

}  // namespace

std::string piece_offset_variable(const std::string& name) { return name + "_in_piece"; }

void choose_loop_pieces(IrKernel& kernel) {
  const Shape& domain = kernel.domain;
  IrSchedule& schedule = kernel.schedule;
  if (kernel.kind != IrKernel::Kind::Pointwise || domain.size() < 2 || !kernel.row_body.empty() ||
      schedule.form != IrSchedule::Form::Elements)
    return;
  int64_t last = domain.back();
  std::string element = "i" + std::to_string(domain.size() - 1);
  std::vector<int64_t> columns = piece_edges(kernel.body, element, last);
  // Row pieces: when guards and clamps cut an outer dim into pieces (a cat along dim 0: rows of the first input,
  // then of the second), each row belongs to one piece and picks that piece's copy of the element loop, where the
  // dim's index is `piece begin + offset` and the index ranges fold the other pieces' reads away.
  for (size_t dim = 0; dim + 1 < domain.size(); ++dim) {
    std::string variable = "i" + std::to_string(dim);
    std::vector<int64_t> rows = piece_edges(kernel.body, variable, domain[dim]);
    if (rows.size() <= 2 || (rows.size() - 1) * (columns.size() - 1) > kMostLoopCopies) continue;
    schedule.row_piece_dim = int(dim);
    schedule.row_pieces = rows;
    for (size_t piece = 0; piece + 1 < rows.size(); ++piece) {
      IrExprPtr index =
          ir_index(IndexOperator::Add, ir_loop_variable(piece_offset_variable(variable), rows[piece + 1] - rows[piece]),
                   ir_int(rows[piece]));
      std::vector<IrStatement> piece_body;
      for (const IrStatement& statement : kernel.body)
        piece_body.push_back(ir_substitute_and_fold(statement, variable, index));
      schedule.row_piece_columns.push_back(cut_or_empty(piece_edges(piece_body, element, last)));
    }
    return;
  }
  schedule.column_pieces = cut_or_empty(std::move(columns));
}

}  // namespace metajit

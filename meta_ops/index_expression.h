// The index-expression language of the reindex / reindex_reduce meta-ops: the typed AST behind strings such as
// "i1*2-1+i3", "@e0(i0, i1)" or "i2 >= yshape2 - 1 || i3 < 1", its parser (errors quote the text and name the
// column), canonical text, simplification, evaluation and conservative range analysis.
// It must never be pasted into generated source as text: renderers walk the AST. It knows nothing about Vars,
// graphs, kernels or dtypes beyond "integer" and "boolean".
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace metajit {

// ---------------------------------------------------------------------------------------------------------------
// The language (what parse_index_expression accepts)
//   literals     decimal integers (64-bit), `true`, `false`. Floats ("1.5", "1e3") are rejected.
//   names        i0..i{loop_rank-1}        the loop indices of the meta-op
//                xshape0..xshape{x_rank-1} the input's shape;  yshape0..yshape{y_rank-1} the output's shape
//                @eK(a, b, ...)            element of extra input K read at the given integer indices; exactly
//                                          extra_ranks[K] indices; integer unless extra_is_boolean[K]
//   functions    min(a, b), max(a, b), abs(a)
//   operators    C precedence, tightest first: unary - + ! ; * / % ; + - ; < <= > >= ; == != ; && ; || ; c ? a : b
//                (binary operators associate left, ?: associates right), parentheses.
// Semantics (the renderers must reproduce these exactly, so never render `/` or `%` as the C operators):
//   * values are int64; + - * and unary minus wrap around modulo 2^64 (never undefined behaviour);
//   * `/` and `%` are FLOOR division and modulo (Python semantics): -1/2 == -1, -1%2 == 1, 7%-3 == -2;
//     a divisor of zero yields 0 for both, and INT64_MIN / -1 wraps to INT64_MIN (INT64_MIN % -1 == 0);
//   * abs(INT64_MIN) wraps to INT64_MIN;
//   * the expression is typed: arithmetic, ordering comparisons, min/max/abs and extra-read indices need integers;
//     `!`, `&&`, `||` and the ?: condition need booleans; integers are never converted to booleans implicitly nor
//     booleans to integers; == and != need two operands of the same type; the ?: branches must agree;
//   * `&&`, `||` and `?:` evaluate lazily like C, so "i0 < xshape0 && @e0(i0) > 0" never reads out of range;
//   * expressions have no side effects (extra reads are pure), so simplify() may drop or merge them;
//   * a unary minus directly applied to a literal is part of the literal: "-5" parses to the integer -5.
// ---------------------------------------------------------------------------------------------------------------

enum class IndexType : uint8_t { Integer, Boolean };
enum class IndexNodeKind : uint8_t { Integer, LoopIndex, InputShape, OutputShape, ExtraRead, Unary, Binary, Ternary };
enum class IndexOperator : uint8_t { None, Negate, Not, Abs, Add, Subtract, Multiply, FloorDivide, FloorModulo, Minimum,
                                     Maximum, Less, LessEqual, Greater, GreaterEqual, Equal, NotEqual, LogicalAnd,
                                     LogicalOr };

struct IndexNode;
using IndexExpression = std::shared_ptr<const IndexNode>;

// One immutable AST node. An Integer node whose type is Boolean is a boolean constant (value 0 or 1): the parser
// makes one for `true` / `false` and simplify() for folded conditions.
struct IndexNode {
  IndexNodeKind kind;
  IndexOperator op = IndexOperator::None;  // for Unary (Negate, Not, Abs) and Binary (the rest)
  IndexType type = IndexType::Integer;
  int64_t value = 0;                       // literal value; loop index number; shape dimension; extra input number
  std::vector<IndexExpression> operands;   // Unary: 1, Binary: 2, Ternary: 3 (cond, then, else), ExtraRead: indices
};

// What names an expression may use.
struct IndexContext {
  int loop_rank = 0;                   // names i0..i{loop_rank-1}
  int x_rank = 0;                      // xshape0..
  int y_rank = 0;                      // yshape0..
  std::vector<int> extra_ranks;        // @e0.. and their ranks
  std::vector<bool> extra_is_boolean;  // may be empty => all integer; otherwise one entry per extra input
};

// Parses and type-checks `text`; the result's type must be `expected_type` (Integer for an index, Boolean for an
// overflow condition). Throws std::invalid_argument like
//   invalid index expression "i0+": expected an operand at column 4
//     i0+
//        ^
// (columns are 1-based byte offsets). An inconsistent context also throws std::invalid_argument.
IndexExpression parse_index_expression(const std::string& text, const IndexContext& context, IndexType expected_type);

// Canonical text: fully parenthesised, single spaces, stable across releases; it parses back to an expression with
// the same canonical text. Used in cache keys and kernel comments. E.g. "i1*2-1+i3" -> "(((i1 * 2) - 1) + i3)".
std::string to_canonical_string(const IndexExpression& expression);

// Constructors for op builders (no parsing). They check operand types and throw std::invalid_argument on misuse.
IndexExpression make_integer(int64_t value);
IndexExpression make_boolean(bool value);
IndexExpression make_loop_index(int which);
IndexExpression make_input_shape(int dimension);   // xshapeK
IndexExpression make_output_shape(int dimension);  // yshapeK
IndexExpression make_extra_read(int extra, std::vector<IndexExpression> indices,
                                IndexType type = IndexType::Integer);
IndexExpression make_unary(IndexOperator op, IndexExpression operand);  // Negate, Not, Abs
IndexExpression make_binary(IndexOperator op, IndexExpression left, IndexExpression right);
IndexExpression make_ternary(IndexExpression condition, IndexExpression if_true, IndexExpression if_false);

// Constant folding and identities that hold exactly under the semantics above (x+0, 0+x, x-0, x*1, x*0, x/1, x%1,
// 0/x, x-x, (x+1)-1, (x/2)/3 -> x/6, min(x,x), !!c, !(a<b) -> a>=b, constant conditions, c ? a : a ...).
// Returns the same pointer when nothing changes.
IndexExpression simplify(const IndexExpression& expression);

// The same expression with xshapeK and yshapeK exchanged: a gradient turns reindex into reindex_reduce (and back)
// over the same loop, where the roles of input and output swap.
IndexExpression swap_input_output_shapes(const IndexExpression& expression);

// Structural equality (same canonical text).
bool same_index_expression(const IndexExpression& left, const IndexExpression& right);

// Evaluate with concrete values (tests, reference implementation). Booleans evaluate to 0/1, including boolean
// extra reads (any non-zero callback result is 1). Throws std::invalid_argument when a name has no value or an
// extra read has no callback.
struct IndexEnvironment {
  std::vector<int64_t> loop_indices, x_shape, y_shape;
  std::function<int64_t(int extra, const std::vector<int64_t>&)> read_extra;
};
int64_t evaluate_index_expression(const IndexExpression& expression, const IndexEnvironment& environment);

// The language's division and modulo on concrete values (floor semantics, zero divisor -> 0, no traps).
int64_t index_floor_divide(int64_t dividend, int64_t divisor);
int64_t index_floor_modulo(int64_t dividend, int64_t divisor);

// Conservative range [low, high] of the values the expression can take when each i_k lies in
// [0, loop_extents[k]-1] and shapes are the given values. Unknown information widens the range: a loop index
// beyond loop_extents gives [0, INT64_MAX], a shape dimension beyond the vector or negative (unknown) gives
// [0, INT64_MAX], an integer extra read gives [INT64_MIN, INT64_MAX]. If any bound computation could overflow
// (the value could wrap), the result is the full int64 range. A boolean expression gives a subrange of [0, 1]:
// [1, 1] means "always true", so a bounds check can be dropped. Never narrower than the truth.
struct IndexRange {
  int64_t low, high;
};
IndexRange bound_index_expression(const IndexExpression& expression, const std::vector<int64_t>& loop_extents,
                                  const std::vector<int64_t>& x_shape, const std::vector<int64_t>& y_shape);

// Whether the expression is exactly loop index k after simplification (sets *which to k when it is).
bool is_loop_index(const IndexExpression& expression, int* which = nullptr);

// Spelling of an operator as in the language ("+", "/", "&&", "min", "abs", "-" for Negate); "" for None.
const char* index_operator_symbol(IndexOperator op);
const char* index_type_name(IndexType type);  // "integer" / "boolean"

}  // namespace metajit

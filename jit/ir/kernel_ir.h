// The kernel IR between fused groups and source text: typed expression trees, a few statement kinds (let,
// reduction loop, store, scatter-accumulate) and the kernel's buffers and iteration domain. Both the C++
// renderer and the CUDA renderer read it; it never refers to graph nodes.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "meta_ops/elementwise.h"
#include "meta_ops/index_expression.h"
#include "meta_ops/reduce.h"

namespace metajit {

enum class IrKind : uint8_t {
  IntConstant, FloatConstant, Variable, Load, Unary, Binary, Select, Cast, IndexUnary, IndexBinary
};

struct IrExpr;
using IrExprPtr = std::shared_ptr<const IrExpr>;

// What is worked out from an expression on first use (ir_hash, ir_tree_size). A copy starts empty: expressions
// are copied to be changed (ir_with_args, substitutions), and the copy's values differ.
struct IrExprSummary {
  IrExprSummary() = default;
  IrExprSummary(const IrExprSummary&) {}
  IrExprSummary& operator=(const IrExprSummary&) { return *this; }
  mutable uint64_t hash = 0;          // 0: not yet computed
  mutable int64_t written_size = -1;  // -1: not yet computed
};

struct IrExpr {
  IrKind kind = IrKind::IntConstant;  // defaults: the integer constant 0 (the ir_* factories set both)
  DType dtype = DType::Int64;         // the computation type (float16 values are float32 here)
  uint16_t op = 0;           // UnaryOp / BinaryOp / IndexOperator
  int64_t integer = 0;       // IntConstant; loop extent of a loop Variable (0 for lets)
  // An integer let Variable: the range of the value it names (its uses would otherwise know nothing of it).
  int64_t let_low = INT64_MIN, let_high = INT64_MAX;
  double floating = 0;       // FloatConstant
  int buffer = -1;           // Load
  std::string name;          // Variable
  std::vector<IrExprPtr> args;  // operands; Load: [offset]
  mutable std::string key;      // ir_key, filled on first use
  IrExprSummary summary;
};

IrExprPtr ir_int(int64_t value);
IrExprPtr ir_bool(bool value);
IrExprPtr ir_float(double value, DType dtype);
IrExprPtr ir_loop_variable(const std::string& name, int64_t extent);
IrExprPtr ir_variable(const std::string& name, DType dtype);
// The Variable naming a let of `value` (an integer value's range goes with it, for ir_range).
IrExprPtr ir_let_variable(const std::string& name, const IrExprPtr& value);
IrExprPtr ir_load(int buffer, DType dtype, IrExprPtr offset);
IrExprPtr ir_unary(UnaryOp op, DType dtype, IrExprPtr operand);
IrExprPtr ir_binary(BinaryOp op, DType dtype, IrExprPtr left, IrExprPtr right);
IrExprPtr ir_select(IrExprPtr condition, IrExprPtr if_true, IrExprPtr if_false);
IrExprPtr ir_cast(DType dtype, IrExprPtr operand);
// A float16 op's result, computed in float32, rounded to float16 (a Cast to Float16 even when the operand is
// already typed Float16): every float16 op rounds, so fusion never changes a float16 result.
IrExprPtr ir_round_to_half(IrExprPtr operand);
// Integer (int64) and boolean index arithmetic with the index language's semantics; folds constants.
IrExprPtr ir_index(IndexOperator op, IrExprPtr left, IrExprPtr right = nullptr);
// `expression` with new operands (index arithmetic goes back through ir_index, so it simplifies again); itself
// when every operand is the same object. For IR-to-IR passes that substitute inside expressions.
IrExprPtr ir_with_args(const IrExprPtr& expression, std::vector<IrExprPtr> args);
// `expression` rebuilt bottom up: `visit` sees each node with its operands already rewritten (through
// ir_with_args) and returns its replacement. Null stays null.
using IrVisitor = std::function<IrExprPtr(const IrExprPtr&)>;
IrExprPtr ir_rewrite(const IrExprPtr& expression, const IrVisitor& visit);

// Conservative value range of an integer/bool expression (loop variables span [0, extent-1]).
struct IrRange { int64_t low, high; };
IrRange ir_range(const IrExprPtr& expression);
// `expression` with every comparison, min and max that its operands' ranges decide replaced by the constant or
// operand it equals (bottom up, so a guard of folded parts folds too). Pattern matchers see index expressions
// unfolded; the C++ renderer folds the element loop's pieces with it.
IrExprPtr ir_fold_by_ranges(const IrExprPtr& expression);
// Stable text of an expression, used for common-subexpression keys.
const std::string& ir_key(const IrExprPtr& expression);
// A hash of what ir_key writes, and whether two expressions have the same ir_key, without writing it: lowering
// looks up every value it builds by its node and index expressions, and spelling those keys out as text (many
// small strings per lookup) cost more than the lookups.
uint64_t ir_hash(const IrExprPtr& expression);
bool ir_equal(const IrExprPtr& first, const IrExprPtr& second);
// Nodes the expressions have when written out as C text (a subexpression shared by several parents counts once
// per parent, and twice or three times inside an index min, max or abs, whose rendering repeats operands),
// counted up to `limit` and no further: keys, range checks and rendered text grow with this, not with the number
// of distinct nodes.
int64_t ir_tree_size(const std::vector<IrExprPtr>& expressions, int64_t limit);

struct IrStatement;

// Whether `name` is still divided or reduced modulo something (a split loop index that did not join back).
bool splits_variable(const IrExprPtr& expression, const std::string& name);
bool statements_split_variable(const std::vector<IrStatement>& statements, const std::string& name);
bool mentions_variable(const IrExprPtr& expression, const std::string& name);
// `expression` with every Variable named `name` replaced by `replacement` (rebuilt through ir_with_args).
IrExprPtr ir_substitute(const IrExprPtr& expression, const std::string& name, const IrExprPtr& replacement);
// Whether the only variables in `expression` are the domain indices i0 .. i<last>, and `also` when given (so it
// can be computed once per row, or per row and `also`).
bool reads_only_domain_indices(const IrExprPtr& expression, int last, const std::string& also = "");
// Appends every Load in `expression` (its buffer, and its offset in args[0]) to `loads`.
void collect_loads(const IrExpr* expression, std::vector<const IrExpr*>* loads);

// Built through the named constructors below, one per kind, which take exactly the fields that kind uses; the
// other fields keep their defaults (positional braces let the same trailing values mean different fields).
struct IrStatement {
  enum class Kind : uint8_t { Let, ReduceLoop, Store, ScatterAccumulate };
  Kind kind = Kind::Let;
  std::string name;                 // Let / ReduceLoop: the variable defined
  DType dtype = DType::Float32;     // Let / ReduceLoop: type of the defined variable; ScatterAccumulate: of the value
  IrExprPtr value;                  // Let: value; ReduceLoop: value accumulated per iteration; Store: value
  IrExprPtr offset;                 // Store / ScatterAccumulate: flat element offset
  IrExprPtr condition;              // ScatterAccumulate: only when true (may be null)
  int buffer = -1;                  // Store / ScatterAccumulate target
  ReduceOp reduce_op = ReduceOp::Add;
  std::vector<std::pair<std::string, int64_t>> loops;  // ReduceLoop: loop variables and extents, outermost first
  std::vector<IrStatement> body;    // ReduceLoop: per-iteration statements
  // ReduceLoop in a kernel's row_body, over one loop: also keep each iteration's value in a local array of
  // this name, which the row's elements read back (softmax's exp(x - max) is summed, then divided: computed
  // once). The array is as long as the row. Set after construction, once lowering has decided.
  std::string spill;

  // const <dtype> name = value;
  static IrStatement let(std::string name, DType dtype, IrExprPtr value);
  // name = reduce_op over `loops` of value, with `body` run before value in each iteration.
  static IrStatement reduce_loop(std::string name, DType dtype, ReduceOp reduce_op,
                                 std::vector<std::pair<std::string, int64_t>> loops, IrExprPtr value,
                                 std::vector<IrStatement> body = {});
  // buffer[offset] = value;
  static IrStatement store(int buffer, IrExprPtr offset, IrExprPtr value);
  // buffer[offset] = scatter_op(buffer[offset], value) where condition holds (null: always); value is of `dtype`.
  static IrStatement scatter_accumulate(int buffer, IrExprPtr offset, DType dtype, IrExprPtr value,
                                        IrExprPtr condition = nullptr);
};

// ir_rewrite of every expression of `statements`: values, offsets, conditions, and the bodies of loops.
void ir_rewrite_statements(std::vector<IrStatement>& statements, const IrVisitor& visit);

// Whether `condition` says loop variable `low` <= loop variable `high`: written !(low > high), low <= high or
// high >= low (a reindex's "skip when low > high" arrives as the first).
bool ir_at_most(const IrExprPtr& condition, const std::string& low, const std::string& high);
// `expression` followed through the Lets of `reduction`'s body while it is a Variable they define.
IrExprPtr ir_let_value(const IrStatement& reduction, const IrExprPtr& expression);
// Whether `reduction` is a running sum along `index`: one loop of Add or Multiply whose value keeps its term
// only where the loop variable r <= index (the identity otherwise), and nothing but that guard depends on
// `index`. Then the result at index + 1 is the result at index combined with one more term (cumsum's triangle).
// The guarding Select (followed through Lets), or null.
IrExprPtr ir_running_sum_guard(const IrStatement& reduction, const std::string& index);

// `statement` (and the statements in its body) with every Variable named `name` replaced by `replacement` and
// each expression folded by index ranges: a loop's body where its index is known to lie in a range (a piece of
// the loop, a vector of a scan), with the guards that range decides gone.
IrStatement ir_substitute_and_fold(const IrStatement& statement, const std::string& name, const IrExprPtr& replacement);

struct IrBuffer {
  std::string name;   // in0, in1, ..., out0
  DType dtype = DType::Float32;  // storage type
  Shape shape;
  bool is_output = false;

  static IrBuffer input(std::string name, DType dtype, Shape shape);
  static IrBuffer output(std::string name, DType dtype, Shape shape);
};

// How a kernel rendered to C++ walks its domain and splits it over threads: decisions that IR passes take (one
// file each, named below) and the C++ renderer only spells. A kernel no pass has looked at walks its elements
// flat, row by row (whole rows when it has a row_body), with the work range not yet decided.
struct IrSchedule {
  enum class Form : uint8_t {
    Elements,           // flat elements (whole rows when row_body is not empty)
    RunningSum,         // jit/ir/running_sums.h: rows, each scanned once along the last dim
    ColumnRunningSum,   // jit/ir/running_sums.h: tiles of columns, each scanned down dim rank-2
    ReverseRunningSum,  // jit/ir/running_sums.h (Scatter): a running sum's gradient, dim rank-2 walked downwards
    ColumnSum,          // jit/ir/column_sums.h: the sum's loops outside, a tile of columns accumulated inside
    TransposedTiles,    // jit/ir/transposed_tiles.h: square tiles of dims `across` and last
  };
  Form form = Form::Elements;
  int statement = -1;  // the body statement the form is built around (all forms but Elements, TransposedTiles)
  int across = -1;     // TransposedTiles: the dim that the strided input reads contiguously
  int64_t tile = 0;    // ColumnSum, ColumnRunningSum: columns per tile; TransposedTiles: the tiles' side
  // jit/ir/parallel_grain.h: the size of the range the launcher splits over threads (elements, rows, tiles or
  // column tiles, by form) and the fewest items one thread takes; -1 until decided.
  int64_t work_items = -1;
  int64_t grain = 1;
  // jit/ir/loop_pieces.h: the edges (0, ..., extent) of the pieces that guards and clamps cut the element loop
  // into, each rendered as a copy of the loop; or, with row_piece_dim set, the edges of that outer dim's pieces
  // and, per row piece, the element loop's edges inside it. Empty: not cut.
  std::vector<int64_t> column_pieces;
  int row_piece_dim = -1;
  std::vector<int64_t> row_pieces;
  std::vector<std::vector<int64_t>> row_piece_columns;
};

const char* schedule_form_name(IrSchedule::Form form);  // "elements", "running sum", ...

struct IrKernel {
  enum class Kind : uint8_t { Pointwise, Scatter };
  Kind kind = Kind::Pointwise;
  std::vector<IrBuffer> buffers;
  Shape domain;                       // loop nest i0..; Pointwise: the output shape; Scatter: the input shape
  std::vector<IrStatement> body;      // statements per domain point
  // Pointwise of rank >= 2 only: statements run once per row (every index but the last) before the row's
  // elements: reductions whose result the row reads at every element (softmax's max and sum, layer norm's
  // mean), computed once per row instead of in kernels of their own. Their values are visible to `body`.
  std::vector<IrStatement> row_body;
  int64_t row_work = 0;               // loop iterations per row spent in row_body
  // Scatter only: output buffer initialised to the reduction identity before accumulation.
  ReduceOp scatter_op = ReduceOp::Add;
  bool scatter_split_rows = false;    // the work range splits dim 0 of both input and output
  int64_t inner_work = 1;             // loop iterations per domain point (for choosing a parallel grain)
  std::vector<std::string> fused_ops; // "exp (train.py:12)" for the header comment
  IrSchedule schedule;                // the C++ scheduling passes' decisions
};

}  // namespace metajit

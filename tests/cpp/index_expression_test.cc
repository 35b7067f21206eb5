// Tests of the index-expression language (meta_ops/index_expression.h): parsing and evaluation against
// hand-computed values, canonical text, every parse error, simplification, and randomized soundness of the range
// analysis. Expected values are written by hand or found by brute force, never computed by the code under test.
#include "meta_ops/index_expression.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace metajit {
namespace {

constexpr int64_t kSmallest = std::numeric_limits<int64_t>::min();
constexpr int64_t kLargest = std::numeric_limits<int64_t>::max();

// Loop indices i0..i3, x is rank 4, y is rank 4, @e0 is a rank-2 integer input, @e1 a rank-1 boolean input.
IndexContext table_context() {
  IndexContext context;
  context.loop_rank = 4;
  context.x_rank = 4;
  context.y_rank = 4;
  context.extra_ranks = {2, 1};
  context.extra_is_boolean = {false, true};
  return context;
}

// i = (3, 5, 2, 7); xshape = (2, 3, 10, 12); yshape = (2, 3, 12, 14);
// @e0(a, b) = 100 * a + b; @e1(a) = 7 when a is even (any non-zero means true), 0 otherwise.
IndexEnvironment table_environment() {
  IndexEnvironment environment;
  environment.loop_indices = {3, 5, 2, 7};
  environment.x_shape = {2, 3, 10, 12};
  environment.y_shape = {2, 3, 12, 14};
  environment.read_extra = [](int extra, const std::vector<int64_t>& indices) -> int64_t {
    if (extra == 0) return 100 * indices.at(0) + indices.at(1);
    return indices.at(0) % 2 == 0 ? 7 : 0;
  };
  return environment;
}

struct EvaluationCase {
  const char* text;
  IndexType type;
  int64_t expected;
};

const IndexType kInteger = IndexType::Integer;
const IndexType kBoolean = IndexType::Boolean;

TEST(IndexExpression, ParsesAndEvaluatesHandComputedTable) {
  const EvaluationCase cases[] = {
      {"42", kInteger, 42},
      {"i0", kInteger, 3},
      {"i0+1", kInteger, 4},
      {"  i0 +\t1 ", kInteger, 4},
      {"i1*2-1+i3", kInteger, 16},
      {"xshape2-1-i2", kInteger, 7},
      {"yshape3 - xshape3", kInteger, 2},
      {"2+3*4", kInteger, 14},
      {"(2+3)*4", kInteger, 20},
      {"10-3-2", kInteger, 5},
      {"100/10/5", kInteger, 2},
      {"2*(i0+1)%3", kInteger, 2},
      {"i1 - i0*2/4", kInteger, 4},
      // floor division and modulo (Python semantics)
      {"7/2", kInteger, 3},
      {"-7/2", kInteger, -4},
      {"7/-2", kInteger, -4},
      {"-7/-2", kInteger, 3},
      {"-1/2", kInteger, -1},
      {"-1%2", kInteger, 1},
      {"7%3", kInteger, 1},
      {"-7%3", kInteger, 2},
      {"7%-3", kInteger, -2},
      {"-7%-3", kInteger, -1},
      {"(i0 - 10) / 4", kInteger, -2},
      {"(i0 - 10) % 4", kInteger, 1},
      {"i0/0", kInteger, 0},
      {"i0%0", kInteger, 0},
      {"-9223372036854775808 / -1", kInteger, kSmallest},
      {"-9223372036854775808 % -1", kInteger, 0},
      {"9223372036854775807 + 1", kInteger, kSmallest},
      {"-9223372036854775808", kInteger, kSmallest},
      // unary operators
      {"-i0", kInteger, -3},
      {"- -i0", kInteger, 3},
      {"+i0", kInteger, 3},
      {"-2*3", kInteger, -6},
      {"2*-3", kInteger, -6},
      {"i0 - 1 - -1", kInteger, 3},
      // functions
      {"min(i0, i1)", kInteger, 3},
      {"max(i0,i1)", kInteger, 5},
      {"abs(i0 - i1)", kInteger, 2},
      {"abs(-9223372036854775807)", kInteger, kLargest},
      {"min(max(i0, 4), 10)", kInteger, 4},
      // comparisons and logic
      {"i0 < i1", kBoolean, 1},
      {"i0 >= i1", kBoolean, 0},
      {"i0 == 3", kBoolean, 1},
      {"i0 != 3", kBoolean, 0},
      {"i0 <= 3", kBoolean, 1},
      {"i0 > 3", kBoolean, 0},
      {"i0 < 4 && i1 > 4", kBoolean, 1},
      {"i0 > 4 || i1 > 4", kBoolean, 1},
      {"i0 > 4 || i1 > 5", kBoolean, 0},
      {"!(i0 < 4)", kBoolean, 0},
      {"i0 < 4 == i1 < 4", kBoolean, 0},
      {"true", kBoolean, 1},
      {"!false", kBoolean, 1},
      {"i0 > 1 || i0 > 2 && i0 > 5", kBoolean, 1},  // && binds tighter than ||
      {"i2 >= yshape2 - 1 || i3 < 1", kBoolean, 0},
      {"i2 < 1 || i3 >= yshape3 - 7", kBoolean, 1},
      // ternary (right-associative)
      {"i0 < i1 ? i0 : i1", kInteger, 3},
      {"i0 > i1 ? 1 : i2 > 1 ? 2 : 3", kInteger, 2},
      {"i0 > i1 ? i0 : i1 * 2", kInteger, 10},
      // extra reads
      {"@e0(i0, i1)", kInteger, 305},
      {"@e0(i0+1, @e0(0, 2))", kInteger, 402},
      {"@e1(i2) ? i0 : i1", kInteger, 3},
      {"@e1(i0)", kBoolean, 0},
      {"@e1(i2)", kBoolean, 1},
  };
  const IndexContext context = table_context();
  const IndexEnvironment environment = table_environment();
  for (const EvaluationCase& test : cases) {
    SCOPED_TRACE(test.text);
    IndexExpression expression;
    ASSERT_NO_THROW(expression = parse_index_expression(test.text, context, test.type));
    EXPECT_EQ(expression->type, test.type);
    EXPECT_EQ(evaluate_index_expression(expression, environment), test.expected);
    // The canonical text parses back to the same canonical text and the same value.
    const std::string canonical = to_canonical_string(expression);
    const IndexExpression reparsed = parse_index_expression(canonical, context, test.type);
    EXPECT_EQ(to_canonical_string(reparsed), canonical);
    EXPECT_EQ(evaluate_index_expression(reparsed, environment), test.expected);
    // Simplification never changes the value.
    EXPECT_EQ(evaluate_index_expression(simplify(expression), environment), test.expected);
  }
}

TEST(IndexExpression, FloorDivisionMatchesBruteForceDefinition) {
  for (int64_t dividend = -25; dividend <= 25; ++dividend) {
    for (int64_t divisor = -7; divisor <= 7; ++divisor) {
      if (divisor == 0) {
        EXPECT_EQ(index_floor_divide(dividend, divisor), 0);
        EXPECT_EQ(index_floor_modulo(dividend, divisor), 0);
        continue;
      }
      // The floor quotient q is the unique integer with the remainder dividend - q*divisor having the divisor's
      // sign (or zero) and magnitude below |divisor|.
      int64_t quotient = -100;
      for (; quotient <= 100; ++quotient) {
        const int64_t remainder = dividend - quotient * divisor;
        if (divisor > 0 ? (remainder >= 0 && remainder < divisor) : (remainder <= 0 && remainder > divisor)) break;
      }
      ASSERT_LE(quotient, 100);
      EXPECT_EQ(index_floor_divide(dividend, divisor), quotient) << dividend << " / " << divisor;
      EXPECT_EQ(index_floor_modulo(dividend, divisor), dividend - quotient * divisor) << dividend << " % " << divisor;
    }
  }
}

TEST(IndexExpression, LogicalOperatorsShortCircuitExtraReads) {
  IndexContext context = table_context();
  IndexEnvironment environment = table_environment();
  int reads = 0;
  environment.read_extra = [&reads](int, const std::vector<int64_t>&) -> int64_t {
    ++reads;
    return 1;
  };
  EXPECT_EQ(evaluate_index_expression(
                parse_index_expression("i0 > 100 && @e0(i0, i1) > 0", context, kBoolean), environment), 0);
  EXPECT_EQ(evaluate_index_expression(parse_index_expression("i0 < 100 || @e1(i0)", context, kBoolean), environment),
            1);
  EXPECT_EQ(evaluate_index_expression(parse_index_expression("i0 < 100 ? i1 : @e0(i0, i0)", context, kInteger),
                                      environment),
            5);
  EXPECT_EQ(reads, 0);
  EXPECT_EQ(evaluate_index_expression(parse_index_expression("i0 < 100 && @e1(i0)", context, kBoolean), environment),
            1);
  EXPECT_EQ(reads, 1);
}

TEST(IndexExpression, CanonicalTextIsStableAndFullyParenthesised) {
  const IndexContext context = table_context();
  auto canonical = [&](const char* text, IndexType type = kInteger) {
    return to_canonical_string(parse_index_expression(text, context, type));
  };
  EXPECT_EQ(canonical("i0 + 1"), "(i0 + 1)");
  EXPECT_EQ(canonical("i0+1"), canonical("i0 + 1"));
  EXPECT_EQ(canonical(" ( i0 )+( 1 ) "), "(i0 + 1)");
  EXPECT_EQ(canonical("i1*2-1+i3"), "(((i1 * 2) - 1) + i3)");
  EXPECT_EQ(canonical("xshape2-1-i2"), "((xshape2 - 1) - i2)");
  EXPECT_EQ(canonical("min(i0,i1)*2"), "(min(i0, i1) * 2)");
  EXPECT_EQ(canonical("abs(-i0)"), "abs((-i0))");
  EXPECT_EQ(canonical("-3"), "(-3)");
  EXPECT_EQ(canonical("i0 - -3"), "(i0 - (-3))");
  EXPECT_EQ(canonical("@e0(i0,i1+1)"), "@e0(i0, (i1 + 1))");
  EXPECT_EQ(canonical("i0<i1?i0:i1"), "((i0 < i1) ? i0 : i1)");
  EXPECT_EQ(canonical("i2 >= yshape2 - 1 || i3 < 1", kBoolean),
            "((i2 >= (yshape2 - 1)) || (i3 < 1))");
  EXPECT_EQ(canonical("!true && @e1(0)", kBoolean), "((!true) && @e1(0))");
  EXPECT_EQ(canonical("i0 / 2 % 3"), "((i0 / 2) % 3)");
  // Different expressions, different canonical text.
  EXPECT_NE(canonical("i0 - 1 - 1"), canonical("i0 - (1 - 1)"));
}

// Parses `text` expecting failure; returns the message.
std::string parse_error(const std::string& text, const IndexContext& context, IndexType type = kInteger) {
  try {
    parse_index_expression(text, context, type);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected \"" << text << "\" to be rejected";
  return "";
}

void expect_contains(const std::string& message, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "missing \"" << part << "\" in:\n" << message;
  }
}

TEST(IndexExpression, ErrorsQuoteTheTextAndNameTheProblem) {
  IndexContext context;
  context.loop_rank = 2;
  context.x_rank = 2;
  context.y_rank = 3;
  context.extra_ranks = {2};

  expect_contains(parse_error("i0+", context),
                  {"invalid index expression \"i0+\": expected an operand at column 4", "\n  i0+\n     ^"});
  expect_contains(parse_error("j0", context), {"\"j0\"", "unknown name 'j0'", "i0..i1", "xshape0..xshape1",
                                               "yshape0..yshape2", "@e0(...)", "min(a, b)"});
  expect_contains(parse_error("xstride0", context), {"unknown name 'xstride0'"});
  expect_contains(parse_error("i01", context), {"unknown name 'i01'"});
  expect_contains(parse_error("i5", context),
                  {"\"i5\"", "index i5 is beyond the rank 2 of the loop at column 1", "i0..i1"});
  expect_contains(parse_error("i0 + i99999999999999", context), {"beyond the rank 2", "column 6"});
  expect_contains(parse_error("1.5", context), {"\"1.5\"", "non-integer", "'1.5'"});
  expect_contains(parse_error("i0 * 1e3", context), {"non-integer", "'1e3'", "column 6"});
  expect_contains(parse_error(".5 + i0", context), {"non-integer", "column 1"});
  expect_contains(parse_error("0x10", context), {"invalid integer literal '0x10'"});
  expect_contains(parse_error("99999999999999999999", context), {"does not fit in 64 bits"});
  expect_contains(parse_error("9223372036854775808", context), {"does not fit in 64 bits"});
  expect_contains(parse_error("xshape3", context), {"\"xshape3\"", "xshape3 is beyond the rank 2", "input x"});
  expect_contains(parse_error("yshape3 - 1", context), {"yshape3 is beyond the rank 3", "output y"});
  expect_contains(parse_error("@e1(i0)", context), {"\"@e1(i0)\"", "@e1 does not exist", "1 extra input", "@e0"});
  expect_contains(parse_error("@e0(i0)", context), {"@e0 has rank 2 but is read with 1 index"});
  expect_contains(parse_error("@e0(i0, i1, 0)", context), {"rank 2", "3 indices"});
  expect_contains(parse_error("@e0", context), {"must be read with indices"});
  expect_contains(parse_error("@x0(i0)", context), {"invalid extra input reference '@x0'"});
  expect_contains(parse_error("@e0(i0 < 1, i1)", context), {"expected an integer, got a boolean", "index 0 of @e0"});
  // parentheses
  expect_contains(parse_error("(i0+1", context), {"\"(i0+1\"", "unbalanced parentheses", "column 1", "never closed"});
  expect_contains(parse_error("((i0)", context), {"unbalanced parentheses"});
  expect_contains(parse_error("i0+1)", context), {"unbalanced parentheses", "unexpected ')'", "column 5"});
  expect_contains(parse_error("()", context), {"expected an operand", "')'"});
  expect_contains(parse_error("min(i0, i1", context), {"unbalanced parentheses", "min", "column 4"});
  expect_contains(parse_error("(i0 1)", context), {"expected ')'", "'1'"});
  // empty
  expect_contains(parse_error("", context), {"invalid index expression \"\"", "empty"});
  expect_contains(parse_error("  \t ", context), {"empty"});
  // types
  expect_contains(parse_error("i0 < 1", context, kInteger), {"\"i0 < 1\"", "non-integer result"});
  expect_contains(parse_error("true", context, kInteger), {"non-integer result"});
  expect_contains(parse_error("i0 + 1", context, kBoolean), {"\"i0 + 1\"", "non-boolean result",
                                                             "expected a boolean"});
  expect_contains(parse_error("i0 && i1", context, kBoolean),
                  {"expected a boolean, got an integer expression", "'&&'", "column 1"});
  expect_contains(parse_error("i0 < 1 || i1", context, kBoolean),
                  {"expected a boolean, got an integer expression", "'||'", "column 11"});
  expect_contains(parse_error("!i0", context, kBoolean), {"expected a boolean, got an integer expression", "'!'"});
  expect_contains(parse_error("i0 ? 1 : 2", context), {"expected a boolean, got an integer expression", "?:"});
  expect_contains(parse_error("(i0 < 1) + 2", context), {"expected an integer, got a boolean", "'+'"});
  expect_contains(parse_error("0 < i0 < 2", context, kBoolean), {"expected an integer, got a boolean", "chain"});
  expect_contains(parse_error("-(i0 < 1)", context), {"expected an integer, got a boolean", "unary '-'"});
  expect_contains(parse_error("i0 < 1 ? 1 : i0 > 2", context), {"branches of '?:' must have the same type"});
  expect_contains(parse_error("i0 == (i1 < 1)", context, kBoolean), {"cannot compare an integer with a boolean"});
  expect_contains(parse_error("min(i0 < 1, 2)", context), {"expected an integer, got a boolean", "argument 1 of min"});
  // syntax
  expect_contains(parse_error("min(i0)", context), {"min takes 2 arguments, got 1"});
  expect_contains(parse_error("abs(i0, i1)", context), {"abs takes 1 argument, got 2"});
  expect_contains(parse_error("min + 1", context), {"'min' is a function"});
  expect_contains(parse_error("foo(i0)", context), {"unknown function 'foo'"});
  expect_contains(parse_error("i0 = 1", context, kBoolean), {"'='", "did you mean '=='"});
  expect_contains(parse_error("i0 & i1", context, kBoolean), {"did you mean '&&'"});
  expect_contains(parse_error("i0 | i1", context, kBoolean), {"did you mean '||'"});
  expect_contains(parse_error("i0 $ 1", context), {"unexpected character '$'", "column 4"});
  expect_contains(parse_error("i0 i1", context), {"unexpected 'i1'", "column 4"});
  expect_contains(parse_error("i0 < 1 ? 2", context), {"expected ':'"});
  expect_contains(parse_error("i0 * * 2", context), {"expected an operand", "'*'", "column 6"});
  // pathological nesting is an error, not a crash
  expect_contains(parse_error(std::string(100000, '(') + "1" + std::string(100000, ')'), context),
                  {"nested too deeply"});
  expect_contains(parse_error(std::string(100000, '-') + "i0", context), {"nested too deeply"});
  std::string long_sum = "1";
  for (int term = 0; term < 5000; ++term) long_sum += "+1";
  expect_contains(parse_error(long_sum, context), {"nested too deeply"});
}

TEST(IndexExpression, RejectsInconsistentContext) {
  IndexContext context;
  context.extra_ranks = {1, 2};
  context.extra_is_boolean = {true};
  EXPECT_THROW(parse_index_expression("1", context, kInteger), std::invalid_argument);
  IndexContext negative;
  negative.loop_rank = -1;
  EXPECT_THROW(parse_index_expression("1", negative, kInteger), std::invalid_argument);
}

TEST(IndexExpression, ConstructorsCheckTypes) {
  const IndexExpression sum = make_binary(IndexOperator::Add, make_loop_index(0), make_integer(1));
  EXPECT_EQ(to_canonical_string(sum), "(i0 + 1)");
  EXPECT_EQ(sum->type, kInteger);
  const IndexExpression condition = make_binary(IndexOperator::Less, make_loop_index(1), make_input_shape(2));
  EXPECT_EQ(condition->type, kBoolean);
  EXPECT_EQ(to_canonical_string(make_ternary(condition, make_output_shape(0), make_integer(-4))),
            "((i1 < xshape2) ? yshape0 : (-4))");
  EXPECT_EQ(to_canonical_string(make_extra_read(3, {make_loop_index(0), make_integer(2)})), "@e3(i0, 2)");
  EXPECT_EQ(make_extra_read(0, {}, kBoolean)->type, kBoolean);
  EXPECT_THROW(make_binary(IndexOperator::Add, condition, make_integer(1)), std::invalid_argument);
  EXPECT_THROW(make_binary(IndexOperator::LogicalAnd, condition, make_integer(1)), std::invalid_argument);
  EXPECT_THROW(make_binary(IndexOperator::Equal, condition, make_integer(1)), std::invalid_argument);
  EXPECT_THROW(make_binary(IndexOperator::Negate, make_integer(1), make_integer(1)), std::invalid_argument);
  EXPECT_THROW(make_unary(IndexOperator::Not, make_integer(1)), std::invalid_argument);
  EXPECT_THROW(make_unary(IndexOperator::Add, make_integer(1)), std::invalid_argument);
  EXPECT_THROW(make_ternary(make_integer(1), make_integer(1), make_integer(2)), std::invalid_argument);
  EXPECT_THROW(make_ternary(condition, make_integer(1), condition), std::invalid_argument);
  EXPECT_THROW(make_extra_read(0, {condition}), std::invalid_argument);
  EXPECT_THROW(make_binary(IndexOperator::Add, nullptr, make_integer(1)), std::invalid_argument);
  EXPECT_THROW(make_loop_index(-1), std::invalid_argument);
}

TEST(IndexExpression, SimplifyFoldsConstantsAndIdentities) {
  const IndexContext context = table_context();
  auto simplified = [&](const char* text, IndexType type = kInteger) {
    return to_canonical_string(simplify(parse_index_expression(text, context, type)));
  };
  EXPECT_EQ(simplified("i0 + 0"), "i0");
  EXPECT_EQ(simplified("0 + i0"), "i0");
  EXPECT_EQ(simplified("i0 - 0"), "i0");
  EXPECT_EQ(simplified("i0 * 1"), "i0");
  EXPECT_EQ(simplified("1 * i0"), "i0");
  EXPECT_EQ(simplified("i0 * 0"), "0");
  EXPECT_EQ(simplified("0 * @e0(i0, i1)"), "0");
  EXPECT_EQ(simplified("i0 / 1"), "i0");
  EXPECT_EQ(simplified("i0 % 1"), "0");
  EXPECT_EQ(simplified("i0 - i0"), "0");
  EXPECT_EQ(simplified("2 * 3 + i0"), "(i0 + 6)");
  EXPECT_EQ(simplified("(i0 + 1) - 1"), "i0");
  EXPECT_EQ(simplified("i0 - 1 - 1"), "(i0 - 2)");
  EXPECT_EQ(simplified("i0 + 1 - 3"), "(i0 - 2)");
  EXPECT_EQ(simplified("(i0 * 2) * 3"), "(i0 * 6)");
  EXPECT_EQ(simplified("(i0 / 2) / 3"), "(i0 / 6)");
  EXPECT_EQ(simplified("(i0 / -2) / 3"), "((i0 / (-2)) / 3)");
  EXPECT_EQ(simplified("i1*2-1+i3"), "(((i1 * 2) - 1) + i3)");
  EXPECT_EQ(simplified("-(-i0)"), "i0");
  EXPECT_EQ(simplified("0 - i0"), "(-i0)");
  EXPECT_EQ(simplified("abs(-i0)"), "abs(i0)");
  EXPECT_EQ(simplified("min(i0, i0)"), "i0");
  EXPECT_EQ(simplified("-7 / 2"), "(-4)");
  EXPECT_EQ(simplified("i0 < 1 ? 5 : 5"), "5");
  EXPECT_EQ(simplified("1 < 2 ? i0 : i1"), "i0");
  EXPECT_EQ(simplified("1 < 2", kBoolean), "true");
  EXPECT_EQ(simplified("2 < 1", kBoolean), "false");
  EXPECT_EQ(simplified("!(i0 < i1)", kBoolean), "(i0 >= i1)");
  EXPECT_EQ(simplified("!!(i0 < i1)", kBoolean), "(i0 < i1)");
  EXPECT_EQ(simplified("i0 < 0 || 1 > 2", kBoolean), "(i0 < 0)");
  EXPECT_EQ(simplified("i0 < 0 && 1 > 2", kBoolean), "false");
  EXPECT_EQ(simplified("0 > 1 || i0 + 0 < 0 + 5", kBoolean), "(i0 < 5)");
  EXPECT_EQ(simplified("i0 <= i0", kBoolean), "true");
  EXPECT_EQ(simplified("i0 < 3 ? true : false", kBoolean), "(i0 < 3)");
  EXPECT_EQ(simplified("i0 < 3 ? false : true", kBoolean), "(i0 >= 3)");
  // Unchanged expressions come back as the same object.
  const IndexExpression untouched = parse_index_expression("i1*2-1+i3", context, kInteger);
  EXPECT_EQ(simplify(untouched), untouched);
}

TEST(IndexExpression, IsLoopIndexLooksThroughIdentities) {
  const IndexContext context = table_context();
  int which = -1;
  EXPECT_TRUE(is_loop_index(parse_index_expression("i1", context, kInteger), &which));
  EXPECT_EQ(which, 1);
  EXPECT_TRUE(is_loop_index(parse_index_expression("(i3 + 0) * 1", context, kInteger), &which));
  EXPECT_EQ(which, 3);
  EXPECT_TRUE(is_loop_index(parse_index_expression("i2 + 1 - 1", context, kInteger), &which));
  EXPECT_EQ(which, 2);
  EXPECT_FALSE(is_loop_index(parse_index_expression("i1 + 1", context, kInteger)));
  EXPECT_FALSE(is_loop_index(parse_index_expression("xshape0", context, kInteger)));
  EXPECT_FALSE(is_loop_index(parse_index_expression("@e0(i0, i1)", context, kInteger)));
  EXPECT_FALSE(is_loop_index(parse_index_expression("i0 * 2", context, kInteger)));
}

struct RangeCase {
  const char* text;
  IndexType type;
  std::vector<int64_t> loop_extents, x_shape, y_shape;
  int64_t low, high;
};

TEST(IndexExpression, RangeAnalysisHandComputedCases) {
  const RangeCase cases[] = {
      {"i0 - 1", kInteger, {4}, {}, {}, -1, 2},
      {"i0 * 2 + 1", kInteger, {4}, {}, {}, 1, 7},
      {"xshape0 - 1 - i0", kInteger, {10}, {10}, {}, 0, 9},
      {"i1 * 2 - 1 + i0", kInteger, {3, 5}, {}, {}, -1, 9},
      {"i0 % 8", kInteger, {4}, {}, {}, 0, 3},
      {"i0 % 3", kInteger, {10}, {}, {}, 0, 2},
      {"(i0 - 5) % 3", kInteger, {10}, {}, {}, 0, 2},
      {"i0 / 2", kInteger, {5}, {}, {}, 0, 2},
      {"(i0 - 3) / 2", kInteger, {4}, {}, {}, -2, 0},
      {"i0 / (i1 - 1)", kInteger, {4, 3}, {}, {}, -3, 3},
      {"i0 / 0", kInteger, {4}, {}, {}, 0, 0},
      {"-i0", kInteger, {4}, {}, {}, -3, 0},
      {"abs(i0 - 2)", kInteger, {4}, {}, {}, 0, 2},
      {"min(i0, 2)", kInteger, {4}, {}, {}, 0, 2},
      {"max(i0, yshape0)", kInteger, {4}, {}, {2}, 2, 3},
      {"i0 < 2 ? 10 : i0", kInteger, {4}, {}, {}, 0, 10},
      {"i0 < 10 ? 10 : i0", kInteger, {4}, {}, {}, 10, 10},
      {"i0 < 10", kBoolean, {4}, {}, {}, 1, 1},
      {"i0 >= 4", kBoolean, {4}, {}, {}, 0, 0},
      {"i0 < 2", kBoolean, {4}, {}, {}, 0, 1},
      {"i0 >= 0 && i0 < xshape0", kBoolean, {4}, {4}, {}, 1, 1},
      {"i0 - 1 < 0 || i0 - 1 >= xshape0", kBoolean, {4}, {4}, {}, 0, 1},
      {"i0 + 1 < 0 || i0 + 1 >= xshape0 + 1", kBoolean, {4}, {4}, {}, 0, 0},
      {"!(i0 < 10)", kBoolean, {4}, {}, {}, 0, 0},
      {"xshape0 == 4", kBoolean, {}, {4}, {}, 1, 1},
      {"xshape0 != 4", kBoolean, {}, {4}, {}, 0, 0},
      // unknown facts widen the range
      {"xshape1", kInteger, {}, {4}, {}, 0, kLargest},
      {"i3", kInteger, {4}, {}, {}, 0, kLargest},
      {"@e0(i0, i0)", kInteger, {4}, {}, {}, kSmallest, kLargest},
      {"@e1(i0)", kBoolean, {4}, {}, {}, 0, 1},
      // possible wrap-around gives the full range
      {"xshape0 * xshape0", kInteger, {}, {int64_t{1} << 40}, {}, kSmallest, kLargest},
      {"9223372036854775807 + i0", kInteger, {2}, {}, {}, kSmallest, kLargest},
      {"-9223372036854775808 - i0", kInteger, {2}, {}, {}, kSmallest, kLargest},
      {"-(-9223372036854775808 + i0)", kInteger, {2}, {}, {}, kSmallest, kLargest},
      {"abs(-9223372036854775808 + i0)", kInteger, {2}, {}, {}, kSmallest, kLargest},
      {"(-9223372036854775808 + i0) / (i0 - 1)", kInteger, {2}, {}, {}, kSmallest, kLargest},
  };
  const IndexContext context = table_context();
  for (const RangeCase& test : cases) {
    SCOPED_TRACE(test.text);
    const IndexRange range = bound_index_expression(parse_index_expression(test.text, context, test.type),
                                                    test.loop_extents, test.x_shape, test.y_shape);
    EXPECT_EQ(range.low, test.low);
    EXPECT_EQ(range.high, test.high);
  }
}

// ---------------------------------------------------------------- randomized soundness
// Random expressions over i0..i2, xshape0..1, yshape0, @e0(a) (integer, rank 1), @e1(a) (boolean, rank 1).
class RandomExpressions {
 public:
  explicit RandomExpressions(uint32_t seed) : generator_(seed) {}

  IndexExpression integer(int depth) {
    if (depth <= 0 || pick(10) < 3) return integer_leaf(depth);
    switch (pick(12)) {
      case 0: return make_unary(IndexOperator::Negate, integer(depth - 1));
      case 1: return make_unary(IndexOperator::Abs, integer(depth - 1));
      case 2: return make_ternary(boolean(depth - 1), integer(depth - 1), integer(depth - 1));
      default: {
        static const IndexOperator kArithmetic[] = {
            IndexOperator::Add,         IndexOperator::Subtract,    IndexOperator::Multiply,
            IndexOperator::FloorDivide, IndexOperator::FloorModulo, IndexOperator::Minimum,
            IndexOperator::Maximum,     IndexOperator::FloorDivide, IndexOperator::FloorModulo};
        return make_binary(kArithmetic[pick(9)], integer(depth - 1), integer(depth - 1));
      }
    }
  }

  IndexExpression boolean(int depth) {
    if (depth <= 0 || pick(10) < 2) {
      if (pick(3) == 0) return make_boolean(pick(2) == 0);
      return make_extra_read(1, {integer(0)}, IndexType::Boolean);
    }
    switch (pick(6)) {
      case 0: return make_unary(IndexOperator::Not, boolean(depth - 1));
      case 1: return make_binary(pick(2) ? IndexOperator::LogicalAnd : IndexOperator::LogicalOr, boolean(depth - 1),
                                 boolean(depth - 1));
      case 2: return make_binary(pick(2) ? IndexOperator::Equal : IndexOperator::NotEqual, boolean(depth - 1),
                                 boolean(depth - 1));
      case 3: return make_ternary(boolean(depth - 1), boolean(depth - 1), boolean(depth - 1));
      default: {
        static const IndexOperator kComparisons[] = {IndexOperator::Less,         IndexOperator::LessEqual,
                                                     IndexOperator::Greater,      IndexOperator::GreaterEqual,
                                                     IndexOperator::Equal,        IndexOperator::NotEqual};
        return make_binary(kComparisons[pick(6)], integer(depth - 1), integer(depth - 1));
      }
    }
  }

  int64_t pick(int64_t count) { return std::uniform_int_distribution<int64_t>(0, count - 1)(generator_); }

 private:
  IndexExpression integer_leaf(int depth) {
    switch (pick(9)) {
      case 0:
      case 1:
      case 2: return make_loop_index(static_cast<int>(pick(3)));
      case 3: return make_input_shape(static_cast<int>(pick(2)));
      case 4: return make_output_shape(0);
      case 5:
        if (depth > 0) return make_extra_read(0, {integer(depth - 1)});
        return make_integer(pick(13) - 6);
      case 6:
        if (pick(4) == 0) {
          static const int64_t kExtremes[] = {kLargest, kSmallest, int64_t{1} << 40, -(int64_t{1} << 40),
                                              int64_t{1} << 62, kLargest - 1, kSmallest + 1};
          return make_integer(kExtremes[pick(7)]);
        }
        return make_integer(pick(13) - 6);
      default: return make_integer(pick(13) - 6);
    }
  }

  std::mt19937 generator_;
};

TEST(IndexExpression, RandomExpressionsStayInsideTheirRangeAndSurviveSimplifyAndReparse) {
  IndexContext context;
  context.loop_rank = 3;
  context.x_rank = 2;
  context.y_rank = 1;
  context.extra_ranks = {1, 1};
  context.extra_is_boolean = {false, true};
  RandomExpressions random(20240611u);
  int64_t narrow_ranges = 0;
  for (int trial = 0; trial < 6000; ++trial) {
    const bool want_boolean = random.pick(4) == 0;
    const IndexExpression expression = want_boolean ? random.boolean(4) : random.integer(4);
    const std::vector<int64_t> extents = {1 + random.pick(4), 1 + random.pick(4), 1 + random.pick(3)};
    IndexEnvironment environment;
    environment.x_shape = {random.pick(7), random.pick(7)};
    environment.y_shape = {random.pick(7)};
    environment.read_extra = [](int extra, const std::vector<int64_t>& indices) -> int64_t {
      const int64_t index = indices.at(0);
      if (extra == 0) return static_cast<int64_t>(static_cast<uint64_t>(index) * 3u - 7u);
      return index % 3 == 0;
    };
    const std::string canonical = to_canonical_string(expression);
    SCOPED_TRACE(canonical);
    const IndexExpression simplified = simplify(expression);
    const IndexExpression reparsed =
        parse_index_expression(canonical, context, want_boolean ? IndexType::Boolean : IndexType::Integer);
    ASSERT_EQ(to_canonical_string(reparsed), canonical);
    const IndexRange range = bound_index_expression(expression, extents, environment.x_shape, environment.y_shape);
    const IndexRange simplified_range =
        bound_index_expression(simplified, extents, environment.x_shape, environment.y_shape);
    ASSERT_LE(range.low, range.high);
    if (want_boolean) {
      ASSERT_GE(range.low, 0);
      ASSERT_LE(range.high, 1);
    }
    if (range.high - static_cast<double>(range.low) < 1e6) ++narrow_ranges;
    for (int64_t i0 = 0; i0 < extents[0]; ++i0) {
      for (int64_t i1 = 0; i1 < extents[1]; ++i1) {
        for (int64_t i2 = 0; i2 < extents[2]; ++i2) {
          environment.loop_indices = {i0, i1, i2};
          const int64_t value = evaluate_index_expression(expression, environment);
          ASSERT_GE(value, range.low) << "at i = " << i0 << ", " << i1 << ", " << i2;
          ASSERT_LE(value, range.high) << "at i = " << i0 << ", " << i1 << ", " << i2;
          ASSERT_GE(value, simplified_range.low) << to_canonical_string(simplified);
          ASSERT_LE(value, simplified_range.high) << to_canonical_string(simplified);
          ASSERT_EQ(evaluate_index_expression(simplified, environment), value) << to_canonical_string(simplified);
          ASSERT_EQ(evaluate_index_expression(reparsed, environment), value);
        }
      }
    }
  }
  // The analysis is not trivially "everything": most random expressions get a usefully narrow range.
  EXPECT_GT(narrow_ranges, 3000);
}

}  // namespace
}  // namespace metajit

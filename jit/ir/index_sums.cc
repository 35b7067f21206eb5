// Index sums as terms: see index_sums.h.
#include "jit/ir/index_sums.h"

#include <algorithm>
#include <vector>

namespace metajit {
namespace {

struct IndexTerm {
  IrExprPtr atom;
  int64_t coefficient;
};

struct IndexSum {
  std::vector<IndexTerm> terms;  // in order of first appearance, each atom once
  int64_t constant = 0;
  int constants = 0;             // how many constant parts were folded into `constant`
  bool merged = false;           // an atom appeared twice
};

bool is_index_op(const IrExprPtr& expression, IndexOperator op) {
  return expression->kind == IrKind::IndexBinary && IndexOperator(expression->op) == op;
}

bool constant_of(const IrExprPtr& expression, int64_t* value) {
  if (expression->kind != IrKind::IntConstant || expression->dtype != DType::Int64) return false;
  *value = expression->integer;
  return true;
}

// Adds coefficient * expression to `sum`, looking through +, - and multiplication by a constant. False on
// overflow (the caller then leaves the expression alone).
bool collect(const IrExprPtr& expression, int64_t coefficient, IndexSum* sum) {
  int64_t value;
  if (constant_of(expression, &value)) {
    int64_t product;
    if (__builtin_mul_overflow(value, coefficient, &product) || __builtin_add_overflow(sum->constant, product, &sum->constant))
      return false;
    ++sum->constants;
    return true;
  }
  if (is_index_op(expression, IndexOperator::Add))
    return collect(expression->args[0], coefficient, sum) && collect(expression->args[1], coefficient, sum);
  if (is_index_op(expression, IndexOperator::Subtract))
    return collect(expression->args[0], coefficient, sum) && collect(expression->args[1], -coefficient, sum);
  if (is_index_op(expression, IndexOperator::Multiply)) {
    for (int side = 0; side < 2; ++side) {
      int64_t factor, product;
      if (!constant_of(expression->args[side], &factor)) continue;
      if (__builtin_mul_overflow(factor, coefficient, &product)) return false;
      return collect(expression->args[1 - side], product, sum);
    }
  }
  for (IndexTerm& term : sum->terms) {
    if (!ir_equal(term.atom, expression)) continue;
    sum->merged = true;
    return !__builtin_add_overflow(term.coefficient, coefficient, &term.coefficient);
  }
  sum->terms.push_back({expression, coefficient});
  return true;
}

// The sum back as an expression, terms in order (a negative term after the first is subtracted).
IrExprPtr build(const std::vector<IndexTerm>& terms, int64_t constant) {
  IrExprPtr result;
  for (const IndexTerm& term : terms) {
    if (term.coefficient == 0) continue;
    if (!result) {
      result = term.coefficient == 1 ? term.atom : ir_index(IndexOperator::Multiply, term.atom, ir_int(term.coefficient));
      continue;
    }
    bool negative = term.coefficient < 0 && term.coefficient != INT64_MIN;
    int64_t magnitude = negative ? -term.coefficient : term.coefficient;
    IrExprPtr scaled = magnitude == 1 ? term.atom : ir_index(IndexOperator::Multiply, term.atom, ir_int(magnitude));
    result = ir_index(negative ? IndexOperator::Subtract : IndexOperator::Add, result, scaled);
  }
  if (!result) return ir_int(constant);
  return constant == 0 ? result : ir_index(IndexOperator::Add, result, ir_int(constant));
}

// x / c and x % c with a positive constant c: sets *x and *c.
bool split_by_constant(const IrExprPtr& expression, IndexOperator op, IrExprPtr* x, int64_t* c) {
  if (!is_index_op(expression, op) || !constant_of(expression->args[1], c) || *c <= 0) return false;
  *x = expression->args[0];
  return true;
}

// Whether `remainder` (coefficient k) and `quotient` (coefficient c * k) are x % c and x / c, or x % c and
// (x / c) % m; then *joined is x, or x % (c * m), taking coefficient k.
bool joins(const IndexTerm& remainder, const IndexTerm& quotient, IrExprPtr* joined) {
  IrExprPtr x, inner;
  int64_t c, m = 0, d, scaled;
  if (!split_by_constant(remainder.atom, IndexOperator::FloorModulo, &x, &c)) return false;
  if (__builtin_mul_overflow(c, remainder.coefficient, &scaled) || quotient.coefficient != scaled) return false;
  IrExprPtr divided = quotient.atom;
  if (split_by_constant(divided, IndexOperator::FloorModulo, &inner, &m)) divided = inner;
  if (!split_by_constant(divided, IndexOperator::FloorDivide, &inner, &d) || d != c || !ir_equal(inner, x))
    return false;
  int64_t modulus;
  if (m && __builtin_mul_overflow(c, m, &modulus)) return false;
  *joined = m ? ir_index(IndexOperator::FloorModulo, x, ir_int(modulus)) : x;
  return true;
}

}  // namespace

IrExprPtr combine_index_sum(const IrExprPtr& left, const IrExprPtr& right) {
  IndexSum sum;
  if (!collect(left, 1, &sum) || !collect(right, 1, &sum)) return nullptr;
  bool changed = sum.merged || sum.constants > 1;
  for (bool joined_any = true; joined_any;) {
    joined_any = false;
    for (size_t first = 0; first < sum.terms.size() && !joined_any; ++first) {
      for (size_t second = 0; second < sum.terms.size() && !joined_any; ++second) {
        IrExprPtr joined;
        if (first == second || !joins(sum.terms[first], sum.terms[second], &joined)) continue;
        sum.terms[first].atom = joined;
        sum.terms.erase(sum.terms.begin() + second);
        joined_any = changed = true;
      }
    }
  }
  if (!changed) return nullptr;
  return build(sum.terms, sum.constant);
}

bool index_coefficient(const IrExprPtr& expression, const std::string& variable, int64_t* coefficient) {
  IndexSum sum;
  if (!collect(expression, 1, &sum)) return false;
  *coefficient = 0;
  for (const IndexTerm& term : sum.terms) {
    if (term.atom->kind == IrKind::Variable && term.atom->name == variable) {
      *coefficient = term.coefficient;
    } else if (mentions_variable(term.atom, variable)) {
      return false;
    }
  }
  return true;
}

IrExprPtr divide_index_sum(IndexOperator op, const IrExprPtr& left, int64_t divisor) {
  IndexSum sum;
  if (divisor <= 1 || !collect(left, 1, &sum)) return nullptr;
  bool divide = op == IndexOperator::FloorDivide;
  std::vector<IndexTerm> whole, rest;  // coefficients that are multiples of the divisor, and the others
  for (const IndexTerm& term : sum.terms) {
    if (term.coefficient % divisor == 0) {
      whole.push_back({term.atom, term.coefficient / divisor});
    } else {
      rest.push_back(term);
    }
  }
  int64_t constant_quotient = index_floor_divide(sum.constant, divisor);
  int64_t constant_rest = index_floor_modulo(sum.constant, divisor);
  if (!whole.empty() || constant_quotient != 0) {
    IrExprPtr remaining = build(rest, constant_rest);
    if (!divide) return ir_index(IndexOperator::FloorModulo, remaining, ir_int(divisor));
    return ir_index(IndexOperator::Add, build(whole, constant_quotient),
                    ir_index(IndexOperator::FloorDivide, remaining, ir_int(divisor)));
  }
  // Candidates for c: coefficients that divide the divisor, largest first (it leaves the most below c).
  std::vector<int64_t> candidates;
  for (const IndexTerm& term : rest)
    if (term.coefficient > 1 && divisor % term.coefficient == 0) candidates.push_back(term.coefficient);
  std::sort(candidates.rbegin(), candidates.rend());
  for (int64_t c : candidates) {
    std::vector<IndexTerm> high, low;
    for (const IndexTerm& term : rest) {
      if (term.coefficient % c == 0) {
        high.push_back({term.atom, term.coefficient / c});
      } else {
        low.push_back(term);
      }
    }
    IrExprPtr below = build(low, constant_rest);
    IrRange range = ir_range(below);
    if (range.low < 0 || range.high >= c) continue;
    IrExprPtr scaled_down = build(high, 0);
    if (divide) return ir_index(IndexOperator::FloorDivide, scaled_down, ir_int(divisor / c));
    IrExprPtr wrapped = ir_index(IndexOperator::FloorModulo, scaled_down, ir_int(divisor / c));
    return ir_index(IndexOperator::Add, ir_index(IndexOperator::Multiply, wrapped, ir_int(c)), below);
  }
  return nullptr;
}

}  // namespace metajit

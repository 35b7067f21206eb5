// Recognises the contractions inside a lowered kernel: out[f(v)] (+)= sum over the other loop variables of
// left[g(v)] * right[h(v)], where f, g, h give each tensor dimension an affine index of the loop variables.
// Matrix products and convolutions (forward and both gradients) all take this form once the meta-ops are
// inlined, whatever ops the user wrote them with; a library backend (ops/) then decides whether it can run one.
// This pass only reads the IR and the lowering's notes on where values came from; it never looks at op names.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "jit/ir/lowering.h"
#include "jit/library_call/contraction.h"

namespace metajit {

// A value the planner stores so that a library call can read an operand from memory, and why.
struct OperandStore {
  Node* node = nullptr;
  int operand = 0;       // 1: the contraction's left operand, 2: its right
  const char* why = "";  // what the library cannot read, e.g. "a reindex whose indices are not affine (...)"
};

// How mj.inspect states a store made for a call of `work` multiply-adds: "operand 1 (reindex [8, 32, 34, 34] of
// [8, 32, 32, 32] at model.py:12) stored first: <why>; storing 1.2 MB costs less than a generated loop nest of
// 3.0e8 multiply-adds".
std::string describe_operand_store(const OperandStore& store, double work);

struct ContractionMatch {
  std::optional<Contraction> contraction;
  // Operand producers computed inside the kernel (their accesses have buffer -1): a library call reads its
  // operands from memory, so the planner materialises these and lowers again if the backend would take it.
  std::vector<Node*> materialize;
  std::vector<OperandStore> stores;  // why, one per entry of `materialize`
  // Filled by the planner for the match it keeps: the stores made for this call in earlier rounds, as
  // describe_operand_store states them.
  std::vector<std::string> stored_operands;
  // Set when the kernel does more than the contraction (a bias, an activation): the same kernel with the
  // reduction replaced by a load of one more input buffer, holding the contraction's result.
  std::optional<IrKernel> epilogue;
  // The same match with the start of that work (adding, subtracting or multiplying by a tensor, ReLU, a constant
  // scale or shift) folded into the call as post-ops: `epilogue` is what is left, none when nothing is. One per
  // foldable prefix of that work, longest first; the planner offers them to the backend in turn and falls back to
  // the plain contraction and epilogue above.
  struct Folded {
    Contraction contraction;
    std::optional<IrKernel> epilogue;
  };
  std::vector<Folded> folds;
};

ContractionMatch match_contraction(const LoweredKernel& lowered);

}  // namespace metajit

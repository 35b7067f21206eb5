// Which prelude helpers a generated kernel needs. A prelude is a list of pieces, each defining a few named helpers;
// a kernel gets the pieces its body names, the pieces those name, and so on, in the prelude's order. Parsing
// every helper for every kernel cost about 3 ms of a 10 ms compile (docs/design.md, "Kernels carry only the
// prelude they use").
#pragma once
#include <cstddef>
#include <string>

namespace metajit {

struct PreludePiece {
  const char* names;  // the identifiers the piece defines, separated by spaces
  const char* text;   // C++ (or CUDA) source, ending in a newline
};

// The pieces of pieces[0, count) that `body` needs, directly or through other pieces, concatenated in order.
std::string select_prelude_pieces(const PreludePiece* pieces, size_t count, const std::string& body);

// All of them, concatenated in order.
std::string join_prelude_pieces(const PreludePiece* pieces, size_t count);

}  // namespace metajit

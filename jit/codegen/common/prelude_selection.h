// Which prelude helpers a generated kernel needs. A prelude is a list of pieces, each defining a few named helpers;
// a kernel gets the pieces its body names, the pieces those name, and so on, in the prelude's order. Parsing
// every helper for every kernel cost about 1.8 ms of a 10 ms compile (docs/design.md, "Kernels carry only the
// prelude they use").
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace metajit {

struct PreludePiece {
  const char* names;  // the identifiers the piece defines, separated by spaces
  const char* text;   // C++ (or CUDA) source, ending in a newline
};

// Chooses pieces for kernel bodies. Built once per prelude: what each piece defines and names is found up front,
// so a choice only scans the body (planning a kernel happens on every new graph, also for a cache hit).
class PreludeSelector {
 public:
  PreludeSelector(const PreludePiece* pieces, size_t count);
  // The pieces `body` needs, directly or through other pieces, concatenated in prelude order.
  std::string select(const std::string& body) const;

 private:
  struct Entry {
    const char* text;
    std::vector<size_t> needs;  // the pieces its text names
  };
  std::vector<Entry> entries_;
  // Keys point into the pieces' names, which must outlive the selector (string literals do).
  std::unordered_map<std::string_view, std::vector<size_t>> pieces_by_name_;
  size_t shortest_name_ = SIZE_MAX;
};

// All of them, concatenated in order.
std::string join_prelude_pieces(const PreludePiece* pieces, size_t count);

}  // namespace metajit

// What mj.inspect shows of a plan without running it: for each kernel that computing some values would launch,
// its key and source, the ops it fuses, whether it is generated, a library call (with or without an epilogue) or a
// Code op, where the kernel cache holds it, and its IR text. Planning only; this file must not compile or run.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/node.h"

namespace metajit {

struct KernelDescription {
  std::string key;     // "" for a library call without an epilogue
  std::string header;  // the kernel's header comment
  std::string body;    // its source without the header
  std::vector<std::string> ops;
  std::string kind;  // "generated", "library", "library+epilogue" or "code"
  bool cached_in_memory = false;
  std::string cached;  // "library", or where the kernel cache has it: "memory", "disk", "bundle", "" (nowhere)
  std::optional<std::string> library;      // the library call, described
  std::optional<std::string> contraction;  // the contraction pattern matched
  std::vector<std::string> stored_operands;  // library calls: operands stored first for the call, and why
  std::vector<int64_t> buffer_offsets;
  std::optional<std::string> ir;  // the kernel IR as text (none for Code ops and bare library calls)
};

std::vector<KernelDescription> describe_plan(const std::vector<NodePtr>& nodes);

}  // namespace metajit

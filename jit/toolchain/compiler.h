// The compiler backend interface: C++17 kernel source in, relocatable ELF object bytes out.
// Backends know nothing of graphs, caches or loading; they must be callable from several threads at once
// and must report failures as CompileError (never abort the process).
#pragma once
#include <memory>
#include <stdexcept>
#include <string>

namespace metajit {

// what() is the compiler's diagnostics text; the source file is named "kernel.cc" with real line numbers.
struct CompileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Compiler {
 public:
  virtual ~Compiler() = default;
  // Everything that changes the produced binary, for cache keys: name, version, flags, target triple,
  // resolved CPU name and feature string (never the word "native").
  virtual const std::string& identity() const = 0;
  // Source -> relocatable ELF object. Throws CompileError carrying diagnostics. Thread-safe.
  virtual std::string compile(const std::string& source) = 0;
};

// In-process Clang 14 (no subprocess, no system headers). Throws std::runtime_error if Clang can't start.
std::unique_ptr<Compiler> make_clang_compiler();
// Subprocess: clang++-14 from PATH if present, else g++. Throws std::runtime_error if neither exists.
std::unique_ptr<Compiler> make_system_compiler();
// Per METAJIT_COMPILER: unset, "" or "clang" -> in-process; "system" -> subprocess; else std::invalid_argument.
std::unique_ptr<Compiler> make_default_compiler();

}  // namespace metajit

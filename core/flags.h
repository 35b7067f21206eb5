// The registry of metajit's settings: every METAJIT_* environment variable is declared once, in core/flag_table.cc
// (name, type, default, who acts on it, one line of documentation), and read through the typed accessors below by
// the C++ layers and, through one binding, by metajit.flags. docs/configuration.md is checked against the table.
// Must not hold a setting's runtime state or behaviour: the subsystem that owns a setting keeps its current value
// (and its mj.flags setter) and decides when to read the environment, at load or at each use.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace metajit {

// One per variable; the spelling of a setting in C++, so a misspelt name fails to build.
enum class Flag {
  CacheDirectory,
  CacheMaximumSize,
  Log,
  NumberOfThreads,
  HugePages,
  Lowering,
  MultipleOutputs,
  ConvolutionAlgorithm,
  CheckNan,
  Compile,
  Bundle,
  DumpDirectory,
  RecordBundle,
  Device,
  CudaArchitecture,
  Nvrtc,
  Cublas,
  Cudnn,
  Compiler,
  DistributedTimeout,
  Nccl,
  OverlapCollectives,
  DeviceMemoryLimit,
  MemoryBudget,
};

enum class FlagType {
  Boolean,  // 1/0, true/false, yes/no, on/off (any case)
  Integer,
  Size,     // bytes, or a number with K, M, G or T (powers of 1024); 0, "none" or "unlimited" mean no limit
  Text,     // a path or free text, taken as it is
  Choice,   // one of `choices` (any case, surrounding spaces ignored)
};

// What a value the type does not accept does: Raise where the owner reads it lazily and can report to the caller
// (std::invalid_argument, a ValueError in Python); Warn where it is read while the library loads, when raising
// would abort the process: a warning naming the variable and the value, then the default.
enum class BadValue { Warn, Raise };

// Who acts on the setting: the C++ engine, or the Python package (at import: loading a bundle, choosing the
// device), which still reads it through this registry.
enum class FlagReader { Engine, Python };

struct FlagDeclaration {
  Flag flag;
  const char* name;
  FlagType type;
  const char* default_value;    // as docs/configuration.md shows it; "" when unset means "not used"
  const char* choices;          // Choice only: the accepted values, separated by '|', the default first
  const char* noun;             // for errors: "METAJIT_DEVICE='tpu' is not a device"
  BadValue bad_value;
  FlagReader reader;
  const char* python_setting;   // the metajit.flags attribute or function that changes it at run time, or ""
  const char* documentation;    // one line
};

struct FlagError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

const std::vector<FlagDeclaration>& flag_declarations();  // in declaration order (core/flag_table.cc)
const FlagDeclaration& flag_declaration(Flag flag);
const FlagDeclaration* find_flag_declaration(const std::string& name);  // null when not registered

// Each accessor reads the environment at the call; owners that read a setting once call it from a static.
// The raw text, nullopt when unset; an empty value is returned as set (METAJIT_CACHE_DIR= means no disk cache).
std::optional<std::string> flag_text(Flag flag);
bool flag_boolean(Flag flag);
std::optional<int64_t> flag_integer(Flag flag);  // nullopt when unset, empty or bad (the owner's default applies)
uint64_t flag_size(Flag flag);                   // bytes; 0 means no limit
std::string flag_choice(Flag flag);              // one of the choices, lower case; the default when unset or empty

// The parsers behind the accessors, for a value given directly (tests, metajit.flags); `text` is never null.
bool parse_boolean_flag(Flag flag, const std::string& text);
std::optional<int64_t> parse_integer_flag(Flag flag, const std::string& text);
uint64_t parse_size_flag(Flag flag, const std::string& text);
// A size written as bytes or as a number with K, M, G or T (KB, KiB, ... alike): its bytes, which may have a
// fraction; none when the text is not one.
std::optional<double> parse_size_text(const std::string& text);
std::string parse_choice_flag(Flag flag, const std::string& text);

const char* flag_type_name(FlagType type);  // "boolean", "integer", "size", "text", "choice"

}  // namespace metajit

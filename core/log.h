// Logging controlled by METAJIT_LOG (default warning). The levels form one ladder, each printing everything the
// levels before it print:
//   warning  problems metajit worked around
//   info     each kernel's key as it is loaded or compiled, library calls chosen
//   plan     each plan as it is made: kernels, library calls, buffers
//   ir       the kernel IR after lowering and after each IR pass
//   source   each kernel's rendered source as it is rendered
//   debug    everything: memory-cache hits, the linker's choices, compiled sources
// Messages go to stderr with a "[metajit <level>]" prefix. Cheap to call when the level is off: check
// log_enabled() before building a message.
#pragma once
#include <optional>
#include <string>

namespace metajit {

enum class LogLevel : int { Warning = 0, Info = 1, Plan = 2, Ir = 3, Source = 4, Debug = 5 };

bool log_enabled(LogLevel level);
void log_message(LogLevel level, const std::string& message);
inline void log_warning(const std::string& message) { log_message(LogLevel::Warning, message); }
void set_log_level(LogLevel level);
// "warning", "info", "plan", "ir", "source" or "debug" (as METAJIT_LOG spells them); nullopt for anything else.
std::optional<LogLevel> parse_log_level(const std::string& name);
const char* log_level_name(LogLevel level);

}  // namespace metajit

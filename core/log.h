// Logging controlled by METAJIT_LOG=warning|info|debug (default warning). Messages go to stderr with a
// "[metajit]" prefix. Cheap to call when the level is off: check log_enabled() before building a message.
#pragma once
#include <string>

namespace metajit {

enum class LogLevel : int { Warning = 0, Info = 1, Debug = 2 };

bool log_enabled(LogLevel level);
void log_message(LogLevel level, const std::string& message);
inline void log_warning(const std::string& message) { log_message(LogLevel::Warning, message); }
void set_log_level(LogLevel level);

}  // namespace metajit

// Level comes from METAJIT_LOG once at startup; set_log_level overrides it (metajit.flags).
#include "core/log.h"

#include "core/flags.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace metajit {
namespace {

int level_from_environment() {
  std::string level = flag_choice(Flag::Log);
  return level == "debug" ? 2 : level == "info" ? 1 : 0;
}

std::atomic<int>& current_level() {
  static std::atomic<int> level{level_from_environment()};
  return level;
}

}  // namespace

bool log_enabled(LogLevel level) { return static_cast<int>(level) <= current_level().load(std::memory_order_relaxed); }

void set_log_level(LogLevel level) { current_level().store(static_cast<int>(level)); }

void log_message(LogLevel level, const std::string& message) {
  if (!log_enabled(level)) return;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  const char* tag = level == LogLevel::Warning ? "warning" : level == LogLevel::Info ? "info" : "debug";
  std::fprintf(stderr, "[metajit %s] %s\n", tag, message.c_str());
}

}  // namespace metajit

// Level comes from METAJIT_LOG once at startup; set_log_level overrides it (metajit.flags).
#include "core/log.h"

#include "core/flags.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace metajit {
namespace {

constexpr const char* kLevelNames[] = {"warning", "info", "plan", "ir", "source", "debug"};

int level_from_environment() {
  std::optional<LogLevel> level = parse_log_level(flag_choice(Flag::Log));
  return static_cast<int>(level.value_or(LogLevel::Warning));
}

std::atomic<int>& current_level() {
  static std::atomic<int> level{level_from_environment()};
  return level;
}

}  // namespace

std::optional<LogLevel> parse_log_level(const std::string& name) {
  for (int level = 0; level < int(sizeof(kLevelNames) / sizeof(*kLevelNames)); ++level)
    if (name == kLevelNames[level]) return static_cast<LogLevel>(level);
  return std::nullopt;
}

const char* log_level_name(LogLevel level) { return kLevelNames[static_cast<int>(level)]; }

bool log_enabled(LogLevel level) { return static_cast<int>(level) <= current_level().load(std::memory_order_relaxed); }

void set_log_level(LogLevel level) { current_level().store(static_cast<int>(level)); }

void log_message(LogLevel level, const std::string& message) {
  if (!log_enabled(level)) return;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  // A message that ends in a newline (a kernel's text) is not followed by an empty line.
  size_t length = message.size() - (!message.empty() && message.back() == '\n' ? 1 : 0);
  std::fprintf(stderr, "[metajit %s] %.*s\n", log_level_name(level), int(length), message.c_str());
}

}  // namespace metajit

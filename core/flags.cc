// Parses METAJIT_* settings by the type core/flag_table.cc declares for each, and reports a value the type does
// not accept by naming the variable and the value. Must not cache values or hold runtime state: owners decide
// when to read (some at load, some at each use, and tests change the environment between reads).
// Warnings go straight to stderr, not through core/log: the log level is itself a setting read here.
#include "core/flags.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

namespace metajit {
namespace {

std::string lower_case_trimmed(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  std::string result = text.substr(begin, end - begin);
  for (char& character : result) character = char(std::tolower(static_cast<unsigned char>(character)));
  return result;
}

std::vector<std::string> choices_of(const FlagDeclaration& declaration) {
  std::vector<std::string> choices;
  std::string rest = declaration.choices;
  for (size_t bar; (bar = rest.find('|')) != std::string::npos; rest = rest.substr(bar + 1))
    choices.push_back(rest.substr(0, bar));
  if (!rest.empty()) choices.push_back(rest);
  return choices;
}

std::string quoted_list(const std::vector<std::string>& choices) {
  std::string list;
  for (size_t index = 0; index < choices.size(); ++index) {
    if (index) list += index + 1 == choices.size() ? " or " : ", ";
    list += "'" + choices[index] + "'";
  }
  return list;
}

// Raises for flags declared BadValue::Raise; otherwise warns once per variable and value (an allocator reads
// METAJIT_HUGE_PAGES at every large block) and returns so that the caller can use the default.
void report_bad_value(const FlagDeclaration& declaration, const std::string& text, const std::string& hint) {
  std::string message = std::string(declaration.name) + "='" + text + "' is not " + declaration.noun + "; " + hint;
  if (declaration.bad_value == BadValue::Raise) throw FlagError(message);
  static std::mutex mutex;
  static std::set<std::string> reported;
  std::lock_guard<std::mutex> lock(mutex);
  if (!reported.insert(std::string(declaration.name) + "=" + text).second) return;
  std::fprintf(stderr, "[metajit warning] %s; using the default, %s\n", message.c_str(), declaration.default_value);
}

void require_type(const FlagDeclaration& declaration, FlagType type) {
  if (declaration.type != type)
    throw std::logic_error(std::string(declaration.name) + " is declared " + flag_type_name(declaration.type) +
                           ", read as " + flag_type_name(type));
}

}  // namespace

const FlagDeclaration& flag_declaration(Flag flag) {
  for (const FlagDeclaration& declaration : flag_declarations())
    if (declaration.flag == flag) return declaration;
  throw std::logic_error("flag " + std::to_string(int(flag)) + " has no row in core/flag_table.cc");
}

const FlagDeclaration* find_flag_declaration(const std::string& name) {
  for (const FlagDeclaration& declaration : flag_declarations())
    if (name == declaration.name) return &declaration;
  return nullptr;
}

const char* flag_type_name(FlagType type) {
  switch (type) {
    case FlagType::Boolean: return "boolean";
    case FlagType::Integer: return "integer";
    case FlagType::Size: return "size";
    case FlagType::Text: return "text";
    case FlagType::Choice: return "choice";
  }
  return "unknown";
}

std::optional<std::string> flag_text(Flag flag) {
  const char* value = std::getenv(flag_declaration(flag).name);
  if (!value) return std::nullopt;
  return std::string(value);
}

bool parse_boolean_flag(Flag flag, const std::string& text) {
  const FlagDeclaration& declaration = flag_declaration(flag);
  require_type(declaration, FlagType::Boolean);
  const bool fallback = std::string(declaration.default_value) == "1";
  std::string value = lower_case_trimmed(text);
  if (value.empty()) return fallback;
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off") return false;
  report_bad_value(declaration, text, "use 1 or 0 (or true/false, yes/no, on/off)");
  return fallback;
}

bool flag_boolean(Flag flag) {
  std::optional<std::string> text = flag_text(flag);
  return parse_boolean_flag(flag, text ? *text : "");
}

std::optional<int64_t> parse_integer_flag(Flag flag, const std::string& text) {
  const FlagDeclaration& declaration = flag_declaration(flag);
  require_type(declaration, FlagType::Integer);
  if (lower_case_trimmed(text).empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  while (end && std::isspace(static_cast<unsigned char>(*end))) ++end;
  if (end == text.c_str() || (end && *end) || errno != 0) {
    report_bad_value(declaration, text, "use a whole number");
    return std::nullopt;
  }
  return int64_t(value);
}

std::optional<int64_t> flag_integer(Flag flag) {
  std::optional<std::string> text = flag_text(flag);
  return parse_integer_flag(flag, text ? *text : "");
}

std::optional<double> parse_size_text(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  double number = std::strtod(text.c_str(), &end);
  std::string suffix = end ? std::string(end) : "";
  double scale = suffix.empty() || suffix == "B" ? 1.0
                 : suffix == "K" || suffix == "KB" || suffix == "KiB" ? 1024.0
                 : suffix == "M" || suffix == "MB" || suffix == "MiB" ? 1024.0 * 1024
                 : suffix == "G" || suffix == "GB" || suffix == "GiB" ? 1024.0 * 1024 * 1024
                 : suffix == "T" || suffix == "TB" || suffix == "TiB" ? 1024.0 * 1024 * 1024 * 1024
                                                                      : -1.0;
  if (end == text.c_str() || errno != 0 || scale < 0 || !(number >= 0) || !std::isfinite(number)) return std::nullopt;
  return number * scale;
}

uint64_t parse_size_flag(Flag flag, const std::string& text) {
  const FlagDeclaration& declaration = flag_declaration(flag);
  require_type(declaration, FlagType::Size);
  if (text.empty()) return parse_size_flag(flag, declaration.default_value);
  if (text == "none" || text == "unlimited") return 0;
  std::optional<double> bytes = parse_size_text(text);
  if (!bytes || *bytes > 1e19) {
    report_bad_value(declaration, text, "use bytes or a number with K, M, G or T (for example 2G), or 'unlimited'");
    return parse_size_flag(flag, declaration.default_value);
  }
  return uint64_t(*bytes);
}

uint64_t flag_size(Flag flag) {
  std::optional<std::string> text = flag_text(flag);
  return parse_size_flag(flag, text ? *text : "");
}

std::string parse_choice_flag(Flag flag, const std::string& text) {
  const FlagDeclaration& declaration = flag_declaration(flag);
  require_type(declaration, FlagType::Choice);
  std::string value = lower_case_trimmed(text);
  if (value.empty()) return declaration.default_value;
  std::vector<std::string> choices = choices_of(declaration);
  for (const std::string& choice : choices)
    if (value == choice) return choice;
  report_bad_value(declaration, text, "use " + quoted_list(choices));
  return declaration.default_value;
}

std::string flag_choice(Flag flag) {
  std::optional<std::string> text = flag_text(flag);
  return parse_choice_flag(flag, text ? *text : "");
}

}  // namespace metajit

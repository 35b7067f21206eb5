#include "jit/prelude_selection.h"

#include <cctype>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace metajit {
namespace {

bool starts_identifier(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool continues_identifier(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Every identifier-shaped token of `text` (keywords and names in comments too: a spare piece costs a little
// parsing, a missing one a compile error).
void add_identifiers(std::string_view text, std::unordered_set<std::string_view>& identifiers) {
  for (size_t position = 0; position < text.size();) {
    if (!starts_identifier(text[position])) {
      // a digit run may carry letters (1.5f, 0x7fu): skip it whole so its suffix is not taken for a name
      if (std::isdigit(static_cast<unsigned char>(text[position])))
        while (position < text.size() && continues_identifier(text[position])) ++position;
      else
        ++position;
      continue;
    }
    size_t start = position;
    while (position < text.size() && continues_identifier(text[position])) ++position;
    identifiers.insert(text.substr(start, position - start));
  }
}

bool defines_any(const PreludePiece& piece, const std::unordered_set<std::string_view>& identifiers) {
  std::unordered_set<std::string_view> names;
  add_identifiers(piece.names, names);
  for (std::string_view name : names)
    if (identifiers.count(name)) return true;
  return false;
}

}  // namespace

std::string select_prelude_pieces(const PreludePiece* pieces, size_t count, const std::string& body) {
  std::unordered_set<std::string_view> needed;
  add_identifiers(body, needed);
  std::vector<bool> chosen(count, false);
  // A chosen piece may name pieces before it, so repeat until nothing more is chosen.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t index = 0; index < count; ++index) {
      if (chosen[index] || !defines_any(pieces[index], needed)) continue;
      chosen[index] = true;
      add_identifiers(pieces[index].text, needed);
      changed = true;
    }
  }
  std::string prelude;
  for (size_t index = 0; index < count; ++index)
    if (chosen[index]) prelude += pieces[index].text;
  return prelude;
}

std::string join_prelude_pieces(const PreludePiece* pieces, size_t count) {
  std::string prelude;
  for (size_t index = 0; index < count; ++index) prelude += pieces[index].text;
  return prelude;
}

}  // namespace metajit

#include "jit/codegen/common/prelude_selection.h"

#include <algorithm>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace metajit {
namespace {

// ASCII only, without the locale lookups of <cctype> (the scan runs on every new kernel's body).
bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool continues_identifier(char c) { return is_letter(c) || is_digit(c); }

// Calls `found` with every identifier-shaped token of `text` (keywords and names in comments too: a spare piece
// costs a little parsing, a missing one a compile error).
template <typename Found> void for_each_identifier(std::string_view text, Found found) {
  for (size_t position = 0; position < text.size();) {
    if (!is_letter(text[position])) {
      // a digit run may carry letters (1.5f, 0x7fu): skip it whole so its suffix is not taken for a name
      if (is_digit(text[position]))
        while (position < text.size() && continues_identifier(text[position])) ++position;
      else
        ++position;
      continue;
    }
    size_t start = position;
    while (position < text.size() && continues_identifier(text[position])) ++position;
    found(text.substr(start, position - start));
  }
}

void add_identifiers(std::string_view text, std::unordered_set<std::string_view>& identifiers) {
  for_each_identifier(text, [&](std::string_view name) { identifiers.insert(name); });
}

}  // namespace

PreludeSelector::PreludeSelector(const PreludePiece* pieces, size_t count) {
  for (size_t index = 0; index < count; ++index) {
    std::unordered_set<std::string_view> names;
    add_identifiers(pieces[index].names, names);
    for (std::string_view name : names) {
      pieces_by_name_[name].push_back(index);
      shortest_name_ = std::min(shortest_name_, name.size());
    }
    entries_.push_back(Entry{pieces[index].text, {}});
  }
  for (Entry& entry : entries_) {
    std::unordered_set<std::string_view> named;
    add_identifiers(entry.text, named);
    for (std::string_view name : named) {
      auto found = pieces_by_name_.find(name);
      if (found != pieces_by_name_.end()) entry.needs.insert(entry.needs.end(), found->second.begin(), found->second.end());
    }
  }
}

std::string PreludeSelector::select(const std::string& body) const {
  std::vector<bool> chosen(entries_.size(), false);
  std::vector<size_t> pending;
  for_each_identifier(body, [&](std::string_view name) {
    if (name.size() < shortest_name_) return;  // most tokens of a body (i0, in0_1, float) name no piece
    auto found = pieces_by_name_.find(name);
    if (found != pieces_by_name_.end()) pending.insert(pending.end(), found->second.begin(), found->second.end());
  });
  while (!pending.empty()) {
    size_t index = pending.back();
    pending.pop_back();
    if (chosen[index]) continue;
    chosen[index] = true;
    pending.insert(pending.end(), entries_[index].needs.begin(), entries_[index].needs.end());
  }
  std::string prelude;
  prelude.reserve(8192);  // a typical selection, in one allocation
  for (size_t index = 0; index < entries_.size(); ++index)
    if (chosen[index]) prelude += entries_[index].text;
  return prelude;
}

std::string join_prelude_pieces(const PreludePiece* pieces, size_t count) {
  std::string prelude;
  for (size_t index = 0; index < count; ++index) prelude += pieces[index].text;
  return prelude;
}

}  // namespace metajit

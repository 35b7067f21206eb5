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

}  // namespace

PreludeSelector::PreludeSelector(const PreludePiece* pieces, size_t count) {
  for (size_t index = 0; index < count; ++index) {
    std::unordered_set<std::string_view> names;
    add_identifiers(pieces[index].names, names);
    for (std::string_view name : names) pieces_by_name_[name].push_back(index);
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
  std::unordered_set<std::string_view> named;
  add_identifiers(body, named);
  std::vector<bool> chosen(entries_.size(), false);
  std::vector<size_t> pending;
  for (std::string_view name : named) {
    auto found = pieces_by_name_.find(name);
    if (found != pieces_by_name_.end()) pending.insert(pending.end(), found->second.begin(), found->second.end());
  }
  while (!pending.empty()) {
    size_t index = pending.back();
    pending.pop_back();
    if (chosen[index]) continue;
    chosen[index] = true;
    pending.insert(pending.end(), entries_[index].needs.begin(), entries_[index].needs.end());
  }
  std::string prelude;
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

#include "jit/run/run_values.h"

#include "core/executor.h"

namespace metajit {

const StoragePtr& RunValues::value(const Node& node) const {
  if (where_ == Where::KeptAside) {
    auto found = kept_aside_.find(&node);
    if (found != kept_aside_.end()) return found->second;
  }
  return node.storage;
}

void RunValues::store(Node& node, StoragePtr storage) {
  if (where_ == Where::KeptAside)
    kept_aside_[&node] = std::move(storage);
  else
    publish_storage(node, std::move(storage));
}

void RunValues::cut_inputs(Node& node) {
  if (where_ == Where::OnNodes) release_inputs(node);
}

}  // namespace metajit

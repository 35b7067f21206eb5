// Pass 5b, start host operations early: each ordered host operation (a collective) moves, with the kernels it
// needs, ahead of kernels it does not need, so that it starts as soon as its inputs exist and moves while the rest
// of the plan runs (the run loop waits for it only before its first reader). A data-parallel step records each
// gradient bucket's all-reduce after the whole backward pass; launched in recording order, the first bucket would
// wait for all of backward and overlap nothing. Ordered operations keep their order among themselves (every rank
// must start collectives in the same order, and every rank plans the same graph the same way), and every other
// kernel keeps its place relative to the rest, so the order stays one in which each kernel follows its inputs.
#include <unordered_map>

#include "core/flags.h"
#include "core/host_operation.h"
#include "jit/plan/planning_state.h"

namespace metajit {

void start_host_operations_early(std::vector<LoweredKernel>& lowered, std::vector<ContractionMatch>& matches) {
  std::unordered_map<const Node*, size_t> producer;  // node -> the kernel computing it
  std::vector<size_t> host_operations;
  for (size_t index = 0; index < lowered.size(); ++index) {
    producer[lowered[index].output.get()] = index;
    for (const NodePtr& sibling : lowered[index].siblings) producer[sibling.get()] = index;
    const Node& output = *lowered[index].output;
    if (output.kind == NodeKind::HostOperation && host_operation_of(output).ordered()) host_operations.push_back(index);
  }
  if (host_operations.empty() || !flag_boolean(Flag::OverlapCollectives)) return;
  std::vector<uint8_t> emitted(lowered.size(), 0);
  std::vector<size_t> order;
  // The kernels `index` needs that are not out yet, in their own order (which follows inputs), then `index`.
  auto emit_with_producers = [&](size_t index) {
    std::vector<uint8_t> needed(lowered.size(), 0);
    std::vector<size_t> stack{index};
    needed[index] = 1;
    while (!stack.empty()) {
      size_t kernel = stack.back();
      stack.pop_back();
      for (const NodePtr& input : lowered[kernel].inputs) {
        auto found = producer.find(input.get());
        if (found == producer.end() || emitted[found->second] || needed[found->second]) continue;
        needed[found->second] = 1;
        stack.push_back(found->second);
      }
    }
    for (size_t kernel = 0; kernel <= index; ++kernel)
      if (needed[kernel] && !emitted[kernel]) {
        emitted[kernel] = 1;
        order.push_back(kernel);
      }
  };
  for (size_t index : host_operations) emit_with_producers(index);
  for (size_t index = 0; index < lowered.size(); ++index)
    if (!emitted[index]) order.push_back(index);
  std::vector<LoweredKernel> reordered_kernels;
  std::vector<ContractionMatch> reordered_matches;
  for (size_t index : order) {
    reordered_kernels.push_back(std::move(lowered[index]));
    reordered_matches.push_back(std::move(matches[index]));
  }
  lowered = std::move(reordered_kernels);
  matches = std::move(reordered_matches);
}

}  // namespace metajit

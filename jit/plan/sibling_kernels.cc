// Groups form in launch order: each joinable kernel joins the most recent open group of its shape that it is
// related to (or any, when it is small), if lowering them together works; otherwise it opens a group of its own.
// A group closes once a kernel outside it reads one of its outputs, since the joined kernel runs where its
// last member was.
#include "jit/plan/sibling_kernels.h"

#include <atomic>
#include <string>

#include "core/flags.h"
namespace metajit {
namespace {

constexpr size_t kMaximumOutputs = 8;          // more stores per element only add register pressure
constexpr int64_t kSmallElements = 64 * 1024;  // a launch (about 5 us on the thread pool) is worth saving alone
// Each attempt lowers the whole group again; trying every open group made the first plan of a 64-step LSTM
// (hundreds of [32, 256] kernels) take 15 s instead of 0.5.
constexpr size_t kMaximumAttempts = 3;

std::atomic<bool> enabled_{flag_boolean(Flag::MultipleOutputs)};

// Elementwise and gather kernels only: a reduction's loops (column sums, row passes) and library calls have
// shapes of their own that the renderer and the matcher look for. A scatter onto the source's own indices
// lowers as a pointwise kernel of its source (jit/ir/lowering.cc), but its node has no elementwise value to join.
bool joinable(const LoweredKernel& lowered, const ContractionMatch& match) {
  const NodePtr& output = lowered.output;
  if (!output || output->kind == NodeKind::Code || output->kind == NodeKind::HostOperation ||
      output->kind == NodeKind::ReindexReduce || match.contraction || !lowered.siblings.empty() || output->numel() == 0)
    return false;
  const IrKernel& kernel = lowered.kernel;
  if (kernel.kind != IrKernel::Kind::Pointwise || !kernel.row_body.empty()) return false;
  for (const IrStatement& statement : kernel.body)
    if (statement.kind != IrStatement::Kind::Let && statement.kind != IrStatement::Kind::Store) return false;
  return true;
}

struct Group {
  std::vector<size_t> members;  // positions in launch order
  std::vector<NodePtr> roots;   // their outputs
  std::unordered_set<Node*> outputs, inputs;
  LoweredKernel joined;         // once there are two members
  bool closed = false;
};

bool reads_any(const LoweredKernel& lowered, const std::unordered_set<Node*>& nodes) {
  for (const NodePtr& input : lowered.inputs)
    if (nodes.count(input.get())) return true;
  return false;
}

// An input worth sharing: at least a quarter of the kernel's size. Every parameter's update reads the same
// scalars (learning rate, momentum); joined by those, eight [256, 1024] updates with nothing else in common
// made one kernel that took 0.4 s to compile and saved no traffic.
bool shares_data(const LoweredKernel& lowered, const std::unordered_set<Node*>& inputs) {
  for (const NodePtr& input : lowered.inputs)
    if (input->numel() * 4 >= lowered.output->numel() && inputs.count(input.get())) return true;
  return false;
}

// Whether `roots` lowered together make one kernel that stores every one of them.
bool lower_together(const std::vector<NodePtr>& roots, const std::unordered_set<Node*>& materialized,
                    const ConsumerCounts* consumers, LoweredKernel* joined) {
  LoweringResult result = lower_siblings(roots, materialized, consumers);
  if (!result.materialize_requests.empty() || !result.lowered.kernel.row_body.empty()) return false;
  // Members that read each other inline each other: the segments of a long chain, cut at kMaximumFusedDepth,
  // would join back into one kernel as long as the chain.
  if (result.inlined.size() > size_t(kMaximumFusedDepth)) return false;
  for (const NodePtr& input : result.lowered.inputs)  // a root read at another index than its own
    for (const NodePtr& root : roots)
      if (input == root) return false;
  *joined = std::move(result.lowered);
  return true;
}

}  // namespace

void join_sibling_kernels(std::vector<LoweredKernel>& lowered, std::vector<ContractionMatch>& matches,
                          const std::unordered_set<Node*>& materialized, const ConsumerCounts* consumers) {
  std::vector<Group> groups;
  for (size_t position = 0; position < lowered.size(); ++position) {
    const LoweredKernel& kernel = lowered[position];
    int joined_group = -1;
    if (joinable(kernel, matches[position])) {
      // Related groups first, most recent first; a small kernel may then join the latest group of its shape.
      std::vector<int> candidates;
      int latest_open = -1;
      for (int index = int(groups.size()) - 1; index >= 0 && candidates.size() < kMaximumAttempts; --index) {
        const Group& group = groups[size_t(index)];
        if (group.closed || group.members.size() >= kMaximumOutputs || group.roots[0]->shape != kernel.output->shape)
          continue;
        if (latest_open < 0) latest_open = index;
        if (shares_data(kernel, group.inputs) || reads_any(kernel, group.outputs)) candidates.push_back(index);
      }
      if (candidates.empty() && latest_open >= 0 && kernel.output->numel() <= kSmallElements)
        candidates.push_back(latest_open);
      for (int index : candidates) {
        Group& group = groups[size_t(index)];
        std::vector<NodePtr> roots = group.roots;
        roots.push_back(kernel.output);
        if (!lower_together(roots, materialized, consumers, &group.joined)) continue;
        group.members.push_back(position);
        group.roots = std::move(roots);
        group.outputs.insert(kernel.output.get());
        for (const NodePtr& input : kernel.inputs) group.inputs.insert(input.get());
        joined_group = index;
        break;
      }
    }
    for (size_t index = 0; index < groups.size(); ++index)
      if (int(index) != joined_group && !groups[index].closed && reads_any(kernel, groups[index].outputs))
        groups[index].closed = true;
    if (joined_group < 0 && joinable(kernel, matches[position])) {
      Group group;
      group.members = {position};
      group.roots = {kernel.output};
      group.outputs = {kernel.output.get()};
      for (const NodePtr& input : kernel.inputs) group.inputs.insert(input.get());
      groups.push_back(std::move(group));
    }
  }
  // Each group of two or more runs at its last member's position; the other members' kernels go.
  std::vector<int> last_of(lowered.size(), -1);
  std::vector<bool> dropped(lowered.size(), false);
  for (size_t index = 0; index < groups.size(); ++index) {
    const Group& group = groups[index];
    if (group.members.size() < 2) continue;
    for (size_t member : group.members) dropped[member] = true;
    last_of[group.members.back()] = int(index);
  }
  std::vector<LoweredKernel> kept_kernels;
  std::vector<ContractionMatch> kept_matches;
  for (size_t position = 0; position < lowered.size(); ++position) {
    if (last_of[position] >= 0) {
      kept_kernels.push_back(std::move(groups[size_t(last_of[position])].joined));
      kept_matches.emplace_back();
    } else if (!dropped[position]) {
      kept_kernels.push_back(std::move(lowered[position]));
      kept_matches.push_back(std::move(matches[position]));
    }
  }
  lowered = std::move(kept_kernels);
  matches = std::move(kept_matches);
}

bool sibling_kernels_enabled() { return enabled_; }
void set_sibling_kernels_enabled(bool enabled) { enabled_ = enabled; }

}  // namespace metajit

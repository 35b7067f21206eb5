// Positions in the signature are a post-order (a node comes after its inputs), so one backward sweep sees every
// node's readers before the node itself.
#include "jit/plan/buffer_lifetimes.h"

#include <stdexcept>

#include "core/executor.h"
#include "jit/plan/contraction_matching.h"
#include "jit/plan/plan.h"

namespace metajit {
namespace {

// release_inputs() cuts a computed node's edges unless backward may still walk them.
bool keeps_inputs(const Node& node) {
  return node.requires_grad && node.any_input_requires_grad() && !node.backward_taken.load(std::memory_order_relaxed);
}

}  // namespace

BufferLifetimes buffer_lifetimes(const GraphSignature& signature, const Plan& plan) {
  const std::vector<NodePtr>& nodes = signature.nodes;
  BufferLifetimes lifetimes;
  lifetimes.readers.resize(nodes.size());
  lifetimes.is_target.assign(nodes.size(), 0);
  lifetimes.is_kernel_output.assign(nodes.size(), 0);
  for (size_t position = 0; position < nodes.size(); ++position) {
    if (nodes[position]->is_computed()) continue;  // the signature stops at computed nodes: their edges are not its
    for (const NodePtr& input : nodes[position]->inputs) {
      int input_position = signature_position(signature, *input);
      if (input_position < 0) throw std::logic_error("a signature node's input is outside the signature");
      lifetimes.readers[size_t(input_position)].push_back(int(position));
    }
  }
  for (int position : signature.targets) lifetimes.is_target[position] = 1;
  for (size_t kernel = 0; kernel < plan.outputs.size(); ++kernel) {
    lifetimes.is_kernel_output[plan.outputs[kernel]] = 1;
    for (int sibling : plan.siblings[kernel]) lifetimes.is_kernel_output[sibling] = 1;
  }
  std::vector<int> last_reader(nodes.size(), -1);
  for (size_t kernel = 0; kernel < plan.inputs.size(); ++kernel)
    for (int input : plan.inputs[kernel]) last_reader[input] = int(kernel);
  // A kernel output no later kernel reads (a sibling output kept for a reader that ended up rebuilding the value
  // itself) goes right after the kernel that wrote it, if it is releasable at all: held to the end of the run, a
  // checkpointed BatchNorm block's sum held one activation per block.
  for (size_t kernel = 0; kernel < plan.outputs.size(); ++kernel) {
    if (last_reader[plan.outputs[kernel]] < 0) last_reader[plan.outputs[kernel]] = int(kernel);
    for (int sibling : plan.siblings[kernel])
      if (last_reader[sibling] < 0) last_reader[sibling] = int(kernel);
  }
  lifetimes.last_read_by.resize(plan.outputs.size());
  for (size_t position = 0; position < nodes.size(); ++position)
    if ((lifetimes.is_kernel_output[position] || nodes[position]->is_computed()) && !lifetimes.is_target[position] &&
        last_reader[position] >= 0)
      lifetimes.last_read_by[last_reader[position]].push_back(int(position));
  return lifetimes;
}

std::vector<uint8_t> releasable_buffers(const BufferLifetimes& lifetimes, const std::vector<NodePtr>& nodes,
                                        bool computed_inputs) {
  // dies[p]: when the run ends, nothing holds node p any more. A node dies when nothing outside the graph holds
  // it (its reference count is the signature's list plus its readers' edges) and each reader drops its edge: a
  // kernel output has its edges cut after it is computed, and a reader that dies drops everything it holds.
  // Computed inputs count too: a parameter an optimizer step has already rebound to its update (optim/optimizer.py)
  // is held by the graph alone, and goes right after its update reads it instead of at the end of the step.
  std::vector<uint8_t> dies(nodes.size(), 0);
  for (size_t position = nodes.size(); position-- > 0;) {
    const NodePtr& node = nodes[position];
    const std::vector<int>& readers = lifetimes.readers[position];
    if (lifetimes.is_target[position]) continue;
    if (size_t(node.use_count()) != 1 + readers.size()) continue;
    bool every_edge_dropped = true;
    for (int reader : readers) {
      bool cut = lifetimes.is_kernel_output[reader] && !keeps_inputs(*nodes[reader]);
      if (!cut && !dies[reader]) {
        every_edge_dropped = false;
        break;
      }
    }
    dies[position] = every_edge_dropped;
  }
  for (size_t position = 0; position < nodes.size(); ++position)
    dies[position] =
        dies[position] && (lifetimes.is_kernel_output[position] || (computed_inputs && nodes[position]->is_computed()));
  return dies;
}

bool release_buffer(const NodePtr& node, size_t graph_readers) {
  // Checked again now: another thread may have taken a reference (say, by building a gradient) since the run began.
  if (size_t(node.use_count()) > 1 + graph_readers) return false;
  StoragePtr storage = take_storage(*node);
  if (!storage) return false;
  // Libraries keep copies only of host buffers (oneDNN's layouts); data() would download a device-only value.
  if (storage.use_count() == 1 && storage->on_host()) note_library_buffer_released(storage->data(), storage->bytes());
  return true;
}

int release_after_kernel(const BufferLifetimes& lifetimes, const std::vector<uint8_t>& releasable,
                         const std::vector<NodePtr>& nodes, size_t kernel) {
  int released = 0;
  for (int position : lifetimes.last_read_by[kernel])
    if (releasable[position] && release_buffer(nodes[position], lifetimes.readers[position].size())) released++;
  return released;
}

void release_computed_inputs(const Plan& plan, const std::vector<NodePtr>& nodes) {
  for (int position : plan.outputs) release_inputs(*nodes[position]);
  for (const std::vector<int>& siblings : plan.siblings)
    for (int position : siblings) release_inputs(*nodes[position]);
}

}  // namespace metajit

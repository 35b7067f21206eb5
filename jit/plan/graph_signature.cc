// The signature walk is an iterative post-order over pending nodes; a computed node is a leaf described only by
// dtype and shape, since its values never enter a kernel's source.
#include "jit/plan/graph_signature.h"

#include <algorithm>

#include "jit/plan/contraction_matching.h"
#include "jit/plan/sibling_kernels.h"

namespace metajit {
namespace {

// The text is a cache key only (hashed and compared, never shown), so numbers go in as their raw bytes:
// formatting them as decimal and hex-float text took about a tenth of a small sync.
void append_number(std::string* text, int64_t value) {
  text->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void append_double(std::string* text, double value) {  // the bits: -0.0 and 0.0 differ, as they should
  text->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void describe_node(const Node& node, std::string* text) {
  append_number(text, int(node.kind));
  append_number(text, int(node.dtype));
  // Every variable-length part is preceded by its length, so no two graphs share a text.
  append_number(text, int64_t(node.shape.size()));
  for (int64_t extent : node.shape) append_number(text, extent);
  append_number(text, node.is_computed());
  if (node.is_computed()) return;
  append_number(text, node.op_code);
  append_number(text, node.keepdim);
  append_number(text, int64_t(node.reduce_mask));
  append_double(text, node.scalar);
  append_number(text, node.integer_scalar);
  append_double(text, node.scalar_step);
  append_number(text, int64_t(node.view.size()));
  for (const ViewDimension& dimension : node.view) {
    append_number(text, dimension.output_dim);
    append_number(text, dimension.step);
    append_number(text, dimension.offset);
  }
  if (node.payload) {
    const std::string& payload = node.payload->canonical();
    append_number(text, int64_t(payload.size()));
    *text += payload;
  } else {
    append_number(text, -1);
  }
  // Provenance only reaches kernel comments, but keeping it exact keeps those comments true.
  append_number(text, reinterpret_cast<intptr_t>(node.provenance.file));
  append_number(text, node.provenance.line);
}

}  // namespace

GraphSignature graph_signature(const std::vector<NodePtr>& targets) {
  GraphSignature signature;
  // Runs under the sync lock, so the nodes carry their positions (Node::walk_mark / walk_position), and the
  // previous signature's size is a good guess at this one's: a training step's text grew by doubling to
  // 770 KB, copying and freeing each smaller buffer on the way.
  static size_t previous_size = 4096;
  signature.text.reserve(previous_size + previous_size / 8);
  uint64_t mark = next_walk_mark();
  auto placed = [mark](const Node& node) { return node.walk_mark == mark; };
  struct Frame {
    const NodePtr* node;
    size_t next_input;
  };
  std::vector<Frame> stack;
  auto visit = [&](const NodePtr& root) {
    if (placed(*root)) return;
    stack.push_back({&root, 0});
    while (!stack.empty()) {
      Frame& frame = stack.back();
      const Node& node = **frame.node;
      if (!node.is_computed() && frame.next_input < node.inputs.size()) {
        const NodePtr& input = node.inputs[frame.next_input++];
        if (!placed(*input)) stack.push_back({&input, 0});
        continue;
      }
      if (!placed(node)) {
        node.walk_mark = mark;
        node.walk_position = int32_t(signature.nodes.size());
        signature.nodes.push_back(*frame.node);
        describe_node(node, &signature.text);
        if (!node.is_computed()) {
          append_number(&signature.text, int64_t(node.inputs.size()));
          for (const NodePtr& input : node.inputs) append_number(&signature.text, input->walk_position);
        }
      }
      stack.pop_back();
    }
  };
  for (const NodePtr& target : targets) visit(target);
  append_number(&signature.text, int64_t(targets.size()));
  for (const NodePtr& target : targets) {
    signature.targets.push_back(target->walk_position);
    append_number(&signature.text, signature.targets.back());
  }
  signature.text += library_lowering_enabled() ? "L" : "G";
  signature.text += sibling_kernels_enabled() ? "M" : "S";  // several outputs per kernel, or one
  signature.text += convolution_algorithm_name(convolution_algorithm());  // library calls differ by it
  previous_size = std::max<size_t>(4096, signature.text.size());
  return signature;
}

int signature_position(const GraphSignature& signature, const Node& node) {
  const std::vector<NodePtr>& nodes = signature.nodes;
  int position = node.walk_position;
  if (position >= 0 && size_t(position) < nodes.size() && nodes[size_t(position)].get() == &node) return position;
  auto found =
      std::find_if(nodes.begin(), nodes.end(), [&](const NodePtr& candidate) { return candidate.get() == &node; });
  return found == nodes.end() ? -1 : int(found - nodes.begin());
}

}  // namespace metajit

#include "meta_ops/code.h"

#include <cctype>
#include <stdexcept>

#include "meta_ops/elementwise.h"

namespace metajit {
namespace {

bool is_identifier(const std::string& name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char character : name)
    if (!(std::isalnum(static_cast<unsigned char>(character)) || character == '_')) return false;
  return true;
}

void append_field(std::string& text, const char* label, const std::string& value) {
  text += label;
  text += "(" + std::to_string(value.size()) + "):";  // length-prefixed, so no field can imitate another
  text += value;
  text += "\n";
}

}  // namespace

std::string CodeOp::describe() const {
  std::string text = "code\n";
  append_field(text, "cpu_header", cpu_header);
  append_field(text, "cpu_source", cpu_source);
  append_field(text, "cuda_header", cuda_header);
  append_field(text, "cuda_source", cuda_source);
  for (size_t index = 0; index < output_shapes.size(); ++index)
    append_field(text, "output", output_names[index] + " " + dtype_name(output_dtypes[index]) + " " +
                                     shape_to_string(output_shapes[index]));
  for (const std::string& name : input_names) append_field(text, "input", name);
  for (const std::string& name : data_names) append_field(text, "data", name);
  if (cpu_work_items > 0) append_field(text, "cpu_work_items", std::to_string(cpu_work_items));
  return text;
}

std::string CodePayload::describe() const { return op->describe() + "output_index " + std::to_string(output_index); }

std::vector<NodePtr> CodePayload::outputs() const {
  std::vector<NodePtr> nodes;
  for (const std::weak_ptr<Node>& output : op->outputs) nodes.push_back(output.lock());
  return nodes;
}

std::vector<NodePtr> CodePayload::gradient(const Node& reached, const std::vector<NodePtr>& output_grads,
                                          const std::vector<bool>& needed) const {
  const std::vector<NodePtr>& inputs = reached.inputs;
  std::vector<NodePtr> forward_outputs = outputs();
  for (size_t index = 0; index < forward_outputs.size(); ++index) {
    if (forward_outputs[index]) continue;
    // The user dropped this output; a gradient source may still read it, so compute it again.
    NodePtr again = make_node(NodeKind::Code, op->output_dtypes[index], op->output_shapes[index], inputs);
    again->payload = std::make_shared<CodePayload>(op, int(index));
    op->outputs[index] = again;
    forward_outputs[index] = again;
  }
  std::vector<NodePtr> grads(inputs.size());
  for (size_t index = 0; index < inputs.size(); ++index) {
    if (!needed[index]) continue;
    if (op->gradient_sources.empty() || op->gradient_sources[index].empty()) {
      std::string where = op->what + " created at " + op->provenance.to_string();
      if (op->what != "code op")
        throw std::invalid_argument(where + " is not differentiable: a Code op's grad_src gives first-order "
                                    "gradients only; write the op as an mj.Function for higher-order gradients");
      throw std::invalid_argument(where + ": input " + std::to_string(index) + " (" + op->input_names[index] +
                                  ") requires grad but the op has no grad_src for it");
    }
    auto gradient_op = std::make_shared<CodeOp>();
    gradient_op->cpu_source = op->gradient_sources[index];
    gradient_op->cpu_header = op->cpu_header;
    gradient_op->output_shapes = {inputs[index]->shape};
    gradient_op->output_dtypes = {inputs[index]->dtype};
    gradient_op->output_names = {"out0"};
    gradient_op->data_names = op->data_names;
    gradient_op->data_values = op->data_values;
    gradient_op->what = "grad_src[" + std::to_string(index) + "] of the code op";
    gradient_op->source_label = "grad_src[" + std::to_string(index) + "]";
    gradient_op->provenance = op->provenance;
    std::vector<NodePtr> gradient_inputs = inputs;
    gradient_op->input_names = op->input_names;
    for (size_t output = 0; output < forward_outputs.size(); ++output) {
      gradient_inputs.push_back(forward_outputs[output]);
      gradient_op->input_names.push_back("pout" + std::to_string(output));
    }
    for (size_t output = 0; output < forward_outputs.size(); ++output) {
      NodePtr incoming = output_grads[output];
      if (!incoming) incoming = constant(op->output_shapes[output], op->output_dtypes[output], 0.0);
      gradient_inputs.push_back(incoming);
      gradient_op->input_names.push_back("dout" + std::to_string(output));
    }
    grads[index] = make_code_op(gradient_op, gradient_inputs)[0];
  }
  return grads;
}

std::vector<NodePtr> make_code_op(std::shared_ptr<CodeOp> op, const std::vector<NodePtr>& inputs) {
  if (op->output_shapes.empty()) throw std::invalid_argument("code: a Code op needs at least one output");
  if (op->output_shapes.size() != op->output_dtypes.size())
    throw std::invalid_argument("code: " + std::to_string(op->output_shapes.size()) + " output shapes but " +
                                std::to_string(op->output_dtypes.size()) + " output dtypes");
  for (const Shape& shape : op->output_shapes)
    for (int64_t extent : shape)
      if (extent < 0) throw std::invalid_argument("code: output shape " + shape_to_string(shape) + " has a negative size");
  if (op->cpu_source.empty() && op->cuda_source.empty())
    throw std::invalid_argument("code: cpu_src and cuda_src are both empty; give the C++ source (cpu_src), the CUDA "
                                "source (cuda_src) or both");
  if (op->cpu_work_items < 0)
    throw std::invalid_argument("code: cpu_parallel must be a positive number of work items, got " +
                                std::to_string(op->cpu_work_items));
  for (size_t index = 0; index < inputs.size(); ++index)
    if (!inputs[index]) throw std::invalid_argument("code: input " + std::to_string(index) + " is None");
  if (op->input_names.empty())
    for (size_t index = 0; index < inputs.size(); ++index) op->input_names.push_back("in" + std::to_string(index));
  if (op->output_names.empty())
    for (size_t index = 0; index < op->output_shapes.size(); ++index) op->output_names.push_back("out" + std::to_string(index));
  if (op->input_names.size() != inputs.size() || op->output_names.size() != op->output_shapes.size())
    throw std::logic_error("internal error: Code op buffer names do not match its buffers");
  if (!op->gradient_sources.empty() && op->gradient_sources.size() != inputs.size())
    throw std::invalid_argument("code: grad_src has " + std::to_string(op->gradient_sources.size()) +
                                " sources but the op has " + std::to_string(inputs.size()) +
                                " inputs; give one per input (an empty string for an input without gradient)");
  if (op->data_names.size() != op->data_values.size())
    throw std::logic_error("internal error: Code op data names and values differ in number");
  for (const std::string& name : op->data_names)
    if (!is_identifier(name))
      throw std::invalid_argument("code: data name '" + name + "' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
  if (op->what.empty()) op->what = "code op";
  if (!op->provenance.file) op->provenance = current_provenance();
  std::vector<NodePtr> nodes;
  op->outputs.clear();
  for (size_t index = 0; index < op->output_shapes.size(); ++index) {
    NodePtr node = make_node(NodeKind::Code, op->output_dtypes[index], op->output_shapes[index], inputs);
    node->payload = std::make_shared<CodePayload>(op, int(index));
    op->outputs.push_back(node);
    nodes.push_back(node);
  }
  return nodes;
}

}  // namespace metajit

// The Code op: a user's own C++ (or CUDA) kernel as a graph node. It is never fused: its inputs are computed
// buffers and its source writes every output itself. A Code op with several outputs is one node per output,
// all sharing one CodeOp, so they are computed by one launch. Gradients come from the user too: one gradient
// source per input (itself a Code op reading the forward inputs, outputs and incoming gradients).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/node.h"
#include "meta_ops/autodiff.h"

namespace metajit {

struct CodeOp {
  std::string cpu_source;
  std::string cpu_header;
  std::string cuda_source;
  std::string cuda_header;
  std::vector<Shape> output_shapes;
  std::vector<DType> output_dtypes;
  // How the source names its buffers: inputs "in0", "in1", ...; a gradient source also sees "pout0" ...
  // (forward outputs) and "dout0" ... (incoming gradients), and writes "out0".
  std::vector<std::string> input_names;
  std::vector<std::string> output_names;
  // Scalar constants read as data["name"]: the names are part of the kernel, the values are not (changing a
  // value never recompiles).
  std::vector<std::string> data_names;
  std::vector<double> data_values;
  std::vector<std::string> gradient_sources;  // per input; empty: that input has no gradient
  // 0: the CPU source runs once (begin 0, end 1). n > 0: it handles work items [begin, end) of n, and the
  // calls are spread over the thread pool (parallel_for), so the source must treat its items independently.
  int64_t cpu_work_items = 0;
  std::string what;                           // "code op" or "grad_src[1] of the code op"
  std::string source_label = "cpu_src";       // what compiler messages call the source: "cpu_src", "grad_src[1]"
  Provenance provenance;                      // where the user created it
  std::vector<std::weak_ptr<Node>> outputs;   // filled by make_code_op

  // Everything that changes the generated kernel (not the data values): the plan cache and kernel identity.
  std::string describe() const;
};

// One output of a Code op (the payload of a NodeKind::Code node).
struct CodePayload : MultiOutputPayload {
  CodePayload(std::shared_ptr<CodeOp> op, int output_index) : op(std::move(op)), output_index(output_index) {}
  std::shared_ptr<CodeOp> op;
  int output_index;
  std::string describe() const override;
  std::vector<NodePtr> outputs() const override;
  std::vector<NodePtr> gradient(const Node& reached, const std::vector<NodePtr>& output_grads,
                                const std::vector<bool>& needed) const override;
};

// Builds the output nodes of a Code op reading `inputs`. Checks what can be checked at the call (shapes,
// dtypes, sizes of the lists, data names) and throws std::invalid_argument naming the problem.
std::vector<NodePtr> make_code_op(std::shared_ptr<CodeOp> op, const std::vector<NodePtr>& inputs);

}  // namespace metajit

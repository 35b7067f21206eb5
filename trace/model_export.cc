#include "trace/model_export.h"

#include <map>
#include <stdexcept>
#include <unordered_map>

#include "core/executor.h"
#include "jit/codegen/common/kernel_symbol.h"
#include "jit/codegen/cpp/runtime_support.h"
#include "jit/toolchain/kernel_cache.h"
#include "jit/toolchain/kernel_entry.h"
#include "jit/toolchain/target_info.h"
#include "meta_ops/code.h"

namespace metajit {
namespace {

std::string describe_node(const Node& node) {
  return node.op_name() + " " + dtype_name(node.dtype) + " " + shape_to_string(node.shape) + " created at " +
         node.provenance.to_string();
}

// The compiled object of a kernel this process ran; the kernel cache keeps every entry it loaded or compiled.
std::string kernel_object(const std::string& key, const std::string& what) {
  std::optional<std::string> entry = KernelCache::instance().entry_bytes(key);
  std::optional<KernelEntry> decoded = entry ? decode_kernel_entry(*entry) : std::nullopt;
  if (!decoded)
    throw std::invalid_argument("mj.export: the compiled kernel of " + what +
                                " is in no kernel cache any more (was the cache cleared since the function was "
                                "traced?); call the function again and export then");
  return decoded->object;
}

}  // namespace

Artifact export_traced_function(const TracedFunction& traced, std::vector<std::string> input_names,
                                std::vector<std::string> output_names, const std::string& producer) {
  using Source = TracedFunction::Source;
  if (traced.run_.where != CudaExecution::Off)
    throw std::invalid_argument(
        "mj.export: the function was traced with its kernels on the GPU (or the CUDA emulator); the C++ runtime runs "
        "CPU plans only for now: trace and export it with mj.flags.use_cuda = 0");
  if (!traced.written_.empty())
    throw std::invalid_argument(
        "mj.export: the function writes a Var in place (its new value made at " +
        traced.written_.front().value.made_at.to_string() +
        "); an exported model is a function of its inputs only. Export the model in eval() mode (batch norm updates "
        "its running statistics in training mode) and without an optimizer step");
  if (!traced.gradients_.empty())
    throw std::invalid_argument(
        "mj.export: the function computes gradients (backward()); an exported model is for inference: export a "
        "function that only runs the forward pass, under mj.no_grad()");

  Artifact artifact;
  artifact.producer = producer;
  artifact.cpu_name = host_cpu_name();
  artifact.cpu_features = host_cpu_features();
  artifact.triple = host_triple();
  artifact.kernel_symbol = kKernelSymbol;

  for (size_t index = 0; index < traced.argument_types_.size(); ++index) {
    const auto& [dtype, shape] = traced.argument_types_[index];
    ArtifactValue value;
    value.kind = ArtifactValue::Kind::Input;
    value.index = int(index);
    value.dtype = dtype;
    value.shape = shape;
    artifact.values.push_back(value);
    std::string name = index < input_names.size() ? input_names[index] : "input" + std::to_string(index);
    artifact.inputs.push_back({name, int(index)});
  }

  std::unordered_map<const Node*, int> weight_values;  // one weight per value read, however many positions read it
  auto weight_of = [&](NodePtr node) {
    if (auto found = weight_values.find(node.get()); found != weight_values.end()) return found->second;
    if (!node->is_computed()) sync({node});
    ArtifactValue value;
    value.kind = ArtifactValue::Kind::Weight;
    value.index = int(artifact.weights.size());
    value.dtype = node->dtype;
    value.shape = node->shape;
    const char* data = static_cast<const char*>(node->storage->data());
    artifact.weights.emplace_back(data, value.bytes());
    artifact.values.push_back(value);
    int id = int(artifact.values.size()) - 1;
    weight_values.emplace(node.get(), id);
    return id;
  };
  auto value_of_source = [&](const Source& source) -> int {
    switch (source.kind) {
      case Source::Kind::Argument: return source.index;
      case Source::Kind::VarValue: return weight_of(TracedFunction::state_value(source));
      case Source::Kind::Constant: return weight_of(source.constant);
      case Source::Kind::Random:
        throw std::invalid_argument("mj.export: the function draws random numbers (at " + source.made_at.to_string() +
                                    "); an exported model must give the same outputs for the same inputs. Export "
                                    "the model in eval() mode (dropout draws in training mode)");
      case Source::Kind::Gradient:
        throw std::invalid_argument("mj.export: the function reads a .grad (at " + source.made_at.to_string() +
                                    "); an exported model is for inference");
      case Source::Kind::Computed: break;
    }
    throw std::logic_error("internal error: a computed value has no position");
  };

  std::vector<int> position_value(traced.positions_, -1);
  for (size_t position = 0; position < traced.positions_; ++position) {
    const NodePtr& node = traced.templates_.empty() ? nullptr : traced.templates_[position];
    if (!node) continue;
    ArtifactValue value;
    value.kind = ArtifactValue::Kind::Computed;
    value.dtype = node->dtype;
    value.shape = node->shape;
    artifact.values.push_back(value);
    position_value[position] = int(artifact.values.size()) - 1;
  }
  for (const auto& [position, source] : traced.inputs_) position_value[size_t(position)] = value_of_source(source);

  if (traced.plan_) {
    const Plan& plan = *traced.plan_;
    std::map<std::string, int> objects;  // by kernel key: a kernel used twice is carried once
    std::unordered_map<const CodeOp*, size_t> code_steps;  // the step that runs each Code op
    std::map<size_t, std::vector<int>> code_outputs;       // per Code op step: its outputs' values, in op order
    std::map<size_t, const CodeOp*> code_ops;
    for (size_t index = 0; index < plan.kernels.size(); ++index) {
      const PlannedKernel& kernel = plan.kernels[index];
      const Node& output = *traced.templates_[size_t(plan.outputs[index])];
      const CodePayload* code = kernel.code ? dynamic_cast<const CodePayload*>(output.payload.get()) : nullptr;
      if (kernel.code && !code) throw std::logic_error("internal error: a code kernel's output is not a Code op");
      if (code) {  // one launch computes every output of the op: a later kernel of the same op adds its output
        auto [found, first] = code_steps.emplace(code->op.get(), artifact.steps.size());
        if (!first) {
          code_outputs[found->second][size_t(code->output_index)] = position_value[size_t(plan.outputs[index])];
          continue;
        }
      }
      if (kernel.host_operation)
        throw std::invalid_argument("mj.export: the function runs a collective (" + describe_node(output) +
                                    "); an exported model runs in one process");
      ArtifactStep step;
      step.description = describe_node(output);
      step.output = position_value[size_t(plan.outputs[index])];
      if (code) {
        step.code = true;
        step.code_data = code->op->data_values;
        step.description = code->op->what + " created at " + code->op->provenance.to_string();
        code_ops[artifact.steps.size()] = code->op.get();
        code_outputs[artifact.steps.size()].assign(code->op->output_shapes.size(), -1);
        code_outputs[artifact.steps.size()][size_t(code->output_index)] = step.output;
      }
      for (int position : plan.siblings[index]) step.siblings.push_back(position_value[size_t(position)]);
      for (int position : plan.inputs[index]) step.inputs.push_back(position_value[size_t(position)]);
      if (kernel.library) {
        if (!kernel.library_contraction)
          throw std::logic_error("internal error: a library call of the plan has no contraction");
        step.contraction = *kernel.library_contraction;
      }
      if (!kernel.library || kernel.epilogue) {
        auto [found, added] = objects.emplace(kernel.key, int(artifact.objects.size()));
        if (added) artifact.objects.push_back(kernel_object(kernel.key, step.description));
        step.object = found->second;
        step.work_items = kernel.rendered.work_items;
        step.grain = std::max<int64_t>(kernel.rendered.grain, 1);
        for (size_t buffer = 0; buffer < kernel.buffer_offsets.size(); ++buffer)
          step.buffer_byte_offsets.push_back(kernel.buffer_offsets[buffer] *
                                             int64_t(dtype_size(kernel.lowered.kernel.buffers[buffer].dtype)));
      }
      for (int position : plan.lifetimes.last_read_by[index])
        if (traced.releasable_[size_t(position)]) step.release.push_back(position_value[size_t(position)]);
      artifact.steps.push_back(std::move(step));
    }
    // A Code op's outputs that nothing reads still get a buffer to write, dropped after its launch.
    for (auto& [step_index, outputs] : code_outputs) {
      ArtifactStep& step = artifact.steps[step_index];
      for (size_t output = 0; output < outputs.size(); ++output) {
        if (outputs[output] >= 0) continue;
        const CodeOp& op = *code_ops[step_index];
        ArtifactValue unused;
        unused.kind = ArtifactValue::Kind::Computed;
        unused.dtype = op.output_dtypes[output];
        unused.shape = op.output_shapes[output];
        outputs[output] = int(artifact.values.size());
        artifact.values.push_back(unused);
        step.release.push_back(outputs[output]);
      }
      step.output = outputs[0];
      step.siblings.assign(outputs.begin() + 1, outputs.end());
    }
  }

  for (size_t index = 0; index < traced.results_.size(); ++index) {
    const Source& result = traced.results_[index];
    int value = result.kind == Source::Kind::Computed ? position_value[size_t(result.index)] : value_of_source(result);
    std::string name = index < output_names.size() ? output_names[index] : "output" + std::to_string(index);
    artifact.outputs.push_back({name, value});
  }

  const RuntimeSupport& support = cpp_runtime_support();
  bool calls_support = false;
  for (const std::string& object : artifact.objects)
    for (const std::string& symbol : support.symbols)  // a called helper's name is in the object's string table
      calls_support = calls_support || object.find(symbol) != std::string::npos;
  if (calls_support) {
    artifact.runtime_support = kernel_object(KernelCache::instance().runtime_support_key(), "the runtime support");
    artifact.runtime_support_symbols = support.symbols;
  }
  return artifact;
}

}  // namespace metajit

// The C++ runtime's Model: an artifact (runtime/artifact.h) checked against this machine, its kernels linked and
// its library calls made once at load; run() then walks the steps in order, allocating each result from the
// caching allocator and handing intermediates back after their last reader, as the JIT's run loop does for the
// same plan. It must not plan, compile or change the order the exporting process chose.
#include <algorithm>
#include <cstring>

#include "core/executor.h"
#include "core/storage.h"
#include "core/thread_pool.h"
#include "libraries/cpu/onednn_backend.h"
#include "metajit/runtime.h"
#include "runtime/artifact.h"
#include "runtime/cpu_features.h"
#include "runtime/linked_kernels.h"

namespace metajit {

static_assert(int(DataType::Float64) == int(DType::Float64) && int(DataType::Bool) == int(DType::Bool),
              "the public DataType mirrors core's DType");

const char* data_type_name(DataType dtype) { return dtype_name(DType(dtype)); }
size_t data_type_size(DataType dtype) { return size_t(dtype_size(DType(dtype))); }

Tensor::Tensor(DataType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t extent : shape_)
    if (extent < 0) throw std::invalid_argument("a tensor's extents must not be negative: " + shape_to_string(shape_));
  auto storage = std::make_shared<Storage>(std::max<size_t>(bytes(), 1));
  data_ = storage->data();
  std::memset(data_, 0, bytes());
  memory_ = std::move(storage);
}

Tensor::Tensor(DataType dtype, std::vector<int64_t> shape, const void* data) : Tensor(dtype, std::move(shape)) {
  if (bytes() != 0 && data == nullptr) throw std::invalid_argument("Tensor: no data to copy (a null pointer)");
  if (bytes() != 0) std::memcpy(data_, data, bytes());
}

int64_t Tensor::numel() const { return shape_numel(shape_); }

void Tensor::check_element_size(size_t size) const {
  if (size != data_type_size(dtype_))
    throw std::invalid_argument("Tensor::data_as: the tensor is " + std::string(data_type_name(dtype_)) + " (" +
                                std::to_string(data_type_size(dtype_)) + " bytes an element), not " +
                                std::to_string(size) + " bytes an element");
}

struct Model::Implementation {
  Artifact artifact;
  std::string where;
  std::vector<TensorInfo> inputs, outputs;
  std::vector<KernelFunction> kernels;                    // per object
  std::vector<std::shared_ptr<const LibraryCall>> calls;  // per step (null: none)
  std::vector<const LibraryCall*> call_list;              // the run's calls, for the library run scope
  std::vector<std::shared_ptr<Storage>> weights;          // per weight, aligned copies
  size_t kernel_count = 0;
  size_t weight_bytes = 0;
};

namespace {

std::string describe_type(DType dtype, const Shape& shape) {
  return std::string(dtype_name(dtype)) + " " + shape_to_string(shape);
}

TensorInfo info_of(const Artifact& artifact, const ArtifactTensor& tensor) {
  const ArtifactValue& value = artifact.values[size_t(tensor.value)];
  return {tensor.name, DataType(value.dtype), value.shape};
}

}  // namespace

Model::Model(std::shared_ptr<const Implementation> implementation) : implementation_(std::move(implementation)) {}

Model Model::load(const std::string& path) { return from_bytes(read_artifact_bytes(path), path); }

Model Model::from_bytes(const std::string& bytes, const std::string& name) {
  install_onednn_backend();  // its hooks scope each run's reordered copies and drop a freed weight's copies
  auto model = std::make_shared<Implementation>();
  model->artifact = decode_artifact(bytes, name);
  model->where = name;
  const Artifact& artifact = model->artifact;
  std::vector<std::string> missing = missing_cpu_features(artifact.cpu_features);
  if (!missing.empty()) {
    std::string list;
    for (const std::string& feature : missing) list += (list.empty() ? "" : ", ") + feature;
    throw ArtifactError(name + " was compiled for a " + artifact.cpu_name + " CPU, and this CPU lacks " + list +
                        ": export the model on a machine whose CPU this one has every feature of");
  }
  for (const ArtifactTensor& input : artifact.inputs) model->inputs.push_back(info_of(artifact, input));
  for (const ArtifactTensor& output : artifact.outputs) model->outputs.push_back(info_of(artifact, output));
  model->kernels = link_artifact_kernels(artifact, name);
  for (const ArtifactStep& step : artifact.steps) {
    std::shared_ptr<const LibraryCall> call;
    if (step.contraction) {
      call = onednn_library_call(*step.contraction);
      if (!call)
        throw ArtifactError(name +
                            ": oneDNN on this machine does not offer the library call the exporting machine "
                            "made for " +
                            step.description + " (" + step.contraction->describe() +
                            "); export the model on a machine like this one");
      model->call_list.push_back(call.get());
    }
    if (step.object >= 0) ++model->kernel_count;
    model->calls.push_back(std::move(call));
  }
  for (const std::string& weight : artifact.weights) {
    auto storage = std::make_shared<Storage>(std::max<size_t>(weight.size(), 1));
    std::memcpy(storage->data(), weight.data(), weight.size());
    model->weights.push_back(std::move(storage));
    model->weight_bytes += weight.size();
  }
  return Model(std::move(model));
}

std::vector<Tensor> Model::run(const std::vector<Tensor>& inputs) const {
  const Implementation& model = *implementation_;
  const Artifact& artifact = model.artifact;
  if (inputs.size() != model.inputs.size())
    throw std::invalid_argument("the model takes " + std::to_string(model.inputs.size()) + " inputs, " +
                                std::to_string(inputs.size()) + " were given");
  for (size_t index = 0; index < inputs.size(); ++index) {
    const TensorInfo& expected = model.inputs[index];
    if (inputs[index].dtype() != expected.dtype || inputs[index].shape() != expected.shape)
      throw std::invalid_argument("input '" + expected.name + "' is " +
                                  describe_type(DType(inputs[index].dtype()), inputs[index].shape()) +
                                  ", the model takes " + describe_type(DType(expected.dtype), expected.shape));
    if (!inputs[index].data() && inputs[index].bytes() != 0)
      throw std::invalid_argument("input '" + expected.name + "' has no memory (a default-constructed Tensor)");
  }

  // Runs take turns with each other and with the JIT's syncs in the same process (mj.load_exported beside
  // training): the library backend's per-run state (reordered operands, released buffers) belongs to one run.
  std::vector<Tensor> outputs;
  run_exclusively([&] {
    use_thread_count_in_libraries();
    // Per value: who holds its memory and where it is. Inputs and weights are read in place.
    std::vector<std::shared_ptr<void>> holders(artifact.values.size());
    std::vector<void*> addresses(artifact.values.size(), nullptr);
    for (size_t index = 0; index < artifact.values.size(); ++index) {
      const ArtifactValue& value = artifact.values[index];
      if (value.kind == ArtifactValue::Kind::Input) {
        holders[index] = inputs[size_t(value.index)].memory_;
        addresses[index] = const_cast<void*>(inputs[size_t(value.index)].data());
      } else if (value.kind == ArtifactValue::Kind::Weight) {
        holders[index] = model.weights[size_t(value.index)];
        addresses[index] = model.weights[size_t(value.index)]->data();
      }
    }
    auto allocate = [&](int value) {
      auto storage = std::make_shared<Storage>(std::max<size_t>(artifact.values[size_t(value)].bytes(), 1));
      addresses[size_t(value)] = storage->data();
      holders[size_t(value)] = std::move(storage);
    };

    LibraryRunScope library_run(model.call_list);
    std::vector<void*> buffers;
    for (size_t index = 0; index < artifact.steps.size(); ++index) {
      const ArtifactStep& step = artifact.steps[index];
      allocate(step.output);
      for (int sibling : step.siblings) allocate(sibling);
      buffers.clear();
      buffers.push_back(addresses[size_t(step.output)]);
      for (int sibling : step.siblings) buffers.push_back(addresses[size_t(sibling)]);
      for (int input : step.inputs) buffers.push_back(addresses[size_t(input)]);
      std::shared_ptr<Storage> temporary;
      if (const LibraryCall* call = model.calls[index].get()) {
        if (step.object >= 0) {  // the call writes a temporary that the epilogue kernel reads as its last buffer
          size_t elements = size_t(shape_numel(artifact.values[size_t(step.output)].shape));
          temporary = std::make_shared<Storage>(std::max<size_t>(elements * sizeof(float), 1));
          buffers[0] = temporary->data();
        }
        try {
          call->run(buffers.data());
        } catch (const std::exception& error) {
          throw std::runtime_error("while computing " + step.description + " with " + call->describe() + ": " +
                                   error.what());
        }
        buffers[0] = addresses[size_t(step.output)];
        if (temporary) buffers.push_back(temporary->data());
      }
      std::vector<double> code_data;
      if (step.code) {  // the op's data values, then the error slot
        code_data = step.code_data;
        code_data.push_back(0);
        buffers.push_back(code_data.data());
      }
      if (step.object >= 0 && step.work_items > 0) {
        for (size_t buffer = 0; buffer < step.buffer_byte_offsets.size(); ++buffer)
          buffers[buffer] = static_cast<char*>(buffers[buffer]) + step.buffer_byte_offsets[buffer];
        KernelFunction function = model.kernels[size_t(step.object)];
        parallel_for(step.work_items, step.grain,
                     [&](int64_t begin, int64_t end) { function(buffers.data(), begin, end); });
      }
      if (step.code && code_data.back() != 0) {  // the kernel left the address of the name it could not find
        const char* missing = nullptr;
        std::memcpy(&missing, &code_data.back(), sizeof(missing));
        throw std::runtime_error("the " + step.description + " read data[\"" + missing +
                                 "\"], which is not in its data");
      }
      for (int released : step.release) {
        if (artifact.values[size_t(released)].kind != ArtifactValue::Kind::Computed) continue;
        note_library_buffer_released(addresses[size_t(released)], artifact.values[size_t(released)].bytes());
        holders[size_t(released)].reset();
        addresses[size_t(released)] = nullptr;
      }
    }
    for (size_t index = 0; index < artifact.outputs.size(); ++index) {
      int value = artifact.outputs[index].value;
      Tensor output;
      output.dtype_ = model.outputs[index].dtype;
      output.shape_ = model.outputs[index].shape;
      if (artifact.values[size_t(value)].kind == ArtifactValue::Kind::Computed) {
        output.memory_ = holders[size_t(value)];
        output.data_ = addresses[size_t(value)];
      } else {  // an input or a weight given back as it is: a copy, so the caller's writes cannot reach the model
        output = Tensor(output.dtype_, output.shape_);
        std::memcpy(output.data_, addresses[size_t(value)], output.bytes());
      }
      outputs.push_back(std::move(output));
    }
  });
  return outputs;
}

const std::vector<TensorInfo>& Model::inputs() const { return implementation_->inputs; }
const std::vector<TensorInfo>& Model::outputs() const { return implementation_->outputs; }
size_t Model::kernel_count() const { return implementation_->kernel_count; }
size_t Model::library_call_count() const { return implementation_->call_list.size(); }
size_t Model::weight_bytes() const { return implementation_->weight_bytes; }
std::string Model::producer() const { return implementation_->artifact.producer; }

}  // namespace metajit

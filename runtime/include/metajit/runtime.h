// metajit's C++ runtime: loads a model exported from Python (mj.export, or a trace's dump()) and runs it, with no
// Python, no LLVM/Clang and no compiler: the artifact carries its kernels compiled, and matrix products and
// convolutions go to oneDNN.
//
//   auto model = metajit::Model::load("resnet18.mjm");
//   metajit::Tensor image(metajit::DataType::Float32, {1, 3, 224, 224});
//   fill(image.data_as<float>(), image.numel());
//   std::vector<metajit::Tensor> outputs = model.run({image});
//
// Threads: a loaded Model may be shared and run() called from several threads at once; the runs of a process
// take turns (each run uses every core already), also with metajit's own work when the process runs it too
// (Python with mj.load_exported), so a call waits while another runs. This header is the whole
// public interface; it includes nothing of metajit's own.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

// What the shared library exports: this header's names and nothing else of metajit's.
#define METAJIT_RUNTIME_API __attribute__((visibility("default")))

namespace metajit {

enum class DataType : uint8_t { Bool, Int8, UInt8, Int32, Int64, Float16, Float32, Float64 };
METAJIT_RUNTIME_API const char* data_type_name(DataType dtype);  // "float32", ... (numpy's spelling)
METAJIT_RUNTIME_API size_t data_type_size(DataType dtype);

// A dense, row-major tensor on the host; its memory is 64-byte aligned and shared between copies of the Tensor.
class METAJIT_RUNTIME_API Tensor {
 public:
  Tensor() = default;
  Tensor(DataType dtype, std::vector<int64_t> shape);  // zero-filled
  // A copy of numel(shape) elements at `data` (row-major, of `dtype`).
  Tensor(DataType dtype, std::vector<int64_t> shape, const void* data);
  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const;
  size_t bytes() const { return size_t(numel()) * data_type_size(dtype_); }
  void* data() { return data_; }
  const void* data() const { return data_; }
  // The elements as T; throws std::invalid_argument when T's size is not the dtype's.
  template <typename T>
  T* data_as() {
    check_element_size(sizeof(T));
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data_as() const {
    check_element_size(sizeof(T));
    return static_cast<const T*>(data_);
  }

 private:
  friend class Model;
  void check_element_size(size_t size) const;
  DataType dtype_ = DataType::Float32;
  std::vector<int64_t> shape_;
  std::shared_ptr<void> memory_;
  void* data_ = nullptr;
};

// The name, dtype and shape of a model's input or output.
struct TensorInfo {
  std::string name;
  DataType dtype = DataType::Float32;
  std::vector<int64_t> shape;
};

// An artifact that cannot be run here: not a model, truncated, corrupt or modified, of another format version,
// compiled for CPU features this machine lacks, or using a library call this machine's oneDNN does not offer.
// The message says which.
class METAJIT_RUNTIME_API ArtifactError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class METAJIT_RUNTIME_API Model {
 public:
  // Throws metajit::ArtifactError.
  static Model load(const std::string& path);
  static Model from_bytes(const std::string& bytes, const std::string& name = "<memory>");

  // Runs the model on `inputs` (in the order of inputs()). Throws std::invalid_argument naming the input when one
  // has another dtype or shape than the model takes, and std::runtime_error naming the op and its line in the
  // Python program when a library call fails.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  size_t kernel_count() const;        // generated kernels launched per run
  size_t library_call_count() const;  // oneDNN calls per run
  size_t weight_bytes() const;
  std::string producer() const;  // "metajit <version>" that exported it

 private:
  struct Implementation;
  explicit Model(std::shared_ptr<const Implementation> implementation);
  std::shared_ptr<const Implementation> implementation_;
};

}  // namespace metajit

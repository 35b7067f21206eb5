#include "jit/library_call/contraction.h"

#include <atomic>
#include <iomanip>
#include <sstream>

#include "core/flags.h"

namespace metajit {
namespace {

std::atomic<ContractionBackend> backend_{nullptr};
std::atomic<ContractionBackend> cuda_backend_{nullptr};
std::atomic<LibraryRunEndHook> run_end_hook_{nullptr};
std::atomic<LibraryRunBeginHook> run_begin_hook_{nullptr};
std::atomic<LibraryBufferReleasedHook> buffer_released_hook_{nullptr};

std::atomic<bool> lowering_enabled_{flag_boolean(Flag::Lowering)};

// Read while the library loads, too early to raise: the registry warns about a bad value and gives "auto".
std::atomic<ConvolutionAlgorithm> convolution_algorithm_{
    parse_convolution_algorithm(flag_choice(Flag::ConvolutionAlgorithm)).value_or(ConvolutionAlgorithm::Auto)};

}  // namespace

std::string AffineIndex::single_variable() const {
  if (constant != 0 || terms.size() != 1 || terms.begin()->second != 1) return "";
  return terms.begin()->first;
}

bool TensorAccess::any_guarded() const {
  for (bool flag : guarded)
    if (flag) return true;
  return false;
}

std::vector<int64_t> TensorAccess::row_major_strides() const {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (int dim = int(shape.size()) - 1; dim >= 0; --dim) {
    strides[dim] = stride;
    stride *= shape[dim];
  }
  return strides;
}

AffineIndex TensorAccess::flat_offset() const {
  AffineIndex flat;
  std::vector<int64_t> strides = row_major_strides();
  for (size_t dim = 0; dim < coordinates.size(); ++dim) {
    flat.constant += coordinates[dim].constant * strides[dim];
    for (const auto& [name, coefficient] : coordinates[dim].terms) flat.terms[name] += coefficient * strides[dim];
  }
  for (auto term = flat.terms.begin(); term != flat.terms.end();)
    term = term->second == 0 ? flat.terms.erase(term) : std::next(term);
  return flat;
}

namespace {

void describe_access(std::ostringstream& text, const char* name, const TensorAccess& tensor) {
  text << name << "#" << tensor.buffer << shape_to_string(tensor.shape) << "[";
  for (size_t dim = 0; dim < tensor.coordinates.size(); ++dim) {
    if (dim) text << ", ";
    const AffineIndex& index = tensor.coordinates[dim];
    bool first = true;
    for (const auto& [variable, coefficient] : index.terms) {
      if (!first) text << "+";
      first = false;
      if (coefficient != 1) text << coefficient << "*";
      text << variable;
    }
    if (index.constant != 0 || first) text << (index.constant >= 0 && !first ? "+" : "") << index.constant;
    if (tensor.guarded[dim]) text << "?";
  }
  text << "]";
}

}  // namespace

std::string PostOp::describe() const {
  std::ostringstream text;
  switch (kind) {
    case Kind::Add: describe_access(text, "add", operand); break;
    case Kind::Subtract: describe_access(text, "subtract", operand); break;
    case Kind::Multiply: describe_access(text, "multiply", operand); break;
    case Kind::Relu: text << "relu"; break;
    // Every digit: the description is the key the backend caches calls under.
    case Kind::Linear: text << std::setprecision(17) << "linear(" << scale << ", " << shift << ")"; break;
  }
  return text.str();
}

std::string Contraction::describe() const {
  std::ostringstream text;
  auto access = [&](const char* name, const TensorAccess& tensor) { describe_access(text, name, tensor); };
  access("out", output);
  text << " += ";
  access("left", left);
  text << " * ";
  access("right", right);
  text << " over";
  for (const auto& [name, extent] : extents) text << " " << name << "<" << extent;
  if (!post_ops.empty()) {
    text << " then";
    for (const PostOp& op : post_ops) text << " " << op.describe();
  }
  return text.str();
}

void set_contraction_backend(ContractionBackend backend) { backend_ = backend; }
ContractionBackend contraction_backend() { return backend_; }
void set_cuda_contraction_backend(ContractionBackend backend) { cuda_backend_ = backend; }
ContractionBackend cuda_contraction_backend() { return cuda_backend_; }
void set_library_run_end_hook(LibraryRunEndHook hook) { run_end_hook_ = hook; }
void set_library_run_begin_hook(LibraryRunBeginHook hook) { run_begin_hook_ = hook; }
LibraryRunScope::LibraryRunScope(const std::vector<const LibraryCall*>& calls) {
  if (LibraryRunBeginHook hook = run_begin_hook_) hook(calls);
}
LibraryRunScope::~LibraryRunScope() {
  if (LibraryRunEndHook hook = run_end_hook_) hook();
}
void set_library_buffer_released_hook(LibraryBufferReleasedHook hook) { buffer_released_hook_ = hook; }
void note_library_buffer_released(const void* address, size_t bytes) {
  if (LibraryBufferReleasedHook hook = buffer_released_hook_) hook(address, bytes);
}
bool library_lowering_enabled() { return lowering_enabled_; }
void set_library_lowering_enabled(bool enabled) { lowering_enabled_ = enabled; }

ConvolutionAlgorithm convolution_algorithm() { return convolution_algorithm_; }
void set_convolution_algorithm(ConvolutionAlgorithm algorithm) { convolution_algorithm_ = algorithm; }
const char* convolution_algorithm_name(ConvolutionAlgorithm algorithm) {
  switch (algorithm) {
    case ConvolutionAlgorithm::Direct: return "direct";
    case ConvolutionAlgorithm::Winograd: return "winograd";
    case ConvolutionAlgorithm::Auto: break;
  }
  return "auto";
}
std::optional<ConvolutionAlgorithm> parse_convolution_algorithm(const std::string& name) {
  for (auto algorithm : {ConvolutionAlgorithm::Auto, ConvolutionAlgorithm::Direct, ConvolutionAlgorithm::Winograd})
    if (name == convolution_algorithm_name(algorithm)) return algorithm;
  return std::nullopt;
}

}  // namespace metajit

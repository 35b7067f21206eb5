#include "jit/codegen/code_ops/code_kernel.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "jit/codegen/common/kernel_symbol.h"
#include "jit/codegen/common/portable_prelude.h"

namespace metajit {
namespace {

// The standard headers users of a Code op expect (std::max, std::exp, memcpy, printf, numeric_limits). They cost
// about 0.1 s of compile time once per distinct op; generated kernels never include them.
const char* const kCodePrelude = R"PRELUDE(// ---- metajit code op support ----
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
namespace mj {
// A typed view of one buffer: t(i, j) is element [i][j] (row-major, element strides), t[k] the k-th
// element in memory order, t.shape[d] / t.stride[d] / t.numel / t.ndim its geometry.
template <typename T, int N>
struct Tensor {
  T* data;
  int64_t shape[N > 0 ? N : 1];
  int64_t stride[N > 0 ? N : 1];
  int64_t numel;
  static constexpr int ndim = N;
  template <typename... Index>
  T& operator()(Index... index) const {
    static_assert(sizeof...(Index) == N, "wrong number of indices for this tensor's rank");
    int64_t indices[N > 0 ? N : 1] = {int64_t(index)...};
    int64_t offset = 0;
    for (int dim = 0; dim < N; ++dim) offset += indices[dim] * stride[dim];
    return data[offset];
  }
  T& operator[](int64_t flat) const { return data[flat]; }
};
}  // namespace mj
)PRELUDE";

// The same accessor for CUDA Code ops (no standard headers: NVRTC compiles without any).
const char* const kCudaCodePrelude = R"PRELUDE(// ---- metajit CUDA code op support ----
namespace mj {
template <typename T, int N>
struct Tensor {
  T* data;
  int64_t shape[N > 0 ? N : 1];
  int64_t stride[N > 0 ? N : 1];
  int64_t numel;
  static constexpr int ndim = N;
  template <typename... Index>
  __device__ T& operator()(Index... index) const {
    static_assert(sizeof...(Index) == N, "wrong number of indices for this tensor's rank");
    int64_t indices[N > 0 ? N : 1] = {int64_t(index)...};
    int64_t offset = 0;
    for (int dim = 0; dim < N; ++dim) offset += indices[dim] * stride[dim];
    return data[offset];
  }
  __device__ T& operator[](int64_t flat) const { return data[flat]; }
};
__device__ inline bool same_name(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}
}  // namespace mj
)PRELUDE";

int count_lines(const std::string& text) {
  int lines = 0;
  for (char character : text) lines += character == '\n';
  return lines;
}

struct NamedBuffer {
  std::string name;
  int index;
  DType dtype;
  Shape shape;
};

void declare_constants(std::ostringstream& out, const NamedBuffer& buffer) {
  const std::string& name = buffer.name;
  int64_t rank = int64_t(buffer.shape.size());
  out << "typedef " << dtype_c_type(buffer.dtype)  // float16: its raw bits (uint16_t)
      << " " << name << "_type;\n";
  out << "static constexpr int " << name << "_ndim = " << rank << ";\n";
  out << "static constexpr int64_t " << name << "_numel = " << shape_numel(buffer.shape) << "LL;\n";
  int64_t stride = 1;
  std::vector<int64_t> strides(buffer.shape.size());
  for (int64_t dim = rank - 1; dim >= 0; --dim) {
    strides[dim] = stride;
    stride *= buffer.shape[dim];
  }
  for (int64_t dim = 0; dim < rank; ++dim) {
    out << "static constexpr int64_t " << name << "_shape" << dim << " = " << buffer.shape[dim] << "LL;\n";
    out << "static constexpr int64_t " << name << "_stride" << dim << " = " << strides[dim] << "LL;\n";
  }
}

// The typed view `name` of the buffer `name_p`; on the CPU the pointer is first taken from buffers[].
void declare_pointers(std::ostringstream& out, const NamedBuffer& buffer, bool cuda = false) {
  const std::string& name = buffer.name;
  size_t rank = buffer.shape.size();
  if (!cuda)
    out << "  " << name << "_type* const " << name << "_p = static_cast<" << name << "_type*>(buffers[" << buffer.index
        << "]);\n";
  out << "  const mj::Tensor<" << name << "_type, " << rank << "> " << name << "{" << name << "_p, {";
  for (size_t dim = 0; dim < rank; ++dim) out << (dim ? ", " : "") << name << "_shape" << dim;
  out << "}, {";
  for (size_t dim = 0; dim < rank; ++dim) out << (dim ? ", " : "") << name << "_stride" << dim;
  out << "}, " << name << "_numel};\n";
  out << "  (void)" << name << "_p; (void)" << name << ";\n";
}

}  // namespace

RenderedKernel render_code_kernel(const CodeOp& op, const std::vector<NodePtr>& inputs) {
  if (op.cpu_source.empty())
    throw std::invalid_argument("the " + op.what + " created at " + op.provenance.to_string() +
                                " has no cpu_src, so it cannot run on the CPU (pass cpu_src=... to mj.code, or run "
                                "it on the GPU: mj.flags.use_cuda = True)");
  std::vector<NamedBuffer> buffers;
  for (size_t index = 0; index < op.output_shapes.size(); ++index)
    buffers.push_back({op.output_names[index], int(index), op.output_dtypes[index], op.output_shapes[index]});
  int first_input = int(op.output_shapes.size());
  for (size_t index = 0; index < inputs.size(); ++index)
    buffers.push_back({op.input_names[index], first_input + int(index), inputs[index]->dtype, inputs[index]->shape});
  // The gradient source of a single-output op may also say dout / pout, as in Jittor.
  bool several_outputs = false;
  for (const NamedBuffer& buffer : buffers) several_outputs |= buffer.name == "pout1";
  if (!several_outputs) {
    std::vector<NamedBuffer> aliases;
    for (const NamedBuffer& buffer : buffers)
      if (buffer.name == "dout0" || buffer.name == "pout0")
        aliases.push_back({buffer.name.substr(0, 4), buffer.index, buffer.dtype, buffer.shape});
    buffers.insert(buffers.end(), aliases.begin(), aliases.end());
  }
  int data_buffer = first_input + int(inputs.size());

  std::ostringstream out;
  out << kCodePrelude;
  for (const NamedBuffer& buffer : buffers) declare_constants(out, buffer);
  out << "namespace mj {\n// data[\"name\"]: scalar constants passed at launch (changing them never recompiles).\n"
         "struct CodeData {\n  const double* values;\n  double* error;\n"
         "  double operator[](const char* name) const {\n";
  for (size_t index = 0; index < op.data_names.size(); ++index)
    out << "    if (__builtin_strcmp(name, \"" << op.data_names[index] << "\") == 0) return values[" << index << "];\n";
  // Not in data: keep the name (a string literal, so it stays valid) for the error after the launch.
  // An atomic store: with cpu_parallel several threads may reach the unknown name at once.
  out << "    unsigned long long name_bits;  // not in data: reported after the launch\n"
         "    __builtin_memcpy(&name_bits, &name, sizeof(name_bits));\n"
         "    __atomic_store_n(reinterpret_cast<unsigned long long*>(error), name_bits, __ATOMIC_RELAXED);\n"
         "    return 0;\n  }\n};\n}  // namespace mj\n";
  int line = count_lines(out.str()) + 1;
  if (!op.cpu_header.empty()) {
    out << "#line 1 \"cpu_header\"\n" << op.cpu_header << "\n";
    line += 1 + count_lines(op.cpu_header) + 1;
    out << "#line " << line + 1 << " \"kernel.cc\"\n";
    line += 1;
  }
  out << "extern \"C\" void " << kKernelSymbol << "(void* const* buffers, int64_t begin, int64_t end) {\n";
  if (op.cpu_work_items > 0)
    out << "  // cpu_parallel: this call runs work items [begin, end) of " << op.cpu_work_items
        << "; other threads run the rest.\n";
  out << "  (void)begin; (void)end;\n";
  for (const NamedBuffer& buffer : buffers) declare_pointers(out, buffer);
  out << "  const mj::CodeData data{static_cast<const double*>(buffers[" << data_buffer << "]), static_cast<double*>(buffers["
      << data_buffer << "]) + " << op.data_names.size() << "};\n  (void)data;\n  {\n";
  out << "#line 1 \"" << op.source_label << "\"\n" << op.cpu_source << "\n";
  out << "  }\n}\n";

  RenderedKernel rendered;
  std::ostringstream header;
  header << "// metajit " << op.what << " created at " << op.provenance.to_string() << "\n// outputs:";
  for (size_t index = 0; index < op.output_shapes.size(); ++index)
    header << " " << op.output_names[index] << " " << dtype_name(op.output_dtypes[index]) << shape_to_string(op.output_shapes[index]);
  header << "\n";
  rendered.header_comment = header.str();
  rendered.source = out.str();
  rendered.work_items = std::max<int64_t>(1, op.cpu_work_items);
  rendered.grain = 1;
  return rendered;
}

RenderedCudaKernel render_code_cuda_kernel(const CodeOp& op, const std::vector<NodePtr>& inputs) {
  if (op.cuda_source.empty())
    throw std::invalid_argument("the " + op.what + " created at " + op.provenance.to_string() +
                                " has no cuda_src, so it cannot run on the GPU (pass cuda_src=... to mj.code)");
  std::vector<NamedBuffer> buffers;
  for (size_t index = 0; index < op.output_shapes.size(); ++index)
    buffers.push_back({op.output_names[index], int(index), op.output_dtypes[index], op.output_shapes[index]});
  for (size_t index = 0; index < inputs.size(); ++index)
    buffers.push_back({op.input_names[index], int(buffers.size()), inputs[index]->dtype, inputs[index]->shape});

  std::ostringstream out;
  out << kIntegerTypes << kCudaCodePrelude;
  for (const NamedBuffer& buffer : buffers) declare_constants(out, buffer);
  // data["name"] reads the values passed at launch; an unknown name sets the error slot (reported by the host).
  out << "namespace mj {\nstruct CodeData {\n  const double* values;\n  double* error;\n"
         "  __device__ double operator[](const char* name) const {\n";
  for (size_t index = 0; index < op.data_names.size(); ++index)
    out << "    if (same_name(name, \"" << op.data_names[index] << "\")) return values[" << index << "];\n";
  out << "    *error = 1;\n    return 0;\n  }\n};\n}  // namespace mj\n";
  int line = count_lines(out.str()) + 1;
  if (!op.cuda_header.empty()) {
    out << "#line 1 \"cuda_header\"\n" << op.cuda_header << "\n";
    line += 1 + count_lines(op.cuda_header) + 1;
    out << "#line " << line + 1 << " \"kernel.cu\"\n";
  }
  out << "extern \"C\" __global__ void " << kKernelSymbol << "(\n";
  for (const NamedBuffer& buffer : buffers)
    out << "    " << buffer.name << "_type* const " << buffer.name << "_p,\n";
  out << "    double* const data_values) {\n";
  for (const NamedBuffer& buffer : buffers) declare_pointers(out, buffer, true);
  out << "  const mj::CodeData data{data_values, data_values + " << op.data_names.size() << "};\n  (void)data;\n"
      << "  // Every thread runs the source; stride over the work with thread_index and thread_count.\n"
      << "  const int64_t thread_index = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
      << "  const int64_t thread_count = (int64_t)gridDim.x * blockDim.x;\n"
      << "  (void)thread_index; (void)thread_count;\n  {\n";
  out << "#line 1 \"cuda_src\"\n" << op.cuda_source << "\n";
  out << "  }\n}\n";

  RenderedCudaKernel rendered;
  std::ostringstream header;
  header << "// metajit CUDA " << op.what << " created at " << op.provenance.to_string() << "\n// outputs:";
  for (size_t index = 0; index < op.output_shapes.size(); ++index)
    header << " " << op.output_names[index] << " " << dtype_name(op.output_dtypes[index])
           << shape_to_string(op.output_shapes[index]);
  header << "\n";
  rendered.header_comment = header.str();
  rendered.source = out.str();
  rendered.schedule = "code op: every thread runs cuda_src";
  int64_t threads = std::max<int64_t>(1, shape_numel(op.output_shapes[0]));
  rendered.launches.push_back({kKernelSymbol, threads, false});
  return rendered;
}

std::string numbered_lines(const std::string& text) {
  std::ostringstream out;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) out << number << ": " << line << "\n";
  return out.str();
}

std::string describe_code_compile_error(const CodeOp& op, const std::string& diagnostics, bool cuda) {
  std::ostringstream out;
  out << "the " << op.what << " created at " << op.provenance.to_string() << " failed to compile:\n" << diagnostics;
  auto listing = [&](const std::string& title, const std::string& text) {
    if (!text.empty()) out << "--- " << title << " ---\n" << numbered_lines(text);
  };
  if (cuda) {
    listing("cuda_header", op.cuda_header);
    listing("cuda_src", op.cuda_source);
  } else {
    listing("cpu_header", op.cpu_header);
    listing(op.source_label, op.cpu_source);
  }
  return out.str();
}

}  // namespace metajit

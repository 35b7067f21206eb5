// The exported-model artifact (".mjm", written by mj.export and a trace's dump(), read by the C++ runtime): a
// kept plan as plain data, with everything it needs to run and nothing to compile: the values it reads and
// computes, its steps (generated kernels as compiled objects, library calls as contractions), the weights, and
// the names, dtypes and shapes of its inputs and outputs. This file only encodes and decodes: it must not run,
// link or plan anything.
//
// Layout: "MJMODEL\0", u32 format version, u32 kernel ABI version, u64 body size, u64 XXH3-64 of the body, then the
// body. Reading refuses, naming which, a file that is not an artifact, one of another format or ABI version, one
// shorter than its header says (truncated), one whose body does not match its checksum (corrupt or tampered), and
// a body that does not parse.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "jit/library_call/contraction.h"
#include "metajit/runtime.h"  // ArtifactError

namespace metajit {

// 1: the first format (CPU plans: generated kernels and oneDNN calls).
constexpr uint32_t kArtifactFormatVersion = 1;

// One buffer of the plan.
struct ArtifactValue {
  enum class Kind : uint8_t { Input, Weight, Computed };
  Kind kind = Kind::Computed;
  int index = 0;  // Input: which input; Weight: which weight
  DType dtype = DType::Float32;
  Shape shape;
  size_t bytes() const { return size_t(shape_numel(shape)) * size_t(dtype_size(dtype)); }
};

// One launch: a generated kernel, a library call, or a library call whose result a generated epilogue reads.
struct ArtifactStep {
  int output = 0;             // value
  std::vector<int> siblings;  // values of further outputs
  std::vector<int> inputs;    // values, in the kernel's buffer order after its outputs
  int object = -1;            // the generated kernel (an index into Artifact::objects); -1 for a call alone
  int64_t work_items = 0;     // the kernel's outer iterations, shared out over threads in pieces of `grain`
  int64_t grain = 1;
  std::vector<int64_t> buffer_byte_offsets;  // per kernel buffer, added to its address (empty: none)
  std::optional<Contraction> contraction;    // a library call made for it
  // A Code op (mj.code): `object` is the user's kernel, run once for all the op's outputs (`output`, then
  // `siblings`, in the op's order), with one more buffer after the inputs: `code_data`, then an error slot the
  // kernel sets when it reads a data name it was not given.
  bool code = false;
  std::vector<double> code_data;
  std::vector<int> release;                  // values no later step reads, freed after this one
  std::string description;                   // "conv2d float32 [1, 64, 56, 56] created at model.py:12", for errors
};

struct ArtifactTensor {
  std::string name;
  int value = 0;
};

struct Artifact {
  std::string producer;  // "metajit <version>"
  std::string cpu_name;  // the CPU the kernels were compiled for, and its LLVM feature list ("+avx2,-avx512f,...")
  std::string cpu_features;
  std::string triple;
  std::string kernel_symbol;  // the function every object defines (jit/codegen/common/kernel_symbol.h)
  std::vector<ArtifactTensor> inputs, outputs;
  std::vector<ArtifactValue> values;
  std::vector<std::string> weights;  // raw bytes, one per Weight value
  std::vector<std::string> objects;  // relocatable ELF objects of generated kernels
  // The runtime support object (jit/codegen/cpp/runtime_support.h) when a kernel calls into it, and its symbols
  // in the order its table gives their addresses.
  std::string runtime_support;
  std::vector<std::string> runtime_support_symbols;
  std::vector<ArtifactStep> steps;
};

std::string encode_artifact(const Artifact& artifact);
// Throws metajit::ArtifactError naming `where` (the file) and the problem.
Artifact decode_artifact(const std::string& bytes, const std::string& where);

// The bytes of the file at `path`; throws ArtifactError naming it when it cannot be read.
std::string read_artifact_bytes(const std::string& path);
// Writes the encoded artifact (beside `path`, then renamed over it) and returns its size in bytes; throws
// std::runtime_error naming the path.
size_t write_artifact(const std::string& path, const Artifact& artifact);

}  // namespace metajit

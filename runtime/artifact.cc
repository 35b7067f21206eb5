#include "runtime/artifact.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "cache/content_hash.h"
#include "jit/loader/kernel_abi.h"

namespace metajit {
namespace {

constexpr char kMagic[8] = {'M', 'J', 'M', 'O', 'D', 'E', 'L', '\0'};
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8;

// Little-endian fields, as the only hosts the kernels run on (x86-64) store them.
class Writer {
 public:
  void u8(uint8_t value) { bytes_.push_back(char(value)); }
  void u32(uint32_t value) { raw(&value, sizeof(value)); }
  void u64(uint64_t value) { raw(&value, sizeof(value)); }
  void i64(int64_t value) { raw(&value, sizeof(value)); }
  void f64(double value) { raw(&value, sizeof(value)); }
  void text(const std::string& value) {
    u64(value.size());
    bytes_ += value;
  }
  void integers(const std::vector<int>& values) {
    u64(values.size());
    for (int value : values) i64(value);
  }
  void integers(const std::vector<int64_t>& values) {
    u64(values.size());
    for (int64_t value : values) i64(value);
  }
  void raw(const void* data, size_t size) { bytes_.append(static_cast<const char*>(data), size); }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

// Every read is bounds-checked: a body that passed its checksum but does not parse (a writer's bug, or a file
// crafted to match) is refused, never read past its end.
class Reader {
 public:
  Reader(const std::string& bytes, size_t start, const std::string& where) : bytes_(bytes), at_(start), where_(where) {}
  uint8_t u8() { return uint8_t(take(1)[0]); }
  uint32_t u32() { return scalar<uint32_t>(); }
  uint64_t u64() { return scalar<uint64_t>(); }
  int64_t i64() { return scalar<int64_t>(); }
  double f64() { return scalar<double>(); }
  std::string text() {
    uint64_t size = count(1);
    return std::string(take(size_t(size)), size_t(size));
  }
  std::vector<int> small_integers() {
    std::vector<int> values(count(8));
    for (int& value : values) value = int(i64());
    return values;
  }
  std::vector<int64_t> integers() {
    std::vector<int64_t> values(count(8));
    for (int64_t& value : values) value = i64();
    return values;
  }
  // A length, checked against what is left (each element takes at least `element_bytes`).
  size_t count(size_t element_bytes) {
    uint64_t size = u64();
    if (size > (bytes_.size() - at_) / element_bytes) fail("a length runs past the end of the file");
    return size_t(size);
  }
  // An index into a table of `size` entries.
  int index(int64_t value, size_t size, const char* what) {
    if (value < 0 || uint64_t(value) >= size) fail(std::string("a ") + what + " index is out of range");
    return int(value);
  }
  bool at_end() const { return at_ == bytes_.size(); }
  [[noreturn]] void fail(const std::string& what) const {
    throw ArtifactError(where_ + " is malformed (" + what + " at byte " + std::to_string(at_) +
                        "); it was not written by this version of mj.export");
  }

 private:
  template <typename T>
  T scalar() {
    T value;
    std::memcpy(&value, take(sizeof(T)), sizeof(T));
    return value;
  }
  const char* take(size_t size) {
    if (size > bytes_.size() - at_) fail("it ends early");
    const char* data = bytes_.data() + at_;
    at_ += size;
    return data;
  }
  const std::string& bytes_;
  size_t at_;
  const std::string& where_;
};

void write_shape(Writer& out, const Shape& shape) { out.integers(shape); }

void write_access(Writer& out, const TensorAccess& access) {
  out.i64(access.buffer);
  write_shape(out, access.shape);
  out.u64(access.coordinates.size());
  for (const AffineIndex& index : access.coordinates) {
    out.u64(index.terms.size());
    for (const auto& [variable, coefficient] : index.terms) {
      out.text(variable);
      out.i64(coefficient);
    }
    out.i64(index.constant);
  }
  out.u64(access.guarded.size());
  for (bool guarded : access.guarded) out.u8(guarded ? 1 : 0);
}

TensorAccess read_access(Reader& in) {
  TensorAccess access;
  access.buffer = int(in.i64());
  access.shape = in.integers();
  access.coordinates.resize(in.count(16));
  for (AffineIndex& index : access.coordinates) {
    size_t terms = in.count(16);
    for (size_t term = 0; term < terms; ++term) {
      std::string variable = in.text();
      index.terms[variable] = in.i64();
    }
    index.constant = in.i64();
  }
  size_t guarded = in.count(1);
  for (size_t dim = 0; dim < guarded; ++dim) access.guarded.push_back(in.u8() != 0);
  if (access.guarded.size() != access.coordinates.size() || access.shape.size() != access.coordinates.size())
    in.fail("a contraction's tensor has dimensions of different counts");
  return access;
}

void write_dtype(Writer& out, DType dtype) { out.text(dtype_name(dtype)); }

DType read_dtype(Reader& in) {
  std::string name = in.text();
  try {
    return dtype_from_name(name);
  } catch (const std::invalid_argument&) {
    in.fail("unknown dtype '" + name + "'");
  }
}

void write_contraction(Writer& out, const Contraction& contraction) {
  out.u64(contraction.extents.size());
  for (const auto& [variable, extent] : contraction.extents) {
    out.text(variable);
    out.i64(extent);
  }
  write_access(out, contraction.output);
  write_access(out, contraction.left);
  write_access(out, contraction.right);
  write_dtype(out, contraction.dtype);
  out.u64(contraction.post_ops.size());
  for (const PostOp& op : contraction.post_ops) {
    out.u8(uint8_t(op.kind));
    out.f64(op.scale);
    out.f64(op.shift);
    if (op.reads_tensor()) write_access(out, op.operand);
  }
}

Contraction read_contraction(Reader& in) {
  Contraction contraction;
  size_t extents = in.count(16);
  for (size_t index = 0; index < extents; ++index) {
    std::string variable = in.text();
    contraction.extents[variable] = in.i64();
  }
  contraction.output = read_access(in);
  contraction.left = read_access(in);
  contraction.right = read_access(in);
  contraction.dtype = read_dtype(in);
  contraction.post_ops.resize(in.count(17));
  for (PostOp& op : contraction.post_ops) {
    uint8_t kind = in.u8();
    if (kind > uint8_t(PostOp::Kind::Linear)) in.fail("unknown post-op kind " + std::to_string(kind));
    op.kind = PostOp::Kind(kind);
    op.scale = in.f64();
    op.shift = in.f64();
    if (op.reads_tensor()) op.operand = read_access(in);
  }
  return contraction;
}

std::string encode_body(const Artifact& artifact) {
  Writer out;
  for (const std::string* field :
       {&artifact.producer, &artifact.cpu_name, &artifact.cpu_features, &artifact.triple, &artifact.kernel_symbol})
    out.text(*field);
  for (const std::vector<ArtifactTensor>* tensors : {&artifact.inputs, &artifact.outputs}) {
    out.u64(tensors->size());
    for (const ArtifactTensor& tensor : *tensors) {
      out.text(tensor.name);
      out.i64(tensor.value);
    }
  }
  out.u64(artifact.values.size());
  for (const ArtifactValue& value : artifact.values) {
    out.u8(uint8_t(value.kind));
    out.i64(value.index);
    write_dtype(out, value.dtype);
    write_shape(out, value.shape);
  }
  for (const std::vector<std::string>* blobs : {&artifact.weights, &artifact.objects}) {
    out.u64(blobs->size());
    for (const std::string& blob : *blobs) out.text(blob);
  }
  out.text(artifact.runtime_support);
  out.u64(artifact.runtime_support_symbols.size());
  for (const std::string& symbol : artifact.runtime_support_symbols) out.text(symbol);
  out.u64(artifact.steps.size());
  for (const ArtifactStep& step : artifact.steps) {
    out.i64(step.output);
    out.integers(step.siblings);
    out.integers(step.inputs);
    out.i64(step.object);
    out.i64(step.work_items);
    out.i64(step.grain);
    out.integers(step.buffer_byte_offsets);
    out.u8(step.contraction ? 1 : 0);
    if (step.contraction) write_contraction(out, *step.contraction);
    out.u8(step.code ? 1 : 0);
    out.u64(step.code_data.size());
    for (double value : step.code_data) out.f64(value);
    out.integers(step.release);
    out.text(step.description);
  }
  return std::move(out.bytes());
}

// Structure beyond parsing: every index points into its table and every value is made before it is read, so
// the runtime can trust the artifact as it runs it.
void check_structure(const Artifact& artifact, Reader& in) {
  size_t values = artifact.values.size();
  std::vector<uint8_t> ready(values, 0);
  size_t inputs = 0;
  for (size_t index = 0; index < values; ++index) {
    const ArtifactValue& value = artifact.values[index];
    for (int64_t extent : value.shape)
      if (extent < 0) in.fail("a negative extent");
    if (value.kind == ArtifactValue::Kind::Input) {
      in.index(value.index, artifact.inputs.size(), "input");
      ++inputs;
      ready[index] = 1;
    } else if (value.kind == ArtifactValue::Kind::Weight) {
      in.index(value.index, artifact.weights.size(), "weight");
      if (artifact.weights[size_t(value.index)].size() != value.bytes()) in.fail("a weight of the wrong size");
      ready[index] = 1;
    } else if (value.kind != ArtifactValue::Kind::Computed) {
      in.fail("unknown value kind");
    }
  }
  for (size_t index = 0; index < artifact.inputs.size(); ++index) {
    int value = in.index(artifact.inputs[index].value, values, "value");
    if (artifact.values[size_t(value)].kind != ArtifactValue::Kind::Input ||
        artifact.values[size_t(value)].index != int(index))
      in.fail("an input that is not its own value");
  }
  if (inputs != artifact.inputs.size()) in.fail("input values and inputs differ in number");
  for (const ArtifactStep& step : artifact.steps) {
    for (int input : step.inputs)
      if (!ready[size_t(in.index(input, values, "value"))]) in.fail("a step reads a value before it is made");
    std::vector<int> outputs{step.output};
    outputs.insert(outputs.end(), step.siblings.begin(), step.siblings.end());
    for (int output : outputs) {
      in.index(output, values, "value");
      if (artifact.values[size_t(output)].kind != ArtifactValue::Kind::Computed) in.fail("a step writes an input");
      ready[size_t(output)] = 1;
    }
    if (step.object >= 0) in.index(step.object, artifact.objects.size(), "object");
    if (step.object < 0 && !step.contraction) in.fail("a step with neither a kernel nor a library call");
    if (step.code && (step.object < 0 || step.contraction)) in.fail("a Code op step without its kernel alone");
    if (step.grain < 1 || step.work_items < 0) in.fail("a kernel's work is not positive");
    size_t buffers =
        outputs.size() + step.inputs.size() + (step.contraction && step.object >= 0 ? 1 : 0) + (step.code ? 1 : 0);
    if (step.buffer_byte_offsets.size() > buffers) in.fail("buffer offsets for more buffers than the step has");
    for (int released : step.release) in.index(released, values, "value");
  }
  for (const ArtifactTensor& output : artifact.outputs)
    if (!ready[size_t(in.index(output.value, values, "value"))]) in.fail("an output no step computes");
}

Artifact decode_body(const std::string& bytes, const std::string& where) {
  Reader in(bytes, kHeaderBytes, where);
  Artifact artifact;
  for (std::string* field :
       {&artifact.producer, &artifact.cpu_name, &artifact.cpu_features, &artifact.triple, &artifact.kernel_symbol})
    *field = in.text();
  for (std::vector<ArtifactTensor>* tensors : {&artifact.inputs, &artifact.outputs}) {
    tensors->resize(in.count(16));
    for (ArtifactTensor& tensor : *tensors) {
      tensor.name = in.text();
      tensor.value = int(in.i64());
    }
  }
  artifact.values.resize(in.count(25));
  for (ArtifactValue& value : artifact.values) {
    value.kind = ArtifactValue::Kind(in.u8());
    value.index = int(in.i64());
    value.dtype = read_dtype(in);
    value.shape = in.integers();
  }
  for (std::vector<std::string>* blobs : {&artifact.weights, &artifact.objects}) {
    blobs->resize(in.count(8));
    for (std::string& blob : *blobs) blob = in.text();
  }
  artifact.runtime_support = in.text();
  artifact.runtime_support_symbols.resize(in.count(8));
  for (std::string& symbol : artifact.runtime_support_symbols) symbol = in.text();
  artifact.steps.resize(in.count(64));
  for (ArtifactStep& step : artifact.steps) {
    step.output = int(in.i64());
    step.siblings = in.small_integers();
    step.inputs = in.small_integers();
    step.object = int(in.i64());
    step.work_items = in.i64();
    step.grain = in.i64();
    step.buffer_byte_offsets = in.integers();
    if (in.u8()) step.contraction = read_contraction(in);
    step.code = in.u8() != 0;
    step.code_data.resize(in.count(8));
    for (double& value : step.code_data) value = in.f64();
    step.release = in.small_integers();
    step.description = in.text();
  }
  if (!in.at_end()) in.fail("bytes after the last step");
  check_structure(artifact, in);
  return artifact;
}

}  // namespace

std::string encode_artifact(const Artifact& artifact) {
  std::string body = encode_body(artifact);
  Writer header;
  header.raw(kMagic, sizeof(kMagic));
  header.u32(kArtifactFormatVersion);
  header.u32(uint32_t(kMetajitAbiVersion));
  header.u64(body.size());
  header.u64(checksum64(body.data(), body.size()));
  return header.bytes() + body;
}

Artifact decode_artifact(const std::string& bytes, const std::string& where) {
  if (bytes.size() < sizeof(kMagic) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    throw ArtifactError(where + " is not a metajit model (an artifact written by mj.export starts with \"MJMODEL\")");
  if (bytes.size() < kHeaderBytes)
    throw ArtifactError(where + " is truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the header");
  uint32_t format, abi;
  uint64_t body_size, checksum;
  std::memcpy(&format, bytes.data() + 8, 4);
  std::memcpy(&abi, bytes.data() + 12, 4);
  std::memcpy(&body_size, bytes.data() + 16, 8);
  std::memcpy(&checksum, bytes.data() + 24, 8);
  if (format != kArtifactFormatVersion)
    throw ArtifactError(where + " has artifact format version " + std::to_string(format) +
                        "; this runtime reads version " + std::to_string(kArtifactFormatVersion) +
                        ": export the model again with this metajit");
  if (abi != uint32_t(kMetajitAbiVersion))
    throw ArtifactError(where + " holds kernels of ABI version " + std::to_string(abi) +
                        "; this runtime calls version " + std::to_string(kMetajitAbiVersion) +
                        ": export the model again with this metajit");
  if (bytes.size() - kHeaderBytes < body_size)
    throw ArtifactError(where + " is truncated: " + std::to_string(bytes.size()) + " bytes, its header says " +
                        std::to_string(kHeaderBytes + body_size));
  if (bytes.size() - kHeaderBytes > body_size)
    throw ArtifactError(where + " has " + std::to_string(bytes.size() - kHeaderBytes - body_size) +
                        " bytes after its end (two files joined, or a damaged copy)");
  if (checksum64(bytes.data() + kHeaderBytes, size_t(body_size)) != checksum)
    throw ArtifactError(where + " is corrupt or was modified: its content does not match its checksum");
  return decode_body(bytes, where);
}

std::string read_artifact_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw ArtifactError("cannot open the model " + path + ": " + std::strerror(errno));
  std::ostringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

size_t write_artifact(const std::string& path, const Artifact& artifact) {
  std::string bytes = encode_artifact(artifact);
  // Written beside the target and renamed over it: a reader never sees half an artifact.
  std::string temporary = path + ".partial";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file) throw std::runtime_error("cannot write the model " + path + ": " + std::strerror(errno));
    file.write(bytes.data(), std::streamsize(bytes.size()));
    if (!file.flush()) throw std::runtime_error("cannot write the model " + path + ": " + std::strerror(errno));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    int error = errno;
    std::remove(temporary.c_str());
    throw std::runtime_error("cannot write the model " + path + ": " + std::strerror(error));
  }
  return bytes.size();
}

}  // namespace metajit

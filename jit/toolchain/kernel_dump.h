// METAJIT_DUMP_DIR: writes each kernel this process uses (compiled, or loaded from the disk cache or a bundle)
// as <key>.cc (source with its header comment) and <key>.o, each CUDA kernel it renders as <key>.cu, and appends one JSON line per kernel to index.jsonl:
// key -> origin, kernel summary, fused ops and the user lines that created them. For reading and diffing
// generated code; never read back.
#pragma once
#include <string>

namespace metajit {

// Writes the files for `key` once per process and directory. Failures are logged, never thrown: dumping is a
// debugging aid and must not break a run.
void dump_kernel(const std::string& directory, const std::string& key, const std::string& source_with_header,
                 const std::string& object, const char* origin);

// A CUDA kernel as rendered for a plan (compiled or not: the CUDA emulator and mj.inspect render without a GPU),
// as <key>.cu plus its index.jsonl line.
void dump_cuda_kernel(const std::string& directory, const std::string& key, const std::string& source_with_header);

}  // namespace metajit

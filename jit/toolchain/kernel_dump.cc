#include "jit/toolchain/kernel_dump.h"

#include <sys/stat.h>

#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/log.h"

namespace metajit {
namespace {

bool write_file(const std::string& path, const std::string& bytes, std::ios::openmode mode = std::ios::trunc) {
  std::ofstream file(path, std::ios::binary | mode);
  file.write(bytes.data(), std::streamsize(bytes.size()));
  return bool(file);
}

// The leading "// ..." lines of a kernel: what it computes and the fused ops with their user lines.
nlohmann::json header_lines(const std::string& source) {
  nlohmann::json lines = nlohmann::json::array();
  std::istringstream stream(source);
  std::string line;
  while (std::getline(stream, line) && line.rfind("//", 0) == 0) {
    if (line.rfind("// ----", 0) == 0) break;  // the prelude starts
    size_t start = line.find_first_not_of("/ ");
    lines.push_back(start == std::string::npos ? "" : line.substr(start));
  }
  return lines;
}

}  // namespace

namespace {

std::mutex& dump_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Whether `path` is new to this process (each file is written once).
bool first_time(const std::string& path) {
  static std::set<std::string> written;
  return written.insert(path).second;
}

}  // namespace

void dump_cuda_kernel(const std::string& directory, const std::string& key, const std::string& source_with_header) {
  std::lock_guard<std::mutex> lock(dump_mutex());
  if (!first_time(directory + "/" + key + ".cu")) return;
  ::mkdir(directory.c_str(), 0755);
  nlohmann::json record = {{"key", key},
                           {"origin", "rendered for CUDA"},
                           {"description", header_lines(source_with_header)},
                           {"source", key + ".cu"}};
  bool ok = write_file(directory + "/" + key + ".cu", source_with_header) &&
            write_file(directory + "/index.jsonl", record.dump() + "\n", std::ios::app);
  if (!ok) log_warning("METAJIT_DUMP_DIR: could not write CUDA kernel " + key + " to " + directory);
}

void dump_kernel(const std::string& directory, const std::string& key, const std::string& source_with_header,
                 const std::string& object, const char* origin) {
  std::lock_guard<std::mutex> lock(dump_mutex());
  if (!first_time(directory + "/" + key)) return;
  ::mkdir(directory.c_str(), 0755);  // one level; an existing directory is fine
  nlohmann::json record = {{"key", key},
                           {"origin", origin},
                           {"description", header_lines(source_with_header)},
                           {"source", key + ".cc"},
                           {"object", key + ".o"}};
  bool ok = write_file(directory + "/" + key + ".cc", source_with_header) &&
            write_file(directory + "/" + key + ".o", object) &&
            write_file(directory + "/index.jsonl", record.dump() + "\n", std::ios::app);
  if (!ok) log_warning("METAJIT_DUMP_DIR: could not write kernel " + key + " to " + directory);
}

}  // namespace metajit

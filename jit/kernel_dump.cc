#include "jit/kernel_dump.h"

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

void dump_kernel(const std::string& directory, const std::string& key, const std::string& source_with_header,
                 const std::string& object, const char* origin) {
  static std::mutex mutex;
  static std::set<std::string> written;
  std::lock_guard<std::mutex> lock(mutex);
  if (!written.insert(directory + "/" + key).second) return;
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

// Subprocess backend (fallback and debugging): runs clang++-14 if it is on PATH, else g++, on a private
// temporary folder, and returns the object file's bytes. Slower than the in-process backend (~40-95 ms).
// Must not search system headers, leave files behind, or go through a shell.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "jit/toolchain/compiler.h"
#include "jit/toolchain/target_info.h"

extern char** environ;

namespace metajit {
namespace {

constexpr const char* kSourceName = "kernel.cc";

std::string find_in_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string folders = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= folders.size();) {
    size_t colon = folders.find(':', start);
    if (colon == std::string::npos) colon = folders.size();
    std::string folder = folders.substr(start, colon - start);
    std::string candidate = (folder.empty() ? "." : folder) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = colon + 1;
  }
  return "";
}

std::string read_file(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  std::ostringstream contents;
  contents << stream.rdbuf();
  return contents.str();
}

// Runs argv with stdin from /dev/null and stdout+stderr into `output_path`. Returns the exit status, or -1.
int run_process(const std::vector<std::string>& arguments, const std::string& output_path, std::string* failure) {
  std::vector<char*> argv;
  for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t child = 0;
  int error = posix_spawn(&child, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    *failure = "cannot start " + arguments[0] + ": " + std::strerror(error);
    return -1;
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) {
      *failure = std::string("waitpid failed: ") + std::strerror(errno);
      return -1;
    }
  }
  if (!WIFEXITED(status)) {
    *failure = arguments[0] + " was killed by signal " + std::to_string(WTERMSIG(status));
    return -1;
  }
  return WEXITSTATUS(status);
}

// A private folder under $TMPDIR (or /tmp), removed with its known files when this object dies.
class TemporaryFolder {
 public:
  TemporaryFolder() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/metajit-compile-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (!::mkdtemp(buffer.data()))
      throw CompileError("cannot create a temporary folder: " + std::string(std::strerror(errno)));
    path_ = buffer.data();
  }
  ~TemporaryFolder() {
    for (const char* name : {"kernel.cc", "kernel.o", "output.txt"}) ::unlink((path_ + "/" + name).c_str());
    ::rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string trim(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.pop_back();
  return text;
}

// Runs the compiler with one query flag and returns its trimmed output (version, include folder).
std::string query(const std::string& compiler, const std::string& flag) {
  TemporaryFolder folder;
  std::string failure;
  std::string output_path = folder.path() + "/output.txt";
  if (run_process({compiler, flag}, output_path, &failure) != 0)
    throw std::runtime_error("cannot query " + compiler + " " + flag + (failure.empty() ? "" : ": " + failure));
  return trim(read_file(output_path));
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t position = text.find(from); position != std::string::npos;
       position = text.find(from, position + to.size()))
    text.replace(position, from.size(), to);
}

class SystemCompiler final : public Compiler {
 public:
  SystemCompiler() {
    compiler_path_ = find_in_path("clang++-14");
    bool is_clang = !compiler_path_.empty();
    if (!is_clang) compiler_path_ = find_in_path("g++");
    if (compiler_path_.empty())
      throw std::runtime_error("no system C++ compiler found: looked for clang++-14 and g++ in PATH");
    initialize_native_target();

    // -ffp-contract=on, as in-process (jit/toolchain/clang_compiler.cc): recomputed values round alike everywhere.
    code_flags_ = {"-O2", "-std=c++17", "-fno-exceptions", "-fno-rtti", "-fno-math-errno", "-ffp-contract=on",
                   "-fPIC", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"};
    std::string version;
    if (is_clang) {
      version = "clang++ " + query(compiler_path_, "-dumpversion");
      target_flags_ = {"-march=" + host_cpu_name()};
      std::string features = host_cpu_features();
      for (size_t start = 0; start < features.size();) {
        size_t comma = features.find(',', start);
        if (comma == std::string::npos) comma = features.size();
        for (const std::string& part : {std::string("-Xclang"), std::string("-target-feature"), std::string("-Xclang"),
                                         features.substr(start, comma - start)})
          target_flags_.push_back(part);
        start = comma + 1;
      }
    } else {
      version = "g++ " + query(compiler_path_, "-dumpfullversion");
      // The default header search stays: generated kernels include nothing, Code ops include the C++ library.
      target_flags_ = {// GCC's CPU names differ from LLVM's, so let GCC resolve the host itself; the identity
                       // records the CPU and features LLVM resolved, which is what the cache key needs.
                       "-march=native"};
    }
    identity_ = "system " + version;
    for (const std::string& flag : code_flags_) identity_ += " " + flag;
    identity_ += " triple=" + host_triple() + " cpu=" + host_cpu_name() + " features=" + host_cpu_features();
  }

  const std::string& identity() const override { return identity_; }

  std::string compile(const std::string& source) override {
    TemporaryFolder folder;
    const std::string source_path = folder.path() + "/" + kSourceName;
    const std::string object_path = folder.path() + "/kernel.o";
    {
      std::ofstream stream(source_path, std::ios::binary);
      stream << source;
      if (!stream.flush()) throw CompileError("cannot write " + source_path);
    }
    std::vector<std::string> arguments = {compiler_path_, "-c", "-x", "c++"};
    arguments.insert(arguments.end(), code_flags_.begin(), code_flags_.end());
    arguments.insert(arguments.end(), target_flags_.begin(), target_flags_.end());
    arguments.insert(arguments.end(), {"-o", object_path, source_path});
    std::string failure;
    int status = run_process(arguments, folder.path() + "/output.txt", &failure);
    std::string diagnostics = read_file(folder.path() + "/output.txt");
    replace_all(diagnostics, source_path, kSourceName);
    if (status != 0)
      throw CompileError(diagnostics.empty() ? (failure.empty() ? "compiler failed" : failure) : diagnostics);
    std::string object = read_file(object_path);
    if (object.empty()) throw CompileError(compiler_path_ + " produced no object file\n" + diagnostics);
    return object;
  }

 private:
  std::string compiler_path_;
  std::vector<std::string> code_flags_;
  std::vector<std::string> target_flags_;
  std::string identity_;
};

}  // namespace

std::unique_ptr<Compiler> make_system_compiler() { return std::make_unique<SystemCompiler>(); }

}  // namespace metajit

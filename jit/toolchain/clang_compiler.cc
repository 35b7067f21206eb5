// In-process Clang 14 backend: builds a cc1 invocation by hand (no driver, so no -disable-free and no system
// header search), compiles the source from memory and emits the object into a memory buffer.
// Each compile owns its CompilerInstance and LLVMContext, so threads share nothing mutable. Must not write files.
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/Basic/Version.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>

#include <dirent.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <vector>

#include "core/log.h"
#include "jit/toolchain/compiler.h"
#include "jit/toolchain/target_info.h"

#ifndef METAJIT_CLANG_RESOURCE_DIR
#error "METAJIT_CLANG_RESOURCE_DIR must be defined by the build (jit/CMakeLists.txt)"
#endif

namespace metajit {
namespace {

constexpr const char* kSourceName = "kernel.cc";

// Flags that shape the generated code; they go into identity() verbatim. cc1 already defaults to no
// exceptions, no math errno and no unwind tables (the driver is what normally turns those on).
// FMA contraction only within one expression (-ffp-contract=on), never across statements: a generated kernel
// writes each op as its own statement, and a value recomputed in several loops or kernels must round the same in
// each. With "fast" the backend fused a multiply into a later subtraction in one loop and not in another, so a
// max gradient's tie mask (x == max(x)) missed the maximum and lost its gradient (tools/fuzz.py seed 71103). The
// preludes' polynomials are single expressions and keep their FMAs.
const std::vector<std::string>& code_flags() {
  static const std::vector<std::string> flags = {
      "-O2", "-std=c++17", "-fno-rtti", "-ffp-contract=on", "-mrelocation-model", "pic", "-pic-level", "2",
      "-mframe-pointer=none", "-vectorize-loops", "-vectorize-slp",
      "-fgnuc-version=4.2.1",  // as the driver passes it: glibc and libstdc++ headers expect __GNUC__
  };
  return flags;
}

bool is_directory(const std::string& path) {
  struct stat status;
  return ::stat(path.c_str(), &status) == 0 && S_ISDIR(status.st_mode);
}

// The newest libstdc++ header directory (/usr/include/c++/N), or "" when none is installed. Generated kernels
// need none; Code ops include <cmath> and friends, as a Jittor user expects.
std::string standard_library_version() {
  std::string best;
  DIR* directory = ::opendir("/usr/include/c++");
  if (!directory) return best;
  while (dirent* entry = ::readdir(directory)) {
    std::string name = entry->d_name;
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    if (!is_directory("/usr/include/c++/" + name + "/bits")) continue;
    if (best.empty() || std::atoi(name.c_str()) > std::atoi(best.c_str())) best = name;
  }
  ::closedir(directory);
  return best;
}

class ClangCompiler final : public Compiler {
 public:
  ClangCompiler() {
    initialize_native_target();
    arguments_ = {"-triple", host_triple(), "-emit-obj"};
    arguments_.insert(arguments_.end(), code_flags().begin(), code_flags().end());
    // Speed only (the driver adds these in release builds too); no effect on the object.
    for (const char* flag : {"-disable-llvm-verifier", "-discard-value-names"}) arguments_.push_back(flag);
    // Generated kernels carry their own prelude and include nothing. Code ops may include the C++ and C
    // libraries, so the search path is the one the clang driver would build, given explicitly in its order
    // (cc1 adds no defaults of its own here).
    for (const char* flag : {"-nostdsysteminc", "-nostdinc++", "-nobuiltininc"}) arguments_.push_back(flag);
    arguments_.push_back("-resource-dir");
    arguments_.push_back(METAJIT_CLANG_RESOURCE_DIR);
    std::string library = standard_library_version();
    std::string multiarch = host_triple().substr(0, host_triple().find('-')) + "-linux-gnu";
    std::vector<std::pair<const char*, std::string>> search;
    if (!library.empty()) {
      search.push_back({"-internal-isystem", "/usr/include/c++/" + library});
      search.push_back({"-internal-isystem", "/usr/include/" + multiarch + "/c++/" + library});
      search.push_back({"-internal-isystem", "/usr/include/c++/" + library + "/backward"});
    }
    search.push_back({"-internal-isystem", std::string(METAJIT_CLANG_RESOURCE_DIR) + "/include"});
    search.push_back({"-internal-isystem", "/usr/local/include"});
    search.push_back({"-internal-externc-isystem", "/usr/include/" + multiarch});
    search.push_back({"-internal-externc-isystem", "/usr/include"});
    for (const auto& [flag, path] : search) {
      if (!is_directory(path)) continue;
      arguments_.push_back(flag);
      arguments_.push_back(path);
    }
    arguments_.push_back("-target-cpu");
    arguments_.push_back(host_cpu_name());
    std::string features = host_cpu_feature_differences();  // the same feature set as host_cpu_features()
    for (size_t start = 0; start < features.size();) {
      size_t comma = features.find(',', start);
      if (comma == std::string::npos) comma = features.size();
      arguments_.push_back("-target-feature");
      arguments_.push_back(features.substr(start, comma - start));
      start = comma + 1;
    }
    // LLVM keeps to 256-bit vectors on AVX-512 hosts unless told otherwise; kernels that compute (exp, divide)
    // run about 1.4x faster with 512-bit ones, and memory-bound ones do not care.
    std::string vector_width = host_cpu_features().find("+avx512f") != std::string::npos ? "-mprefer-vector-width=512" : "";
    if (!vector_width.empty()) arguments_.push_back(vector_width);
    arguments_.push_back("-x");
    arguments_.push_back("c++");
    arguments_.push_back(kSourceName);

    identity_ = std::string("clang-inprocess ") + CLANG_VERSION_STRING;
    for (const std::string& flag : code_flags()) identity_ += " " + flag;
    if (!vector_width.empty()) identity_ += " " + vector_width;
    identity_ += " triple=" + host_triple() + " cpu=" + host_cpu_name() + " features=" + host_cpu_features();
    identity_ += " libstdc++=" + (library.empty() ? std::string("none") : library);
  }

  const std::string& identity() const override { return identity_; }

  std::string compile(const std::string& source) override {
    std::string diagnostics;
    llvm::raw_string_ostream diagnostics_stream(diagnostics);
    llvm::IntrusiveRefCntPtr<clang::DiagnosticOptions> diagnostic_options(new clang::DiagnosticOptions());
    diagnostic_options->ShowColors = false;
    diagnostic_options->ShowPresumedLoc = true;  // honour #line: Code op errors point into the user's source
    clang::TextDiagnosticPrinter printer(diagnostics_stream, diagnostic_options.get());

    auto invocation = std::make_shared<clang::CompilerInvocation>();
    {
      std::vector<const char*> argument_pointers;
      for (const std::string& argument : arguments_) argument_pointers.push_back(argument.c_str());
      clang::DiagnosticsEngine argument_diagnostics(
          llvm::IntrusiveRefCntPtr<clang::DiagnosticIDs>(new clang::DiagnosticIDs()), diagnostic_options, &printer,
          /*ShouldOwnClient=*/false);
      if (!clang::CompilerInvocation::CreateFromArgs(*invocation, argument_pointers, argument_diagnostics)) {
        diagnostics_stream.flush();
        throw CompileError("internal error: clang rejected metajit's compiler arguments:\n" + diagnostics);
      }
    }
    invocation->getFrontendOpts().DisableFree = false;  // otherwise every compile leaks its AST and module
    invocation->getCodeGenOpts().DisableFree = false;
    // The preprocessor takes ownership of the remapped buffer (RetainRemappedFileBuffers is false).
    invocation->getPreprocessorOpts().addRemappedFile(
        kSourceName, llvm::MemoryBuffer::getMemBufferCopy(source, kSourceName).release());

    clang::CompilerInstance instance;
    instance.setInvocation(std::move(invocation));
    instance.createDiagnostics(&printer, /*ShouldOwnClient=*/false);
    instance.setVerboseOutputStream(llvm::nulls());  // "N errors generated." would otherwise go to stderr
    llvm::SmallVector<char, 0> object;
    instance.setOutputStream(std::make_unique<llvm::raw_svector_ostream>(object));
    clang::EmitObjAction action;  // owns its own LLVMContext
    bool succeeded = instance.ExecuteAction(action);
    diagnostics_stream.flush();
    if (!succeeded || instance.getDiagnostics().hasErrorOccurred() || object.empty())
      throw CompileError(diagnostics.empty() ? std::string("clang failed without diagnostics") : diagnostics);
    if (!diagnostics.empty() && log_enabled(LogLevel::Info))
      log_message(LogLevel::Info, "clang warnings for kernel:\n" + diagnostics);
    return std::string(object.data(), object.size());
  }

 private:
  std::vector<std::string> arguments_;
  std::string identity_;
};

}  // namespace

std::unique_ptr<Compiler> make_clang_compiler() { return std::make_unique<ClangCompiler>(); }

}  // namespace metajit

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

#include <vector>

#include "core/log.h"
#include "jit/compiler.h"
#include "jit/target_info.h"

#ifndef METAJIT_CLANG_RESOURCE_DIR
#error "METAJIT_CLANG_RESOURCE_DIR must be defined by the build (jit/CMakeLists.txt)"
#endif

namespace metajit {
namespace {

constexpr const char* kSourceName = "kernel.cc";

// Flags that shape the generated code; they go into identity() verbatim. cc1 already defaults to no
// exceptions, no math errno and no unwind tables (the driver is what normally turns those on).
const std::vector<std::string>& code_flags() {
  static const std::vector<std::string> flags = {
      "-O2", "-std=c++17", "-fno-rtti", "-ffp-contract=fast", "-mrelocation-model", "pic", "-pic-level", "2",
      "-mframe-pointer=none", "-vectorize-loops", "-vectorize-slp",
  };
  return flags;
}

class ClangCompiler final : public Compiler {
 public:
  ClangCompiler() {
    initialize_native_target();
    arguments_ = {"-triple", host_triple(), "-emit-obj"};
    arguments_.insert(arguments_.end(), code_flags().begin(), code_flags().end());
    // Speed only (the driver adds these in release builds too); no effect on the object.
    for (const char* flag : {"-disable-llvm-verifier", "-discard-value-names"}) arguments_.push_back(flag);
    // Kernels carry their own prelude: never search system or C++ library headers. Clang's builtin headers
    // (resource dir: immintrin.h, stddef.h) stay reachable.
    for (const char* flag : {"-nostdsysteminc", "-nostdinc++"}) arguments_.push_back(flag);
    arguments_.push_back("-resource-dir");
    arguments_.push_back(METAJIT_CLANG_RESOURCE_DIR);
    arguments_.push_back("-target-cpu");
    arguments_.push_back(host_cpu_name());
    std::string features = host_cpu_features();
    for (size_t start = 0; start < features.size();) {
      size_t comma = features.find(',', start);
      if (comma == std::string::npos) comma = features.size();
      arguments_.push_back("-target-feature");
      arguments_.push_back(features.substr(start, comma - start));
      start = comma + 1;
    }
    arguments_.push_back("-x");
    arguments_.push_back("c++");
    arguments_.push_back(kSourceName);

    identity_ = std::string("clang-inprocess ") + CLANG_VERSION_STRING;
    for (const std::string& flag : code_flags()) identity_ += " " + flag;
    identity_ += " triple=" + host_triple() + " cpu=" + host_cpu_name() + " features=" + features;
  }

  const std::string& identity() const override { return identity_; }

  std::string compile(const std::string& source) override {
    std::string diagnostics;
    llvm::raw_string_ostream diagnostics_stream(diagnostics);
    llvm::IntrusiveRefCntPtr<clang::DiagnosticOptions> diagnostic_options(new clang::DiagnosticOptions());
    diagnostic_options->ShowColors = false;
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

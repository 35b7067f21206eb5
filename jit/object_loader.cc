// One process-wide LLJIT (RuntimeDyld object layer) plus a "<process>" JITDylib that resolves symbols from the
// running process. Each load gets its own bare JITDylib linked against it. Objects are sanity-checked before
// RuntimeDyld sees them, because RuntimeDyld reaches llvm_unreachable on relocation types it doesn't implement.
// Must not let an llvm::Error go unconsumed, and must not destroy the JIT (kernels may run until exit).
#include "jit/object_loader.h"

#include <llvm/ADT/Triple.h>
#include <llvm/BinaryFormat/ELF.h>
#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Object/ELF.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>

#include <cstring>
#include <mutex>
#include <stdexcept>

#include "jit/target_info.h"

namespace metajit {
namespace {

// Relocations that clang emits for PIC, non-TLS x86-64 code and that RuntimeDyldELF implements.
bool supported_x86_64_relocation(uint32_t type) {
  using namespace llvm::ELF;
  switch (type) {
    case R_X86_64_NONE: case R_X86_64_64: case R_X86_64_PC32: case R_X86_64_PLT32: case R_X86_64_GOTPCREL:
    case R_X86_64_32: case R_X86_64_32S: case R_X86_64_PC64: case R_X86_64_GOTOFF64: case R_X86_64_GOTPC32:
    case R_X86_64_GOTPCRELX: case R_X86_64_REX_GOTPCRELX:
      return true;
    default:
      return false;
  }
}

// Empty string when the bytes look like a loadable relocatable ELF object for this host; else the reason.
std::string check_object(const std::string& bytes) {
  if (bytes.size() < 4 || std::memcmp(bytes.data(), "\x7f" "ELF", 4) != 0) return "not an ELF file";
  llvm::Triple host(host_triple());
  if (host.getArch() != llvm::Triple::x86_64 || !host.isOSBinFormatELF()) return "";  // checks below are x86-64 only
  auto file = llvm::object::ELF64LEFile::create(llvm::StringRef(bytes.data(), bytes.size()));
  if (!file) return "malformed ELF: " + llvm::toString(file.takeError());
  if (bytes.size() < sizeof(llvm::object::ELF64LE::Ehdr) ||
      file->getHeader().e_ident[llvm::ELF::EI_CLASS] != llvm::ELF::ELFCLASS64)
    return "not a 64-bit ELF file";
  if (file->getHeader().e_machine != llvm::ELF::EM_X86_64) return "ELF object is not for x86-64";
  if (file->getHeader().e_type != llvm::ELF::ET_REL) return "ELF file is not a relocatable object (ET_REL)";
  auto sections = file->sections();
  if (!sections) return "malformed ELF sections: " + llvm::toString(sections.takeError());
  for (const auto& section : *sections) {
    if (section.sh_type == llvm::ELF::SHT_REL) return "SHT_REL relocation sections are not expected on x86-64";
    if (section.sh_type != llvm::ELF::SHT_RELA) continue;
    auto relocations = file->relas(section);
    if (!relocations) return "malformed relocation section: " + llvm::toString(relocations.takeError());
    for (const auto& relocation : *relocations) {
      uint32_t type = relocation.getType(/*isMips64EL=*/false);
      if (!supported_x86_64_relocation(type))
        return "unsupported relocation type " + std::to_string(type) + " (thread-local storage or non-PIC code?)";
    }
  }
  return "";
}

}  // namespace

struct ObjectLoader::Implementation {
  std::mutex mutex;                       // one load at a time: loads are rare and ~tens of microseconds
  std::unique_ptr<llvm::orc::LLJIT> jit;  // null when the JIT could not start (start_error says why)
  std::string start_error;
  llvm::orc::JITDylib* process_symbols = nullptr;
  std::string session_errors;  // filled by the session's error reporter during a load (mutex held)
  uint64_t loads = 0;
};

ObjectLoader& ObjectLoader::instance() {
  static ObjectLoader* loader = new ObjectLoader();  // intentionally leaked: kernels may run during exit
  return *loader;
}

ObjectLoader::ObjectLoader() : implementation_(std::make_unique<Implementation>()) {
  initialize_native_target();
  Implementation& state = *implementation_;
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) {
    state.start_error = llvm::toString(jit.takeError());
    return;
  }
  state.jit = std::move(*jit);
  llvm::orc::ExecutionSession& session = state.jit->getExecutionSession();
  Implementation* raw_state = &state;
  // Materialization runs in the loading thread (no compile threads), so this fires under our mutex.
  session.setErrorReporter([raw_state](llvm::Error error) {
    raw_state->session_errors += (raw_state->session_errors.empty() ? "" : "; ") + llvm::toString(std::move(error));
  });
  auto generator = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      state.jit->getDataLayout().getGlobalPrefix());
  if (!generator) {
    state.start_error = "cannot search the host process for symbols: " + llvm::toString(generator.takeError());
    state.jit.reset();
    return;
  }
  state.process_symbols = &session.createBareJITDylib("<process>");
  state.process_symbols->addGenerator(std::move(*generator));
}

ObjectLoader::~ObjectLoader() = default;

void* ObjectLoader::load(const std::string& object_bytes, const std::string& symbol) {
  Implementation& state = *implementation_;
  std::lock_guard<std::mutex> lock(state.mutex);
  if (!state.jit)
    throw std::runtime_error("cannot load kernel: the LLVM ORC JIT failed to start: " + state.start_error);
  std::string problem = check_object(object_bytes);
  if (!problem.empty()) throw std::runtime_error("cannot load kernel object: " + problem);

  llvm::orc::ExecutionSession& session = state.jit->getExecutionSession();
  std::string name = "metajit_kernel_object_" + std::to_string(state.loads++);
  llvm::orc::JITDylib& library = session.createBareJITDylib(name);
  library.addToLinkOrder(*state.process_symbols);
  state.session_errors.clear();

  auto fail = [&](llvm::Error error) -> std::runtime_error {
    std::string message = "cannot load kernel object (symbol '" + symbol + "'): " + llvm::toString(std::move(error));
    if (!state.session_errors.empty()) message += " [" + state.session_errors + "]";
    llvm::consumeError(session.removeJITDylib(library));
    return std::runtime_error(message);
  };
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(object_bytes, name);
  if (llvm::Error error = state.jit->addObjectFile(library, std::move(buffer))) throw fail(std::move(error));
  auto address = state.jit->lookup(library, symbol);
  if (!address) throw fail(address.takeError());
  if (!state.session_errors.empty())  // materialized, but something was reported on the way
    throw fail(llvm::make_error<llvm::StringError>("the JIT reported errors", llvm::inconvertibleErrorCode()));
  return reinterpret_cast<void*>(static_cast<uintptr_t>(address->getAddress()));
}

}  // namespace metajit

// Links kernel objects into this process. Our own small linker (jit/toolchain/elf_linker) takes the objects it
// understands in a few microseconds; everything else goes to LLVM's RuntimeDyld (the linker under ORC's object
// layer, used directly: ORC's sessions and lookups cost tens of microseconds per kernel, most of a warm
// disk-cache load). Each object is linked on its own, so every kernel may export the same symbol. Objects are
// sanity-checked first, because RuntimeDyld reaches llvm_unreachable on relocation types it doesn't
// implement. Must not let an llvm::Error go unconsumed.
#include "jit/toolchain/object_loader.h"

#include <llvm/ADT/Triple.h>
#include <llvm/BinaryFormat/ELF.h>
#include <llvm/ExecutionEngine/RTDyldMemoryManager.h>
#include <llvm/ExecutionEngine/RuntimeDyld.h>
#include <llvm/Object/ELF.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/Error.h>
#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "core/log.h"
#include "jit/loader/elf_linker.h"
#include "jit/loader/executable_memory.h"
#include "jit/toolchain/target_info.h"

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

// RuntimeDyld's memory manager for the objects the fast linker declines: regions from the shared arena (sizes
// come up front from reserveAllocationSpace), then code made read+execute and constants read-only.
class ArenaMemoryManager final : public llvm::RTDyldMemoryManager {
 public:
  ArenaMemoryManager(ExecutableArena& arena, ExternalResolver resolve) : arena_(arena), resolve_(std::move(resolve)) {}

  bool needsToReserveAllocationSpace() override { return true; }
  void reserveAllocationSpace(uintptr_t code_size, uint32_t code_align, uintptr_t read_only_size,
                              uint32_t read_only_align, uintptr_t read_write_size, uint32_t read_write_align) override {
    ExecutableArena::Regions regions = arena_.take_together(code_size + code_align, read_only_size + read_only_align,
                                                            read_write_size + read_write_align);
    code_ = regions.code;
    read_only_ = regions.read_only;
    read_write_ = regions.read_write;
  }
  uint8_t* allocateCodeSection(uintptr_t size, unsigned alignment, unsigned, llvm::StringRef) override {
    return code_.carve(size, alignment);  // nullptr (RuntimeDyld reports it) if no reservation came first
  }
  uint8_t* allocateDataSection(uintptr_t size, unsigned alignment, unsigned, llvm::StringRef,
                               bool read_only) override {
    return (read_only ? read_only_ : read_write_).carve(size, alignment);
  }
  bool finalizeMemory(std::string* error_message) override {
    std::string problem = ExecutableArena::protect(code_, Protection::ReadExecute);
    if (problem.empty()) problem = ExecutableArena::protect(read_only_, Protection::ReadOnly);
    code_ = read_only_ = read_write_ = MemoryRegion{};  // a later object never writes into protected pages
    if (!problem.empty() && error_message) *error_message = problem;
    return !problem.empty();
  }
  uint64_t getSymbolAddress(const std::string& name) override { return resolve_(name); }

 private:
  ExecutableArena& arena_;
  ExternalResolver resolve_;
  MemoryRegion code_, read_only_, read_write_;
};

}  // namespace

struct ObjectLoader::Implementation {
  std::mutex mutex;  // one load at a time: the arena and the symbol map are not thread-safe
  ExecutableArena arena;
  std::unordered_map<std::string, uint64_t> host_symbols;
  ExternalResolver resolve = [this](const std::string& name) -> uint64_t {
    auto found = host_symbols.find(name);
    if (found != host_symbols.end()) return found->second;
    uint64_t address = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, name.c_str()));
    if (address) host_symbols.emplace(name, address);
    return address;
  };
  ArenaMemoryManager memory{arena, resolve};
};

ObjectLoader& ObjectLoader::instance() {
  static ObjectLoader* loader = new ObjectLoader();  // intentionally leaked: kernels may run during exit
  return *loader;
}

ObjectLoader::ObjectLoader() : implementation_(std::make_unique<Implementation>()) { initialize_native_target(); }

ObjectLoader::~ObjectLoader() = default;

void ObjectLoader::define_symbol(const std::string& name, void* address) {
  std::lock_guard<std::mutex> lock(implementation_->mutex);
  implementation_->host_symbols[name] = reinterpret_cast<uintptr_t>(address);
}

bool ObjectLoader::defines(const std::string& name) {
  std::lock_guard<std::mutex> lock(implementation_->mutex);
  return implementation_->host_symbols.count(name) != 0;
}

void* ObjectLoader::load(const std::string& object_bytes, const std::string& symbol, LinkPath* used,
                         LinkPath prefer) {
  std::string problem = check_object(object_bytes);
  if (!problem.empty()) throw std::runtime_error("cannot load kernel object: " + problem);
  Implementation& state = *implementation_;
  std::lock_guard<std::mutex> lock(state.mutex);
  std::string unsupported;
  if (prefer == LinkPath::Fast) {
    if (void* address = link_elf_object(object_bytes, symbol, state.arena, state.resolve, &unsupported)) {
      if (used) *used = LinkPath::Fast;
      return address;
    }
    if (log_enabled(LogLevel::Debug))
      log_message(LogLevel::Debug, "kernel object linked by RuntimeDyld: the fast linker declined (" + unsupported + ")");
  }

  auto object = llvm::object::ObjectFile::createObjectFile(
      llvm::MemoryBufferRef(llvm::StringRef(object_bytes.data(), object_bytes.size()), "metajit kernel"));
  if (!object) throw std::runtime_error("cannot load kernel object: " + llvm::toString(object.takeError()));
  auto fail = [&](const std::string& what) {
    return std::runtime_error("cannot load kernel object (symbol '" + symbol + "'): " + what);
  };
  // The RuntimeDyld is only needed while linking: the memory it filled belongs to the arena.
  llvm::RuntimeDyld linker(state.memory, state.memory);
  std::unique_ptr<llvm::RuntimeDyld::LoadedObjectInfo> loaded = linker.loadObject(**object);
  if (linker.hasError()) throw fail(linker.getErrorString().str());
  linker.resolveRelocations();
  if (linker.hasError()) throw fail(linker.getErrorString().str());
  linker.registerEHFrames();  // lets unwinders walk through kernel frames
  llvm::JITEvaluatedSymbol address = linker.getSymbol(symbol);
  std::string finalize_error;
  if (state.memory.finalizeMemory(&finalize_error)) throw fail(finalize_error);
  if (!address || address.getAddress() == 0) throw fail("the object does not define it");
  for (const llvm::object::SectionRef& section : (*object)->sections()) {  // static constructors, as the fast path
    llvm::Expected<llvm::StringRef> name = section.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (*name != ".init_array" || !loaded) continue;
    auto* functions = reinterpret_cast<void (**)()>(static_cast<uintptr_t>(loaded->getSectionLoadAddress(section)));
    for (uint64_t entry = 0; functions && entry < section.getSize() / sizeof(void*); ++entry) functions[entry]();
  }
  if (used) *used = LinkPath::RuntimeDyld;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(address.getAddress()));
}

}  // namespace metajit

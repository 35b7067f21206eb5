// A small, fast linker for the objects our own compilers produce: x86-64 ELF relocatable objects with code,
// constants and data, the common PIC relocations, and calls into the host process (libm, memcpy) through
// 16-byte jump stubs; static constructors (.init_array) run once after linking, destructors never (kernels
// live until exit). It links a kernel in a few microseconds, where RuntimeDyld takes tens. Anything it does not
// handle (unwind tables, thread-locals, unusual relocations) is reported as unsupported and the caller hands
// the object to RuntimeDyld instead; it never guesses.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "jit/loader/executable_memory.h"

namespace metajit {

// Resolves an undefined symbol of the object to an address in this process; 0 when there is none.
using ExternalResolver = std::function<uint64_t(const std::string& name)>;

// Links `object_bytes` into memory from `arena` and returns the address of the global symbol `symbol`.
// Returns nullptr and sets *unsupported to the reason when the object needs something this linker does not do
// (including a missing symbol or an unresolvable reference: RuntimeDyld then reports those in its words).
void* link_elf_object(const std::string& object_bytes, const std::string& symbol, ExecutableArena& arena,
                      const ExternalResolver& resolve_external, std::string* unsupported);

}  // namespace metajit

// Links an artifact's compiled kernels into this process with the fast ELF linker (jit/loader/elf_linker.h), no
// LLVM: the runtime support object first (when a kernel calls into it), its helpers' addresses then resolving
// the kernels' references to them, everything else resolving against the process (libm, memcpy). Linked code
// stays until the process exits, as the JIT's does. This file must not run a kernel or know what one computes.
#pragma once
#include <string>
#include <vector>

#include "jit/loader/kernel_abi.h"
#include "runtime/artifact.h"

namespace metajit {

// One function per artifact object, in order. Throws ArtifactError naming `where` when an object cannot be
// linked (malformed, or needing a relocation the fast linker does not do).
std::vector<KernelFunction> link_artifact_kernels(const Artifact& artifact, const std::string& where);

}  // namespace metajit

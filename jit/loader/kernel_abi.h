// How a loaded kernel is called: its one function's signature and the version of that calling convention and of
// what kernel entries carry. Cache keys and exported artifacts carry the version, so a change here makes old
// entries miss and old artifacts be refused instead of being called wrongly. This file must not load anything.
#pragma once
#include <cstdint>

namespace metajit {

// buffers: the kernel's outputs then inputs (and a Code op's data); [begin, end): the share of its outer loop's
// iterations this call runs.
using KernelFunction = void (*)(void* const* buffers, int64_t begin, int64_t end);

constexpr int kMetajitAbiVersion = 2;  // 2: entries carry their source (jit/toolchain/kernel_entry.h)

}  // namespace metajit

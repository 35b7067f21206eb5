// Buffers for oneDNN calls from metajit's caching allocator, and copies of input tensors in oneDNN's blocked
// layouts kept for the rest of a plan run (see LibraryRunScope in jit/contraction.h). A convolution's input is
// reordered by its forward call and read again, in the same layout, by its weight-gradient call; the output
// gradient is read by both backward calls. Without the cache each reorder ran twice.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "core/storage.h"

namespace metajit {

// Memory for `desc` from the caching allocator; `owners` keeps it alive (a training step asks for the same
// sizes every time, so this stops oneDNN's own allocations from faulting fresh pages in on every call).
dnnl::memory scratch_memory(const dnnl::memory::desc& desc, const dnnl::engine& engine, std::vector<StoragePtr>& owners);

// oneDNN's scratchpad for one call: one buffer per thread, grown to the largest call's need and reused by every
// call of the run (handed back at its end). Scratchpads are large and short-lived (a Winograd weight gradient of
// 512x512 channels asks for 128 MB): from the caching allocator, each size stayed cached after its one call.
dnnl::memory scratchpad_memory(const dnnl::memory::desc& desc, const dnnl::engine& engine);

// `user` in the layout `library`: the copy an earlier call of this plan run made, or reordered now on `stream`
// (and kept, within a budget). `owners` keeps an uncached copy alive.
dnnl::memory reordered_input(const dnnl::memory& user, const dnnl::memory::desc& library, dnnl::stream& stream,
                             std::vector<StoragePtr>& owners);

// A call is about to write [address, address + bytes): copies made from there would be stale.
void forget_copies_within(const void* address, size_t bytes);

// Drops every kept copy and the scratchpad (the end of a plan run).
void drop_layout_copies();

}  // namespace metajit

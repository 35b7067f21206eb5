// Buffers for oneDNN calls from metajit's caching allocator, and copies of input tensors in oneDNN's blocked
// layouts kept for the rest of a plan run (see LibraryRunScope in jit/library_call/contraction.h). A convolution's
// input is reordered by its forward call and read again, in the same layout, by its weight-gradient call; the output
// gradient is read by both backward calls. Without the cache each reorder ran twice.
// A convolution's weights are kept longer: for as long as their buffer lives, across plan runs.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "core/storage.h"

namespace metajit {

// Memory for `desc` from the caching allocator; `owners` keeps it alive (a training step asks for the same
// sizes every time, so this stops oneDNN's own allocations from faulting fresh pages in on every call).
dnnl::memory scratch_memory(const dnnl::memory::desc& desc, const dnnl::engine& engine,
                            std::vector<StoragePtr>& owners);

// oneDNN's scratchpad for one call: one buffer per thread, grown to the largest call's need and reused by every
// call of the run (handed back at its end). Scratchpads are large and short-lived (a Winograd weight gradient of
// 512x512 channels asks for 128 MB): from the caching allocator, each size stayed cached after its one call.
dnnl::memory scratchpad_memory(const dnnl::memory::desc& desc, const dnnl::engine& engine);

// `user` in the layout `library`: the copy an earlier call of this plan run made, or reordered now on `stream`
// (and kept, within a budget). `owners` keeps an uncached copy alive.
dnnl::memory reordered_input(const dnnl::memory& user, const dnnl::memory::desc& library, dnnl::stream& stream,
                             std::vector<StoragePtr>& owners);

// `user`, a convolution's weights, in the layout `library`, kept across plan runs for as long as the buffer
// holding them lives: a model run again and again on the same weights (inference) copies each layer's weights
// once, not on every run. A buffer's value never changes while it lives (core/storage.h); when it dies the copy
// goes too (forget_weight_copies_within, the host-buffer-freed hook). At most 512 MiB of them are kept,
// the least recently read going first.
dnnl::memory reordered_weights(const dnnl::memory& user, const dnnl::memory::desc& library, dnnl::stream& stream,
                               std::vector<StoragePtr>& owners);

// How many times calls of this plan run have asked about the tensor at `address`, this call included. A call
// that reads an operand in a slow layout copies it only from its second read on, when the copy (kept for the run)
// pays for itself: an RNN reads its recurrent weight at every step, a Linear layer once.
int reads_in_run(const void* address);

// A call is about to write [address, address + bytes): copies made from there would be stale.
void forget_copies_within(const void* address, size_t bytes);

// The buffer at [address, address + bytes) was freed: its weight copies go (any thread).
void forget_weight_copies_within(const void* address, size_t bytes);

// Drops every kept weight copy (mj.gc()).
void drop_weight_copies();

// Drops every kept copy and the scratchpad (the end of a plan run).
void drop_layout_copies();

}  // namespace metajit

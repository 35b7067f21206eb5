// One library call for every contraction that differs only in where its tensors are: a contraction reading x[i]
// inside a loop (an RNN cell stepping through its input sequence) differs from step to step in the constant parts
// of its indices, and the same product fused into kernels with other inputs differs in its buffers' numbers. A
// backend that caches calls by the contraction's description made one (with its oneDNN primitive) for each: 0.7 ms
// of primitive creation per step for a [4, 16] x [16, 128] product, and a cache that grew with every step. The
// canonical form numbers the tensors 0, 1, 2, ... in order (output, left, right, post-op operands) and moves the
// constants of unguarded indices into the tensors' base addresses; a call made for it runs behind a thin wrapper
// that hands it the real buffers at their offsets. Library-independent; this file must not know any backend.
#pragma once
#include <memory>
#include <vector>

#include "jit/library_call/contraction.h"

namespace metajit {

struct CanonicalContraction {
  Contraction contraction;  // tensors numbered 0, 1, ...; the constants of unguarded indices zeroed
  // Per canonical buffer: the kernel buffer it is and the elements added to that buffer's address. A tensor whose
  // offset would be negative keeps its constants (its base address stays its buffer's start).
  struct Slot {
    int buffer = 0;
    int64_t offset = 0;
  };
  std::vector<Slot> slots;
  bool identity() const;  // slot k is buffer k at offset 0: the call needs no wrapper
};

// Accesses to the same buffer at the same offset share a slot, so a backend still sees which tensors are one.
// Buffer -1 (a value the planner would first store) stays -1.
CanonicalContraction canonical_contraction(const Contraction& contraction);

// `call`, made for `canonical.contraction`, as a call of the original contraction; null for a null call.
std::shared_ptr<const LibraryCall> call_with_slots(std::shared_ptr<const LibraryCall> call,
                                                   const CanonicalContraction& canonical, int element_bytes);

}  // namespace metajit

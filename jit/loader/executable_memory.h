// Memory for linked kernels: large read-write arenas carved into whole-page regions. A region is filled while
// read-write, then made read+execute (code) or read-only (constants) with one mprotect. Each final protection
// has its own arenas, so the regions of consecutive kernels are adjacent pages with equal protection, which
// Linux merges into one mapping: a process may load hundreds of thousands of kernels without reaching the
// per-process mapping limit (vm.max_map_count, 65,530), where alternating code/constant pages cost two
// mappings per kernel. Memory is never returned: loaded kernels live until the process exits. Not thread-safe
// (the object loader serialises use).
//
// Every arena lies inside one reserved span of address space (kSpanBytes), and a kernel's three regions are
// taken together from one span: code reaches its constants with 32-bit relative offsets, which must stay
// within +-2 GiB. Separate mmaps gave no such bound: after the CUDA driver had reserved its large address
// ranges, a code arena and a constant arena could land far apart, and the kernel crashed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace metajit {

struct MemoryRegion {
  uint8_t* start = nullptr;
  size_t capacity = 0;  // whole pages
  size_t used = 0;

  // The next `size` bytes at `alignment`, or nullptr when the region is too small.
  uint8_t* carve(size_t size, size_t alignment);
};

enum class Protection { ReadExecute, ReadOnly, ReadWrite };

class ExecutableArena {
 public:
  // A fresh region of at least `bytes` (rounded up to pages) that will end up with protection `final`; empty
  // for 0 bytes. Throws std::runtime_error when the system refuses memory.
  MemoryRegion take(size_t bytes, Protection final);
  // One region per protection (code, constants, writable data; sizes in bytes, 0 for none), all from the same
  // reserved span, so any two addresses in them are less than kSpanBytes apart.
  struct Regions {
    MemoryRegion code, read_only, read_write;
  };
  Regions take_together(size_t code_bytes, size_t read_only_bytes, size_t read_write_bytes);
  // Empty string on success, else the reason. An empty region, or ReadWrite, is a no-op.
  static std::string protect(const MemoryRegion& region, Protection protection);

 private:
  static constexpr size_t kArenaBytes = size_t(4) << 20;
  static constexpr size_t kSpanBytes = size_t(1) << 30;  // address space only: pages are mapped as arenas start
  struct Arena {
    uint8_t* start = nullptr;
    size_t size = 0, used = 0;
  };
  size_t pages(size_t bytes) const;
  // Whole-page bytes a take of `size` needs from the span beyond what its arena has left.
  size_t span_bytes_needed(size_t size, Protection final) const;
  void start_new_span();
  Arena arenas_[3];  // indexed by Protection
  uint8_t* span_ = nullptr;
  size_t span_used_ = 0;
};

}  // namespace metajit

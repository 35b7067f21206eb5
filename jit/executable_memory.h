// Memory for linked kernels: large read-write arenas carved into whole-page regions. A region is filled while
// read-write, then made read+execute (code) or read-only (constants) with one mprotect. Memory is never
// returned: loaded kernels live until the process exits. Not thread-safe (the object loader serialises use).
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

enum class Protection { ReadExecute, ReadOnly };

class ExecutableArena {
 public:
  // A fresh region of at least `bytes` (rounded up to pages); empty for 0 bytes. Throws std::runtime_error
  // when the system refuses memory.
  MemoryRegion take(size_t bytes);
  // Empty string on success, else the reason. An empty region is a no-op.
  static std::string protect(const MemoryRegion& region, Protection protection);

 private:
  static constexpr size_t kArenaBytes = size_t(4) << 20;
  uint8_t* arena_ = nullptr;
  size_t arena_size_ = 0, arena_used_ = 0;
};

}  // namespace metajit

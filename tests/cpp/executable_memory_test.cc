// Tests for the kernel memory arenas (jit/loader/executable_memory.h): a kernel's code, constants and data regions
// stay within one reserved span, however the rest of the process maps memory in between, because code reaches its
// constants with 32-bit relative offsets.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "jit/loader/executable_memory.h"

namespace metajit {
namespace {

uintptr_t address(const MemoryRegion& region) { return reinterpret_cast<uintptr_t>(region.start); }

// The largest distance between the ends of the non-empty regions.
uint64_t spread(const ExecutableArena::Regions& regions) {
  uintptr_t low = UINTPTR_MAX, high = 0;
  for (const MemoryRegion* region : {&regions.code, &regions.read_only, &regions.read_write}) {
    if (!region->start) continue;
    low = std::min(low, address(*region));
    high = std::max(high, address(*region) + region->capacity);
  }
  return high - low;
}

TEST(ExecutableArena, RegionsOfOneKernelStayWithinOneGibibyteWhileOtherMappingsComeBetween) {
  ExecutableArena arena;
  std::vector<std::pair<void*, size_t>> others;
  // Each round fills the arenas past their 4 MiB and maps 3 GiB of (untouched) address space elsewhere, as the
  // CUDA driver does; the second half of the rounds also crosses into new spans.
  for (int round = 0; round < 300; ++round) {
    ExecutableArena::Regions regions = arena.take_together(3 << 20, 2 << 20, round % 3 == 0 ? 4096 : 0);
    ASSERT_NE(regions.code.start, nullptr);
    ASSERT_NE(regions.read_only.start, nullptr);
    EXPECT_EQ(regions.read_write.start == nullptr, round % 3 != 0);
    EXPECT_LT(spread(regions), uint64_t(1) << 30) << "round " << round;
    regions.code.start[regions.code.capacity - 1] = 1;  // writable until protected
    regions.read_only.start[0] = 2;
    EXPECT_EQ(ExecutableArena::protect(regions.code, Protection::ReadExecute), "");
    EXPECT_EQ(ExecutableArena::protect(regions.read_only, Protection::ReadOnly), "");
    if (round % 50 == 0) {
      size_t bytes = size_t(3) << 30;
      void* other = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      ASSERT_NE(other, MAP_FAILED);
      others.push_back({other, bytes});
    }
  }
  for (auto& [other, bytes] : others) munmap(other, bytes);
}

TEST(ExecutableArena, SmallRegionsOfConsecutiveKernelsShareTheirArenas) {
  ExecutableArena arena;
  ExecutableArena::Regions first = arena.take_together(100, 100, 100);
  ExecutableArena::Regions second = arena.take_together(100, 100, 100);
  // Whole pages, adjacent to the previous kernel's region of the same protection.
  EXPECT_EQ(address(second.code), address(first.code) + first.code.capacity);
  EXPECT_EQ(address(second.read_only), address(first.read_only) + first.read_only.capacity);
  EXPECT_EQ(address(second.read_write), address(first.read_write) + first.read_write.capacity);
}

}  // namespace
}  // namespace metajit

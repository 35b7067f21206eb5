// Tests for the caching allocator (core/storage.h): alignment, reuse of freed blocks, and the separately mapped,
// huge-page-aligned blocks of 2 MiB and more that METAJIT_HUGE_PAGES=1 asks for.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/storage.h"

namespace metajit {
namespace {

constexpr uintptr_t kHugePage = uintptr_t(2) << 20;

bool is_mapped(const void* address) {
  unsigned char resident = 0;
  uintptr_t page = reinterpret_cast<uintptr_t>(address) / uintptr_t(sysconf(_SC_PAGESIZE)) *
                   uintptr_t(sysconf(_SC_PAGESIZE));
  return mincore(reinterpret_cast<void*>(page), 1, &resident) == 0;  // ENOMEM: nothing mapped there
}

// The VmFlags line of /proc/self/smaps for the mapping holding `address` ("" if none).
std::string mapping_flags(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  uintptr_t target = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  std::string line;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= target && target < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool transparent_huge_pages_available() {
  std::ifstream setting("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text;
  std::getline(setting, text);
  return !text.empty() && text.find("[never]") == std::string::npos;
}

// Sets METAJIT_HUGE_PAGES for one test (the allocator reads it at each large allocation).
class HugePagesOn : public ::testing::Test {
 protected:
  void SetUp() override { setenv("METAJIT_HUGE_PAGES", "1", 1); }
  void TearDown() override { unsetenv("METAJIT_HUGE_PAGES"); }
};

TEST(StorageTest, SmallBlocksAre64ByteAlignedAndReused) {
  void* first;
  {
    Storage block(1000);
    first = block.data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    std::memset(first, 1, 1000);
  }
  Storage again(1000);  // same size class: the block just freed
  EXPECT_EQ(again.data(), first);
}

TEST(StorageTest, LargeBlocksComeFromMallocByDefault) {
  unsetenv("METAJIT_HUGE_PAGES");
  const size_t bytes = size_t(6) << 20;
  Storage block(bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block.data()) % 64, 0u);
  std::memset(block.data(), 5, bytes);
  // malloc's own mapping: a 16-byte header precedes the block, so it never starts on a page boundary.
  EXPECT_NE(reinterpret_cast<uintptr_t>(block.data()) % 4096, 0u);
}

TEST_F(HugePagesOn, LargeBlocksStartOnAHugePageAndAreWritableToTheirLastByte) {
  const size_t bytes = (size_t(2) << 20) + 100;  // a 2 MiB huge page plus a tail in small pages
  Storage block(bytes);
  uintptr_t start = reinterpret_cast<uintptr_t>(block.data());
  EXPECT_EQ(start % kHugePage, 0u);
  std::memset(block.data(), 7, bytes);
  EXPECT_EQ(static_cast<unsigned char*>(block.data())[bytes - 1], 7);
  if (transparent_huge_pages_available()) {
    // "hg": the kernel was asked to back this mapping with huge pages (MADV_HUGEPAGE).
    EXPECT_NE(mapping_flags(block.data()).find(" hg"), std::string::npos) << mapping_flags(block.data());
  }
}

TEST_F(HugePagesOn, FreedLargeBlocksAreKeptUntilTheCacheIsReleased) {
  const size_t bytes = size_t(6) << 20;
  void* first;
  {
    Storage block(bytes);
    first = block.data();
    std::memset(first, 3, bytes);
  }
  EXPECT_TRUE(is_mapped(first));
  {
    Storage again(bytes);
    EXPECT_EQ(again.data(), first);
  }
  release_cached_memory();
  EXPECT_FALSE(is_mapped(first));  // given back to the system, not leaked
  EXPECT_FALSE(is_mapped(static_cast<char*>(first) + bytes - 1));
}

}  // namespace
}  // namespace metajit

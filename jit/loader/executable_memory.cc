#include "jit/loader/executable_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace metajit {

uint8_t* MemoryRegion::carve(size_t size, size_t alignment) {
  if (alignment == 0) alignment = 1;
  uintptr_t base = reinterpret_cast<uintptr_t>(start);
  uintptr_t aligned = (base + used + alignment - 1) / alignment * alignment;
  size_t end = aligned + size - base;
  if (!start || end > capacity) return nullptr;
  used = end;
  return reinterpret_cast<uint8_t*>(aligned);
}

size_t ExecutableArena::pages(size_t bytes) const {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

size_t ExecutableArena::span_bytes_needed(size_t size, Protection final) const {
  const Arena& arena = arenas_[int(final)];
  if (size == 0 || arena.used + size <= arena.size) return 0;
  return std::max(size, kArenaBytes);
}

void ExecutableArena::start_new_span() {
  // Address space only (no access, no commitment); each arena maps its part read-write when it starts.
  void* span = mmap(nullptr, kSpanBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (span == MAP_FAILED)
    throw std::runtime_error("cannot reserve address space for kernels: " + std::string(std::strerror(errno)));
  span_ = static_cast<uint8_t*>(span);
  span_used_ = 0;
  for (Arena& arena : arenas_) arena = Arena{};  // later kernels start fresh arenas in the new span
}

MemoryRegion ExecutableArena::take(size_t bytes, Protection final) {
  size_t size = pages(bytes);
  if (size == 0) return MemoryRegion{};
  Arena& arena = arenas_[int(final)];
  if (size_t needed = span_bytes_needed(size, final)) {
    if (needed > kSpanBytes) throw std::runtime_error("a kernel needs more than 1 GiB of memory");
    if (!span_ || span_used_ + needed > kSpanBytes) start_new_span();
    uint8_t* start = span_ + span_used_;
    if (mprotect(start, needed, PROT_READ | PROT_WRITE) != 0)
      throw std::runtime_error("cannot map memory for a kernel: " + std::string(std::strerror(errno)));
    span_used_ += needed;
    arena = Arena{start, needed, 0};
  }
  MemoryRegion region{arena.start + arena.used, size, 0};
  arena.used += size;
  return region;
}

ExecutableArena::Regions ExecutableArena::take_together(size_t code_bytes, size_t read_only_bytes,
                                                        size_t read_write_bytes) {
  size_t needed = span_bytes_needed(pages(code_bytes), Protection::ReadExecute) +
                  span_bytes_needed(pages(read_only_bytes), Protection::ReadOnly) +
                  span_bytes_needed(pages(read_write_bytes), Protection::ReadWrite);
  if (needed > 0 && (!span_ || span_used_ + needed > kSpanBytes)) start_new_span();  // all three in one span
  Regions regions;
  regions.code = take(code_bytes, Protection::ReadExecute);
  regions.read_only = take(read_only_bytes, Protection::ReadOnly);
  regions.read_write = take(read_write_bytes, Protection::ReadWrite);
  return regions;
}

std::string ExecutableArena::protect(const MemoryRegion& region, Protection protection) {
  if (!region.start || protection == Protection::ReadWrite) return "";
  int flags = protection == Protection::ReadExecute ? PROT_READ | PROT_EXEC : PROT_READ;
  if (mprotect(region.start, region.capacity, flags) != 0)
    return "cannot protect kernel memory: " + std::string(std::strerror(errno));
  return "";
}

}  // namespace metajit

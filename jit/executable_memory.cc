#include "jit/executable_memory.h"

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

MemoryRegion ExecutableArena::take(size_t bytes, Protection final) {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  size_t size = (bytes + page - 1) / page * page;
  if (size == 0) return MemoryRegion{};
  Arena& arena = arenas_[int(final)];
  if (arena.used + size > arena.size) {
    size_t new_size = std::max(size, kArenaBytes);
    void* memory = mmap(nullptr, new_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED)
      throw std::runtime_error("cannot map memory for a kernel: " + std::string(std::strerror(errno)));
    arena = Arena{static_cast<uint8_t*>(memory), new_size, 0};
  }
  MemoryRegion region{arena.start + arena.used, size, 0};
  arena.used += size;
  return region;
}

std::string ExecutableArena::protect(const MemoryRegion& region, Protection protection) {
  if (!region.start || protection == Protection::ReadWrite) return "";
  int flags = protection == Protection::ReadExecute ? PROT_READ | PROT_EXEC : PROT_READ;
  if (mprotect(region.start, region.capacity, flags) != 0)
    return "cannot protect kernel memory: " + std::string(std::strerror(errno));
  return "";
}

}  // namespace metajit

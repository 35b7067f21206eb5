// Host buffers: 64-byte aligned blocks from a caching allocator, shared by refcount between a computed
// node and whatever still reads it (a numpy view, a kernel launch). Never knows what the bytes mean.
#pragma once
#include <cstddef>
#include <memory>
#include <new>
#include <string>

namespace metajit {

// A failed allocation (MemoryError in Python); what() says how many bytes, and the executor adds for which op
// and user line.
class AllocationError : public std::bad_alloc {
 public:
  explicit AllocationError(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

class Storage {
 public:
  explicit Storage(size_t bytes);   // allocated from the caching allocator, 64-byte aligned, uninitialised
  ~Storage();                       // returns the block to the allocator's free list
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_;
  size_t bytes_;
  bool mapped_;  // its own huge-page-aligned mapping (METAJIT_HUGE_PAGES=1), not a malloc block
};

using StoragePtr = std::shared_ptr<Storage>;

// Drops every cached free block back to the system (mj.gc()).
void release_cached_memory();

}  // namespace metajit

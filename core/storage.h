// Host buffers: 64-byte aligned blocks from a caching allocator, shared by refcount between a computed
// node and whatever still reads it (a numpy view, a kernel launch). Never knows what the bytes mean.
#pragma once
#include <cstddef>
#include <memory>

namespace metajit {

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
};

using StoragePtr = std::shared_ptr<Storage>;

// Drops every cached free block back to the system (mj.gc()).
void release_cached_memory();

}  // namespace metajit

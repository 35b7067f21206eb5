#include "jit/toolchain/kernel_entry.h"

#include <cstdint>
#include <cstring>

namespace metajit {
namespace {
constexpr char kEntryMagic[4] = {'M', 'J', 'K', 'E'};
constexpr size_t kHeaderSize = 4 + sizeof(uint64_t);
}  // namespace

std::string encode_kernel_entry(const KernelEntry& entry) {
  std::string bytes(kEntryMagic, 4);
  uint64_t size = entry.object.size();
  bytes.append(reinterpret_cast<const char*>(&size), sizeof(size));
  bytes += entry.object;
  bytes += entry.source;
  return bytes;
}

namespace {

// The object's size, or nullopt when `bytes` are not an entry of this format.
std::optional<uint64_t> object_size(const std::string& bytes) {
  if (bytes.size() < kHeaderSize || std::memcmp(bytes.data(), kEntryMagic, 4) != 0) return std::nullopt;
  uint64_t size;
  std::memcpy(&size, bytes.data() + 4, sizeof(size));
  if (size > bytes.size() - kHeaderSize) return std::nullopt;
  return size;
}

}  // namespace

std::optional<KernelEntry> decode_kernel_entry(const std::string& bytes) {
  std::optional<uint64_t> size = object_size(bytes);
  if (!size) return std::nullopt;
  return KernelEntry{bytes.substr(kHeaderSize, *size), bytes.substr(kHeaderSize + *size)};
}

std::optional<std::string> decode_kernel_object(const std::string& bytes) {
  std::optional<uint64_t> size = object_size(bytes);
  if (!size) return std::nullopt;
  return bytes.substr(kHeaderSize, *size);
}

}  // namespace metajit

// XXH3 wrappers behind content_hash.h. Kept in one place so the hash function can change without callers
// noticing (changing it changes every cache key, which is safe: old entries are simply never looked up).
#include "cache/content_hash.h"

#include <xxhash.h>

namespace metajit {

std::string content_hash(const std::string& bytes) {
  XXH128_hash_t hash = XXH3_128bits(bytes.data(), bytes.size());
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, hash);
  static const char digits[] = "0123456789abcdef";
  std::string text(2 * sizeof(canonical.digest), '0');
  for (size_t index = 0; index < sizeof(canonical.digest); ++index) {
    text[2 * index] = digits[canonical.digest[index] >> 4];
    text[2 * index + 1] = digits[canonical.digest[index] & 0xf];
  }
  return text;
}

uint64_t checksum64(const void* data, size_t size) { return XXH3_64bits(data, size); }

}  // namespace metajit

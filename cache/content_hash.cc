// XXH3 wrappers behind content_hash.h. Kept in one place so the hash function can change without callers
// noticing (changing it changes every cache key, which is safe: old entries are simply never looked up).
#include "cache/content_hash.h"

#include <xxhash.h>

#include <memory>

namespace metajit {

namespace {

std::string hex_digits(XXH128_hash_t hash) {
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

}  // namespace

std::string content_hash(const std::string& bytes) { return hex_digits(XXH3_128bits(bytes.data(), bytes.size())); }

std::string content_hash(std::initializer_list<std::string_view> parts) {
  // One state per thread, made once: its layout is the library's own (not in the header without
  // XXH_STATIC_LINKING_ONLY), so it lives on the heap.
  thread_local std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state(XXH3_createState(),
                                                                                     XXH3_freeState);
  XXH3_128bits_reset(state.get());
  for (std::string_view part : parts) XXH3_128bits_update(state.get(), part.data(), part.size());
  return hex_digits(XXH3_128bits_digest(state.get()));
}

uint64_t checksum64(const void* data, size_t size) { return XXH3_64bits(data, size); }

}  // namespace metajit

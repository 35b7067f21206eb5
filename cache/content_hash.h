// Content hashing for cache keys and entry checksums (XXH3). Pure functions over bytes: this file must not
// know what the bytes mean (source, objects, metadata) and must not touch the disk.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace metajit {

// 32 lowercase hex characters of XXH3-128 over `bytes` (canonical big-endian order, same digits as `xxh128sum`).
std::string content_hash(const std::string& bytes);
// The same digits as content_hash of the parts concatenated, without building that string.
std::string content_hash(std::initializer_list<std::string_view> parts);

// XXH3-64 of a byte range; used as the integrity checksum of on-disk entries.
uint64_t checksum64(const void* data, size_t size);

}  // namespace metajit

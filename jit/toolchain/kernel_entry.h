// What the kernel cache keeps per key, on disk and in bundles: the object file plus the kernel's source (so
// `python -m metajit.cache show KEY` and inspection can print what a cached kernel is). Framed as
// "MJKE" + u64 object size + object + source; the disk store's own header checks the whole entry's integrity.
#pragma once
#include <optional>
#include <string>

namespace metajit {

struct KernelEntry {
  std::string object;  // relocatable ELF
  std::string source;  // header comment + source, as compiled
};

std::string encode_kernel_entry(const KernelEntry& entry);
// nullopt for bytes that are not an entry of this format (an old or foreign file).
std::optional<KernelEntry> decode_kernel_entry(const std::string& bytes);
// Only the object (loading a kernel needs no copy of its source).
std::optional<std::string> decode_kernel_object(const std::string& bytes);

}  // namespace metajit

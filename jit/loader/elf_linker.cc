#include "jit/loader/elf_linker.h"

#include <elf.h>

#include <cstring>
#include <limits>
#include <unordered_map>
#include <vector>

namespace metajit {
namespace {

constexpr size_t kStubBytes = 16;  // jmp *0(%rip) (6 bytes) + the 8-byte target, padded to 16

enum class SectionKind { NotLoaded, Code, ReadOnly, ReadWrite };

struct LinkError {
  std::string reason;
};

template <typename T>
const T* at(const std::string& bytes, uint64_t offset, uint64_t count = 1) {
  if (offset > bytes.size() || count > (bytes.size() - offset) / sizeof(T))
    throw LinkError{"a table lies outside the file"};
  return reinterpret_cast<const T*>(bytes.data() + offset);
}

bool fits_int32(int64_t value) {
  return value >= std::numeric_limits<int32_t>::min() && value <= std::numeric_limits<int32_t>::max();
}

void* link(const std::string& bytes, const std::string& symbol, ExecutableArena& arena,
           const ExternalResolver& resolve_external) {
  const Elf64_Ehdr& header = *at<Elf64_Ehdr>(bytes, 0);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB || header.e_type != ET_REL || header.e_machine != EM_X86_64)
    throw LinkError{"not an x86-64 little-endian relocatable ELF object"};
  if (header.e_shentsize != sizeof(Elf64_Shdr)) throw LinkError{"unexpected section header size"};
  const Elf64_Shdr* sections = at<Elf64_Shdr>(bytes, header.e_shoff, header.e_shnum);
  const size_t section_count = header.e_shnum;
  if (header.e_shstrndx >= section_count) throw LinkError{"no section name table"};
  const Elf64_Shdr& names = sections[header.e_shstrndx];
  const char* name_table = at<char>(bytes, names.sh_offset, names.sh_size);
  auto section_name = [&](const Elf64_Shdr& section) -> std::string {
    if (section.sh_name >= names.sh_size) throw LinkError{"section name outside the name table"};
    return std::string(name_table + section.sh_name,
                       strnlen(name_table + section.sh_name, names.sh_size - section.sh_name));
  };

  // Classify sections and find the symbol table.
  std::vector<SectionKind> kinds(section_count, SectionKind::NotLoaded);
  std::vector<size_t> initializer_sections;  // .init_array: static constructors, run once after linking
  size_t sizes[4] = {0, 0, 0, 0};
  const Elf64_Shdr* symbol_table = nullptr;
  for (size_t index = 0; index < section_count; ++index) {
    const Elf64_Shdr& section = sections[index];
    if (section.sh_type == SHT_REL) throw LinkError{"REL relocations (x86-64 objects use RELA)"};
    if (section.sh_type == SHT_SYMTAB) {
      if (symbol_table) throw LinkError{"more than one symbol table"};
      symbol_table = &section;
    }
    if (!(section.sh_flags & SHF_ALLOC) || section.sh_size == 0) continue;
    if (section.sh_flags & SHF_TLS) throw LinkError{"thread-local storage"};
    if (section.sh_type == SHT_INIT_ARRAY) {
      if (section.sh_size % 8 != 0) throw LinkError{"malformed .init_array"};
      initializer_sections.push_back(index);
    } else if (section.sh_type != SHT_PROGBITS && section.sh_type != SHT_NOBITS)
      throw LinkError{"section " + section_name(section) + " (constructors or other special sections)"};
    if (section_name(section) == ".eh_frame") throw LinkError{"unwind tables (.eh_frame) need registering"};
    SectionKind kind = (section.sh_flags & SHF_EXECINSTR) ? SectionKind::Code
                       : (section.sh_flags & SHF_WRITE)   ? SectionKind::ReadWrite
                                                          : SectionKind::ReadOnly;
    kinds[index] = kind;
    sizes[int(kind)] += section.sh_size + std::max<uint64_t>(section.sh_addralign, 1);
  }
  if (!symbol_table) throw LinkError{"no symbol table"};
  if (symbol_table->sh_entsize != sizeof(Elf64_Sym) || symbol_table->sh_link >= section_count)
    throw LinkError{"malformed symbol table"};
  const size_t symbol_count = symbol_table->sh_size / sizeof(Elf64_Sym);
  const Elf64_Sym* symbols = at<Elf64_Sym>(bytes, symbol_table->sh_offset, symbol_count);
  const Elf64_Shdr& strings = sections[symbol_table->sh_link];
  const char* string_table = at<char>(bytes, strings.sh_offset, strings.sh_size);
  auto symbol_name = [&](const Elf64_Sym& entry) -> std::string {
    if (entry.st_name >= strings.sh_size) throw LinkError{"symbol name outside the string table"};
    return std::string(string_table + entry.st_name,
                       strnlen(string_table + entry.st_name, strings.sh_size - entry.st_name));
  };

  // Relocation sections that patch loaded sections; count the GOT slots and call stubs they need.
  std::vector<const Elf64_Shdr*> relocation_sections;
  std::unordered_map<uint32_t, size_t> got_slots, stubs;  // symbol index -> slot number
  for (size_t index = 0; index < section_count; ++index) {
    const Elf64_Shdr& section = sections[index];
    if (section.sh_type != SHT_RELA || section.sh_info >= section_count) continue;
    if (kinds[section.sh_info] == SectionKind::NotLoaded) continue;  // debug info and the like
    if (section.sh_entsize != sizeof(Elf64_Rela) || section.sh_link != size_t(symbol_table - sections))
      throw LinkError{"malformed relocation section"};
    relocation_sections.push_back(&section);
    const Elf64_Rela* entries = at<Elf64_Rela>(bytes, section.sh_offset, section.sh_size / sizeof(Elf64_Rela));
    for (size_t entry = 0; entry < section.sh_size / sizeof(Elf64_Rela); ++entry) {
      uint32_t type = ELF64_R_TYPE(entries[entry].r_info), target = ELF64_R_SYM(entries[entry].r_info);
      if (target >= symbol_count) throw LinkError{"relocation against a missing symbol"};
      bool external = symbols[target].st_shndx == SHN_UNDEF;
      if (type == R_X86_64_GOTPCREL || type == R_X86_64_GOTPCRELX || type == R_X86_64_REX_GOTPCRELX)
        got_slots.emplace(target, got_slots.size());
      else if (type == R_X86_64_PLT32 && external)
        stubs.emplace(target, stubs.size());
    }
  }

  // Lay out: code + stubs, constants + GOT, writable data. Memory from a fresh mmap is already zero.
  ExecutableArena::Regions regions = arena.take_together(
      sizes[int(SectionKind::Code)] + stubs.size() * kStubBytes + kStubBytes,
      sizes[int(SectionKind::ReadOnly)] + got_slots.size() * 8 + 8, sizes[int(SectionKind::ReadWrite)]);
  MemoryRegion& code = regions.code;
  MemoryRegion& read_only = regions.read_only;
  MemoryRegion& read_write = regions.read_write;
  std::vector<uint8_t*> addresses(section_count, nullptr);
  for (size_t index = 0; index < section_count; ++index) {
    if (kinds[index] == SectionKind::NotLoaded) continue;
    const Elf64_Shdr& section = sections[index];
    MemoryRegion& region = kinds[index] == SectionKind::Code       ? code
                           : kinds[index] == SectionKind::ReadOnly ? read_only
                                                                   : read_write;
    addresses[index] = region.carve(section.sh_size, std::max<uint64_t>(section.sh_addralign, 1));
    if (!addresses[index]) throw LinkError{"layout overflow"};
    if (section.sh_type != SHT_NOBITS)
      std::memcpy(addresses[index], at<uint8_t>(bytes, section.sh_offset, section.sh_size), section.sh_size);
    else
      std::memset(addresses[index], 0, section.sh_size);
  }
  uint8_t* stub_area = code.carve(stubs.size() * kStubBytes, kStubBytes);
  uint64_t* got = reinterpret_cast<uint64_t*>(read_only.carve(got_slots.size() * 8, 8));
  if ((!stub_area && !stubs.empty()) || (!got && !got_slots.empty())) throw LinkError{"layout overflow"};

  std::vector<uint64_t> symbol_addresses(symbol_count, 0);
  std::vector<bool> resolved(symbol_count, false);
  auto address_of = [&](uint32_t index) -> uint64_t {
    if (resolved[index]) return symbol_addresses[index];
    const Elf64_Sym& entry = symbols[index];
    uint64_t address;
    if (entry.st_shndx == SHN_UNDEF) {
      std::string name = symbol_name(entry);
      address = name.empty() ? 0 : resolve_external(name);
      if (!address) throw LinkError{"unresolved symbol " + name};
    } else if (entry.st_shndx == SHN_ABS) {
      address = entry.st_value;
    } else if (entry.st_shndx < section_count && addresses[entry.st_shndx]) {
      address = reinterpret_cast<uint64_t>(addresses[entry.st_shndx]) + entry.st_value;
    } else {
      throw LinkError{"symbol in an unloaded or special section"};
    }
    resolved[index] = true;
    return symbol_addresses[index] = address;
  };
  for (const auto& [index, slot] : got_slots) got[slot] = address_of(index);
  for (const auto& [index, slot] : stubs) {
    uint8_t* stub = stub_area + slot * kStubBytes;
    const uint8_t jump[6] = {0xff, 0x25, 0, 0, 0, 0};  // jmp *0(%rip): the target follows the instruction
    std::memcpy(stub, jump, sizeof(jump));
    uint64_t target = address_of(index);
    std::memcpy(stub + sizeof(jump), &target, sizeof(target));
  }

  for (const Elf64_Shdr* section : relocation_sections) {
    const Elf64_Shdr& patched = sections[section->sh_info];
    uint8_t* base = addresses[section->sh_info];
    const Elf64_Rela* entries = at<Elf64_Rela>(bytes, section->sh_offset, section->sh_size / sizeof(Elf64_Rela));
    for (size_t entry = 0; entry < section->sh_size / sizeof(Elf64_Rela); ++entry) {
      const Elf64_Rela& relocation = entries[entry];
      uint32_t type = ELF64_R_TYPE(relocation.r_info), target = ELF64_R_SYM(relocation.r_info);
      if (type == R_X86_64_NONE) continue;
      size_t width = (type == R_X86_64_64 || type == R_X86_64_PC64) ? 8 : 4;
      if (relocation.r_offset > patched.sh_size || width > patched.sh_size - relocation.r_offset)
        throw LinkError{"relocation outside its section"};
      uint8_t* place = base + relocation.r_offset;
      int64_t position = int64_t(reinterpret_cast<uint64_t>(place));
      int64_t addend = relocation.r_addend;
      bool external = symbols[target].st_shndx == SHN_UNDEF;
      int64_t value;
      switch (type) {
        case R_X86_64_64: value = int64_t(address_of(target)) + addend; break;
        case R_X86_64_PC64: value = int64_t(address_of(target)) + addend - position; break;
        case R_X86_64_PC32:
          if (external) throw LinkError{"PC32 reference to an external symbol (may be out of reach)"};
          value = int64_t(address_of(target)) + addend - position;
          break;
        case R_X86_64_PLT32:
          value = (external ? int64_t(reinterpret_cast<uint64_t>(stub_area + stubs.at(target) * kStubBytes))
                            : int64_t(address_of(target))) +
                  addend - position;
          break;
        case R_X86_64_GOTPCREL:
        case R_X86_64_GOTPCRELX:
        case R_X86_64_REX_GOTPCRELX:
          value = int64_t(reinterpret_cast<uint64_t>(got + got_slots.at(target))) + addend - position;
          break;
        case R_X86_64_32:
          value = int64_t(address_of(target)) + addend;
          if (value < 0 || value > int64_t(std::numeric_limits<uint32_t>::max()))
            throw LinkError{"absolute 32-bit reference out of range (non-PIC code)"};
          break;
        case R_X86_64_32S:
          value = int64_t(address_of(target)) + addend;
          if (!fits_int32(value)) throw LinkError{"absolute 32-bit reference out of range (non-PIC code)"};
          break;
        default: throw LinkError{"relocation type " + std::to_string(type)};
      }
      if (width == 8) {
        std::memcpy(place, &value, 8);
      } else {
        if (type != R_X86_64_32 && !fits_int32(value)) throw LinkError{"32-bit relative reference out of range"};
        uint32_t narrow = uint32_t(value);
        std::memcpy(place, &narrow, 4);
      }
    }
  }

  void* result = nullptr;
  for (size_t index = 0; index < symbol_count && !result; ++index) {
    const Elf64_Sym& entry = symbols[index];
    unsigned binding = ELF64_ST_BIND(entry.st_info);
    if ((binding == STB_GLOBAL || binding == STB_WEAK) && entry.st_shndx != SHN_UNDEF && symbol_name(entry) == symbol)
      result = reinterpret_cast<void*>(address_of(uint32_t(index)));
  }
  if (!result) throw LinkError{"symbol " + symbol + " is not defined"};
  for (auto [region, protection] : {std::pair{&code, Protection::ReadExecute}, {&read_only, Protection::ReadOnly}}) {
    std::string problem = ExecutableArena::protect(*region, protection);
    if (!problem.empty()) throw LinkError{problem};
  }
  for (size_t index : initializer_sections) {
    auto* functions = reinterpret_cast<void (**)()>(addresses[index]);
    for (size_t entry = 0; entry < sections[index].sh_size / 8; ++entry) functions[entry]();
  }
  return result;
}

}  // namespace

void* link_elf_object(const std::string& object_bytes, const std::string& symbol, ExecutableArena& arena,
                      const ExternalResolver& resolve_external, std::string* unsupported) {
  try {
    return link(object_bytes, symbol, arena, resolve_external);
  } catch (const LinkError& error) {
    if (unsupported) *unsupported = error.reason;
    return nullptr;
  }
}

}  // namespace metajit

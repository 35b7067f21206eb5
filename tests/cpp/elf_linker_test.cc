// Tests for the fast kernel linker (jit/loader/elf_linker.h) through the object loader: which linker takes which
// object, and that code linked by our linker computes the same as code linked by RuntimeDyld, for each kind of
// relocation our compilers emit (local constants, calls into libm through stubs, GOT loads of host data,
// absolute pointers in writable and read-only data).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <string>

#include "jit/loader/elf_linker.h"
#include "jit/toolchain/compiler.h"
#include "jit/toolchain/object_loader.h"

extern char** environ;

namespace metajit {
namespace {

// Exercises every relocation kind at once; metajit_kernel(out, in) writes 4 values checked below.
const std::string kRelocationsSource = R"(
extern "C" float expf(float);
extern "C" char** environ;
static float scale_table[4] = {1.0f, 2.0f, 3.0f, 4.0f};        // writable data, PC32
static float add(float a, float b) { return a + b; }
static float multiply(float a, float b) { return a * b; }
static float (*const operations[2])(float, float) = {add, multiply};  // absolute pointers (R_X86_64_64)
static int calls = 0;
extern "C" void metajit_kernel(float* out, const float* in) {
  calls += 1;
  scale_table[0] += 1.0f;                                         // modifies writable data
  out[0] = expf(in[0]) * scale_table[1];                          // external call through a stub
  out[1] = operations[in[1] > 0 ? 1 : 0](in[1], 3.0f);            // pointer table
  out[2] = environ != nullptr ? float(calls) : -1.0f;             // GOT load of host data
  out[3] = scale_table[0];
}
)";

void expect_relocations_kernel(void* address) {
  ASSERT_NE(address, nullptr);
  auto kernel = reinterpret_cast<void (*)(float*, const float*)>(address);
  float out[4] = {0, 0, 0, 0};
  const float in[2] = {0.5f, 2.0f};
  kernel(out, in);
  EXPECT_NEAR(out[0], std::exp(0.5f) * 2.0f, 1e-5f);
  EXPECT_FLOAT_EQ(out[1], 6.0f);  // multiply(2, 3)
  EXPECT_FLOAT_EQ(out[2], environ != nullptr ? 1.0f : -1.0f);
  EXPECT_FLOAT_EQ(out[3], 2.0f);
  kernel(out, in);  // state persists in this object's own writable data
  EXPECT_FLOAT_EQ(out[2], environ != nullptr ? 2.0f : -1.0f);
  EXPECT_FLOAT_EQ(out[3], 3.0f);
}

TEST(ElfLinkerTest, InProcessClangObjectsTakeTheFastPath) {
  std::string object = make_clang_compiler()->compile(kRelocationsSource);
  LinkPath used = LinkPath::RuntimeDyld;
  void* address = ObjectLoader::instance().load(object, "metajit_kernel", &used);
  EXPECT_EQ(used, LinkPath::Fast);
  expect_relocations_kernel(address);
}

TEST(ElfLinkerTest, EachObjectGetsItsOwnData) {
  std::string object = make_clang_compiler()->compile(kRelocationsSource);
  expect_relocations_kernel(ObjectLoader::instance().load(object, "metajit_kernel"));
  expect_relocations_kernel(ObjectLoader::instance().load(object, "metajit_kernel"));  // fresh counters again
}

TEST(ElfLinkerTest, RuntimeDyldGivesTheSameResults) {
  std::unique_ptr<Compiler> compilers[] = {make_clang_compiler(), make_system_compiler()};
  for (const auto& compiler : compilers) {
    std::string object = compiler->compile(kRelocationsSource);
    LinkPath used = LinkPath::Fast;
    void* address = ObjectLoader::instance().load(object, "metajit_kernel", &used, LinkPath::RuntimeDyld);
    EXPECT_EQ(used, LinkPath::RuntimeDyld);
    expect_relocations_kernel(address);
    expect_relocations_kernel(ObjectLoader::instance().load(object, "metajit_kernel", &used));
    EXPECT_EQ(used, LinkPath::Fast) << compiler->identity();
  }
}

TEST(ElfLinkerTest, StaticConstructorsRunOnceOnEitherPath) {
  std::string object = make_clang_compiler()->compile(R"(
extern "C" float expf(float);
static float initialized = expf(1.0f);  // dynamic initialisation: a constructor in .init_array
extern "C" void metajit_kernel(float* out) { out[0] = initialized; initialized += 1.0f; }
)");
  for (LinkPath prefer : {LinkPath::Fast, LinkPath::RuntimeDyld}) {
    LinkPath used;
    auto kernel = reinterpret_cast<void (*)(float*)>(ObjectLoader::instance().load(object, "metajit_kernel", &used, prefer));
    EXPECT_EQ(used, prefer);
    float out = 0;
    kernel(&out);
    EXPECT_NEAR(out, std::exp(1.0f), 1e-6f);
    kernel(&out);
    EXPECT_NEAR(out, std::exp(1.0f) + 1.0f, 1e-6f);
  }
}

size_t mapping_count() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  size_t count = 0;
  while (std::getline(maps, line)) ++count;
  return count;
}

// Linux allows 65,530 mappings per process. When every kernel cost separate mappings for its code, constants
// and data, a process failed after about 32,600 kernels; regions with equal protection now share mappings.
TEST(ElfLinkerTest, ThousandsOfKernelsShareAFewMappings) {
  std::string object = make_clang_compiler()->compile(kRelocationsSource);
  auto resolve_host = [](const std::string& name) {
    return name == "expf" ? uint64_t(reinterpret_cast<uintptr_t>(&expf))
                          : uint64_t(reinterpret_cast<uintptr_t>(&environ));
  };
  ExecutableArena arena;
  std::string reason;
  ASSERT_NE(link_elf_object(object, "metajit_kernel", arena, resolve_host, &reason), nullptr) << reason;
  size_t before = mapping_count();
  constexpr int kKernels = 3000;
  void* last = nullptr;
  for (int kernel = 0; kernel < kKernels; ++kernel) {
    last = link_elf_object(object, "metajit_kernel", arena, resolve_host, &reason);
    ASSERT_NE(last, nullptr) << reason;
  }
  size_t after = mapping_count();
  // Each kernel here has code, constants and writable data: 3 pages. 3000 kernels fill a few 4 MiB arenas
  // per protection; every arena is at most two mappings (the used part and the rest).
  EXPECT_LT(after - before, 40u) << "mappings before " << before << ", after " << after;
  expect_relocations_kernel(last);
}

TEST(ElfLinkerTest, DeclinesRatherThanGuesses) {
  std::string object = make_clang_compiler()->compile(kRelocationsSource);
  ExecutableArena scratch;
  std::string reason;
  auto resolve_nothing = [](const std::string&) { return uint64_t(0); };
  EXPECT_EQ(link_elf_object(object, "metajit_kernel", scratch, resolve_nothing, &reason), nullptr);
  EXPECT_NE(reason.find("unresolved symbol"), std::string::npos) << reason;
  auto resolve_host = [](const std::string& name) {
    return name == "expf" ? uint64_t(reinterpret_cast<uintptr_t>(&expf))
                          : uint64_t(reinterpret_cast<uintptr_t>(&environ));
  };
  EXPECT_EQ(link_elf_object(object, "no_such_symbol", scratch, resolve_host, &reason), nullptr);
  EXPECT_NE(reason.find("no_such_symbol"), std::string::npos) << reason;
  EXPECT_EQ(link_elf_object(object.substr(0, object.size() / 2), "metajit_kernel", scratch, resolve_host, &reason),
            nullptr);
  EXPECT_FALSE(reason.empty());
  expect_relocations_kernel(link_elf_object(object, "metajit_kernel", scratch, resolve_host, &reason));
}

}  // namespace
}  // namespace metajit

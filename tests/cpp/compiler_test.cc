// Tests for the compiler backends (jit/toolchain/compiler.h) and the object loader (jit/toolchain/object_loader.h):
// compile real kernels, load them, run them against std::exp, and check that errors come back as exceptions with usable
// text.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "jit/toolchain/compiler.h"
#include "jit/toolchain/object_loader.h"
#include "jit/toolchain/target_info.h"

namespace metajit {
namespace {

using KernelFunction = void (*)(float*, const float*, long);

std::string exp_kernel_source(float factor) {
  return "extern \"C\" float expf(float);\n"
         "extern \"C\" void metajit_kernel(float* out, const float* in, long n) {\n"
         "  for (long i = 0; i < n; ++i) out[i] = expf(in[i]) * " + std::to_string(factor) + "f;\n"
         "}\n";
}

// Runs the kernel on a range of inputs and checks out[i] == exp(in[i]) * factor to float precision.
void expect_exp_kernel(void* address, float factor) {
  ASSERT_NE(address, nullptr);
  std::vector<float> input(1000), output(1000, -1.0f);
  for (size_t index = 0; index < input.size(); ++index) input[index] = -5.0f + 10.0f * index / input.size();
  reinterpret_cast<KernelFunction>(address)(output.data(), input.data(), static_cast<long>(input.size()));
  for (size_t index = 0; index < input.size(); ++index) {
    float expected = std::exp(input[index]) * factor;
    ASSERT_NEAR(output[index], expected, 1e-6f * std::fabs(expected)) << "at index " << index;
  }
}

const std::string kSyntaxErrorSource =
    "extern \"C\" void metajit_kernel(float* out) {\n"
    "  out[0] = 1.0f;\n"
    "  int broken = ;\n"
    "}\n";

TEST(CompilerTest, ClangCompilesLoadsAndRunsExpKernel) {
  auto compiler = make_clang_compiler();
  std::string object = compiler->compile(exp_kernel_source(2.0f));
  ASSERT_GE(object.size(), 4u);
  EXPECT_EQ(object.substr(0, 4), "\x7f" "ELF");
  expect_exp_kernel(ObjectLoader::instance().load(object, "metajit_kernel"), 2.0f);
}

TEST(CompilerTest, IdentityNamesResolvedCpuAndNeverNative) {
  auto compiler = make_clang_compiler();
  const std::string& identity = compiler->identity();
  EXPECT_EQ(identity.rfind("clang-inprocess 14.", 0), 0u) << identity;
  EXPECT_NE(identity.find("-O2"), std::string::npos);
  EXPECT_NE(identity.find("cpu=" + host_cpu_name()), std::string::npos);
  EXPECT_NE(identity.find("features=" + host_cpu_features()), std::string::npos);
  EXPECT_EQ(identity.find("native"), std::string::npos) << identity;
  EXPECT_FALSE(host_cpu_name().empty());
  EXPECT_EQ(make_clang_compiler()->identity(), identity);  // stable across instances
}

TEST(CompilerTest, SyntaxErrorThrowsWithFileAndLine) {
  auto compiler = make_clang_compiler();
  try {
    compiler->compile(kSyntaxErrorSource);
    FAIL() << "expected CompileError";
  } catch (const CompileError& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("kernel.cc:3:"), std::string::npos) << message;
    EXPECT_NE(message.find("error: expected expression"), std::string::npos) << message;
  }
}

// Code ops include the C++ library (as Jittor users expect); the search path must find it and the C headers
// it wraps, in the driver's order (libstdc++'s <cmath> include_next's the C <math.h>).
TEST(CompilerTest, StandardLibraryHeadersAreFound) {
  auto compiler = make_clang_compiler();
  std::string object = compiler->compile(
      "#include <algorithm>\n#include <cmath>\n#include <cstdio>\n#include <vector>\n"
      "extern \"C\" float metajit_kernel(float x) { return std::max(std::sqrt(x), 1.0f); }\n");
  EXPECT_FALSE(object.empty());
  EXPECT_NE(compiler->identity().find("libstdc++="), std::string::npos) << compiler->identity();
}

TEST(CompilerTest, MissingHeaderIsACompileErrorNamingIt) {
  auto compiler = make_clang_compiler();
  try {
    compiler->compile("#include <no_such_header_metajit.h>\nextern \"C\" void metajit_kernel() {}\n");
    FAIL() << "expected CompileError";
  } catch (const CompileError& error) {
    EXPECT_NE(std::string(error.what()).find("'no_such_header_metajit.h' file not found"), std::string::npos) << error.what();
  }
}

TEST(CompilerTest, TwoThreadsCompileAtOnce) {
  auto compiler = make_clang_compiler();
  std::string objects[2];
  std::string failures[2];
  auto work = [&](int which) {
    try {
      for (int round = 0; round < 3; ++round) objects[which] = compiler->compile(exp_kernel_source(3.0f + which));
    } catch (const std::exception& error) {
      failures[which] = error.what();
    }
  };
  std::thread first(work, 0), second(work, 1);
  first.join();
  second.join();
  ASSERT_EQ(failures[0], "");
  ASSERT_EQ(failures[1], "");
  expect_exp_kernel(ObjectLoader::instance().load(objects[0], "metajit_kernel"), 3.0f);
  expect_exp_kernel(ObjectLoader::instance().load(objects[1], "metajit_kernel"), 4.0f);
}

TEST(CompilerTest, ReportsCompileAndLoadTimes) {
  auto compiler = make_clang_compiler();
  compiler->compile(exp_kernel_source(1.0f));  // warm-up
  const int rounds = 10;
  auto start = std::chrono::steady_clock::now();
  std::string object;
  for (int round = 0; round < rounds; ++round) object = compiler->compile(exp_kernel_source(1.0f + round));
  auto compiled = std::chrono::steady_clock::now();
  for (int round = 0; round < rounds; ++round) ObjectLoader::instance().load(object, "metajit_kernel");
  auto loaded = std::chrono::steady_clock::now();
  double compile_ms = std::chrono::duration<double, std::milli>(compiled - start).count() / rounds;
  double load_ms = std::chrono::duration<double, std::milli>(loaded - compiled).count() / rounds;
  std::printf("[ timing   ] in-process clang compile %.2f ms/kernel, object load %.3f ms/kernel (%zu-byte object)\n",
              compile_ms, load_ms, object.size());
  EXPECT_LT(load_ms, 50.0);  // loose: only catches pathological regressions, not slow CI machines
}

TEST(CompilerTest, SystemCompilerProducesLoadableObject) {
  auto compiler = make_system_compiler();
  EXPECT_EQ(compiler->identity().rfind("system ", 0), 0u) << compiler->identity();
  EXPECT_EQ(compiler->identity().find("native"), std::string::npos) << compiler->identity();
  std::string object = compiler->compile(exp_kernel_source(5.0f));
  expect_exp_kernel(ObjectLoader::instance().load(object, "metajit_kernel"), 5.0f);
}

TEST(CompilerTest, SystemCompilerSyntaxErrorNamesKernelFileAndLine) {
  auto compiler = make_system_compiler();
  try {
    compiler->compile(kSyntaxErrorSource);
    FAIL() << "expected CompileError";
  } catch (const CompileError& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("kernel.cc:3:"), std::string::npos) << message;
    EXPECT_NE(message.find("expected"), std::string::npos) << message;
    EXPECT_EQ(message.find("metajit-compile-"), std::string::npos) << "temporary path leaked: " << message;
  }
}

TEST(CompilerTest, DefaultCompilerFollowsEnvironment) {
  const char* saved = std::getenv("METAJIT_COMPILER");
  std::string saved_value = saved ? saved : "";
  ::unsetenv("METAJIT_COMPILER");
  EXPECT_EQ(make_default_compiler()->identity().rfind("clang-inprocess", 0), 0u);
  ::setenv("METAJIT_COMPILER", "clang", 1);
  EXPECT_EQ(make_default_compiler()->identity().rfind("clang-inprocess", 0), 0u);
  ::setenv("METAJIT_COMPILER", "system", 1);
  EXPECT_EQ(make_default_compiler()->identity().rfind("system ", 0), 0u);
  ::setenv("METAJIT_COMPILER", "gcc-please", 1);
  EXPECT_THROW(make_default_compiler(), std::invalid_argument);
  if (saved) ::setenv("METAJIT_COMPILER", saved_value.c_str(), 1);
  else ::unsetenv("METAJIT_COMPILER");
}

TEST(ObjectLoaderTest, SameSymbolFromManyObjects) {
  auto compiler = make_clang_compiler();
  std::string doubling = compiler->compile(exp_kernel_source(2.0f));
  std::string tripling = compiler->compile(exp_kernel_source(3.0f));
  void* first = ObjectLoader::instance().load(doubling, "metajit_kernel");
  void* second = ObjectLoader::instance().load(tripling, "metajit_kernel");
  void* again = ObjectLoader::instance().load(doubling, "metajit_kernel");  // same bytes twice
  EXPECT_NE(first, second);
  EXPECT_NE(first, again);
  expect_exp_kernel(first, 2.0f);
  expect_exp_kernel(second, 3.0f);
  expect_exp_kernel(again, 2.0f);
}

TEST(ObjectLoaderTest, ConcurrentLoadsFromFourThreads) {
  std::string object = make_clang_compiler()->compile(exp_kernel_source(6.0f));
  void* addresses[4][10] = {};
  std::vector<std::thread> loaders;
  for (int thread = 0; thread < 4; ++thread) {
    loaders.emplace_back([&, thread] {
      for (int round = 0; round < 10; ++round)
        addresses[thread][round] = ObjectLoader::instance().load(object, "metajit_kernel");
    });
  }
  for (std::thread& loader : loaders) loader.join();
  for (auto& row : addresses)
    for (void* address : row) expect_exp_kernel(address, 6.0f);
}

TEST(ObjectLoaderTest, GarbageAndTruncatedObjectsThrow) {
  EXPECT_THROW(ObjectLoader::instance().load("", "metajit_kernel"), std::runtime_error);
  EXPECT_THROW(ObjectLoader::instance().load("definitely not an object file", "metajit_kernel"), std::runtime_error);
  std::string object = make_clang_compiler()->compile(exp_kernel_source(2.0f));
  for (size_t length : {size_t(4), size_t(64), object.size() / 2, object.size() - 1}) {
    EXPECT_THROW(ObjectLoader::instance().load(object.substr(0, length), "metajit_kernel"), std::runtime_error)
        << "length " << length;
  }
  std::string scrambled = object;
  for (size_t index = 64; index < scrambled.size(); index += 7) scrambled[index] = static_cast<char>(index * 31);
  try {
    ObjectLoader::instance().load(scrambled, "metajit_kernel");  // may or may not be detectable; must not crash
  } catch (const std::runtime_error&) {
  }
  expect_exp_kernel(ObjectLoader::instance().load(object, "metajit_kernel"), 2.0f);  // loader still healthy
}

TEST(ObjectLoaderTest, MissingSymbolThrowsNamingIt) {
  std::string object = make_clang_compiler()->compile(exp_kernel_source(2.0f));
  try {
    ObjectLoader::instance().load(object, "metajit_not_defined_here");
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("metajit_not_defined_here"), std::string::npos) << error.what();
  }
}

TEST(ObjectLoaderTest, UnresolvableReferenceThrowsNamingIt) {
  std::string object = make_clang_compiler()->compile(
      "extern \"C\" float metajit_no_such_function(float);\n"
      "extern \"C\" void metajit_kernel(float* out) { out[0] = metajit_no_such_function(out[0]); }\n");
  try {
    ObjectLoader::instance().load(object, "metajit_kernel");
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("metajit_no_such_function"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace metajit

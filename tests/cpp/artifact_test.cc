// Tests for the exported-model artifact format (runtime/artifact.h) and the runtime's CPU feature check
// (runtime/cpu_features.h): what is written reads back the same, and what does not hold together is refused.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "runtime/artifact.h"
#include "runtime/cpu_features.h"

namespace metajit {
namespace {

Artifact small_artifact() {
  Artifact artifact;
  artifact.producer = "metajit test";
  artifact.cpu_name = "x86-64";
  artifact.kernel_symbol = "metajit_kernel";
  artifact.values = {{ArtifactValue::Kind::Input, 0, DType::Float32, {2, 3}},
                     {ArtifactValue::Kind::Weight, 0, DType::Float32, {3, 4}},
                     {ArtifactValue::Kind::Computed, 0, DType::Float32, {2, 4}}};
  artifact.inputs = {{"x", 0}};
  artifact.outputs = {{"y", 2}};
  artifact.weights = {std::string(3 * 4 * 4, '\x01')};
  Contraction product;
  product.extents = {{"i", 2}, {"j", 4}, {"k", 3}};
  product.output = {0, {2, 4}, {AffineIndex{{{"i", 1}}, 0}, AffineIndex{{{"j", 1}}, 0}}, {false, false}};
  product.left = {1, {2, 3}, {AffineIndex{{{"i", 1}}, 0}, AffineIndex{{{"k", 1}}, 0}}, {false, false}};
  product.right = {2, {3, 4}, {AffineIndex{{{"k", 1}}, 0}, AffineIndex{{{"j", 1}}, 0}}, {false, false}};
  PostOp scale;
  scale.kind = PostOp::Kind::Linear;
  scale.scale = 0.5;
  scale.shift = -1.25;
  product.post_ops = {scale};
  ArtifactStep step;
  step.output = 2;
  step.inputs = {0, 1};
  step.contraction = product;
  step.description = "matmul float32 [2, 4] created at test.py:1";
  artifact.steps = {step};
  return artifact;
}

TEST(ArtifactTest, ReadsBackWhatWasWritten) {
  Artifact written = small_artifact();
  Artifact read = decode_artifact(encode_artifact(written), "memory");
  EXPECT_EQ(read.producer, "metajit test");
  ASSERT_EQ(read.values.size(), 3u);
  EXPECT_EQ(read.values[1].kind, ArtifactValue::Kind::Weight);
  EXPECT_EQ(read.values[2].shape, (Shape{2, 4}));
  EXPECT_EQ(read.weights, written.weights);
  EXPECT_EQ(read.inputs[0].name, "x");
  EXPECT_EQ(read.outputs[0].name, "y");
  ASSERT_EQ(read.steps.size(), 1u);
  ASSERT_TRUE(read.steps[0].contraction.has_value());
  // The description is every field of the contraction, the post-op's scale and shift to all their digits.
  EXPECT_EQ(read.steps[0].contraction->describe(), written.steps[0].contraction->describe());
  EXPECT_EQ(read.steps[0].description, written.steps[0].description);
}

void expect_refused(const Artifact& artifact, const std::string& message) {
  try {
    decode_artifact(encode_artifact(artifact), "model.mjm");
    FAIL() << "accepted an artifact that should say: " << message;
  } catch (const ArtifactError& error) {
    EXPECT_NE(std::string(error.what()).find("model.mjm is malformed (" + message), std::string::npos) << error.what();
  }
}

TEST(ArtifactTest, RefusesStructureThatDoesNotHoldTogether) {
  Artifact artifact = small_artifact();
  artifact.steps[0].inputs = {0, 7};
  expect_refused(artifact, "a value index is out of range");

  artifact = small_artifact();
  artifact.outputs = {{"y", 1}, {"z", 2}};
  artifact.steps[0].inputs = {0, 2};  // reads its own output before it is made
  expect_refused(artifact, "a step reads a value before it is made");

  artifact = small_artifact();
  artifact.weights[0].resize(5);
  expect_refused(artifact, "a weight of the wrong size");

  artifact = small_artifact();
  artifact.steps[0].output = 0;
  expect_refused(artifact, "a step writes an input");

  artifact = small_artifact();
  artifact.steps[0].contraction.reset();
  expect_refused(artifact, "a step with neither a kernel nor a library call");

  artifact = small_artifact();
  artifact.steps.clear();
  expect_refused(artifact, "an output no step computes");
}

// The flags line of /proc/cpuinfo names the extensions this CPU has, in the kernel's spelling.
std::set<std::string> cpuinfo_flags() {
  std::ifstream file("/proc/cpuinfo");
  std::string line;
  while (std::getline(file, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string word; words >> word;) flags.insert(word);
    return flags;
  }
  return {};
}

TEST(CpuFeaturesTest, ReportsExactlyTheExtensionsThisCpuLacks) {
  std::set<std::string> flags = cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags line on this system";
  // LLVM's spelling on the left, /proc/cpuinfo's on the right.
  const std::pair<const char*, const char*> extensions[] = {{"avx", "avx"},
                                                            {"avx2", "avx2"},
                                                            {"fma", "fma"},
                                                            {"sse4.2", "sse4_2"},
                                                            {"avx512f", "avx512f"},
                                                            {"avx512bw", "avx512bw"},
                                                            {"avx512vnni", "avx512_vnni"},
                                                            {"bmi2", "bmi2"}};
  std::string requested;
  std::set<std::string> expected_missing;
  for (const auto& [llvm, cpuinfo] : extensions) {
    requested += std::string(requested.empty() ? "" : ",") + "+" + llvm;
    if (!flags.count(cpuinfo)) expected_missing.insert(llvm);
  }
  requested += ",-avx512fp16,+made-up-feature";  // disabled ones and unknown ones are never reported
  std::vector<std::string> missing = missing_cpu_features(requested);
  EXPECT_EQ(std::set<std::string>(missing.begin(), missing.end()), expected_missing) << requested;
}

}  // namespace
}  // namespace metajit

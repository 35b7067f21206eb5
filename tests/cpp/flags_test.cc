// Tests of the settings registry (core/flags.h): the table is whole and consistent, each type parses its values,
// and a bad value raises or warns naming the variable and the value, as the setting is declared.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "core/flags.h"

using namespace metajit;

TEST(FlagsTest, EveryFlagHasOneRowAndUniqueName) {
  std::set<std::string> names;
  for (const FlagDeclaration& declaration : flag_declarations()) {
    EXPECT_TRUE(names.insert(declaration.name).second) << declaration.name;
    EXPECT_EQ(std::string(declaration.name).rfind("METAJIT_", 0), 0u) << declaration.name;
    EXPECT_EQ(&flag_declaration(declaration.flag), &declaration) << declaration.name;
    EXPECT_EQ(find_flag_declaration(declaration.name), &declaration);
  }
  EXPECT_EQ(names.size(), size_t(Flag::MemoryBudget) + 1);  // the last enumerator
  EXPECT_EQ(find_flag_declaration("METAJIT_NOT_A_SETTING"), nullptr);
}

TEST(FlagsTest, BooleansAcceptTheUsualSpellingsAndDefaultWhenEmpty) {
  EXPECT_TRUE(parse_boolean_flag(Flag::Lowering, ""));
  EXPECT_FALSE(parse_boolean_flag(Flag::HugePages, ""));
  EXPECT_FALSE(parse_boolean_flag(Flag::Lowering, "0"));
  EXPECT_TRUE(parse_boolean_flag(Flag::HugePages, "1"));
  EXPECT_TRUE(parse_boolean_flag(Flag::CheckNan, "On"));
  EXPECT_FALSE(parse_boolean_flag(Flag::MultipleOutputs, "false"));
}

TEST(FlagsTest, SizesAndChoices) {
  EXPECT_EQ(parse_size_flag(Flag::CacheMaximumSize, ""), uint64_t(2) << 30);
  EXPECT_EQ(parse_size_flag(Flag::CacheMaximumSize, "3K"), 3072u);
  EXPECT_EQ(parse_size_flag(Flag::CacheMaximumSize, "none"), 0u);
  EXPECT_EQ(parse_choice_flag(Flag::Compiler, ""), "clang");
  EXPECT_EQ(parse_choice_flag(Flag::Device, " CUDA "), "cuda");
  EXPECT_EQ(parse_integer_flag(Flag::NumberOfThreads, "3"), 3);
  EXPECT_EQ(parse_integer_flag(Flag::NumberOfThreads, ""), std::nullopt);
}

TEST(FlagsTest, BadValueRaisesNamingVariableAndValue) {
  try {
    parse_size_flag(Flag::CacheMaximumSize, "12 parsecs");
    FAIL() << "no error";
  } catch (const FlagError& error) {
    EXPECT_NE(std::string(error.what()).find("METAJIT_CACHE_MAX_SIZE='12 parsecs'"), std::string::npos);
  }
  EXPECT_THROW(parse_choice_flag(Flag::Compile, "sometimes"), std::invalid_argument);
}

TEST(FlagsTest, BadValueOfSettingReadAtLoadWarnsAndGivesDefault) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(parse_choice_flag(Flag::ConvolutionAlgorithm, "sideways"), "auto");
  EXPECT_TRUE(parse_boolean_flag(Flag::Lowering, "perhaps"));
  EXPECT_EQ(parse_integer_flag(Flag::NumberOfThreads, "4x"), std::nullopt);
  std::string errors = testing::internal::GetCapturedStderr();
  EXPECT_NE(errors.find("METAJIT_CONV_ALGORITHM='sideways' is not a convolution algorithm"), std::string::npos);
  EXPECT_NE(errors.find("METAJIT_LOWERING='perhaps' is not a boolean"), std::string::npos);
  EXPECT_NE(errors.find("METAJIT_NUM_THREADS='4x' is not an integer"), std::string::npos);
}

TEST(FlagsTest, ReadsTheEnvironmentAtEachCall) {
  ::setenv("METAJIT_DUMP_DIR", "", 1);
  EXPECT_EQ(flag_text(Flag::DumpDirectory), std::string());  // set but empty is not unset
  ::unsetenv("METAJIT_DUMP_DIR");
  EXPECT_EQ(flag_text(Flag::DumpDirectory), std::nullopt);
}

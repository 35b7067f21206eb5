// Prelude selection: a kernel gets the pieces its body names, transitively, in prelude order, and nothing else.
#include <gtest/gtest.h>

#include <string>

#include "jit/codegen/common/prelude_selection.h"
#include "jit/codegen/cpp/cpp_prelude.h"

namespace metajit {
namespace {

const PreludePiece kPieces[] = {
    {"uses_later", "int uses_later() { return later(); }\n"},
    {"alpha", "int alpha() { return 1; }\n"},
    {"beta", "int beta() { return alpha() + 1; }\n"},
    {"gamma f u", "int gamma() { return 3; }\n"},
    {"delta", "int delta() { return beta(); }\n"},
    {"later", "int later();\n"},
};
constexpr size_t kCount = sizeof(kPieces) / sizeof(kPieces[0]);

TEST(PreludeSelectionTest, TakesWhatTheBodyNamesTransitivelyInOrder) {
  EXPECT_EQ(PreludeSelector(kPieces, kCount).select("x = delta();"),
            "int alpha() { return 1; }\nint beta() { return alpha() + 1; }\nint delta() { return beta(); }\n");
  EXPECT_EQ(PreludeSelector(kPieces, kCount).select("no helpers here"), "");
  // a piece may name one that comes after it
  EXPECT_EQ(PreludeSelector(kPieces, kCount).select("uses_later()"), "int uses_later() { return later(); }\nint later();\n");
}

TEST(PreludeSelectionTest, NumberSuffixesAndLongerNamesAreNotNames) {
  // 1.5f and 0x7fu carry the letters f and u; gammas and alpha_2 only contain a piece's name
  EXPECT_EQ(PreludeSelector(kPieces, kCount).select("y = 1.5f + 0x7fu + 2e5f; gammas(); alpha_2();"), "");
  EXPECT_EQ(join_prelude_pieces(kPieces, 2), "int uses_later() { return later(); }\nint alpha() { return 1; }\n");
}

TEST(PreludeSelectionTest, CppPreludeCarriesOnlyWhatAKernelUses) {
  std::string plain = cpp_prelude_for("out0[i0] = in0[i0] * 2.0f;");
  EXPECT_NE(plain.find("typedef long long int64_t;"), std::string::npos);
  EXPECT_NE(plain.find("---- end of prelude ----"), std::string::npos);
  EXPECT_EQ(plain.find("mj_exp"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("mj_float_vector"), std::string::npos) << plain;

  std::string scalar_exp = cpp_prelude_for("out0[i0] = mj_exp(in0[i0]);");
  EXPECT_NE(scalar_exp.find("static inline float mj_exp(float x)"), std::string::npos);
  EXPECT_NE(scalar_exp.find("mj_exp_series"), std::string::npos);    // named by mj_exp
  EXPECT_NE(scalar_exp.find("mj_float_to_bits"), std::string::npos);  // and so is this
  EXPECT_EQ(scalar_exp.find("mj_float_vector"), std::string::npos);   // the vector overload stays out

  std::string vector_exp = cpp_prelude_for("mj_store_lanes(&out0[i0], mj_exp_lanes(mj_load_lanes(&in0[i0], n)), n);");
  EXPECT_NE(vector_exp.find("static inline mj_float_vector mj_exp_lanes(mj_float_vector x)"), std::string::npos);
  EXPECT_NE(vector_exp.find("mj_exp_series"), std::string::npos);
  EXPECT_EQ(vector_exp.find("static inline float mj_exp(float x)"), std::string::npos) << vector_exp;  // scalar
  // Without AVX-512 the full range is the runtime support object's: declared, and its definition skipped.
  EXPECT_NE(vector_exp.find("extern \"C\" mj_float_vector mj_exp_outside_86(mj_float_vector x);"), std::string::npos);
  EXPECT_NE(vector_exp.find("#if defined(__AVX512F__) || defined(MJ_RUNTIME_SUPPORT)"), std::string::npos);

  std::string half = cpp_prelude_for("out0[i0] = mj_round_to_half(in0[i0]);");
  EXPECT_NE(half.find("#define MJ_FUNCTION"), std::string::npos);  // the portable pieces' qualifiers
  EXPECT_NE(half.find("mj_float_to_half"), std::string::npos);
  EXPECT_LT(half.find("mj_bits_to_float("), half.find("mj_half_to_float("));  // defined before use
}

}  // namespace
}  // namespace metajit

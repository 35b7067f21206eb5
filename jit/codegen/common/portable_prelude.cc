// Raw strings, so the generated source is exactly what is shown by inspection tools.
#include "jit/codegen/common/portable_prelude.h"

namespace metajit {

const PreludePiece kPortablePieces[] = {
    {"mj_half_to_float", R"PRELUDE(MJ_FUNCTION float mj_half_to_float(uint16_t half) {
  uint32_t sign = (uint32_t)(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1f, mantissa = half & 0x3ffu;
  if (exponent == 0x1f) return mj_bits_to_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    float value = (float)mantissa * 5.9604644775390625e-8f;  // 2^-24
    return sign ? -value : value;
  }
  return mj_bits_to_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}
)PRELUDE"},
    {"mj_float_to_half", R"PRELUDE(MJ_FUNCTION uint16_t mj_float_to_half(float value) {  // round to nearest even
  uint32_t bits = mj_float_to_bits(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
  if (magnitude >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {  // subnormal half
    float scaled = mj_bits_to_float(magnitude) * 16777216.0f;  // 2^24
    return (uint16_t)(sign | (uint32_t)MJ_MATH(rintf)(scaled));
  }
  uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}
)PRELUDE"},
    {"mj_round_to_half", R"PRELUDE(MJ_FUNCTION float mj_round_to_half(float value) { return mj_half_to_float(mj_float_to_half(value)); }
)PRELUDE"},
    {"mj_floor_divide", R"PRELUDE(MJ_FUNCTION int64_t mj_floor_divide(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0ull - (uint64_t)a);
  int64_t quotient = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? quotient - 1 : quotient;
}
)PRELUDE"},
    {"mj_floor_modulo", R"PRELUDE(MJ_FUNCTION int64_t mj_floor_modulo(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t remainder = a % b;
  return (remainder != 0 && ((remainder < 0) != (b < 0))) ? remainder + b : remainder;
}
)PRELUDE"},
    {"mj_float_floor_divide", R"PRELUDE(// Float floor division with Python/numpy semantics: derived from fmod so that a == (a // b) * b + a % b holds
// (floor(a / b) would give 1.0 // 0.1 == 10, numpy and Python give 9). A zero divisor gives a / b (inf or nan).
MJ_FUNCTION float mj_float_floor_divide(float a, float b) {
  if (b == 0.0f) return a / b;
  float remainder = fmodf(a, b);
  float quotient = (a - remainder) / b;
  if (remainder != 0.0f && ((b < 0.0f) != (remainder < 0.0f))) quotient -= 1.0f;
  if (quotient == 0.0f) return MJ_MATH(copysignf)(0.0f, a / b);
  float floored = MJ_MATH(floorf)(quotient);
  return quotient - floored > 0.5f ? floored + 1.0f : floored;
}
MJ_FUNCTION double mj_float_floor_divide(double a, double b) {
  if (b == 0.0) return a / b;
  double remainder = fmod(a, b);
  double quotient = (a - remainder) / b;
  if (remainder != 0.0 && ((b < 0.0) != (remainder < 0.0))) quotient -= 1.0;
  if (quotient == 0.0) return MJ_MATH(copysign)(0.0, a / b);
  double floored = MJ_MATH(floor)(quotient);
  return quotient - floored > 0.5 ? floored + 1.0 : floored;
}
)PRELUDE"},
    {"mj_integer_power", R"PRELUDE(MJ_FUNCTION int64_t mj_integer_power(int64_t base, int64_t exponent) {
  if (exponent < 0) return base == 1 ? 1 : (base == -1 ? ((exponent & 1) ? -1 : 1) : 0);
  uint64_t result = 1, factor = (uint64_t)base;
  while (exponent) { if (exponent & 1) result *= factor; factor *= factor; exponent >>= 1; }
  return (int64_t)result;
}
)PRELUDE"},
    {"mj_max", R"PRELUDE(template <typename T> MJ_FUNCTION T mj_max(T a, T b) { return (a != a || a > b) ? a : b; }
)PRELUDE"},
    {"mj_min", R"PRELUDE(template <typename T> MJ_FUNCTION T mj_min(T a, T b) { return (a != a || a < b) ? a : b; }
)PRELUDE"},
};
const size_t kPortablePieceCount = sizeof(kPortablePieces) / sizeof(kPortablePieces[0]);

const char* const kIntegerTypes = R"PRELUDE(typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
)PRELUDE";

}  // namespace metajit

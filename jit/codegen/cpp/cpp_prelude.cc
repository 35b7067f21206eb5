// The C++ prelude: integer typedefs, libm declarations, a vectorisable exp/log, the portable helpers
// (float16, floor division, NaN-aware max/min), order keys for max/min reductions and the explicit-SIMD vector
// helpers. Raw strings, so the generated source is exactly what is shown by inspection tools; each kernel gets
// only the pieces it names (jit/codegen/common/prelude_selection.h).
#include "jit/codegen/cpp/cpp_prelude.h"

#include "jit/codegen/common/portable_prelude.h"
#include "jit/codegen/common/prelude_selection.h"

#include <iterator>
#include <vector>

namespace metajit {

namespace {
// Before the portable pieces: what they build on.
const PreludePiece kCppBefore[] = {
    {"expf logf sinf cosf tanhf powf fmodf exp log sin cos tanh pow fmod",
     R"PRELUDE(extern "C" {
float expf(float); float logf(float); float sinf(float); float cosf(float); float tanhf(float);
float powf(float, float); float fmodf(float, float);
double exp(double); double log(double); double sin(double); double cos(double); double tanh(double);
double pow(double, double); double fmod(double, double);
}
)PRELUDE"},
    {"log1pf expm1f log2f log10f erff tanf asinf acosf atanf sinhf coshf "
     "log1p expm1 log2 log10 erf tan asin acos atan sinh cosh",
     R"PRELUDE(extern "C" {
float log1pf(float); float expm1f(float); float log2f(float); float log10f(float); float erff(float);
float tanf(float); float asinf(float); float acosf(float); float atanf(float); float sinhf(float); float coshf(float);
double log1p(double); double expm1(double); double log2(double); double log10(double); double erf(double);
double tan(double); double asin(double); double acos(double); double atan(double); double sinh(double);
double cosh(double);
}
)PRELUDE"},
    {"mj_bits_to_float mj_float_to_bits",
     R"PRELUDE(static inline float mj_bits_to_float(uint32_t bits) { float value; __builtin_memcpy(&value, &bits, 4); return value; }
static inline uint32_t mj_float_to_bits(float value) { uint32_t bits; __builtin_memcpy(&bits, &value, 4); return bits; }
)PRELUDE"},
    {"mj_exp_series",
     R"PRELUDE(// exp for float32 without a libm call, so loops around it vectorise: exp(x) = 2^n * p(r), |r| <= ln2/2.
// n = round(x / ln2) comes from adding 1.5 * 2^23, which leaves n in the sum's low mantissa bits (no floor, no
// float-to-int conversion). p is a degree-6 near-minimax fit of e^r with its first two terms exactly 1 (relative
// error 3e-9 before rounding). 2^n goes in by adding n - 1 to p's exponent bits (exact: the result stays normal)
// and one multiply by 2, which overflows to inf past 88.72 by itself; below n = -124 it is n + 25 and a multiply
// by 2^-25, which rounds once into the subnormals and to 0 below -103.97. Below -104 (masked softmax lanes are
// exp(-inf)) the reduction runs on 0 instead and the result is selected as 0: the underflowing multiply (or
// scalef) that gave that 0 took a microcode assist on Intel CPUs, about 100 ns a vector, which made a causal
// softmax 6x slower than a plain one. Within 0.91 ulp of exp over every float32 input (checked against double exp
// over all 2^32 bit patterns).
template <typename T> static inline T mj_exp_series(T r) {
  T p = r * 1.381461275741458e-3f + 8.368710055947304e-3f;
  p = p * r + 4.166838899254799e-2f;
  p = p * r + 1.666652113199234e-1f;
  p = p * r + 4.999999403953552e-1f;
  p = p * r + 1.0f;
  return p * r + 1.0f;
}
)PRELUDE"},
    {"mj_exp",
     R"PRELUDE(static inline float mj_exp(float x) {
  bool vanishing = x < -104.0f;
  float clamped = vanishing ? 0.0f : (x > 89.0f ? 89.0f : x);
  float shifted = clamped * 1.44269504088896341f + 12582912.0f;
  float n = shifted - 12582912.0f;
  float r = clamped - n * 0.693359375f + n * 2.12194440e-4f;
  float p = mj_exp_series(r);
  int32_t exponent = (int32_t)(mj_float_to_bits(shifted) - 0x4B400000u);
  bool tiny = exponent < -124;
  float scaled = mj_bits_to_float(mj_float_to_bits(p) + ((uint32_t)(exponent + (tiny ? 25 : -1)) << 23));
  float result = scaled * (tiny ? 2.98023223876953125e-8f : 2.0f);
  return x != x ? x : (vanishing ? 0.0f : result);
}
)PRELUDE"},
    {"mj_tanh_series",
     R"PRELUDE(// tanh for float32 without a libm call (glibc's tanhf is a scalar call of about 50 cycles, 6x PyTorch's
// vectorised tanh). Below |x| = 0.625: x + x^3 P(x^2), P a degree-5 least-squares fit of (tanh x - x) / x^3
// weighted for relative error. From there on 1 - 2 / (e^(2|x|) + 1), which loses at most one bit to the
// subtraction there and reaches exactly 1 once e^(2|x|) is huge or inf. Within 2 ulp of tanh over float32
// inputs spread over every bit pattern (checked against double tanh); NaN stays NaN, -0 stays -0.
template <typename T> static inline T mj_tanh_series(T x) {
  T u = x * x;
  T p = u * 2.148957457393408e-3f - 8.18463321775198e-3f;
  p = p * u + 2.1703990176320076e-2f;
  p = p * u - 5.394745245575905e-2f;
  p = p * u + 1.3333211839199066e-1f;
  p = p * u - 3.333333134651184e-1f;
  return x + x * u * p;
}
)PRELUDE"},
    {"mj_tanh",
     R"PRELUDE(// Odd: computed for |x|, then given x's sign (so -0 stays -0).
static inline float mj_tanh(float x) {
  float magnitude = __builtin_fabsf(x);
  float result = magnitude < 0.625f ? mj_tanh_series(magnitude)
                                    : 1.0f - 2.0f / (mj_exp(magnitude + magnitude) + 1.0f);
  return __builtin_copysignf(result, x);
}
)PRELUDE"},
    {"mj_erf mj_erf_near_zero mj_erfc_exponent",
     R"PRELUDE(// erf for float32 without a libm call (glibc's erff is a scalar call), within 1 ulp of erf over every float32
// input (checked against double erf over all 2^31 non-negative bit patterns, with FMA). Odd: computed for
// m = |x|, then given x's sign, so -0 stays -0 and NaN passes through. Below m = 1: m + m P(m^2), P of degree 6
// with constant term 2/sqrt(pi) - 1. From 1 to 3.9375: 1 - exp(Q(m - 2.46875) - m^2), Q of degree 6 standing
// for log(erfc m) + m^2, so exp carries the fast decay and Q stays smooth. Both are minimax fits weighted by how
// much their error moves erf in float32 ulps (an error in Q moves erf by erfc m times it, so Q may be loose
// where erfc is small), coefficients rounded to float one by one, the rest refitted. From 3.9375 on erf rounds
// to 1. Both forms are computed and one is selected, so loops vectorise.
template <typename T> static inline T mj_erf_near_zero(T m) {
  T u = m * m;
  T p = u * 7.893988368e-05f - 8.023963892e-04f;
  p = p * u + 5.190125667e-03f;
  p = p * u - 2.685491182e-02f;
  p = p * u + 1.128361598e-01f;
  p = p * u - 3.761262894e-01f;
  p = p * u + 1.283791671e-01f;
  return m + m * p;
}
template <typename T> static inline T mj_erfc_exponent(T m) {
  T t = m - 2.46875f;
  T q = t * 1.855947630e-04f - 1.907108381e-04f;
  q = q * t + 2.485037316e-03f;
  q = q * t - 1.102639828e-02f;
  q = q * t + 5.713410676e-02f;
  q = q * t - 3.562327027e-01f;
  q = q * t - 1.545740962e+00f;
  return q - m * m;
}
// Above 1, Q(m) - m^2 lies in [-18.3, -1.8] (m clamped to 3.9375, where 1 - erfc already rounds to 1): exp of
// it is mj_exp's reduction and series without the clamps and the subnormal path, 2^n added to the exponent bits.
// A NaN fails m >= 1 and takes the near-zero form, which keeps it NaN.
static inline float mj_erf(float x) {
  float magnitude = __builtin_fabsf(x);
  float clamped = magnitude < 3.9375f ? magnitude : 3.9375f;
  float exponent = mj_erfc_exponent(clamped);
  float shifted = exponent * 1.44269504088896341f + 12582912.0f;
  float n = shifted - 12582912.0f;
  float r = exponent - n * 0.693359375f + n * 2.12194440e-4f;
  float erfc = mj_bits_to_float(mj_float_to_bits(mj_exp_series(r)) + (mj_float_to_bits(shifted) << 23));
  float result = magnitude >= 1.0f ? 1.0f - erfc : mj_erf_near_zero(magnitude);
  return __builtin_copysignf(result, x);
}
)PRELUDE"},
    {"mj_sin mj_cos mj_sin_series mj_cos_series mj_two_over_pi mj_pi_over_2_high mj_pi_over_2_low mj_rounding_shift",
     R"PRELUDE(// sin and cos for float32 without a libm call (glibc's sinf / cosf are scalar calls), exact to within 1 ulp.
// Below |x| = 2^20: x = j pi/2 + r, j the integer nearest x * 2/pi, and r = x - j pi/2 in double with pi/2 in two
// parts (the first has 33 significant bits, so j times it is exact and so is x minus that); |r| <= pi/4 or a
// hair more. sin r and cos r are Taylor series to r^11 and r^12 in double (truncation below 1e-11), j mod 4
// picks which and its sign, and the result is rounded to float once. From 2^20 on, and for inf and NaN: libm.
static const double mj_two_over_pi = 0.6366197723675814;
static const double mj_pi_over_2_high = 1.5707963267341256;    // 0x1.921fb544p+0
static const double mj_pi_over_2_low = 6.077100506506192e-11;  // pi/2 - mj_pi_over_2_high
static const double mj_rounding_shift = 6755399441055744.0;     // 1.5 * 2^52: adding it rounds to an integer
template <typename D> static inline D mj_sin_series(D r, D r2) {
  D p = r2 * (-1.0 / 39916800) + 1.0 / 362880;
  p = p * r2 - 1.0 / 5040;
  p = p * r2 + 1.0 / 120;
  p = p * r2 - 1.0 / 6;
  return r * (1.0 + r2 * p);  // a product, so sin(-0) is -0 (r + r * r2 * p would add +0 to it)
}
template <typename D> static inline D mj_cos_series(D r2) {
  D p = r2 * (1.0 / 479001600) - 1.0 / 3628800;
  p = p * r2 + 1.0 / 40320;
  p = p * r2 - 1.0 / 720;
  p = p * r2 + 1.0 / 24;
  p = p * r2 - 0.5;
  return 1.0 + r2 * p;
}
// x reduced to r, with j mod 4 in *quadrant.
static inline double mj_quarter_turns(float x, int64_t* quadrant) {
  double shifted = (double)x * mj_two_over_pi + mj_rounding_shift;
  double turns = shifted - mj_rounding_shift;
  int64_t bits; __builtin_memcpy(&bits, &shifted, 8);
  *quadrant = bits & 3;  // the low mantissa bits hold 2^51 + j
  return ((double)x - turns * mj_pi_over_2_high) - turns * mj_pi_over_2_low;
}
static inline float mj_sin(float x) {
  if (!(__builtin_fabsf(x) < 1048576.0f)) return sinf(x);
  int64_t quadrant;
  double r = mj_quarter_turns(x, &quadrant), r2 = r * r;
  double value = (quadrant & 1) ? mj_cos_series(r2) : mj_sin_series(r, r2);
  return (float)((quadrant & 2) ? -value : value);
}
static inline float mj_cos(float x) {
  if (!(__builtin_fabsf(x) < 1048576.0f)) return cosf(x);
  int64_t quadrant;
  double r = mj_quarter_turns(x, &quadrant), r2 = r * r;
  double value = (quadrant & 1) ? mj_sin_series(r, r2) : mj_cos_series(r2);
  return (float)(((quadrant + 1) & 2) ? -value : value);
}
)PRELUDE"},
    {"mj_log mj_log1p mj_log_reduced mj_log_split mj_log_special",
     R"PRELUDE(// log and log1p for float32 without a libm call, so loops around them vectorise. log(m 2^k) = k ln2 + log(1 + f)
// with m in [sqrt(1/2), sqrt(2)) and f = m - 1 exact. With s = f / (2 + f), log(1 + f) = 2s + s R(s^2), R the
// tail of the odd series 2 (s + s^3/3 + ...); as 2s = f - hfsq + s hfsq (hfsq = f^2 / 2), that is
// f - (hfsq - s (hfsq + R)): the leading f is exact and the rest small. ln2 is split so k ln2_high is exact.
// Subnormal inputs are scaled into the normal range first. Within 0.83 ulp of log and of log1p over float32
// inputs spread over every bit pattern (checked against double log and log1p); -0, inf, NaN and x <= 0 (x <= -1
// for log1p) as libm. glibc's log1pf is a scalar call: 10x PyTorch's vectorised log1p.
static inline float mj_log_reduced(float f, float k, float correction) {
  float s = f / (2.0f + f);
  float z = s * s;
  float tail = z * (0.666666686534881591796875f + z * (0.4000000059604644775390625f +
               z * (0.2857142984867095947265625f + z * (0.222222223877906799316406f + z * 0.181818187236785888671875f))));
  float hfsq = 0.5f * f * f;
  return k * 0.693359375f + (f - (hfsq - (s * (hfsq + tail) + (k * -2.12194440e-4f + correction))));
}
static inline float mj_log_split(float u, float* k) {
  bool subnormal = u < 1.17549435e-38f;
  uint32_t bits = mj_float_to_bits(subnormal ? u * 8388608.0f : u);
  int32_t exponent = (int32_t)((bits >> 23) & 0xff) - 127 - (subnormal ? 23 : 0);
  float mantissa = mj_bits_to_float((bits & 0x007fffffu) | 0x3f800000u);
  int big = mantissa > 1.41421356f;
  *k = (float)(exponent + big);
  return big ? mantissa * 0.5f : mantissa;
}
static inline float mj_log_special(float x, float result) {
  result = x == __builtin_inff() ? x : result;
  result = x == 0.0f ? -__builtin_inff() : result;
  result = x < 0.0f ? __builtin_nanf("") : result;
  return x != x ? x : result;
}
static inline float mj_log(float x) {
  float k;
  float m = mj_log_split(x, &k);
  return mj_log_special(x, mj_log_reduced(m - 1.0f, k, 0.0f));
}
// log(u) for u = 1 + x rounded, plus what the rounding took: (x - (u - 1)) / u.
static inline float mj_log1p(float x) {
  float u = 1.0f + x;
  float k;
  float m = mj_log_split(u, &k);
  float result = mj_log_special(u, mj_log_reduced(m - 1.0f, k, (x - (u - 1.0f)) / u));
  return x == 0.0f ? x : result;  // keeps -0
}
)PRELUDE"},
    {"mj_expm1",
     R"PRELUDE(// expm1 for float32 without a libm call (glibc's expm1f is a scalar call: 10x PyTorch's vectorised expm1).
// x = n ln2 + r as in mj_exp, expm1(r) = r + r^2 q(r) (Taylor to r^8, |r| <= ln2/2), and
// expm1(x) = 2^n expm1(r) + (2^n - 1), formed as (2^(n-1) expm1(r) + (2^(n-1) - 1/2)) * 2 so that 2^(n-1) stays a
// normal float up to n = 128 and the product overflows to inf by itself. Below -30 the result is -1 (e^x is under
// half an ulp of 1). Within 1.44 ulp of expm1 over float32 inputs spread over every bit pattern (checked against
// double expm1); -0, inf and NaN as libm.
static inline float mj_expm1(float x) {
  float clamped = x > 89.0f ? 89.0f : (x < -30.0f ? -30.0f : x);
  float shifted = clamped * 1.44269504088896341f + 12582912.0f;
  float n = shifted - 12582912.0f;
  float r = clamped - n * 0.693359375f + n * 2.12194440e-4f;
  float q = r * 2.48015873015873e-5f + 1.984126984126984e-4f;
  q = q * r + 1.388888888888889e-3f;
  q = q * r + 8.333333333333333e-3f;
  q = q * r + 4.1666666666666664e-2f;
  q = q * r + 1.6666666666666666e-1f;
  q = q * r + 0.5f;
  float small = r + r * r * q;
  int32_t exponent = (int32_t)(mj_float_to_bits(shifted) - 0x4B400000u);
  float half_power = mj_bits_to_float((uint32_t)(exponent + 126) << 23);  // 2^(n-1)
  float result = (half_power * small + (half_power - 0.5f)) * 2.0f;
  return x == 0.0f ? x : result;  // keeps -0; NaN passes through the arithmetic
}
)PRELUDE"},
    {"MJ_FUNCTION MJ_MATH",
     R"PRELUDE(#define MJ_FUNCTION static inline
#define MJ_MATH(name) __builtin_##name
)PRELUDE"},
};
// After them: the reductions' order keys and the vector helpers of row loops. The vector helpers are one piece
// named by vector-only identifiers: a scalar kernel naming mj_exp or mj_max must not pull the vector overloads.
const PreludePiece kCppAfter[] = {
    {"mj_order_key mj_from_order_key",
     R"PRELUDE(// Floats as integers in the same order (negative values flipped), so max/min reductions become integer
// max/min, which vectorise; NaNs are tracked by a separate flag because LLVM will not vectorise a NaN-aware
// float max.
static inline int32_t mj_order_key(float value) {
  int32_t bits; __builtin_memcpy(&bits, &value, 4); return bits ^ ((bits >> 31) & 0x7fffffff);
}
static inline int64_t mj_order_key(double value) {
  int64_t bits; __builtin_memcpy(&bits, &value, 8); return bits ^ ((bits >> 63) & 0x7fffffffffffffffLL);
}
static inline float mj_from_order_key(int32_t key) {
  int32_t bits = key ^ ((key >> 31) & 0x7fffffff); float value; __builtin_memcpy(&value, &bits, 4); return value;
}
static inline double mj_from_order_key(int64_t key) {
  int64_t bits = key ^ ((key >> 63) & 0x7fffffffffffffffLL); double value; __builtin_memcpy(&value, &bits, 8); return value;
}
)PRELUDE"},
    {"MJ_LANES mj_float_vector mj_mask_vector mj_load_vector mj_store_vector mj_load_lanes mj_store_lanes mj_splat "
     "mj_splat_mask mj_sum_lanes mj_max_lane mj_min_lane mj_any_lane",
     R"PRELUDE(// Explicit SIMD for the row loops of row kernels (jit/vector_expression_renderer.cc): GCC-style vectors of
// MJ_LANES floats (Clang and g++ both take them), one register of the widest unit the kernel is compiled for.
// Arithmetic with a scalar operand splats it; comparisons give masks (-1 or 0 per lane). Loads and stores go
// through memcpy: unaligned, and no aliasing assumptions beyond float's.
#if defined(__AVX512F__)
#define MJ_LANES 16
#elif defined(__AVX__)
#define MJ_LANES 8
#else
#define MJ_LANES 4
#endif
typedef float mj_float_vector __attribute__((vector_size(MJ_LANES * 4)));
typedef int32_t mj_mask_vector __attribute__((vector_size(MJ_LANES * 4)));
static inline mj_float_vector mj_load_vector(const float* address) {
  mj_float_vector value; __builtin_memcpy(&value, address, sizeof(value)); return value;
}
static inline void mj_store_vector(float* address, mj_float_vector value) {
  __builtin_memcpy(address, &value, sizeof(value));
}
// Splats by scalar-vector arithmetic rather than a loop over lanes, which LLVM had to unroll and fold back into
// one broadcast at every use. `value - 0` keeps -0 and NaN payloads (`0 + value` would turn -0 into +0).
static inline mj_float_vector mj_splat(float value) { return value - (mj_float_vector){}; }
static inline mj_mask_vector mj_splat_mask(bool value) { return (value ? -1 : 0) + (mj_mask_vector){}; }
// The first `lanes` floats at `address` (1 <= lanes <= MJ_LANES), the other lanes 0, reading nothing past them;
// and the store of a vector's first `lanes` lanes. An element loop's last, partial vector uses them, so the
// loop body is compiled once. AVX-512 masks the lanes. AVX takes a whole vector the plain way and masks only a
// partial one (vmaskmovps, whose stores are slow on AMD: masking every vector made kernels 1.7x slower); its
// lane loop had become a chain of about 40 blends, and half of a small kernel's compile time. SSE takes a whole
// vector the plain way and loops over a partial one's lanes.
static inline mj_float_vector mj_load_lanes(const float* address, int64_t lanes) {
#if defined(__AVX512F__)
  return __builtin_ia32_loadups512_mask(address, mj_splat(0.0f), (unsigned short)((1u << lanes) - 1u));
#elif defined(__AVX__)
  if (lanes == MJ_LANES) return mj_load_vector(address);
  const mj_mask_vector lane_index = {0, 1, 2, 3, 4, 5, 6, 7};
  return __builtin_ia32_maskloadps256((const mj_float_vector*)address, lane_index < (int32_t)lanes);
#else
  if (lanes == MJ_LANES) return mj_load_vector(address);
  mj_float_vector value = mj_splat(0.0f);
  for (int64_t lane = 0; lane < lanes; ++lane) value[lane] = address[lane];
  return value;
#endif
}
static inline void mj_store_lanes(float* address, mj_float_vector value, int64_t lanes) {
#if defined(__AVX512F__)
  __builtin_ia32_storeups512_mask(address, value, (unsigned short)((1u << lanes) - 1u));
#elif defined(__AVX__)
  if (lanes == MJ_LANES) return mj_store_vector(address, value);
  const mj_mask_vector lane_index = {0, 1, 2, 3, 4, 5, 6, 7};
  __builtin_ia32_maskstoreps256((mj_float_vector*)address, lane_index < (int32_t)lanes, value);
#else
  if (lanes == MJ_LANES) return mj_store_vector(address, value);
  for (int64_t lane = 0; lane < lanes; ++lane) address[lane] = value[lane];
#endif
}
static inline mj_float_vector mj_max(mj_float_vector a, mj_float_vector b) { return ((a != a) | (a > b)) ? a : b; }
static inline mj_float_vector mj_min(mj_float_vector a, mj_float_vector b) { return ((a != a) | (a < b)) ? a : b; }
static inline mj_float_vector mj_abs(mj_float_vector x) { return (mj_float_vector)((mj_mask_vector)x & 0x7fffffff); }
static inline mj_mask_vector mj_order_key(mj_float_vector value) {
  mj_mask_vector bits = (mj_mask_vector)value; return bits ^ ((bits >> 31) & 0x7fffffff);
}
// Across the lanes of one vector. Clang reduces integer lanes with one builtin; a loop over lanes costs a compile
// about 2 ms of unrolling and folding back. The float sum keeps its loop: its order is part of the result.
static inline float mj_sum_lanes(mj_float_vector value) {
  float sum = value[0];
  for (int lane = 1; lane < MJ_LANES; ++lane) sum += value[lane];
  return sum;
}
#if defined(__clang__)
static inline int32_t mj_max_lane(mj_mask_vector keys) { return __builtin_reduce_max(keys); }
static inline int32_t mj_min_lane(mj_mask_vector keys) { return __builtin_reduce_min(keys); }
static inline bool mj_any_lane(mj_mask_vector mask) { return __builtin_reduce_or(mask) != 0; }
#else
static inline int32_t mj_max_lane(mj_mask_vector keys) {
  int32_t result = keys[0];
  for (int lane = 1; lane < MJ_LANES; ++lane) result = keys[lane] > result ? keys[lane] : result;
  return result;
}
static inline int32_t mj_min_lane(mj_mask_vector keys) {
  int32_t result = keys[0];
  for (int lane = 1; lane < MJ_LANES; ++lane) result = keys[lane] < result ? keys[lane] : result;
  return result;
}
static inline bool mj_any_lane(mj_mask_vector mask) {
  int32_t any = 0;
  for (int lane = 0; lane < MJ_LANES; ++lane) any |= mask[lane];
  return any != 0;
}
#endif
)PRELUDE"},
    {"mj_double_vector mj_long_vector",
     R"PRELUDE(// MJ_LANES doubles or int64s: two registers of the float width each. Lane i goes with lane i of an mj_float_vector.
typedef double mj_double_vector __attribute__((vector_size(MJ_LANES * 8)));
typedef int64_t mj_long_vector __attribute__((vector_size(MJ_LANES * 8)));
)PRELUDE"},
    {"mj_index_lanes",
     R"PRELUDE(// An element loop's index at each lane of the vector starting at `first` (int64, as the index language computes):
// index arithmetic and comparisons (a causal mask's j <= i, an arange) then run on lanes, not lane by lane.
static inline mj_long_vector mj_index_lanes(int64_t first) {
#if MJ_LANES == 16
  const mj_long_vector offsets = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#elif MJ_LANES == 8
  const mj_long_vector offsets = {0, 1, 2, 3, 4, 5, 6, 7};
#else
  const mj_long_vector offsets = {0, 1, 2, 3};
#endif
  return first + offsets;
}
)PRELUDE"},
    {"mj_exp_any_range",
     R"PRELUDE(// The scalar exp on every lane, bit for bit (same reduction and polynomial). AVX-512 applies 2^n with vscalefps, which
// rounds once into the subnormals and overflows to inf by itself (11 instructions a vector instead of about 20).
// Without AVX-512 only the runtime support object (jit/runtime_support.cc) compiles it: kernels skip its text.
#if defined(__AVX512F__) || defined(MJ_RUNTIME_SUPPORT)
static inline mj_float_vector mj_exp_any_range(mj_float_vector x) {
  mj_float_vector upper = x > 89.0f ? mj_splat(89.0f) : x;  // NaN stays NaN through the clamp
  mj_mask_vector vanishing = x < -104.0f;  // exp rounds to 0: computed on 0, then selected (as the scalar exp)
  mj_float_vector clamped = vanishing ? mj_splat(0.0f) : upper;
  mj_float_vector shifted = clamped * 1.44269504088896341f + 12582912.0f;
  mj_float_vector n = shifted - 12582912.0f;
  mj_float_vector r = clamped - n * 0.693359375f + n * 2.12194440e-4f;
  mj_float_vector p = mj_exp_series(r);
#if defined(__AVX512F__)
  mj_float_vector result = __builtin_ia32_scalefps512_mask(p, n, p, (unsigned short)0xffff, 4 /* current rounding */);
  return vanishing ? mj_splat(0.0f) : result;
#else
  mj_mask_vector exponent = (mj_mask_vector)shifted - 0x4B400000;
  mj_mask_vector tiny = exponent < -124;
  mj_mask_vector offset = (tiny & 26) - 1;  // 25 when tiny, else -1
  mj_float_vector scaled = (mj_float_vector)((mj_mask_vector)p + ((exponent + offset) << 23));
  mj_float_vector result = scaled * (tiny ? mj_splat(2.98023223876953125e-8f) : mj_splat(2.0f));
  return x != x ? x : (vanishing ? mj_splat(0.0f) : result);
#endif
}
#endif
)PRELUDE"},
    {"mj_exp_lanes mj_exp_outside_86",
     R"PRELUDE(#if defined(__AVX512F__)
static inline mj_float_vector mj_exp_lanes(mj_float_vector x) { return mj_exp_any_range(x); }
#else
// Without vscalefps the full form spends about 10 of its 22 operations on clamps, the subnormal range and NaN.
// When every lane is within 86 of 0 (n within +-124: p 2^n stays normal) none of that can happen, and 2^n goes
// straight into p's exponent bits, with the same bits. Other vectors call the full form, which is compiled once
// into the runtime support object (jit/runtime_support.cc) with these flags: compiling it into every kernel
// took a third of a small exp kernel's compile time.
extern "C" mj_float_vector mj_exp_outside_86(mj_float_vector x);
static inline mj_float_vector mj_exp_lanes(mj_float_vector x) {
  if (__builtin_expect(mj_any_lane(~((mj_mask_vector)(mj_abs(x) <= 86.0f))), 0)) return mj_exp_outside_86(x);
  mj_float_vector shifted = x * 1.44269504088896341f + 12582912.0f;
  mj_float_vector n = shifted - 12582912.0f;
  mj_float_vector r = x - n * 0.693359375f + n * 2.12194440e-4f;
  return (mj_float_vector)((mj_mask_vector)mj_exp_series(r) + ((mj_mask_vector)shifted << 23));
}
#endif
)PRELUDE"},
    {"mj_tanh_lanes",
     R"PRELUDE(// The scalar tanh on every lane: both of its forms, the one for each lane's magnitude, then the lane's sign.
static inline mj_float_vector mj_tanh_lanes(mj_float_vector x) {
  mj_float_vector magnitude = mj_abs(x);
  mj_float_vector result = magnitude < 0.625f ? mj_tanh_series(magnitude)
                                              : 1.0f - 2.0f / (mj_exp_lanes(magnitude + magnitude) + 1.0f);
  return (mj_float_vector)((mj_mask_vector)result | ((mj_mask_vector)x & (int32_t)0x80000000u));
}
)PRELUDE"},
    {"mj_sin_lanes mj_cos_lanes",
     R"PRELUDE(// mj_sin / mj_cos on every lane: the same reduction and series, on MJ_LANES doubles; lanes from 2^20 on
// (and inf, NaN) go to libm one by one. A piece of its own, so only kernels that take sin or cos lane-wise
// parse it.
static inline mj_double_vector mj_quarter_turns(mj_float_vector x, mj_long_vector* quadrant) {
  mj_double_vector wide = __builtin_convertvector(x, mj_double_vector);
  mj_double_vector shifted = wide * mj_two_over_pi + mj_rounding_shift;
  mj_double_vector turns = shifted - mj_rounding_shift;
  *quadrant = (mj_long_vector)shifted & 3;
  return (wide - turns * mj_pi_over_2_high) - turns * mj_pi_over_2_low;
}
// Out of line: a kernel inlines sin or cos hundreds of times (a long chain's backward), and Clang unrolled this
// loop with its libm calls at every copy, which made a 650-op kernel take 5 s to compile.
static __attribute__((noinline, cold)) mj_float_vector mj_sin_cos_outside(mj_float_vector x, mj_float_vector result,
                                                                         int64_t cosine) {
  for (int lane = 0; lane < MJ_LANES; ++lane)
    if (!(__builtin_fabsf(x[lane]) < 1048576.0f)) result[lane] = cosine ? cosf(x[lane]) : sinf(x[lane]);
  return result;
}
static inline mj_float_vector mj_sin_cos(mj_float_vector x, int64_t cosine) {
  mj_long_vector quadrant;
  mj_double_vector r = mj_quarter_turns(x, &quadrant), r2 = r * r;
  quadrant += cosine;  // cos x = sin(x + pi/2)
  mj_double_vector value = (quadrant & 1) != 0 ? mj_cos_series(r2) : mj_sin_series(r, r2);
  value = (quadrant & 2) != 0 ? -value : value;
  mj_float_vector result = __builtin_convertvector(value, mj_float_vector);
  mj_mask_vector outside = ~((mj_mask_vector)(mj_abs(x) < 1048576.0f));
  if (mj_any_lane(outside)) result = mj_sin_cos_outside(x, result, cosine);
  return result;
}
static inline mj_float_vector mj_sin_lanes(mj_float_vector x) { return mj_sin_cos(x, 0); }
static inline mj_float_vector mj_cos_lanes(mj_float_vector x) { return mj_sin_cos(x, 1); }
)PRELUDE"},
    {"mj_erf_lanes",
     R"PRELUDE(// mj_erf on every lane: both forms, the one for each lane's magnitude, then the lane's sign.
static inline mj_float_vector mj_erf_lanes(mj_float_vector x) {
  mj_float_vector magnitude = mj_abs(x);
  mj_float_vector clamped = magnitude < 3.9375f ? magnitude : mj_splat(3.9375f);
  mj_float_vector exponent = mj_erfc_exponent(clamped);
  mj_float_vector shifted = exponent * 1.44269504088896341f + 12582912.0f;
  mj_float_vector n = shifted - 12582912.0f;
  mj_float_vector r = exponent - n * 0.693359375f + n * 2.12194440e-4f;
  mj_float_vector erfc = (mj_float_vector)((mj_mask_vector)mj_exp_series(r) + ((mj_mask_vector)shifted << 23));
  mj_float_vector result = magnitude >= 1.0f ? 1.0f - erfc : mj_erf_near_zero(magnitude);
  return (mj_float_vector)((mj_mask_vector)result | ((mj_mask_vector)x & (int32_t)0x80000000u));
}
)PRELUDE"},
    {"mj_prefix_sum mj_prefix_product",
     R"PRELUDE(// Inclusive prefix sums (products) across a vector's lanes, for the vector loop of a running sum: log2(MJ_LANES)
// steps, each combining the vector with itself moved up by 1, 2, 4, ... lanes (the identity moved in below).
// mj_lanes_up(x, fill, s): lane k is x[k - s], or fill[0] for k < s (shuffle indices: fill's lanes first).
#if MJ_LANES == 16
#define mj_lanes_up_1(x, f) __builtin_shufflevector(f, x, 0, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30)
#define mj_lanes_up_2(x, f) __builtin_shufflevector(f, x, 0, 0, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29)
#define mj_lanes_up_4(x, f) __builtin_shufflevector(f, x, 0, 0, 0, 0, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27)
#define mj_lanes_up_8(x, f) __builtin_shufflevector(f, x, 0, 0, 0, 0, 0, 0, 0, 0, 16, 17, 18, 19, 20, 21, 22, 23)
#define MJ_PREFIX_STEPS(combine) combine(1) combine(2) combine(4) combine(8)
#elif MJ_LANES == 8
#define mj_lanes_up_1(x, f) __builtin_shufflevector(f, x, 0, 8, 9, 10, 11, 12, 13, 14)
#define mj_lanes_up_2(x, f) __builtin_shufflevector(f, x, 0, 0, 8, 9, 10, 11, 12, 13)
#define mj_lanes_up_4(x, f) __builtin_shufflevector(f, x, 0, 0, 0, 0, 8, 9, 10, 11)
#define MJ_PREFIX_STEPS(combine) combine(1) combine(2) combine(4)
#else
#define mj_lanes_up_1(x, f) __builtin_shufflevector(f, x, 0, 4, 5, 6)
#define mj_lanes_up_2(x, f) __builtin_shufflevector(f, x, 0, 0, 4, 5)
#define MJ_PREFIX_STEPS(combine) combine(1) combine(2)
#endif
static inline mj_float_vector mj_prefix_sum(mj_float_vector x) {
  const mj_float_vector zero = mj_splat(0.0f);
#define MJ_ADD_UP(s) x = x + mj_lanes_up_##s(x, zero);
  MJ_PREFIX_STEPS(MJ_ADD_UP)
#undef MJ_ADD_UP
  return x;
}
static inline mj_float_vector mj_prefix_product(mj_float_vector x) {
  const mj_float_vector one = mj_splat(1.0f);
#define MJ_MULTIPLY_UP(s) x = x * mj_lanes_up_##s(x, one);
  MJ_PREFIX_STEPS(MJ_MULTIPLY_UP)
#undef MJ_MULTIPLY_UP
  return x;
}
)PRELUDE"},
    {"mj_transpose_tile mj_transpose_lanes",
     R"PRELUDE(// The full tiles of a transposing kernel: tile[a * (16 / MJ_LANES) + l / MJ_LANES] holds lanes l .. l + MJ_LANES - 1
// of row a of the transposed 16 x 16 block, row a lane l being source[a + l * stride]. The source is read as
// contiguous vectors along a and transposed in registers, MJ_LANES x MJ_LANES at a time: rows are interleaved in
// pairs, then pairs of pairs, then (AVX) 128-bit quarters, the shuffles x86 does fastest (unpcklps, shufps,
// vshuff32x4). A generic interleave-by-lane network (vpermt2ps) ran the NCHW -> NHWC kernel 25% slower.
#if MJ_LANES == 16
static inline void mj_transpose_lanes(mj_float_vector* r) {
  mj_float_vector t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
  }
  for (int i = 0; i < 16; i += 4)
    for (int j = 0; j < 2; ++j) {
      r[i + 2 * j] = __builtin_shufflevector(t[i + j], t[i + j + 2], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
      r[i + 2 * j + 1] =
          __builtin_shufflevector(t[i + j], t[i + j + 2], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    }
  for (int i = 0; i < 8; ++i) {
    int a = (i / 4) * 8 + i % 4;
    t[a] = __builtin_shufflevector(r[a], r[a + 4], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    t[a + 4] = __builtin_shufflevector(r[a], r[a + 4], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = __builtin_shufflevector(t[i], t[i + 8], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    r[i + 8] = __builtin_shufflevector(t[i], t[i + 8], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  }
}
#elif MJ_LANES == 8
static inline void mj_transpose_lanes(mj_float_vector* r) {
  mj_float_vector t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4)
    for (int j = 0; j < 2; ++j) {
      r[i + 2 * j] = __builtin_shufflevector(t[i + j], t[i + j + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      r[i + 2 * j + 1] = __builtin_shufflevector(t[i + j], t[i + j + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int i = 0; i < 4; ++i) {
    t[i] = __builtin_shufflevector(r[i], r[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    t[i + 4] = __builtin_shufflevector(r[i], r[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
  for (int i = 0; i < 8; ++i) r[i] = t[i];
}
#else
static inline void mj_transpose_lanes(mj_float_vector* r) {
  mj_float_vector t[4];
  for (int i = 0; i < 4; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 4, 1, 5);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 6, 3, 7);
  }
  for (int j = 0; j < 2; ++j) {
    r[2 * j] = __builtin_shufflevector(t[j], t[j + 2], 0, 1, 4, 5);
    r[2 * j + 1] = __builtin_shufflevector(t[j], t[j + 2], 2, 3, 6, 7);
  }
}
#endif
static inline void mj_transpose_tile(const float* source, int64_t stride, mj_float_vector* tile) {
  for (int a = 0; a < 16; a += MJ_LANES)
    for (int l = 0; l < 16; l += MJ_LANES) {
      mj_float_vector rows[MJ_LANES];
      for (int lane = 0; lane < MJ_LANES; ++lane) rows[lane] = mj_load_vector(&source[a + (l + lane) * stride]);
      mj_transpose_lanes(rows);
      for (int lane = 0; lane < MJ_LANES; ++lane) tile[(a + lane) * (16 / MJ_LANES) + l / MJ_LANES] = rows[lane];
    }
}
)PRELUDE"},
};

// Every piece in prelude order: one selection over all of them, so any piece can name one before it.
const PreludeSelector& selector() {
  static const PreludeSelector* selector = [] {
    std::vector<PreludePiece> pieces(std::begin(kCppBefore), std::end(kCppBefore));
    pieces.insert(pieces.end(), kPortablePieces, kPortablePieces + kPortablePieceCount);
    pieces.insert(pieces.end(), std::begin(kCppAfter), std::end(kCppAfter));
    return new PreludeSelector(pieces.data(), pieces.size());  // leaked: kernels may render during exit
  }();
  return *selector;
}
}  // namespace

std::string cpp_prelude_for(const std::string& body) {
  return std::string(kIntegerTypes) + "// ---- metajit prelude ----\n" + selector().select(body) +
         "// ---- end of prelude ----\n";
}

}  // namespace metajit

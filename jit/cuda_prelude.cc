// Kept as one raw string so the generated source is exactly what is shown by inspection tools.
#include "jit/cuda_prelude.h"

namespace metajit {

const char* const kCudaPrelude = R"PRELUDE(// ---- metajit CUDA prelude ----
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#define MJ_DEVICE static __device__ __forceinline__
// CUDA's own expf/logf are accurate to 2 ulp and already fast; the C++ prelude's polynomial exists to vectorise.
MJ_DEVICE float mj_exp(float x) { return expf(x); }
MJ_DEVICE float mj_log(float x) { return logf(x); }
MJ_DEVICE float mj_half_to_float(uint16_t half) {
  uint32_t sign = (uint32_t)(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1f, mantissa = half & 0x3ffu;
  if (exponent == 0x1f) return __uint_as_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    float value = (float)mantissa * 5.9604644775390625e-8f;  // 2^-24
    return sign ? -value : value;
  }
  return __uint_as_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}
MJ_DEVICE uint16_t mj_float_to_half(float value) {  // round to nearest even, as on the CPU
  uint32_t bits = __float_as_uint(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
  if (magnitude >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {  // subnormal half
    float scaled = __uint_as_float(magnitude) * 16777216.0f;  // 2^24
    return (uint16_t)(sign | (uint32_t)rintf(scaled));
  }
  uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}
MJ_DEVICE float mj_round_to_half(float value) { return mj_half_to_float(mj_float_to_half(value)); }
MJ_DEVICE int64_t mj_floor_divide(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0ull - (uint64_t)a);
  int64_t quotient = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? quotient - 1 : quotient;
}
MJ_DEVICE int64_t mj_floor_modulo(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t remainder = a % b;
  return (remainder != 0 && ((remainder < 0) != (b < 0))) ? remainder + b : remainder;
}
// Python/numpy float floor division, derived from fmod as on the CPU (see the C++ prelude).
MJ_DEVICE float mj_float_floor_divide(float a, float b) {
  if (b == 0.0f) return a / b;
  float remainder = fmodf(a, b);
  float quotient = (a - remainder) / b;
  if (remainder != 0.0f && ((b < 0.0f) != (remainder < 0.0f))) quotient -= 1.0f;
  if (quotient == 0.0f) return copysignf(0.0f, a / b);
  float floored = floorf(quotient);
  return quotient - floored > 0.5f ? floored + 1.0f : floored;
}
MJ_DEVICE double mj_float_floor_divide(double a, double b) {
  if (b == 0.0) return a / b;
  double remainder = fmod(a, b);
  double quotient = (a - remainder) / b;
  if (remainder != 0.0 && ((b < 0.0) != (remainder < 0.0))) quotient -= 1.0;
  if (quotient == 0.0) return copysign(0.0, a / b);
  double floored = floor(quotient);
  return quotient - floored > 0.5 ? floored + 1.0 : floored;
}
MJ_DEVICE int64_t mj_integer_power(int64_t base, int64_t exponent) {
  if (exponent < 0) return base == 1 ? 1 : (base == -1 ? ((exponent & 1) ? -1 : 1) : 0);
  uint64_t result = 1, factor = (uint64_t)base;
  while (exponent) { if (exponent & 1) result *= factor; factor *= factor; exponent >>= 1; }
  return (int64_t)result;
}
// NaN-propagating max/min, as on the CPU.
template <typename T> MJ_DEVICE T mj_max(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> MJ_DEVICE T mj_min(T a, T b) { return (a != a || a < b) ? a : b; }

// One lane's value from the lane `offset` away (xor); types without a shuffle of their own travel as int.
MJ_DEVICE float mj_shuffle_xor(float value, int offset) { return __shfl_xor_sync(0xffffffffu, value, offset); }
MJ_DEVICE double mj_shuffle_xor(double value, int offset) { return __shfl_xor_sync(0xffffffffu, value, offset); }
MJ_DEVICE int32_t mj_shuffle_xor(int32_t value, int offset) { return __shfl_xor_sync(0xffffffffu, value, offset); }
MJ_DEVICE int64_t mj_shuffle_xor(int64_t value, int offset) { return __shfl_xor_sync(0xffffffffu, value, offset); }
MJ_DEVICE bool mj_shuffle_xor(bool value, int offset) { return __shfl_xor_sync(0xffffffffu, (int)value, offset) != 0; }
MJ_DEVICE int8_t mj_shuffle_xor(int8_t value, int offset) { return (int8_t)__shfl_xor_sync(0xffffffffu, (int)value, offset); }
MJ_DEVICE uint8_t mj_shuffle_xor(uint8_t value, int offset) { return (uint8_t)__shfl_xor_sync(0xffffffffu, (int)value, offset); }
// Every thread of the block passes its partial result and gets the whole block's: a butterfly within each
// warp, then each thread combines the warps' results from shared memory (at most 32 of them). Every thread of
// the block must call it; blockDim.x is a multiple of 32.
template <typename T, typename Combine>
static __device__ T mj_block_reduce(T value, Combine combine) {
  __shared__ T warp_results[32];
  for (int offset = 16; offset > 0; offset >>= 1) value = combine(value, mj_shuffle_xor(value, offset));
  __syncthreads();  // an earlier call's readers are done with warp_results
  if ((threadIdx.x & 31) == 0) warp_results[threadIdx.x >> 5] = value;
  __syncthreads();
  T result = warp_results[0];
  for (int warp = 1; warp < (int)(blockDim.x >> 5); ++warp) result = combine(result, warp_results[warp]);
  return result;
}

// Scatter accumulation. Sums of 4- and 8-byte numbers use the hardware's atomic add; every other update is a
// compare-and-swap loop on the element's bits (a 1-byte element on the aligned 4-byte word holding it).
MJ_DEVICE void mj_atomic_add(float* address, float value) { atomicAdd(address, value); }
MJ_DEVICE void mj_atomic_add(double* address, double value) { atomicAdd(address, value); }
MJ_DEVICE void mj_atomic_add(int32_t* address, int32_t value) { atomicAdd(address, value); }
MJ_DEVICE void mj_atomic_add(int64_t* address, int64_t value) {
  atomicAdd((unsigned long long*)address, (unsigned long long)value);  // two's complement: same bits
}
template <typename T, typename Update>
static __device__ void mj_atomic_update(T* address, Update update) {
  if constexpr (sizeof(T) == 8) {
    unsigned long long* word = (unsigned long long*)address;
    unsigned long long observed = *word, expected;
    do {
      expected = observed;
      T next = update(*(const T*)&expected);
      observed = atomicCAS(word, expected, *(const unsigned long long*)&next);
    } while (observed != expected);
  } else if constexpr (sizeof(T) == 4) {
    unsigned int* word = (unsigned int*)address;
    unsigned int observed = *word, expected;
    do {
      expected = observed;
      T next = update(*(const T*)&expected);
      observed = atomicCAS(word, expected, *(const unsigned int*)&next);
    } while (observed != expected);
  } else if constexpr (sizeof(T) == 2) {
    unsigned short* word = (unsigned short*)address;
    unsigned short observed = *word, expected;
    do {
      expected = observed;
      T next = update(*(const T*)&expected);
      observed = atomicCAS(word, expected, *(const unsigned short*)&next);
    } while (observed != expected);
  } else {
    unsigned int* word = (unsigned int*)((unsigned long long)address & ~3ull);
    unsigned int shift = (unsigned int)((unsigned long long)address & 3ull) * 8u;
    unsigned int observed = *word, expected;
    do {
      expected = observed;
      uint8_t current_bits = (uint8_t)(expected >> shift);
      T next = update(*(const T*)&current_bits);
      unsigned int next_bits = *(const uint8_t*)&next;
      observed = atomicCAS(word, expected, (expected & ~(0xffu << shift)) | (next_bits << shift));
    } while (observed != expected);
  }
}
// ---- end of prelude ----
)PRELUDE";

}  // namespace metajit

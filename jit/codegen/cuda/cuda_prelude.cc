// Kept as one raw string so the generated source is exactly what is shown by inspection tools.
#include "jit/codegen/cuda/cuda_prelude.h"

#include "jit/codegen/common/portable_prelude.h"

namespace metajit {

namespace {
const char* const kCudaStart = R"PRELUDE(// ---- metajit CUDA prelude ----
#define MJ_DEVICE static __device__ __forceinline__
#define MJ_FUNCTION MJ_DEVICE
#define MJ_MATH(name) name
MJ_DEVICE float mj_bits_to_float(uint32_t bits) { return __uint_as_float(bits); }
MJ_DEVICE uint32_t mj_float_to_bits(float value) { return __float_as_uint(value); }
// CUDA's own expf/logf are accurate to 2 ulp and already fast; the C++ prelude's polynomial exists to vectorise.
MJ_DEVICE float mj_exp(float x) { return expf(x); }
MJ_DEVICE float mj_log(float x) { return logf(x); }
MJ_DEVICE float mj_log1p(float x) { return log1pf(x); }
MJ_DEVICE float mj_expm1(float x) { return expm1f(x); }
MJ_DEVICE float mj_tanh(float x) { return tanhf(x); }
MJ_DEVICE float mj_sin(float x) { return sinf(x); }
MJ_DEVICE float mj_cos(float x) { return cosf(x); }
MJ_DEVICE float mj_erf(float x) { return erff(x); }
)PRELUDE";
const char* const kCudaEnd = R"PRELUDE(// One lane's value from the lane `offset` away (xor); types without a shuffle of their own travel as int.
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
}  // namespace

const std::string kCudaPrelude =
    std::string(kIntegerTypes) + kCudaStart + join_prelude_pieces(kPortablePieces, kPortablePieceCount) + kCudaEnd;

}  // namespace metajit

// cuBLAS (libcublas.so.13) and cuDNN (libcudnn.so.9), loaded with dlopen on first use like NVRTC and the driver,
// so neither is linked and a machine without them runs every contraction as a generated kernel. Only the few
// functions the CUDA contraction backend (libraries/cuda_contraction_backend.h) calls are bound, with their C types
// spelled here (handles and descriptors are pointers, statuses and enums are ints).
#pragma once
#include <cstddef>
#include <string>

namespace metajit {

struct CublasApi {
  void* handle = nullptr;  // the process's cublasHandle_t, on the CUDA context's stream
  int (*set_stream)(void* handle, void* stream) = nullptr;
  int (*sgemm_strided_batched)(void* handle, int transpose_a, int transpose_b, int m, int n, int k,
                               const float* alpha, const float* a, int lda, long long stride_a, const float* b,
                               int ldb, long long stride_b, const float* beta, float* c, int ldc, long long stride_c,
                               int batch) = nullptr;
};

// One result of cuDNN's algorithm heuristics (cudnnConvolutionFwdAlgoPerf_t and its backward twins share it).
struct CudnnAlgorithmChoice {
  int algorithm;
  int status;
  float time;
  size_t memory;  // workspace bytes
  int determinism;
  int math_type;
  int reserved[3];
};

struct CudnnApi {
  void* handle = nullptr;  // the process's cudnnHandle_t, on the CUDA context's stream
  const char* (*error_text)(int status) = nullptr;
  int (*create_tensor)(void** descriptor) = nullptr;
  int (*set_tensor)(void* descriptor, int data_type, int dims, const int* extents, const int* strides) = nullptr;
  int (*destroy_tensor)(void* descriptor) = nullptr;
  int (*create_filter)(void** descriptor) = nullptr;
  int (*set_filter)(void* descriptor, int data_type, int format, int dims, const int* extents) = nullptr;
  int (*destroy_filter)(void* descriptor) = nullptr;
  int (*create_convolution)(void** descriptor) = nullptr;
  int (*set_convolution)(void* descriptor, int spatial, const int* padding, const int* stride, const int* dilation,
                         int mode, int data_type) = nullptr;
  int (*set_group_count)(void* descriptor, int groups) = nullptr;
  int (*set_math_type)(void* descriptor, int math_type) = nullptr;
  int (*destroy_convolution)(void* descriptor) = nullptr;
  // Heuristic choices, best first: (handle, x, w, conv, y | dy, ...), as cudnnGetConvolution*Algorithm_v7 take.
  int (*forward_algorithms)(void*, void* x, void* w, void* convolution, void* y, int wanted, int* found,
                            CudnnAlgorithmChoice* choices) = nullptr;
  int (*backward_data_algorithms)(void*, void* w, void* dy, void* convolution, void* dx, int wanted, int* found,
                                  CudnnAlgorithmChoice* choices) = nullptr;
  int (*backward_filter_algorithms)(void*, void* x, void* dy, void* convolution, void* dw, int wanted, int* found,
                                    CudnnAlgorithmChoice* choices) = nullptr;
  int (*forward)(void*, const void* alpha, void* x_descriptor, const void* x, void* w_descriptor, const void* w,
                 void* convolution, int algorithm, void* workspace, size_t workspace_bytes, const void* beta,
                 void* y_descriptor, void* y) = nullptr;
  int (*backward_data)(void*, const void* alpha, void* w_descriptor, const void* w, void* dy_descriptor,
                       const void* dy, void* convolution, int algorithm, void* workspace, size_t workspace_bytes,
                       const void* beta, void* dx_descriptor, void* dx) = nullptr;
  int (*backward_filter)(void*, const void* alpha, void* x_descriptor, const void* x, void* dy_descriptor,
                         const void* dy, void* convolution, int algorithm, void* workspace, size_t workspace_bytes,
                         const void* beta, void* dw_descriptor, void* dw) = nullptr;
};

// The loaded library with a handle on the CUDA context's stream, or null when it cannot be used; then
// *_unavailable_reason() says why (not found where it was looked for, a missing function, a failed create).
// Creating the handles needs the GPU: call these only once CUDA execution is on.
const CublasApi* cublas();
const CudnnApi* cudnn();
std::string cublas_unavailable_reason();
std::string cudnn_unavailable_reason();
// Where the libraries are looked for first (Python adds the nvidia-* wheels' lib folders).
void add_cuda_library_search_directory(const std::string& directory);

}  // namespace metajit

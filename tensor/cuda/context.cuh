// Per-device library context: the cuBLASLt handle and its workspace, created on first use of each
// device and kept for the life of the process (destroying them at exit could run after the CUDA
// runtime has shut down). Kernels use them on the device's one stream (runtime.cu), which
// serialises every use of the workspace.
#pragma once

#include <cublasLt.h>

#include "tensor/cuda/common.cuh"

namespace sprig::cuda {

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file,
                                     int line);

#define CUBLAS_CHECK(expr)                                                   \
  do {                                                                       \
    const cublasStatus_t status_ = (expr);                                   \
    if (status_ != CUBLAS_STATUS_SUCCESS)                                    \
      ::sprig::cuda::throw_cublas_error(status_, #expr, __FILE__, __LINE__); \
  } while (0)

struct DeviceContext {
  cublasLtHandle_t blas_lt = nullptr;
  void* workspace = nullptr;  // cudaMalloc'ed, outside the caching allocator's accounting
  size_t workspace_bytes = 0;
};

DeviceContext& device_context(int device);

}  // namespace sprig::cuda

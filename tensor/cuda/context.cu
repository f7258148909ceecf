// The per-device library context (context.cuh) and cuBLAS error reporting.
#include <mutex>
#include <vector>

#include "tensor/cuda/context.cuh"

namespace sprig::cuda {

namespace {
constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // NVIDIA's recommendation for Hopper
}  // namespace

void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line) {
  throw std::runtime_error(std::string("[cublasLt] ") + cublasLtGetStatusName(status) + " (" +
                           cublasLtGetStatusString(status) + ") in " + expr + " at " + file + ":" +
                           std::to_string(line));
}

DeviceContext& device_context(int device) {
  static std::mutex mutex;
  static std::vector<DeviceContext> contexts(static_cast<size_t>(device_count()));
  std::lock_guard<std::mutex> lock(mutex);
  if (device < 0 || device >= static_cast<int>(contexts.size()))
    throw std::invalid_argument("[cuda] device " + std::to_string(device) + " is not available");
  DeviceContext& ctx = contexts[static_cast<size_t>(device)];
  if (!ctx.blas_lt) {
    DeviceContext fresh;
    const DeviceGuard guard(device);
    CUBLAS_CHECK(cublasLtCreate(&fresh.blas_lt));
    fresh.workspace_bytes = kWorkspaceBytes;
    CUDA_CHECK(cudaMalloc(&fresh.workspace, fresh.workspace_bytes));
    ctx = fresh;
  }
  return ctx;
}

}  // namespace sprig::cuda

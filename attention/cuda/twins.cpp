// The CUDA twins of the attention op (attention/cuda/flash.h): each call runs on cuDNN's fused
// attention or on sprig's flash kernels (over the mask's tile map of the pass's tile shape), as
// the backend rule says (attention/backend.h). Backend cudnn always runs cuDNN. Backend auto, on a
// call cuDNN can run, measures once per plan key (shape, mask form, dtype, pass) and keeps the
// faster (cudnn::run_automatic, attention/cudnn/sdpa_plan.h), falling back to the flash kernels
// where cuDNN fails on the key; cuDNN alone where the flash kernels lack the head dim.
#include <cuda_runtime.h>

#include <optional>
#include <stdexcept>
#include <string>

#include "attention/backend.h"
#include "attention/cuda/flash.h"
#include "attention/cudnn/sdpa.h"

namespace sprig::cuda {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("[attention] ") + what + ": " + cudaGetErrorString(e));
}

// Seconds `run` takes on `stream` (events around it; waits for it to finish).
template <class F> double seconds_on(cudaStream_t stream, F&& run) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "creating an event");
  check(cudaEventCreate(&stop), "creating an event");
  check(cudaEventRecord(start, stream), "recording an event");
  run();
  check(cudaEventRecord(stop, stream), "recording an event");
  check(cudaEventSynchronize(stop), "waiting for an event");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "timing");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1e3;
}

// Runs the call on cuDNN or on the flash kernels as the backend and (for auto) the measurement
// of its plan key decide (cudnn::run_automatic).
template <class Cudnn, class Flash>
void run_attention(const Tensor& q, const Tensor& k, const AttentionMask& mask,
                   cudnn::SdpaPass pass, cudaStream_t stream, Cudnn&& on_cudnn, Flash&& on_flash) {
  const AttentionBackend backend = attention_backend();
  const int version = cudnn::runtime_version();
  const std::optional<CudnnMaskForm> form =
      cudnn_route(backend, mask.mask(), q.size(0), q.size(3), version);
  if (!form) return on_flash();
  const bool flash_runs = q.size(3) == 64 || q.size(3) == 128;  // flash_tile_shape's head dims
  if (backend == AttentionBackend::cudnn || !flash_runs) return on_cudnn(*form);
  const cudnn::SdpaPlanKey key = cudnn::sdpa_plan_key(
      q.device().index, q.dtype(), pass, cudnn::call_shape(q, k, mask, *form, pass, version));
  cudnn::run_automatic(
      key, [&] { on_cudnn(*form); }, on_flash, [&](auto&& run) { return seconds_on(stream, run); });
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                       double scale, const Tensor& out, const Tensor& lse, cudaStream_t stream) {
  run_attention(
      q, k, mask, cudnn::SdpaPass::forward, stream,
      [&](const CudnnMaskForm& form) {
        cudnn::sdpa_forward(q, k, v, mask, form, scale, out, lse, stream);
      },
      [&] {
        const TileShape s = flash_tile_shape(FlashPass::forward, q.size(3));
        flash_attention_forward(q, k, v, mask.device_tile_map(s.block_m, s.block_n, q.device()),
                                scale, out, lse, stream);
      });
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& dout, const AttentionMask& mask,
                        double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                        cudaStream_t stream) {
  run_attention(
      q, k, mask, cudnn::SdpaPass::backward, stream,
      [&](const CudnnMaskForm& form) {
        cudnn::sdpa_backward(q, k, v, out, lse, dout, mask, form, scale, dq, dk, dv, stream);
      },
      [&] {
        const TileShape s = flash_tile_shape(FlashPass::backward, q.size(3));
        flash_attention_backward(q, k, v, out, lse, dout,
                                 mask.device_tile_map(s.block_m, s.block_n, q.device()), scale, dq,
                                 dk, dv, stream);
      });
}

}  // namespace sprig::cuda

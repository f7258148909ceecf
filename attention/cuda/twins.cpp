// The CUDA twins of the attention op (attention/cuda/flash.h): each call runs on cuDNN's fused
// attention where the backend rule says so (attention/backend.h), else on sprig's flash kernels
// over the mask's tile map of the pass's tile shape. Under the automatic backend, a graph cuDNN
// refuses falls back to the flash kernels (reported once per process on stderr).
#include <atomic>
#include <iostream>
#include <optional>

#include "attention/backend.h"
#include "attention/cuda/flash.h"
#include "attention/cudnn/sdpa.h"

namespace sprig::cuda {

namespace {

std::optional<CudnnMaskForm> route(const Tensor& q, const AttentionMask& mask) {
  return cudnn_route(attention_backend(), mask.mask(), q.size(0), q.size(3),
                     cudnn::runtime_version());
}

// Runs `on_cudnn`; under the automatic backend, a refused graph returns false instead.
template <class F> bool ran_on_cudnn(F&& on_cudnn) {
  try {
    on_cudnn();
    return true;
  } catch (const cudnn::Unsupported& e) {
    if (attention_backend() == AttentionBackend::cudnn) throw;
    static std::atomic<bool> reported{false};
    if (!reported.exchange(true))
      std::cerr << "sprig: attention falls back to sprig's kernels where cuDNN refuses the graph: "
                << e.what() << "\n";
    return false;
  }
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                       double scale, const Tensor& out, const Tensor& lse, cudaStream_t stream) {
  if (const auto form = route(q, mask);
      form &&
      ran_on_cudnn([&] { cudnn::sdpa_forward(q, k, v, mask, *form, scale, out, lse, stream); }))
    return;
  const TileShape s = flash_tile_shape(FlashPass::forward, q.size(3));
  flash_attention_forward(q, k, v, mask.device_tile_map(s.block_m, s.block_n, q.device()), scale,
                          out, lse, stream);
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& dout, const AttentionMask& mask,
                        double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                        cudaStream_t stream) {
  if (const auto form = route(q, mask);
      form && ran_on_cudnn([&] {
        cudnn::sdpa_backward(q, k, v, out, lse, dout, mask, *form, scale, dq, dk, dv, stream);
      }))
    return;
  const TileShape s = flash_tile_shape(FlashPass::backward, q.size(3));
  flash_attention_backward(q, k, v, out, lse, dout,
                           mask.device_tile_map(s.block_m, s.block_n, q.device()), scale, dq, dk,
                           dv, stream);
}

}  // namespace sprig::cuda

// cuDNN's fused scaled-dot-product attention on sprig's tensors (docs/kernels.md §9), forward and
// backward, through a small graph builder on cuDNN's backend API (the C API the library ships):
// the matmul -> scale -> mask -> softmax -> matmul graph cuDNN's runtime fusion engine runs as one
// flash-attention kernel, and its backward. Masks are the forms of attention/backend.h: one causal
// square per row, or packed documents as ragged sequences, either with a sliding window.
//
// The contract is the flash kernels' (attention/cuda/flash.h): q, out, dout, dq [B, T, Hq, D];
// k, v, dk, dv [B, T, Hkv, D]; lse [B, Hq, T] f32 (natural log); contiguous bf16/f16 on one CUDA
// device; GQA native; every output written with `=`. Execution plans are built on first use and
// cached per (device, shape, mask form, dtype, pass); workspace comes from the caching allocator;
// work runs on the stream passed. A build without cuDNN (SPRIG_WITH_CUDNN 0) has stand-ins that
// throw "[cudnn] ... built without cuDNN".
#pragma once

#include <stdexcept>
#include <string>

#include "attention/attention_mask.h"
#include "attention/backend.h"
#include "attention/cudnn/sdpa_plan.h"
#include "tensor/cuda/kernels.h"
#include "tensor/tensor.h"

namespace sprig::cuda::cudnn {

inline constexpr bool kBuilt = SPRIG_WITH_CUDNN;

// The version of the cuDNN headers this build compiled against, and of the library loaded at run
// time (cudnnGetVersion(), e.g. 91900 for 9.19.0); 0 for both without cuDNN.
int compiled_version();
int runtime_version();

// cuDNN could not build a plan for this graph on this device (an unsupported shape or version).
// The automatic backend falls back to sprig's kernels on it; every other failure is a
// std::runtime_error.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The shape cuDNN sees q [B, T, Hq, D] and k [B, T, Hkv, D] under `form` in, for one pass on the
// loaded cuDNN; `ragged` (when given) receives the mask's sequences on q's device (null unless
// ragged or padded).
SdpaShape call_shape(const Tensor& q, const Tensor& k, const AttentionMask& mask,
                     const CudnnMaskForm& form, SdpaPass pass, int cudnn_version,
                     const DeviceRagged** ragged = nullptr);

// Finalises every tensor and operation descriptor of the graph of one pass, without a device (the
// graph and plan need one): a check of the graph's construction that runs on the CPU. Returns the
// number of operations; throws "[cudnn] ..." where cuDNN rejects a descriptor.
int64_t describe_graph(DType dtype, SdpaPass pass, const SdpaShape& shape);

void sdpa_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                  const CudnnMaskForm& form, double scale, const Tensor& out, const Tensor& lse,
                  cudaStream_t stream);
void sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                   const Tensor& lse, const Tensor& dout, const AttentionMask& mask,
                   const CudnnMaskForm& form, double scale, const Tensor& dq, const Tensor& dk,
                   const Tensor& dv, cudaStream_t stream);

}  // namespace sprig::cuda::cudnn

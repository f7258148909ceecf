// Host-side planning of cuDNN's fused attention (attention/cudnn/sdpa.h), built with or without
// CUDA and cuDNN so it is tested on the CPU: the ragged sequences of packed documents, the layouts
// (dims and strides) cuDNN sees sprig's tensors in, and the key execution plans are cached by.
//
// cuDNN describes every attention tensor as [b, h, s, d]. sprig stores q/k/v/out as [B, T, H, D]
// (token-major), so the strides are (T*H*D, D, H*D, 1). Packed documents become ragged sequences:
// b = the number of documents, s = a maximum length, and a ragged-offset tensor holds each
// document's first element, so the tensors stay exactly where sprig keeps them. Softmax statistics
// are sprig's lse [B, H, T] as they are for one causal square per row, and a token-major [B*T, H]
// buffer (copied from and to lse) for ragged sequences.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <vector>

#include "attention/backend.h"
#include "tensor/tensor.h"

namespace sprig::cuda::cudnn {

// The ragged sequences of a packed-documents form over rows of `row_len` tokens: one per document,
// in the [B*T] token order (contiguous, since the documents tile every row).
struct RaggedSequences {
  int64_t count = 0;
  // The length plans are built for: the longest document rounded up to a power of two, at least
  // 64 and at most row_len, so batches of similar documents share a plan.
  int64_t max_len = 0;
  std::vector<int32_t> seq_lens;       // [count]
  std::vector<int64_t> token_offsets;  // [count + 1]: exclusive prefix sums of seq_lens
};
RaggedSequences ragged_sequences(const CudnnMaskForm& form, int64_t row_len);

// The sequences' tensors as cuDNN reads them, on one device: seq_lens i32 [count, 1, 1, 1] (for
// queries and keys alike) and i64 ragged offsets [count + 1, 1, 1, 1] of q/out (Hq*D elements per
// token), k/v (Hkv*D) and the statistics (Hq).
struct DeviceRagged {
  RaggedSequences seqs;
  Tensor seq_lens, q_offsets, kv_offsets, stats_offsets;
};
DeviceRagged upload_ragged(RaggedSequences seqs, int64_t heads_q, int64_t heads_kv,
                           int64_t head_dim, Device device);

// The ragged offsets of a tensor holding `per_token` elements per token (H*D for q/k/v/out, H for
// the statistics): token_offsets * per_token.
std::vector<int64_t> element_offsets(const RaggedSequences& seqs, int64_t per_token);

// The shape cuDNN sees one attention call in.
struct SdpaShape {
  int64_t batch = 0;  // B, or the number of ragged sequences
  int64_t heads_q = 0, heads_kv = 0;
  int64_t seq_len = 0;  // T, or RaggedSequences::max_len
  int64_t head_dim = 0;
  bool ragged = false;
  int64_t window = 0;
};
// q [B, T, Hq, D] and k [B, T, Hkv, D] under `form` (seqs: its ragged sequences, when ragged).
SdpaShape sdpa_shape(int64_t batch, int64_t row_len, int64_t heads_q, int64_t heads_kv,
                     int64_t head_dim, const CudnnMaskForm& form, const RaggedSequences& seqs);

struct TensorLayout {
  std::array<int64_t, 4> dims{}, strides{};
  bool operator==(const TensorLayout&) const = default;
};
// q/k/v/out/their gradients with `heads` heads: [b, heads, s, d] at strides (s*heads*d, d,
// heads*d, 1).
TensorLayout token_major_layout(const SdpaShape& s, int64_t heads);
// The same tensor with its last two dims swapped (K^T and V^T as cuDNN's matmuls take them).
TensorLayout transposed(const TensorLayout& t);
// The softmax statistics [b, Hq, s, 1], f32: head-major (Hq*s, s, 1, 1), which is sprig's lse, or
// token-major (s*Hq, 1, Hq, 1) for ragged sequences.
TensorLayout stats_layout(const SdpaShape& s);

enum class SdpaPass : uint8_t { forward, backward };

// What an execution plan depends on: everything but the data, the scale and the window's width
// (those are passed at execution).
struct SdpaPlanKey {
  int device = 0;
  DType dtype = DType::bf16;
  SdpaPass pass = SdpaPass::forward;
  int64_t batch = 0, heads_q = 0, heads_kv = 0, seq_len = 0, head_dim = 0;
  bool ragged = false, windowed = false;
  auto operator<=>(const SdpaPlanKey&) const = default;
};
SdpaPlanKey sdpa_plan_key(int device, DType dtype, SdpaPass pass, const SdpaShape& s);

// The automatic backend's measurements (attention/cuda/twins.cpp): per plan key, whether cuDNN ran
// faster than sprig's kernels the first time both ran it (nullopt: not measured yet). A key
// cuDNN refuses is recorded as slower. Process-wide, thread-safe.
std::optional<bool> measured_cudnn_faster(const SdpaPlanKey& key);
void record_measurement(const SdpaPlanKey& key, double cudnn_seconds, double sprig_seconds);

}  // namespace sprig::cuda::cudnn

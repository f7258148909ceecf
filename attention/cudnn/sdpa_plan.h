// Host-side planning of cuDNN's fused attention (attention/cudnn/sdpa.h), built with or without
// CUDA and cuDNN so it is tested on the CPU: the ragged sequences of packed documents, the layouts
// (dims and strides) cuDNN sees sprig's tensors in, the version rules, the key execution plans are
// cached by (in a bounded cache), and the automatic backend's choice per key.
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
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attention/backend.h"
#include "tensor/tensor.h"

namespace sprig::cuda::cudnn {

// The sequences cuDNN sees a call's rows as, in the [B*T] token order. A ragged form has one per
// document (contiguous, since the documents tile every row), and empty sequences after them up to
// a power-of-two count, so that batches with other numbers of documents share a plan. A causal
// form has one per row, of the row's length (bound only where the padding mask of
// needs_padding_mask is in the graph).
struct RaggedSequences {
  int64_t count = 0;  // documents and empty sequences, or rows
  // The length plans are built for: for a ragged form the longest document rounded up to a power
  // of two, at least 64 and at most row_len, so batches of similar documents share a plan.
  int64_t max_len = 0;
  std::vector<int32_t> seq_lens;       // [count]
  std::vector<int64_t> token_offsets;  // [count + 1]: exclusive prefix sums of seq_lens
};
RaggedSequences ragged_sequences(const CudnnMaskForm& form, int64_t batch, int64_t row_len);
// The number of sequences plans are built for: a power of two, at least `documents`.
int64_t sequence_bucket(int64_t documents);

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
  bool padded = false;  // unragged, with full-length sequences bound to a padding mask
};
// q [B, T, Hq, D] and k [B, T, Hkv, D] under `form` (seqs: its ragged sequences, when ragged);
// `padded` from needs_padding_mask.
SdpaShape sdpa_shape(int64_t batch, int64_t row_len, int64_t heads_q, int64_t heads_kv,
                     int64_t head_dim, const CudnnMaskForm& form, const RaggedSequences& seqs,
                     bool padded = false);

enum class SdpaPass : uint8_t { forward, backward };

// cuDNN up to 9.15.0 runs the backward of unragged sequences whose length is not a multiple of 128
// only with a padding mask in the graph (cudnn-frontend adds one there): that pass of a causal form
// then binds full-length sequences (RaggedSequences of the form) to one.
bool needs_padding_mask(SdpaPass pass, const CudnnMaskForm& form, int64_t row_len,
                        int cudnn_version);
// The score masked elements are set to: -inf, or the lowest float before cuDNN 9.10.0, whose
// softmax expects that.
float masked_score(int cudnn_version);

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

// What an execution plan depends on: everything but the data, the scale and the window's width
// (those are passed at execution).
struct SdpaPlanKey {
  int device = 0;
  DType dtype = DType::bf16;
  SdpaPass pass = SdpaPass::forward;
  int64_t batch = 0, heads_q = 0, heads_kv = 0, seq_len = 0, head_dim = 0;
  bool ragged = false, windowed = false, padded = false;
  auto operator<=>(const SdpaPlanKey&) const = default;
};
SdpaPlanKey sdpa_plan_key(int device, DType dtype, SdpaPass pass, const SdpaShape& s);

// A map of at most `capacity` entries that forgets the least recently used one: the plans and
// measurements of a long run stay bounded whatever shapes it sees. Not thread-safe.
template <class Key, class Value> class BoundedCache {
 public:
  explicit BoundedCache(size_t capacity) : capacity_(capacity) {}
  // The value of `key` (now the most recently used), or null.
  Value* find(const Key& key) {
    const auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    it->second.second = ++clock_;
    return &it->second.first;
  }
  Value& put(const Key& key, Value value) {
    if (!entries_.count(key) && entries_.size() >= capacity_) {
      auto oldest = entries_.begin();
      for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (it->second.second < oldest->second.second) oldest = it;
      entries_.erase(oldest);
    }
    auto& entry = entries_[key];
    entry = {std::move(value), ++clock_};
    return entry.first;
  }
  size_t size() const { return entries_.size(); }

 private:
  size_t capacity_;
  uint64_t clock_ = 0;
  std::map<Key, std::pair<Value, uint64_t>> entries_;
};
// Plans and measurements kept per process (each plan holds a compiled kernel).
inline constexpr size_t kPlanCacheCapacity = 64;

// The automatic backend's measurements (attention/cuda/twins.cpp): per plan key, whether cuDNN ran
// faster than sprig's kernels the first time both ran it (nullopt: not measured yet). A key
// cuDNN failed on is recorded as slower. Process-wide, thread-safe.
std::optional<bool> measured_cudnn_faster(const SdpaPlanKey& key);
void record_measurement(const SdpaPlanKey& key, double cudnn_seconds, double sprig_seconds);
// What a key is, for messages: "backward bf16 b=4 hq=8 hkv=2 s=128 d=128 ragged on cuda:0".
std::string describe_key(const SdpaPlanKey& key);
// The line run_automatic prints when cuDNN fails on a key's first call.
void report_cudnn_fallback(const SdpaPlanKey& key, const std::string& what);

// One call of backend auto on a call cuDNN can run. The first call of a key runs cuDNN once
// (building its plan), then times cuDNN and sprig's kernels once each (seconds_of(f) runs f and
// returns its seconds) and keeps the faster for the key. Any failure of cuDNN on that first call
// (a graph it refuses, a plan that does not finalise, an execution error) runs sprig's kernels
// instead, with one line on stderr, and keeps them for the key. Both write every output with `=`,
// so a measured call's result is the last run's, computed as any other.
template <class Cudnn, class Flash, class SecondsOf>
void run_automatic(const SdpaPlanKey& key, Cudnn&& on_cudnn, Flash&& on_flash,
                   SecondsOf&& seconds_of) {
  if (const std::optional<bool> faster = measured_cudnn_faster(key))
    return *faster ? on_cudnn() : on_flash();
  try {
    on_cudnn();
  } catch (const std::exception& e) {
    report_cudnn_fallback(key, e.what());
    record_measurement(key, 1, 0);
    return on_flash();
  }
  const double cudnn_s = seconds_of(on_cudnn);
  on_flash();  // compiles and uploads the mask's tile map
  record_measurement(key, cudnn_s, seconds_of(on_flash));
}

}  // namespace sprig::cuda::cudnn

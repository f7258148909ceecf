// Host-side planning of cuDNN's fused attention (attention/cudnn/sdpa_plan.h).
#include "attention/cudnn/sdpa_plan.h"

#include <algorithm>
#include <iostream>
#include <limits>
#include <mutex>
#include <utility>

#include "attention/cudnn/sdpa.h"

namespace sprig::cuda::cudnn {

int64_t sequence_bucket(int64_t documents) {
  int64_t bucket = 1;
  while (bucket < documents) bucket *= 2;
  return bucket;
}

RaggedSequences ragged_sequences(const CudnnMaskForm& form, int64_t batch, int64_t row_len) {
  RaggedSequences s;
  if (form.ragged) {
    s.seq_lens = form.seq_lens;
    s.seq_lens.resize(sequence_bucket(static_cast<int64_t>(form.seq_lens.size())), 0);
  } else {
    s.seq_lens.assign(batch, static_cast<int32_t>(row_len));
  }
  s.count = static_cast<int64_t>(s.seq_lens.size());
  s.token_offsets.assign(1, 0);
  int64_t longest = 0;
  for (int32_t len : s.seq_lens) {
    s.token_offsets.push_back(s.token_offsets.back() + len);
    longest = std::max<int64_t>(longest, len);
  }
  int64_t bucket = 64;
  while (bucket < longest) bucket *= 2;
  s.max_len = form.ragged ? std::min(bucket, row_len) : row_len;
  return s;
}

std::vector<int64_t> element_offsets(const RaggedSequences& seqs, int64_t per_token) {
  std::vector<int64_t> out(seqs.token_offsets);
  for (int64_t& o : out) o *= per_token;
  return out;
}

DeviceRagged upload_ragged(RaggedSequences seqs, int64_t heads_q, int64_t heads_kv,
                           int64_t head_dim, Device device) {
  const int64_t n = seqs.count;
  auto offsets = [&](int64_t per_token) {
    return Tensor::from_vector(element_offsets(seqs, per_token), {n + 1, 1, 1, 1}, device);
  };
  DeviceRagged r{{},
                 Tensor::from_vector(seqs.seq_lens, {n, 1, 1, 1}, device),
                 offsets(heads_q * head_dim),
                 offsets(heads_kv * head_dim),
                 offsets(heads_q)};
  r.seqs = std::move(seqs);
  return r;
}

SdpaShape sdpa_shape(int64_t batch, int64_t row_len, int64_t heads_q, int64_t heads_kv,
                     int64_t head_dim, const CudnnMaskForm& form, const RaggedSequences& seqs,
                     bool padded) {
  SdpaShape s{batch, heads_q, heads_kv, row_len, head_dim, form.ragged, form.window, padded};
  if (form.ragged) s.batch = seqs.count, s.seq_len = seqs.max_len;
  return s;
}

bool needs_padding_mask(SdpaPass pass, const CudnnMaskForm& form, int64_t row_len,
                        int cudnn_version) {
  return pass == SdpaPass::backward && !form.ragged && row_len % 128 != 0 && cudnn_version <= 91500;
}

float masked_score(int cudnn_version) {
  return cudnn_version < 91000 ? std::numeric_limits<float>::lowest()
                               : -std::numeric_limits<float>::infinity();
}

TensorLayout token_major_layout(const SdpaShape& s, int64_t heads) {
  const int64_t d = s.head_dim;
  return {{s.batch, heads, s.seq_len, d}, {s.seq_len * heads * d, d, heads * d, 1}};
}

TensorLayout transposed(const TensorLayout& t) {
  TensorLayout r = t;
  std::swap(r.dims[2], r.dims[3]);
  std::swap(r.strides[2], r.strides[3]);
  return r;
}

TensorLayout stats_layout(const SdpaShape& s) {
  const int64_t h = s.heads_q, len = s.seq_len;
  if (s.ragged) return {{s.batch, h, len, 1}, {len * h, 1, h, 1}};
  return {{s.batch, h, len, 1}, {h * len, len, 1, 1}};
}

SdpaPlanKey sdpa_plan_key(int device, DType dtype, SdpaPass pass, const SdpaShape& s) {
  return {device,    dtype,      pass,     s.batch,      s.heads_q, s.heads_kv,
          s.seq_len, s.head_dim, s.ragged, s.window > 0, s.padded};
}

namespace {
std::mutex g_measured_mutex;
BoundedCache<SdpaPlanKey, bool> g_measured(kPlanCacheCapacity);
}  // namespace

std::optional<bool> measured_cudnn_faster(const SdpaPlanKey& key) {
  std::lock_guard<std::mutex> lock(g_measured_mutex);
  const bool* faster = g_measured.find(key);
  if (!faster) return std::nullopt;
  return *faster;
}

void record_measurement(const SdpaPlanKey& key, double cudnn_seconds, double sprig_seconds) {
  std::lock_guard<std::mutex> lock(g_measured_mutex);
  g_measured.put(key, cudnn_seconds < sprig_seconds);
}

std::string describe_key(const SdpaPlanKey& k) {
  std::string s = std::string(k.pass == SdpaPass::forward ? "forward " : "backward ") +
                  dtype_name(k.dtype) + " b=" + std::to_string(k.batch) +
                  " hq=" + std::to_string(k.heads_q) + " hkv=" + std::to_string(k.heads_kv) +
                  " s=" + std::to_string(k.seq_len) + " d=" + std::to_string(k.head_dim);
  if (k.ragged) s += " ragged";
  if (k.windowed) s += " windowed";
  if (k.padded) s += " padded";
  return s + " on cuda:" + std::to_string(k.device);
}

void report_cudnn_fallback(const SdpaPlanKey& key, const std::string& what) {
  std::cerr << "sprig: attention runs sprig's kernels for " << describe_key(key)
            << ": cuDNN failed on it (" << what << ")\n";
}

SdpaShape call_shape(const Tensor& q, const Tensor& k, const AttentionMask& mask,
                     const CudnnMaskForm& form, SdpaPass pass, int cudnn_version,
                     const DeviceRagged** ragged) {
  const int64_t B = q.size(0), T = q.size(1), hq = q.size(2), hkv = k.size(2), d = q.size(3);
  const bool padded = needs_padding_mask(pass, form, T, cudnn_version);
  const DeviceRagged* r =
      form.ragged || padded ? &mask.cudnn_ragged(form, B, hq, hkv, d, q.device()) : nullptr;
  if (ragged) *ragged = r;
  return sdpa_shape(B, T, hq, hkv, d, form, r ? r->seqs : RaggedSequences{}, padded);
}

}  // namespace sprig::cuda::cudnn

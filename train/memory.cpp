#include "train/memory.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "nn/loss.h"
#include "nn/qwen.h"
#include "tensor/cuda/kernels.h"
#include "tensor/storage.h"
#include "train/gradient_buckets.h"

#if SPRIG_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sprig {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// The data loader holds the batch in use and prefetches two more, each a few i64 tensors of
// B x S (input ids, labels or loss mask, positions, document ids).
constexpr double kBatchesHeld = 3, kBatchTensors = 4;

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", bytes / kGiB);
  return buf;
}

}  // namespace

// Shape legend: T tokens of a micro-batch, L trained layers, H hidden, I intermediate,
// Q = heads x head_dim, K = kv_heads x head_dim, V vocabulary, P trained and F frozen parameters,
// c bytes per compute element (2 for bf16, 4 for f32).
//   parameters   P x (4 f32 master + c compute copy when it is not f32) + F x c
//   optimizer    P x (c gradient + 8 AdamW moments in f32)
//   sharding     over W ranks (train.shard optimizer) the moments, and the masters when they are
//                not the parameters themselves (bf16), are divided by W; with train.shard
//                gradients the gradients too, plus the whole bucket a reduce-scatter fills
//                (25 MiB, or the output head's V x H when larger; at most the gradients)
//   activations  what autograd keeps for the backward, per layer and token: the attention
//                block's input and norm, q, k, v, rotated q and k, and the attention output
//                (2H + 3Q + 3K, plus a f32 log-sum-exp per head: flash attention keeps no T x T
//                scores), the MLP's input and norm, gate, up and SiLU(gate) x up (2H + 3I); the
//                projections' outputs go into residual sums, which keep nothing:
//                a = T x (4H + 3Q + 3K + 3I) x c + T x heads x 4 per layer, L x a,
//                plus StepShapes::layer_extra_width per token (what a recipe's layer keeps
//                besides), the context tokens' projection and norm and each layer's keys before
//                and after rotation and values (context x (2H + 3K x L) x c), the embeddings and
//                final norm (3 x T x H x c) and the frozen model's kept outputs (kept x c). With
//                activation checkpointing a checkpointed layer keeps only its input (T x H x c,
//                plus StepShapes::checkpoint_extra_width) and its backward rebuilds its a while
//                the layers below it still hold theirs: the layers' part is the most of the
//                forward's end and of each checkpointed layer's rebuild, walking up the stack
//   loss         the output head's logits, one chunk of rows at a time in f32 (nn/loss.h; their
//                gradient is written over them), and the gradient of its input:
//                rows x V x 4 + T x H x c
//   peak         parameters + moments + batches + the gradients that live through the step (data
//                parallel buckets, accumulation, a sharded rank's shard) + the larger of the rest
//                of the gradients (made by the backward as it frees the activations; with sharded
//                gradients the bucket in flight) and activations + kept + loss
//   batches      3 batches of 4 i64 tensors of B x S
MemoryEstimate estimate_step_memory(const StepShapes& s, int64_t trained_parameters,
                                    DType compute) {
  const double c = compute == DType::bf16 ? 2.0 : 4.0;
  const QwenConfig& m = s.layers;
  const double T = static_cast<double>(s.tokens), L = static_cast<double>(m.num_hidden_layers),
               H = static_cast<double>(m.hidden_size), I = static_cast<double>(m.intermediate_size),
               Q = static_cast<double>(m.num_attention_heads * m.head_dim),
               K = static_cast<double>(m.num_key_value_heads * m.head_dim),
               V = static_cast<double>(m.vocab_size), P = static_cast<double>(trained_parameters);
  MemoryEstimate e;
  const double W = static_cast<double>(s.optimizer_shards);
  e.masters = compute == DType::f32 ? P * 4.0 : P * 4.0 / W;
  e.compute_copy = compute == DType::f32 ? 0.0 : P * c;
  e.frozen = static_cast<double>(s.frozen_parameters) * c;
  const double G = static_cast<double>(s.gradient_shards);
  if (G > 1) {  // this rank's shard, and a whole bucket in flight (the head's, when larger)
    e.persistent_gradients = P * c / G;
    e.gradients = e.persistent_gradients +
                  std::min(P * c, std::max(static_cast<double>(kDefaultBucketBytes), V * H * c));
  } else {
    e.gradients = P * c;
    e.persistent_gradients = s.gradients_persist ? e.gradients : 0.0;
  }
  e.moments = P * 8.0 / W;
  const double layer = T * (4 * H + 3 * Q + 3 * K + 3 * I) * c +
                       T * static_cast<double>(m.num_attention_heads) * 4.0;
  e.layer = layer + T * static_cast<double>(s.layer_extra_width) * c;
  e.checkpointed_layer = T * (H + static_cast<double>(s.checkpoint_extra_width)) * c;
  double below = 0, layers = 0;  // what the layers below the current one keep; the most
  for (int64_t i = 0; i < m.num_hidden_layers; ++i) {
    if (checkpointed_layer(s.checkpoint_every, i)) {
      layers = std::max(layers, below + e.checkpointed_layer + layer);
      below += e.checkpointed_layer;
    } else {
      below += e.layer;
    }
  }
  e.activations = std::max(layers, below) +
                  static_cast<double>(s.context_tokens) * (2 * H + 3 * K * L) * c + 3 * T * H * c;
  e.kept = static_cast<double>(s.kept_elements) * c;
  const double rows = std::min(T, static_cast<double>(head_chunk_rows(0, m.vocab_size)));
  e.loss = rows * V * 4.0 + T * H * c;
  e.batches = kBatchesHeld * kBatchTensors * static_cast<double>(s.batch_tokens) * 8.0;
  return e;
}

double usable_memory(Device device) {
  if (device.is_cpu())
    return static_cast<double>(cpu_memory_available()) +
           static_cast<double>(cpu_memory_allocated());
#if SPRIG_WITH_CUDA
  int current = 0;
  size_t free = 0, total = 0;
  if (cudaGetDevice(&current) == cudaSuccess && cudaSetDevice(device.index) == cudaSuccess) {
    const cudaError_t rc = cudaMemGetInfo(&free, &total);
    cudaSetDevice(current);
    if (rc == cudaSuccess)
      return static_cast<double>(free) + static_cast<double>(cuda::memory_allocated(device.index));
  }
#endif
  throw std::runtime_error("[train] cannot read the free memory of " + device.str());
}

void check_step_fits(const StepShapes& shapes, int64_t trained_parameters, DType compute,
                     Device device) {
  const MemoryEstimate e = estimate_step_memory(shapes, trained_parameters, compute);
  const double usable = usable_memory(device);
  if (e.total() > usable)
    throw std::runtime_error("[train] one training step needs about " + gib(e.total()) +
                             " GiB (parameters " + gib(e.parameters()) + ", gradients and AdamW " +
                             gib(e.optimizer()) + ", activations " + gib(e.activations + e.kept) +
                             ", loss " + gib(e.loss) + ", batches " + gib(e.batches) +
                             "), more than the " + gib(usable) + " GiB available on " +
                             device.str() + ": lower data.micro_batch_size or data.seq_len");
}

void check_kv_cache_fits(const QwenConfig& model, int64_t tokens, DType dtype, Device device,
                         const std::string& where) {
  const double bytes = 2.0 * static_cast<double>(model.num_hidden_layers) *
                       static_cast<double>(model.num_key_value_heads) *
                       static_cast<double>(model.head_dim) * static_cast<double>(tokens) *
                       static_cast<double>(dtype_size(dtype));
  const double usable = usable_memory(device);
  if (bytes > usable / 2)
    throw std::runtime_error("[" + where + "] decoding " + std::to_string(tokens) +
                             " tokens holds a KV cache of about " + gib(bytes) +
                             " GiB, more than half the " + gib(usable) + " GiB available on " +
                             device.str() + ": lower --max-new-tokens");
}

}  // namespace sprig

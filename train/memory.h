// The memory a training step needs, estimated from the shapes before anything large is allocated,
// so a run that cannot fit is refused with the figures instead of being killed by the kernel's
// out-of-memory killer part-way through.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "nn/qwen_config.h"
#include "tensor/dtype.h"

namespace sprig {

// What a step's memory depends on. A recipe describes its models (Recipe::step_shapes); the
// trainer fills in batch_tokens from the data config.
struct StepShapes {
  QwenConfig layers;              // the shape of the trained decoder layers and output head
  int64_t tokens = 0;             // tokens of one micro-batch through those layers
  int64_t context_tokens = 0;     // tokens each layer also attends to (a draft's target context)
  int64_t frozen_parameters = 0;  // a model run without gradients (a draft's target)
  int64_t kept_elements = 0;      // its outputs kept for the step (the captured hidden states)
  int64_t batch_tokens = 0;       // B x S of a data batch
  int64_t checkpoint_every = 0;   // activation checkpointing of the trained layers, 0: none
  int64_t optimizer_shards = 1;   // ranks the masters and moments are sharded over (train.shard)
  int64_t gradient_shards = 1;    // ranks the gradients are sharded over (train.shard gradients)
  // Elements per token a layer keeps besides a decoder layer's set (layer_extra_width), and a
  // checkpointed one besides its input (checkpoint_extra_width): an EAGLE-3 step's embeddings,
  // input norms and logits, and when checkpointed its projected queries, keys and values.
  int64_t layer_extra_width = 0, checkpoint_extra_width = 0;
  // Whether the gradients live through the whole step (data-parallel buckets, or accumulation
  // over several micro-batches); otherwise the backward makes them as it frees the activations.
  bool gradients_persist = true;
};

// The estimate, in bytes, and its parts.
struct MemoryEstimate {
  double masters = 0, compute_copy = 0, frozen = 0;  // the trained and the frozen parameters
  double gradients = 0, moments = 0;                 // the trained parameters' gradients, AdamW's
  double activations = 0;  // what autograd keeps for the backward (the trained layers, the head's
                           // input, a draft's context keys)
  double kept = 0;         // the frozen model's outputs kept for the step
  // Of the activations: what one trained layer keeps, and one checkpointed layer (its input and
  // what it keeps besides; its backward rebuilds a layer's set for a while).
  double layer = 0, checkpointed_layer = 0;
  double loss = 0, batches = 0;
  double persistent_gradients = 0;  // the part of `gradients` that lives through the step
  double parameters() const { return masters + compute_copy + frozen; }
  double optimizer() const { return gradients + moments; }
  // The peak: the backward starts with every activation held and makes the gradients as it frees
  // them, so the gradients that do not live through the step count against the activations.
  double total() const {
    return parameters() + moments + batches + persistent_gradients +
           std::max(gradients - persistent_gradients, activations + kept + loss);
  }
};

// The memory of one training step of a module with `trained_parameters` computing in `compute`
// (bf16 or f32), with f32 masters and AdamW moments; the formula is at its definition.
MemoryEstimate estimate_step_memory(const StepShapes& shapes, int64_t trained_parameters,
                                    DType compute);

// What a run on `device` can use: on the CPU the system's available memory plus what sprig's
// tensors already hold; on CUDA the device's free memory plus what sprig's allocator holds.
double usable_memory(Device device);

// Throws std::runtime_error "[train] one training step needs about ... GiB (...), more than the
// ... GiB available on DEVICE ..." when the estimate exceeds usable_memory(device).
void check_step_fits(const StepShapes& shapes, int64_t trained_parameters, DType compute,
                     Device device);

// Throws std::runtime_error "[where] decoding N tokens holds a KV cache of about ... GiB, more
// than the ... GiB available on DEVICE ..." when the keys and values of `tokens` positions of
// `model` in `dtype` (2 x layers x kv heads x head_dim each) exceed half of usable_memory(device)
// (the rest is the weights and the forward's own activations).
void check_kv_cache_fits(const QwenConfig& model, int64_t tokens, DType dtype, Device device,
                         const std::string& where);

}  // namespace sprig

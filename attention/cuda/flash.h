// CUDA flash attention (docs/kernels.md §4, stage 1: FA2 structure on mma.sync m16n8k16, bf16/f16
// inputs, fp32 accumulation), forward and backward, driven by the block-sparse tile map of
// tile_map.h.
//
// Layouts (all contiguous, one CUDA device, q/k/v of one dtype, bf16 or f16):
//   q, out, dout, dq [B, Tq, Hq, D]; k, v, dk, dv [B, Tk, Hkv, D]; lse [B, Hq, Tq] f32.
// D is 64 or 128. GQA is native: query head h reads kv head h / (Hq / Hkv), without K/V copies.
// Scores are scale * q.k (scale > 0); lse is the natural-log sum of exp over the allowed keys.
// A fully masked query row gets out = 0, lse = -inf and zero gradients. Every output is written
// with `=`. Batch row b uses mask row b of the map, or row 0 when the map is shared (1 row).
//
// Each pass runs on a tile map compiled for its own tile shape, flash_tile_shape(pass, D), once
// per batch and shared by every layer and head: the twins take it from the AttentionMask; the
// flash_* kernels take an uploaded map (upload_tile_map) directly. Scratch buffers of the backward
// come from the device's caching allocator, which is ordered on cuda::current_stream(device): pass
// that stream.
#pragma once

#include <cstdint>

#include "attention/attention_mask.h"
#include "attention/cuda/device_tile_map.h"
#include "tensor/cuda/kernels.h"
#include "tensor/tensor.h"

namespace sprig::cuda {

// The twins of cpu::attention_forward / attention_backward (attention/cpu_attention.h): the
// flash kernels below on the mask's tile maps of each pass's tile shape, compiled and uploaded on
// first use (AttentionMask::device_tile_map). The backward adds dQ with atomics.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                       double scale, const Tensor& out, const Tensor& lse, cudaStream_t stream);
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& dout, const AttentionMask& mask,
                        double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                        cudaStream_t stream);

// out = softmax(scale q k^T masked) v and its lse. `map` has the forward tile shape.
void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const DeviceTileMap& map, double scale, const Tensor& out,
                             const Tensor& lse, cudaStream_t stream);

// dq, dk, dv of the forward above, given its out and lse. `map` has the backward tile shape.
// Default: a key-tile-major kernel computes dK/dV (looping over the query heads of its kv head)
// and adds dQ with fp32 atomics (summation order varies from run to run). deterministic = true
// computes dQ in a second, query-tile-major kernel instead: bitwise reproducible, ~40% more math.
void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const Tensor& dout, const DeviceTileMap& map,
                              double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              cudaStream_t stream, bool deterministic = false);

}  // namespace sprig::cuda

// CPU attention kernels: the twins of the CUDA kernels (attention/cuda/flash.h) with the same names
// and arguments, the tiled flash implementation they run (fp32, the CPU default and the oracle of
// the CUDA kernels) and the dense reference. attention/attention.h checks arguments, allocates
// outputs and dispatches here; these kernels may assume what each comment states.
//
// Shapes: q, out, dout, dq [B, Tq, Hq, D]; k, v, dk, dv [B, Tk, Hkv, D]; lse [B, Hq, Tq]; all
// contiguous. GQA: query head h reads kv head h / (Hq / Hkv) (no K/V copies). Scores are
// scale * q.k; lse is the natural-log sum of exp over allowed keys. A fully masked query row gets
// out = 0, lse = -inf and zero gradients. Every output is written with `=`.
#pragma once

#include <cstdint>

#include "attention/attention_mask.h"
#include "attention/mask.h"
#include "attention/tile_map.h"
#include "tensor/tensor.h"

namespace sprig::cpu {

// Tile shape of the CPU tiled implementation's map.
constexpr int32_t kAttentionBlockM = 64, kAttentionBlockN = 64;

// The twins of cuda::attention_forward / attention_backward: f32 tensors run the tiled flash
// implementation below on the mask's kAttentionBlockM x kAttentionBlockN map (compiled on first
// use), f64 tensors the dense reference. The backward reads lse, not out. lse is f32 (f64).
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                       double scale, const Tensor& out, const Tensor& lse);
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& dout, const AttentionMask& mask,
                        double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv);

// Tiled flash attention in fp32 (all tensors f32). Walks the tile map (any tile shape): empty
// tiles are skipped, partial tiles read their keep bits. Extra memory is O(Tq) per head beyond
// the outputs (the forward's online softmax; the backward's per-row delta and norm). OpenMP over
// (batch, head, query tile) forward and for dQ, over (batch, kv head, key tile) for dK/dV, in the
// map's LPT order; no two threads write the same output rows, so results are deterministic.
void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const TileMap& map,
                             float scale, const Tensor& out, const Tensor& lse);
// The backward recomputes delta = rowsum(dout * out) from its own probabilities (see
// cpu_flash.cpp), so it needs lse but not out.
void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse,
                              const Tensor& dout, const TileMap& map, float scale, const Tensor& dq,
                              const Tensor& dk, const Tensor& dv);

// Dense reference: materialises the mask and the [Tq, Tk] scores of each head and runs the
// textbook formulas (Eigen GEMMs, row softmax) in the tensors' dtype (all f32 or all f64). In f64
// it is the reference the tests measure against; in f32 it is the naive same-precision
// implementation of FlashAttention's error rule.
void attention_reference_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const BatchMask& mask, double scale, const Tensor& out,
                                 const Tensor& lse);
void attention_reference_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& dout, const BatchMask& mask, double scale,
                                  const Tensor& dq, const Tensor& dk, const Tensor& dv);

}  // namespace sprig::cpu

// The attention op on tensors (DESIGN §4): forward and backward over a batch mask compiled once
// and shared by every layer. GQA is native: q has Hq heads, k and v have Hkv heads with Hq a
// multiple of Hkv, and query head h reads kv head h / (Hq / Hkv).
//
// Shapes: q [B, Tq, Hq, D]; k, v [B, Tk, Hkv, D]; out [B, Tq, Hq, D]; lse [B, Hq, Tq] (natural
// log). scores = scale * q.k. A fully masked query row gets out = 0, lse = -inf and zero
// gradients. Inputs may have any strides; results are fresh tensors (`=`, never accumulated).
//
// CPU dtypes: f32 runs the tiled flash implementation (bf16/f16 inputs compute in f32 and come
// back in their dtype, lse f32); f64 runs the dense f64 reference (gradient checks; lse f64).
// CUDA: the flash kernels (attention/cuda/flash.h) at head dims 64 and 128; bf16/f16 inputs run
// as they are, f32 inputs are rounded to bf16 for the kernels (fp32 accumulation) and the results
// come back in f32, as FlexAttention-based pipelines do.
#pragma once

#include <memory>

#include "attention/mask.h"
#include "attention/tile_map.h"
#include "tensor/tensor.h"

namespace sprig {

struct AttentionOutput {
  Tensor out;  // [B, Tq, Hq, D]
  Tensor lse;  // [B, Hq, Tq]
};

struct AttentionGrads {
  Tensor dq, dk, dv;
};

// A batch's mask compiled for attention: the description, its row intervals and the tile map of
// the CPU kernels; the tile maps of the CUDA kernels are compiled and uploaded on first use (per
// device, pass and head dim) and then shared by every layer.
struct DeviceTileCache;  // attention.cpp

struct AttentionMask {
  BatchMask mask;
  RowIntervals intervals;
  TileMap cpu_tiles;
  std::shared_ptr<DeviceTileCache> device_tiles;  // filled lazily, thread-safe
};
AttentionMask compile_attention_mask(BatchMask mask);

AttentionOutput attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const AttentionMask& mask, double scale);
// out and lse are attention_forward's results for the same inputs; dout has out's shape. (The
// CPU implementation reads lse only; FlashAttention-style GPU kernels also read out.)
AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& dout,
                                  const AttentionMask& mask, double scale);

// The dense reference (materialises the mask), computing in the inputs' dtype: f64 inputs give
// the f64 reference, f32 inputs the naive same-precision implementation (FlashAttention's test
// rule compares against both). Outputs have the inputs' dtype.
AttentionOutput attention_reference_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const BatchMask& mask, double scale);
AttentionGrads attention_reference_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const Tensor& dout, const BatchMask& mask,
                                            double scale);

}  // namespace sprig

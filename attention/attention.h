// The attention op on tensors: forward and backward over a batch mask compiled once and shared by
// every layer (attention/attention_mask.h). GQA is native: q has Hq heads, k and v have Hkv heads
// with Hq a multiple of Hkv, and query head h reads kv head h / (Hq / Hkv).
//
// Shapes: q [B, Tq, Hq, D]; k, v [B, Tk, Hkv, D]; out [B, Tq, Hq, D]; lse [B, Hq, Tq] (natural
// log). scores = scale * q.k. A fully masked query row gets out = 0, lse = -inf and zero
// gradients. Inputs may have any strides; results are fresh tensors (`=`, never accumulated).
//
// Like every op, attention checks its arguments and dispatches to one of two twins of the same
// name and arguments: cpu::attention_forward (attention/cpu_attention.h) and
// cuda::attention_forward (attention/cuda/flash.h).
// CPU dtypes: f32 runs the tiled flash implementation (bf16/f16 inputs compute in f32 and come
// back in their dtype, lse f32); f64 runs the dense f64 reference (gradient checks; lse f64).
// CUDA: the flash kernels at head dims 64 and 128; bf16/f16 inputs run as they are, f32 inputs
// are rounded to bf16 for the kernels (fp32 accumulation) and the results come back in f32, as
// FlexAttention-based pipelines do.
#pragma once

#include "attention/attention_mask.h"
#include "tensor/tensor.h"

namespace sprig {

struct AttentionOutput {
  Tensor out;  // [B, Tq, Hq, D]
  Tensor lse;  // [B, Hq, Tq]
};

struct AttentionGrads {
  Tensor dq, dk, dv;
};

AttentionOutput attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const AttentionMask& mask, double scale);
// out and lse are attention_forward's results for the same inputs; dout has out's shape. (The
// CPU implementation reads lse only; FlashAttention-style GPU kernels also read out.)
AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& dout,
                                  const AttentionMask& mask, double scale);

// The dense reference on the CPU (materialises the mask), computing in the inputs' dtype: f64
// inputs give the f64 reference, f32 inputs the naive same-precision implementation
// (FlashAttention's test rule compares against both). Outputs have the inputs' dtype.
AttentionOutput attention_reference_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const BatchMask& mask, double scale);
AttentionGrads attention_reference_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const Tensor& dout, const BatchMask& mask,
                                            double scale);

}  // namespace sprig

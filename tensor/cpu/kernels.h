// CPU kernels: the readable reference implementation of every op (plain loops, fp32/f64
// accumulation, OpenMP where it matters, Eigen for GEMM). tensor/cuda/kernels.h declares the CUDA
// twin of each with the same arguments plus a stream. The dispatchers in tensor/ops/*.cpp check
// arguments and allocate outputs; kernels may assume what each comment states.
//
// Dtypes: floating kernels handle f32 and f64 (bf16/f16 inputs are converted to f32 by the
// dispatcher on CPU); index tensors are i32 or i64. Unless stated, tensors are contiguous.
// Backward rule: kernels `+=` into parameter gradients (marked "+=") and `=` into activation
// gradients.
#pragma once

#include <vector>

#include "tensor/kernel_params.h"
#include "tensor/tensor.h"

namespace sprig::cpu {

// dst = src converted to dst's dtype; same shape, any strides and dtypes (all seven).
void copy(const Tensor& src, const Tensor& dst);
void fill(const Tensor& dst, double value);  // dst contiguous, any dtype

// y = op(x); y may alias x.
void unary(UnaryOp op, const Tensor& x, const Tensor& y, double exponent);
void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy,
                    const Tensor& dx, double exponent);
// a and b are already expanded to out's shape (any strides, including 0); out contiguous.
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
// out = x op s (s op x when scalar_first); out may alias x.
void binary_scalar(BinaryOp op, const Tensor& x, double s, bool scalar_first, const Tensor& out);
// cond (bool), a, b expanded to out's shape (any strides); out contiguous.
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);

// out has x's shape without `dim` (dim already normalised); out dtype = x dtype.
void reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t dim);
void argmax(const Tensor& x, const Tensor& out, int64_t dim);  // out i64
void softmax(const Tensor& x, const Tensor& y, int64_t dim, bool log);
void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int64_t dim, bool log);

// weight [V, H], ids [N] -> out [N, H]; dweight += scatter of dy [N, H].
void embedding(const Tensor& weight, const Tensor& ids, const Tensor& out);
void embedding_backward(const Tensor& dy, const Tensor& ids, const Tensor& dweight);
// idx 1-D; out = x.index_select(dim, idx); dx.index_add_(dim, idx, dy) (dx +=).
void index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out);
void index_add(const Tensor& dy, int64_t dim, const Tensor& idx, const Tensor& dx);
// torch.gather / scatter_add_ along dim; idx has out's shape (dx +=).
void gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out);
void scatter_add(const Tensor& dy, int64_t dim, const Tensor& idx, const Tensor& dx);
// The range check of loss targets and teacher rows, with one value read back instead of the whole
// index: first (i64 [1], holding idx.numel() or less on entry) = min(first, the first position of
// the 1-D idx whose value lies outside [0, limit) and, with has_skip, differs from skip).
void first_out_of_range(const Tensor& idx, int64_t limit, bool has_skip, int64_t skip,
                        const Tensor& first);

// a [Ba, M, K] (or [Ba, K, M] if trans_a), b [Bb, K, N] (or [Bb, N, K] if trans_b), Bb in {1, Ba};
// out [Ba, M, N] = op(a) @ op(b) (+= when accumulate). All three share one dtype.
void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b,
            bool accumulate);

// Fused and loss kernels (rms_norm .. kl_div_backward) read and write all four floating dtypes
// natively, on CPU too (fp32 math, f64 for f64), so HF's roundings to the activation dtype are
// reproduced and no f32 copy of the logits is ever made. Their f32 outputs (rstd, loss, lse, kl)
// are f64 when the inputs are f64 (gradient checks).
// x [R, H], w [H], y [R, H] share one dtype; rstd [R] f32; dw f32 or w's dtype.
void rms_norm(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& rstd, double eps);
void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                       const Tensor& dx, const Tensor& dw /* += */);
// x, y [B, T, nH, D], pos [B, T]; inverse applies the transposed rotation (the backward).
// Both devices rotate by the same host-computed RopeFrequencies (tensor/kernel_params.h).
void rope(const Tensor& x, const Tensor& pos, const Tensor& y, const RopeFrequencies& freqs,
          bool inverse);
void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out);
void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                     const Tensor& dup);
// A GRU step: gi, gh, dgi, dgh [R, 3G]; h_prev, h, dh, dh_prev [R, G]; gates [R, 4G]; each
// with unit column stride and any row stride.
void gru_cell(const Tensor& gi, const Tensor& gh, const Tensor& h_prev, const Tensor& h,
              const Tensor& gates);
void gru_cell_backward(const Tensor& dh, const Tensor& h_prev, const Tensor& gates,
                       const Tensor& dgi, const Tensor& dgh, const Tensor& dh_prev);

// logits [T, V], targets [T]; loss, lse [T] f32; argmax [T] i64 or undefined. Targets are in
// [0, V) or equal to ignore_index (checked by the dispatcher).
void cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& loss,
                   const Tensor& lse, const Tensor& argmax, int64_t ignore_index);
void cross_entropy_backward(const Tensor& dloss, const Tensor& logits, const Tensor& targets,
                            const Tensor& lse, const Tensor& dlogits, int64_t ignore_index);
// base [R, V], features [R, E], proj [V, E]; loss, lse [2, R] f32; argmax [2, R] i64 or undefined.
// dbase may alias base; dfeatures [R, E]; dproj [V, E] (written, or added to with
// accumulate_dproj) or undefined.
void corrected_cross_entropy(const Tensor& base, const Tensor& features, const Tensor& proj,
                             const Tensor& targets, const Tensor& loss, const Tensor& lse,
                             const Tensor& argmax, int64_t ignore_index);
void corrected_cross_entropy_backward(const Tensor& dloss, const Tensor& base,
                                      const Tensor& features, const Tensor& proj,
                                      const Tensor& targets, const Tensor& lse, const Tensor& dbase,
                                      const Tensor& dfeatures, const Tensor& dproj,
                                      bool accumulate_dproj, int64_t ignore_index);
// student [R, V]; teacher [R, V], or [Rt, V] with teacher_rows (i32/i64 [R]) naming row r's
// teacher; kl, teacher_lse, student_lse [R] f32; student_argmax [R] i64 or undefined.
void kl_div(const Tensor& teacher, const Tensor& student, const Tensor& teacher_rows,
            const Tensor& kl, const Tensor& teacher_lse, const Tensor& student_lse,
            const Tensor& student_argmax, double temperature);
void kl_div_backward(const Tensor& dkl, const Tensor& teacher, const Tensor& student,
                     const Tensor& teacher_rows, const Tensor& teacher_lse,
                     const Tensor& student_lse, const Tensor& dstudent, double temperature);

// out (one element, f64 on CPU / f32 on CUDA) = sum of squares of x (any floating dtype).
void sum_squares(const Tensor& x, const Tensor& out);
// param, exp_avg, exp_avg_sq f32; grad f32 or bf16; compute_copy bf16/f16 or undefined.
// The step constants come from adamw_scalars (tensor/kernel_params.h), as on CUDA.
void adamw(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
           const Tensor& compute_copy, const AdamWParams& hp);

}  // namespace sprig::cpu

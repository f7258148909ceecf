// Differentiable functions on Vars: the same names and arguments as the raw ops of tensor/ops.h,
// so nn code reads like tensor code. Each one computes its value with the forward op and records a
// backward that calls the matching backward op (autograd/functions_*.cpp, forward and backward
// side by side). Tensor arguments (ids, targets, masks, positions) get no gradient.
#pragma once

#include <vector>

#include "autograd/var.h"
#include "tensor/ops.h"

namespace sprig {

// ---- elementwise (functions_elementwise.cpp) ----------------------------------------------------
Var unary(UnaryOp op, const Var& x, double exponent = 0.0);
inline Var neg(const Var& x) { return unary(UnaryOp::neg, x); }
inline Var exp(const Var& x) { return unary(UnaryOp::exp, x); }
inline Var log(const Var& x) { return unary(UnaryOp::log, x); }
inline Var sqrt(const Var& x) { return unary(UnaryOp::sqrt, x); }
inline Var rsqrt(const Var& x) { return unary(UnaryOp::rsqrt, x); }
inline Var tanh(const Var& x) { return unary(UnaryOp::tanh, x); }
inline Var sigmoid(const Var& x) { return unary(UnaryOp::sigmoid, x); }
inline Var silu(const Var& x) { return unary(UnaryOp::silu, x); }
inline Var pow(const Var& x, double exponent) { return unary(UnaryOp::pow, x, exponent); }
inline Var abs(const Var& x) { return unary(UnaryOp::abs, x); }

// Broadcasting binary ops; gradients are summed back to each input's shape.
Var binary(BinaryOp op, const Var& a, const Var& b);
inline Var add(const Var& a, const Var& b) { return binary(BinaryOp::add, a, b); }
inline Var sub(const Var& a, const Var& b) { return binary(BinaryOp::sub, a, b); }
inline Var mul(const Var& a, const Var& b) { return binary(BinaryOp::mul, a, b); }
inline Var div(const Var& a, const Var& b) { return binary(BinaryOp::div, a, b); }

// x op s, or s op x when scalar_first.
Var binary_scalar(BinaryOp op, const Var& x, double s, bool scalar_first = false);
inline Var add(const Var& x, double s) { return binary_scalar(BinaryOp::add, x, s); }
inline Var sub(const Var& x, double s) { return binary_scalar(BinaryOp::sub, x, s); }
inline Var mul(const Var& x, double s) { return binary_scalar(BinaryOp::mul, x, s); }
inline Var div(const Var& x, double s) { return binary_scalar(BinaryOp::div, x, s); }

inline Var operator-(const Var& x) { return neg(x); }
inline Var operator+(const Var& a, const Var& b) { return add(a, b); }
inline Var operator-(const Var& a, const Var& b) { return sub(a, b); }
inline Var operator*(const Var& a, const Var& b) { return mul(a, b); }
inline Var operator/(const Var& a, const Var& b) { return div(a, b); }
inline Var operator+(const Var& x, double s) { return add(x, s); }
inline Var operator-(const Var& x, double s) { return sub(x, s); }
inline Var operator*(const Var& x, double s) { return mul(x, s); }
inline Var operator/(const Var& x, double s) { return div(x, s); }
inline Var operator+(double s, const Var& x) { return binary_scalar(BinaryOp::add, x, s, true); }
inline Var operator-(double s, const Var& x) { return binary_scalar(BinaryOp::sub, x, s, true); }
inline Var operator*(double s, const Var& x) { return binary_scalar(BinaryOp::mul, x, s, true); }
inline Var operator/(double s, const Var& x) { return binary_scalar(BinaryOp::div, x, s, true); }

Var where(const Tensor& cond, const Var& a, const Var& b);        // cond ? a : b
Var masked_fill(const Var& x, const Tensor& mask, double value);  // filled positions get no grad
Var cast(const Var& x, DType dtype);  // the gradient is cast back to x's dtype

// ---- reductions and softmax (functions_reduce.cpp) ----------------------------------------------
Var sum(const Var& x, int64_t dim, bool keepdim = false);
Var mean(const Var& x, int64_t dim, bool keepdim = false);
Var max(const Var& x, int64_t dim, bool keepdim = false);  // the gradient goes to the first max
Var logsumexp(const Var& x, int64_t dim, bool keepdim = false);
Var sum_all(const Var& x);   // 0-dim
Var mean_all(const Var& x);  // 0-dim
Var softmax(const Var& x, int64_t dim = -1);
Var log_softmax(const Var& x, int64_t dim = -1);

// ---- views and indexing (functions_shape.cpp) ---------------------------------------------------
// Views of x's value (shared storage); the gradients are reshaped, transposed or zero-padded back.
Var view(const Var& x, const Shape& shape);
Var reshape(const Var& x, const Shape& shape);
Var transpose(const Var& x, int64_t d0, int64_t d1);
Var permute(const Var& x, const std::vector<int64_t>& dims);
Var slice(const Var& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Var narrow(const Var& x, int64_t dim, int64_t start, int64_t length);
Var select(const Var& x, int64_t dim, int64_t index);
Var expand(const Var& x, const Shape& shape);  // the gradient is summed back (sum_to)
Var unsqueeze(const Var& x, int64_t dim);
Var squeeze(const Var& x, int64_t dim);
Var contiguous(const Var& x);

Var concat(const std::vector<Var>& xs, int64_t dim);
// Pieces of `sizes` along dim (sizes must sum to x.size(dim)), each a narrow of x.
std::vector<Var> split(const Var& x, const std::vector<int64_t>& sizes, int64_t dim);
Var embedding(const Var& weight, const Tensor& ids);  // [V, H], ids [...] -> [..., H]
Var index_select(const Var& x, int64_t dim, const Tensor& idx);
Var gather(const Var& x, int64_t dim, const Tensor& idx);

// ---- matmul and fused transformer ops (functions_nn.cpp) ----------------------------------------
Var matmul(const Var& a, const Var& b, bool trans_a = false, bool trans_b = false);
Var rms_norm(const Var& x, const Var& w, double eps);                     // over the last dim
Var rope(const Var& x, const Tensor& pos, const RopeFrequencies& freqs);  // x [B, T, nH, D]
Var swiglu(const Var& gate, const Var& up);                               // silu(gate) * up
// PyTorch's nn.GRU with bias=False, one layer, batch_first, h0 = 0 (functions_gru.cpp):
// x [R, T, E], w_ih [3G, E], w_hh [3G, G] (row blocks r, z, n) -> every hidden state, [R, T, G].
// The result is a view with time-major strides (the buffer the backward keeps); ops needing it
// contiguous copy it.
Var gru(const Var& x, const Var& w_ih, const Var& w_hh);
// Per-row loss [T] f32 of logits [T, V] against targets [T]; ignored rows give 0 and no gradient.
Var cross_entropy(const Var& logits, const Tensor& targets, int64_t ignore_index = -100);
// Per-row KL(softmax(teacher/T) || softmax(student/T)) [R] f32; student, teacher [R, V].
Var kl_div(const Var& student, const Tensor& teacher, double temperature = 1.0);

}  // namespace sprig

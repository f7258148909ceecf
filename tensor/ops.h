// Raw ops on Tensors: each op is a forward function and, where differentiable, a backward function.
// Every function checks its arguments (throwing std::invalid_argument "[op] ..." naming the op and
// the offending values), allocates its outputs on the inputs' device and dispatches to the CPU
// kernel (tensor/cpu/kernels.h) or its CUDA twin (tensor/cuda/kernels.h). No gradients here: the
// autograd library pairs these forwards and backwards.
//
// Backward rule: functions that return gradients return fresh activation gradients (`=`);
// functions taking a gradient tensor argument by reference to a parameter gradient (embedding,
// rms_norm's dw, index_add) accumulate into it (`+=`).
//
// Dtypes: floating ops accept f32, f64, bf16, f16 (on CPU, bf16/f16 compute in f32); outputs keep
// the input dtype unless stated. Index tensors are i32 or i64.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "tensor/kernel_params.h"
#include "tensor/tensor.h"

namespace sprig {

// ---- elementwise
// --------------------------------------------------------------------------------- y = op(x);
// `exponent` is used by UnaryOp::pow only. Works on any strides.
Tensor unary(UnaryOp op, const Tensor& x, double exponent = 0.0);
// dx = dy * op'(x) (y = op(x) is passed so exp/sqrt/tanh/sigmoid reuse it).
Tensor unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy,
                      double exponent = 0.0);
inline Tensor neg(const Tensor& x) { return unary(UnaryOp::neg, x); }
inline Tensor exp(const Tensor& x) { return unary(UnaryOp::exp, x); }
inline Tensor log(const Tensor& x) { return unary(UnaryOp::log, x); }
inline Tensor sqrt(const Tensor& x) { return unary(UnaryOp::sqrt, x); }
inline Tensor rsqrt(const Tensor& x) { return unary(UnaryOp::rsqrt, x); }
inline Tensor tanh(const Tensor& x) { return unary(UnaryOp::tanh, x); }
inline Tensor sigmoid(const Tensor& x) { return unary(UnaryOp::sigmoid, x); }
inline Tensor silu(const Tensor& x) { return unary(UnaryOp::silu, x); }
inline Tensor pow(const Tensor& x, double exponent) { return unary(UnaryOp::pow, x, exponent); }
inline Tensor abs(const Tensor& x) { return unary(UnaryOp::abs, x); }

// out = a op b with NumPy broadcasting; a and b must share dtype and device.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
// Gradients of binary(op, a, b) given dy, each reduced back to its input's shape (for add and
// sub, a gradient that needs no reduction is dy itself, sharing its storage).
std::pair<Tensor, Tensor> binary_backward(BinaryOp op, const Tensor& a, const Tensor& b,
                                          const Tensor& dy);
// out = x op s, or s op x when scalar_first.
Tensor binary_scalar(BinaryOp op, const Tensor& x, double s, bool scalar_first = false);
inline Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::add, a, b); }
inline Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::sub, a, b); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::mul, a, b); }
inline Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::div, a, b); }
inline Tensor add(const Tensor& a, double s) { return binary_scalar(BinaryOp::add, a, s); }
inline Tensor sub(const Tensor& a, double s) { return binary_scalar(BinaryOp::sub, a, s); }
inline Tensor mul(const Tensor& a, double s) { return binary_scalar(BinaryOp::mul, a, s); }
inline Tensor div(const Tensor& a, double s) { return binary_scalar(BinaryOp::div, a, s); }

// Broadcast result shape of two shapes; throws "[op] shapes [..] and [..] do not broadcast".
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Sums x over broadcast dimensions so the result has `shape` (the inverse of expand); x itself
// when it already has that shape.
Tensor sum_to(const Tensor& x, const Shape& shape);

// out = cond ? a : b (cond is bool; all three broadcast together; a, b share dtype).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// Gradients of where: (dy where cond else 0, 0 where cond else dy), reduced to a's / b's shapes.
std::pair<Tensor, Tensor> where_backward(const Tensor& cond, const Shape& a_shape,
                                         const Shape& b_shape, const Tensor& dy);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);  // mask broadcasts to x

// Dtype conversion (any dtype to any dtype; floats to ints truncate toward zero).
inline Tensor cast(const Tensor& x, DType dtype) { return x.to(dtype); }

// ---- reductions over one dimension -------------------------------------------------------------
// Accumulate in f32 (f64 for f64 inputs). max/argmax pick the first maximum.
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // i64
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor sum_all(const Tensor& x);  // 0-dim tensor
// Backward of sum/mean: dy (reduced shape) broadcast back to x_shape (divided by n for mean).
Tensor sum_backward(const Tensor& dy, const Shape& x_shape, int64_t dim, bool keepdim);
Tensor mean_backward(const Tensor& dy, const Shape& x_shape, int64_t dim, bool keepdim);
// Backward of max: dy goes to the argmax position of each reduced row.
Tensor max_backward(const Tensor& dy, const Tensor& x, const Tensor& argmax_idx, int64_t dim,
                    bool keepdim);
// Backward of logsumexp: dx = dy * exp(x - y).
Tensor logsumexp_backward(const Tensor& dy, const Tensor& x, const Tensor& y, int64_t dim,
                          bool keepdim);

// ---- softmax ------------------------------------------------------------------------------------
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
Tensor softmax_backward(const Tensor& y, const Tensor& dy, int64_t dim = -1);  // y = softmax(x)
Tensor log_softmax_backward(const Tensor& y, const Tensor& dy,
                            int64_t dim = -1);  // y = log_softmax

// ---- indexing -----------------------------------------------------------------------------------
// weight [V, H], ids [...] (i32/i64, each in [0, V)) -> [..., H].
Tensor embedding(const Tensor& weight, const Tensor& ids);
// dweight [V, H] += scatter-add of dy [..., H] at ids.
void embedding_backward(const Tensor& dy, const Tensor& ids, const Tensor& dweight);

Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
// Pieces of `sizes` along dim (views of x; sizes must sum to x.size(dim)).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);

// out = x.index_select(dim, idx) (idx 1-D); backward: dx (zeros of x_shape) with rows added at idx.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx);
Tensor index_select_backward(const Tensor& dy, const Shape& x_shape, int64_t dim,
                             const Tensor& idx);
// out[i][j] = x[i][idx[i][j]] along dim (torch.gather semantics, idx same ndim as x);
// backward scatter-adds dy into zeros of x_shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx);
Tensor gather_backward(const Tensor& dy, const Shape& x_shape, int64_t dim, const Tensor& idx);

// ---- matmul -------------------------------------------------------------------------------------
// out = op(a) @ op(b), op = transpose of the last two dims when the flag is set.
// a [M, K] or [B, M, K]; b [K, N] or [B, K, N] (a 3-D a with a 2-D b broadcasts b over B).
// CPU: Eigen. CUDA: cuBLASLt, fp32 accumulation (bf16/f16 inputs stay in their dtype).
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// The same product written into `out` (contiguous, the result's shape, a's dtype and device):
// out = op(a) @ op(b), or out += op(a) @ op(b) when accumulate (e.g. a weight gradient summed
// over row chunks in place).
void matmul_into(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b,
                 bool accumulate);
// (da, db) for out = matmul(a, b, trans_a, trans_b); db is summed over B when b was broadcast.
std::pair<Tensor, Tensor> matmul_backward(const Tensor& a, const Tensor& b, const Tensor& dy,
                                          bool trans_a, bool trans_b);

// ---- fused transformer ops
// ----------------------------------------------------------------------- Statistics and losses
// documented as f32 below are f64 when the inputs are f64. RMSNorm over the last dim (HF numerics):
// y = w * cast_to_x_dtype(x32 * rstd), rstd = rsqrt(mean(x32^2) + eps). Returns (y, rstd [rows]
// f32).
std::pair<Tensor, Tensor> rms_norm(const Tensor& x, const Tensor& w, double eps);
// Returns dx; dw (f32 or w's dtype, shape [H]) += the weight gradient.
Tensor rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                         const Tensor& dw);

// Rotary embedding, rotate-half layout: x [B, T, nH, D], pos [B, T] (i32/i64) ->
// y = x * cos + rotate_half(x) * sin at angles float(pos) * freqs.inv_freq[i] (D / 2 of them),
// cos/sin in fp32 times freqs.attention_scaling, then cast to x's dtype before use (HF). D must be
// even.
Tensor rope(const Tensor& x, const Tensor& pos, const RopeFrequencies& freqs);
Tensor rope_backward(const Tensor& dy, const Tensor& pos,
                     const RopeFrequencies& freqs);  // the transposed rotation

// SwiGLU: out = silu(gate) * up; backward returns (dgate, dup).
Tensor swiglu(const Tensor& gate, const Tensor& up);
std::pair<Tensor, Tensor> swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dout);

// One GRU step after its GEMMs (PyTorch's nn.GRU without biases), gates in the order r, z, n:
// gi = x W_ih^T and gh = h_prev W_hh^T, both [R, 3G] with column blocks r, z, n; h_prev [R, G].
//   r = sigmoid(gi_r + gh_r), z = sigmoid(gi_z + gh_z), n = tanh(gi_n + r * gh_n),
//   h = (1 - z) * n + z * h_prev.
// Returns h [R, G] and gates [R, 4G] = [r, z, n, gh_n], what the backward reads. One dtype for
// all tensors (any floating dtype, read natively, math in f32, f64 for f64).
struct GruCell {
  Tensor h, gates;
};
GruCell gru_cell(const Tensor& gi, const Tensor& gh, const Tensor& h_prev);
// Gradients of h given dh [R, G]: dgi, dgh [R, 3G] and the direct part of dh_prev [R, G] (dh * z;
// the part through gh is dgh @ W_hh, the caller's GEMM). With
//   dn = dh (1 - z), dz = dh (h_prev - n), da_n = dn (1 - n^2),
//   da_r = da_n gh_n r (1 - r), da_z = dz z (1 - z):
//   dgi = [da_r, da_z, da_n], dgh = [da_r, da_z, da_n r].
struct GruCellGrads {
  Tensor dgi, dgh, dh_prev;
};
GruCellGrads gru_cell_backward(const Tensor& dh, const Tensor& h_prev, const Tensor& gates);
// The same two ops written into given outputs (`=`; the shapes, dtype and device above, unit
// column stride, any row stride), e.g. one step's slices of buffers holding a whole sequence.
void gru_cell_into(const Tensor& gi, const Tensor& gh, const Tensor& h_prev, const GruCell& out);
void gru_cell_backward_into(const Tensor& dh, const Tensor& h_prev, const Tensor& gates,
                            const GruCellGrads& out);

// The loss ops check their indices (targets, teacher rows) by reading them back: on CUDA, one
// device-to-host copy and a stream synchronisation per call. A caller that runs an op chunk by
// chunk checks all its indices once with the two functions below and passes IndexCheck::done, as
// the chunked head losses of nn/loss.h do.
enum class IndexCheck { each_call, done };
// Every target in [0, V) or equal to ignore_index, else "[op] target 7 out of range [0, 7) at row
// 2".
void check_target_range(const char* op, const Tensor& targets, int64_t V, int64_t ignore_index);
// Every teacher row in [0, rows), else "[op] teacher row 2 out of range [0, 2) at row 1".
void check_teacher_rows(const char* op, const Tensor& teacher_rows, int64_t rows);

// Cross-entropy per row: logits [T, V], targets [T] (i64/i32, ignore_index rows give loss 0).
// Reads logits in their own dtype with fp32 math, row chunk by row chunk (never a [T, V] f32 copy).
struct CrossEntropyResult {
  Tensor loss;    // [T] f32 (0 on ignored rows)
  Tensor lse;     // [T] f32 log-sum-exp per row (saved for backward)
  Tensor argmax;  // [T] i64 when requested, else undefined
};
CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets,
                                 int64_t ignore_index = -100, bool want_argmax = false,
                                 IndexCheck check = IndexCheck::each_call);
// dlogits [T, V] (logits dtype) = dloss[t] * (softmax(logits[t]) - onehot(target[t])), 0 if
// ignored. Written into `out` when it is given (contiguous, of logits' shape, dtype and device),
// which may be logits itself: the gradient then overwrites the logits in place (the output head's
// backward so reuses its scratch logits instead of holding a second (T, V) tensor).
Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& logits, const Tensor& targets,
                              const Tensor& lse, int64_t ignore_index = -100,
                              const Tensor& out = {});

// Domino's two cross-entropies with shared targets: over base logits b [R, V] and over corrected
// logits c = b + e @ P^T, with features e [R, E] and the projection P [V, E]. The corrections are
// rounded to the logits' dtype and so is their sum with b (as a GEMM's output added into b in
// place would be). On the CPU the corrections are computed tile by tile and never stored whole; on
// CUDA they are one GEMM into a scratch [R, V]. The results are [2, R]: row 0 of b, row 1 of c.
CrossEntropyResult corrected_cross_entropy(const Tensor& base, const Tensor& features,
                                           const Tensor& proj, const Tensor& targets,
                                           int64_t ignore_index = -100, bool want_argmax = false,
                                           IndexCheck check = IndexCheck::each_call);
// Their gradients from dloss and lse [2, R], with dc = dloss[1] (softmax(c) - onehot) (0 on
// ignored rows): dbase = dloss[0] (softmax(b) - onehot) + dc (c depends on b too; dbase may be
// base, in place), dfeatures [R, E] = dc @ P, and dproj [V, E] = dc^T @ e, written or, with
// accumulate_dproj, added to (an undefined dproj is skipped: a frozen projection).
void corrected_cross_entropy_backward_into(const Tensor& dloss, const Tensor& base,
                                           const Tensor& features, const Tensor& proj,
                                           const Tensor& targets, const Tensor& lse,
                                           const Tensor& dbase, const Tensor& dfeatures,
                                           const Tensor& dproj, bool accumulate_dproj = false,
                                           int64_t ignore_index = -100);

// Forward KL per row: KL(softmax(teacher/T) || softmax(student/T)) = sum_v p (log p - log q),
// terms with p == 0 contribute 0. student [R, V]; teacher [R, V], or with teacher_rows (i32/i64
// [R]) any [Rt, V] whose row teacher_rows[r] is row r's teacher (read in place, never gathered).
// With want_argmax, also each student row's first maximum.
struct KLResult {
  Tensor kl;              // [R] f32
  Tensor teacher_lse;     // [R] f32, of teacher / T
  Tensor student_lse;     // [R] f32, of student / T
  Tensor student_argmax;  // [R] i64 when asked for
};
KLResult kl_div(const Tensor& teacher, const Tensor& student, double temperature = 1.0,
                const Tensor& teacher_rows = {}, bool want_argmax = false,
                IndexCheck check = IndexCheck::each_call);
// dstudent [R, V] = dkl[r] * (q - p) / T, teacher and teacher_rows as the forward's.
Tensor kl_div_backward(const Tensor& dkl, const Tensor& teacher, const Tensor& student,
                       const KLResult& fwd, double temperature = 1.0,
                       const Tensor& teacher_rows = {}, IndexCheck check = IndexCheck::each_call);

// ---- optimizer
// ----------------------------------------------------------------------------------- Global L2
// norm of a list of tensors (fp32/fp64 accumulation), as a double on the host.
double global_norm(const std::vector<Tensor>& tensors);
// The factor clipping to `max_norm` scales gradients of global norm `norm` by:
// min(1, max_norm / (norm + 1e-6)), and 1 for a non-finite norm (nothing is clipped then).
double clip_coefficient(double norm, double max_norm);
// Scales every tensor by clip_coefficient(norm, max_norm); returns the norm before clipping.
double clip_grad_norm(const std::vector<Tensor>& grads, double max_norm);

// In place, fp32 master weights and moments: with g = grad * hp.grad_scale,
// p -= lr * (m_hat / (sqrt(v_hat) + eps) + wd * p) (decoupled decay, torch.optim.AdamW). grad may
// be f32 or bf16; `compute_copy`, when defined (bf16/f16, same shape), receives the updated
// parameter cast to its dtype.
void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const AdamWParams& hp, const Tensor& compute_copy = {});

}  // namespace sprig

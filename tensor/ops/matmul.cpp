// matmul, matmul_into and matmul_backward. The dispatcher brings every call to the kernels' 3-D
// contract (a [B, M, K], b [1 or B, K, N], contiguous, transposes as flags): 2-D operands gain a
// batch dim of 1, a transposed view of a contiguous tensor is passed as the contiguous tensor with
// its flag flipped (no copy), and a 3-D a times a shared 2-D b becomes one GEMM over the B*M rows.
#include "tensor/ops.h"
#include "tensor/ops/dispatch.h"

namespace sprig {

using detail::fail;

namespace {

// Sizes of out = op(a) @ op(b): [batch, m, n], inner size k (batch 1 for 2-D a).
struct MatmulDims {
  int64_t batch, m, k, n;
};

// "a [3, 2]^T (K=3)": an operand in error messages, ^T marking a transposed one.
std::string operand_str(const char* name, const Tensor& x, bool trans, int64_t k) {
  return std::string(name) + " " + shape_str(x.shape()) + (trans ? "^T" : "") +
         " (K=" + std::to_string(k) + ")";
}

MatmulDims matmul_dims(const char* op, const Tensor& a, const Tensor& b, bool trans_a,
                       bool trans_b) {
  detail::check_defined(op, a, "a");
  detail::check_defined(op, b, "b");
  detail::check_floating(op, a, "a");
  detail::check_same_dtype(op, a, b);
  detail::check_same_device(op, {&a, &b});
  for (const auto& [x, name] : {std::pair{&a, "a"}, std::pair{&b, "b"}})
    if (x->dim() != 2 && x->dim() != 3)
      fail(op, std::string(name) + " must have 2 or 3 dimensions, got " + std::to_string(x->dim()) +
                   " (shape " + shape_str(x->shape()) + ")");
  if (a.dim() == 2 && b.dim() == 3)
    fail(op, "b " + shape_str(b.shape()) + " is batched but a " + shape_str(a.shape()) + " is not");
  if (a.dim() == 3 && b.dim() == 3 && a.size(0) != b.size(0))
    fail(op, "batch sizes differ: a " + shape_str(a.shape()) + " and b " + shape_str(b.shape()));
  const int64_t ka = a.size(trans_a ? -2 : -1), kb = b.size(trans_b ? -1 : -2);
  if (ka != kb)
    fail(op, "inner dimensions differ: " + operand_str("a", a, trans_a, ka) + " and " +
                 operand_str("b", b, trans_b, kb));
  return {a.dim() == 3 ? a.size(0) : 1, a.size(trans_a ? -1 : -2), ka, b.size(trans_b ? -2 : -1)};
}

// A 3-D operand for the kernel: contiguous, or the contiguous tensor a transposed view was taken
// from, with the transpose flag flipped.
struct Operand {
  Tensor t;
  bool trans;
};

Operand kernel_operand(const Tensor& x, bool trans) {
  const Tensor x3 = x.dim() == 2 ? x.unsqueeze(0) : x;
  if (x3.is_contiguous()) return {x3, trans};
  const Tensor flipped = x3.transpose(1, 2);
  if (flipped.is_contiguous()) return {flipped, !trans};
  return {x3.contiguous(), trans};
}

}  // namespace

void matmul_into(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b,
                 bool accumulate) {
  const char* op = "matmul_into";
  const MatmulDims d = matmul_dims(op, a, b, trans_a, trans_b);
  detail::check_defined(op, out, "out");
  detail::check_same_dtype(op, a, out);
  detail::check_same_device(op, {&a, &out});
  detail::check_shape(op, out, a.dim() == 3 ? Shape{d.batch, d.m, d.n} : Shape{d.m, d.n}, "out");
  if (out.numel() > 0 && !out.is_contiguous()) fail(op, "out must be contiguous");
  const bool fold_batch = a.dim() == 3 && b.dim() == 2 && !trans_a;
  const int64_t batch = fold_batch ? 1 : d.batch, rows = fold_batch ? d.batch * d.m : d.m;
  const DType dtype = detail::compute_dtype(a);
  const Operand pa = kernel_operand((fold_batch ? a.reshape({rows, d.k}) : a).to(dtype), trans_a);
  const Operand pb = kernel_operand(b.to(dtype), trans_b);
  // The kernel writes out itself, or (16-bit on CPU) an f32 copy that is cast back.
  const Tensor target =
      dtype == out.dtype() ? out : (accumulate ? out.to(dtype) : Tensor::empty(out.shape(), dtype));
  SPRIG_DISPATCH(a.device(), matmul, pa.t, pb.t, target.view({batch, rows, d.n}), pa.trans,
                 pb.trans, accumulate);
  if (!target.shares_storage(out)) out.copy_(target);
}

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  const MatmulDims d = matmul_dims("matmul", a, b, trans_a, trans_b);
  Tensor out = Tensor::empty(a.dim() == 3 ? Shape{d.batch, d.m, d.n} : Shape{d.m, d.n}, a.dtype(),
                             a.device());
  matmul_into(a, b, out, trans_a, trans_b, false);
  return out;
}

// With A = op(a), B = op(b): dA = dy B^T and dB = A^T dy; a transposed operand receives the
// transpose of its gradient, which is again one matmul with the flags below.
std::pair<Tensor, Tensor> matmul_backward(const Tensor& a, const Tensor& b, const Tensor& dy,
                                          bool trans_a, bool trans_b) {
  const char* op = "matmul_backward";
  const MatmulDims d = matmul_dims(op, a, b, trans_a, trans_b);
  detail::check_defined(op, dy, "dy");
  detail::check_same_dtype(op, a, dy);
  detail::check_same_device(op, {&a, &dy});
  detail::check_shape(op, dy, a.dim() == 3 ? Shape{d.batch, d.m, d.n} : Shape{d.m, d.n}, "dy");
  const bool broadcast_b = a.dim() == 3 && b.dim() == 2;

  Tensor da;
  if (!trans_a) da = matmul(dy, b, false, !trans_b);
  // da = (dy B^T)^T per batch; the 2-D b cannot be the left operand of a batched product.
  else if (broadcast_b)
    da = matmul(dy, b, false, !trans_b).transpose(1, 2).contiguous();
  else
    da = matmul(b, dy, trans_b, true);

  Tensor db;
  if (broadcast_b) {
    // dB = sum over the batch of A_i^T dy_i: one GEMM over the stacked B*M rows.
    const Tensor a_rows = (trans_a ? a.transpose(1, 2) : a).reshape({d.batch * d.m, d.k});
    const Tensor dy_rows = dy.reshape({d.batch * d.m, d.n});
    db = trans_b ? matmul(dy_rows, a_rows, true, false) : matmul(a_rows, dy_rows, true, false);
  } else {
    db = trans_b ? matmul(dy, a, true, trans_a) : matmul(a, dy, !trans_a, false);
  }
  return {da, db};
}

}  // namespace sprig

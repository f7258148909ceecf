// Fused transformer ops: RMSNorm, rotary embedding, SwiGLU, cross-entropy and KL divergence.
// Each function checks its arguments, allocates outputs on the inputs' device and dispatches to
// the kernels in tensor/cpu/{norm_rope,loss}.cpp or their CUDA twins. Kernels read every floating
// dtype natively, so inputs are only made contiguous, never converted.
#include <sstream>
#include <string>

#include "tensor/ops/dispatch.h"

namespace sprig {

using detail::check_defined;
using detail::check_dim;
using detail::check_floating;
using detail::check_index;
using detail::check_same_device;
using detail::check_same_dtype;
using detail::check_shape;
using detail::fail;

namespace {

// Per-row statistics and losses: f32, or f64 for f64 inputs (gradient checks).
DType stat_dtype(const Tensor& x) { return x.dtype() == DType::f64 ? DType::f64 : DType::f32; }

// A double as the shortest form streams give ("0.5", "1e+06").
std::string num_str(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// A defined floating tensor.
void check_float_input(const char* op, const Tensor& t, const char* name) {
  check_defined(op, t, name);
  check_floating(op, t, name);
}

// A per-row statistic [rows] of the statistics dtype of x.
void check_stat(const char* op, const Tensor& stat, const Tensor& x, int64_t rows,
                const char* name) {
  check_defined(op, stat, name);
  check_shape(op, stat, {rows}, name);
  if (stat.dtype() != stat_dtype(x))
    fail(op, std::string(name) + " must be " + dtype_name(stat_dtype(x)) + ", got " +
                 dtype_name(stat.dtype()));
}

// An incoming per-row gradient [rows] (any floating dtype; converted to the statistics dtype).
void check_row_grad(const char* op, const Tensor& grad, int64_t rows, const char* name) {
  check_float_input(op, grad, name);
  check_shape(op, grad, {rows}, name);
}

// Leading dimensions of x flattened: x viewed as [rows, x.size(-1)].
int64_t leading_rows(const Tensor& x) {
  return shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
}

// x (at least 1-D) and its weight [x.size(-1)], same dtype and device.
void check_rms_weight(const char* op, const Tensor& x, const Tensor& w) {
  check_float_input(op, x, "x");
  if (x.dim() < 1) fail(op, "x must have at least 1 dimension, got a 0-dim tensor");
  check_defined(op, w, "weight");
  check_same_device(op, {&x, &w});
  check_same_dtype(op, x, w);
  check_dim(op, w, 1, "weight");
  if (w.size(0) != x.size(-1))
    fail(op, "weight has " + std::to_string(w.size(0)) + " elements, x's last dimension is " +
                 std::to_string(x.size(-1)));
}

// Targets [rows] (i32/i64) on the logits' device.
void check_targets(const char* op, const Tensor& targets, const Tensor& logits) {
  check_defined(op, targets, "targets");
  check_index(op, targets, "targets");
  check_shape(op, targets, {logits.size(0)}, "targets");
  check_same_device(op, {&logits, &targets});
}

// Every target in [0, V) or equal to ignore_index (read on the host).
void check_target_range(const char* op, const Tensor& targets, int64_t V, int64_t ignore_index) {
  const std::vector<int64_t> values = targets.to_vector<int64_t>();
  for (size_t r = 0; r < values.size(); ++r)
    if (values[r] != ignore_index && (values[r] < 0 || values[r] >= V))
      fail(op, "target " + std::to_string(values[r]) + " out of range [0, " + std::to_string(V) +
                   ") at row " + std::to_string(r));
}

void check_logits(const char* op, const Tensor& logits, const char* name) {
  check_float_input(op, logits, name);
  check_dim(op, logits, 2, name);
}

}  // namespace

// ---- RMSNorm ------------------------------------------------------------------------------------

std::pair<Tensor, Tensor> rms_norm(const Tensor& x, const Tensor& w, double eps) {
  const char* op = "rms_norm";
  check_rms_weight(op, x, w);
  const int64_t R = leading_rows(x), H = x.size(-1);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor rstd = Tensor::empty({R}, stat_dtype(x), x.device());
  if (R > 0)
    SPRIG_DISPATCH(x.device(), rms_norm, x.contiguous().view({R, H}), w.contiguous(),
                   y.view({R, H}), rstd, eps);
  return {y, rstd};
}

Tensor rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                         const Tensor& dw) {
  const char* op = "rms_norm_backward";
  check_rms_weight(op, x, w);
  check_float_input(op, dy, "dy");
  check_shape(op, dy, x.shape(), "dy");
  check_same_dtype(op, dy, x);
  const int64_t R = leading_rows(x), H = x.size(-1);
  check_stat(op, rstd, x, R, "rstd");
  check_float_input(op, dw, "dw");
  check_shape(op, dw, {H}, "dw");
  if (dw.dtype() != DType::f32 && dw.dtype() != w.dtype())
    fail(op, std::string("dw must be f32 or the weight's dtype ") + dtype_name(w.dtype()) +
                 ", got " + dtype_name(dw.dtype()));
  if (!dw.is_contiguous()) fail(op, "dw must be contiguous (it is accumulated in place)");
  check_same_device(op, {&x, &dy, &rstd, &dw});
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (R > 0)
    SPRIG_DISPATCH(x.device(), rms_norm_backward, dy.contiguous().view({R, H}),
                   x.contiguous().view({R, H}), w.contiguous(), rstd, dx.view({R, H}), dw);
  return dx;
}

// ---- rotary embedding ---------------------------------------------------------------------------

namespace {

Tensor rope_apply(const char* op, const Tensor& x, const Tensor& pos, double theta, bool inverse) {
  check_float_input(op, x, "x");
  check_dim(op, x, 4, "x");
  check_defined(op, pos, "pos");
  check_index(op, pos, "pos");
  check_shape(op, pos, {x.size(0), x.size(1)}, "pos");
  check_same_device(op, {&x, &pos});
  if (x.size(3) % 2 != 0) fail(op, "head dim must be even, got " + std::to_string(x.size(3)));
  if (!(theta > 0)) fail(op, "theta must be positive, got " + num_str(theta));
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.numel() > 0)
    SPRIG_DISPATCH(x.device(), rope, x.contiguous(), pos.contiguous(), y, theta, inverse);
  return y;
}

}  // namespace

Tensor rope(const Tensor& x, const Tensor& pos, double theta) {
  return rope_apply("rope", x, pos, theta, false);
}

Tensor rope_backward(const Tensor& dy, const Tensor& pos, double theta) {
  return rope_apply("rope_backward", dy, pos, theta, true);
}

// ---- SwiGLU -------------------------------------------------------------------------------------

namespace {

void check_swiglu(const char* op, const Tensor& gate, const Tensor& up) {
  check_float_input(op, gate, "gate");
  check_float_input(op, up, "up");
  check_shape(op, up, gate.shape(), "up");
  check_same_dtype(op, gate, up);
  check_same_device(op, {&gate, &up});
}

}  // namespace

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  check_swiglu("swiglu", gate, up);
  Tensor out = Tensor::empty(gate.shape(), gate.dtype(), gate.device());
  if (out.numel() > 0)
    SPRIG_DISPATCH(gate.device(), swiglu, gate.contiguous(), up.contiguous(), out);
  return out;
}

std::pair<Tensor, Tensor> swiglu_backward(const Tensor& gate, const Tensor& up,
                                          const Tensor& dout) {
  const char* op = "swiglu_backward";
  check_swiglu(op, gate, up);
  check_float_input(op, dout, "dout");
  check_shape(op, dout, gate.shape(), "dout");
  check_same_dtype(op, gate, dout);
  check_same_device(op, {&gate, &dout});
  Tensor dgate = Tensor::empty(gate.shape(), gate.dtype(), gate.device());
  Tensor dup = Tensor::empty(gate.shape(), gate.dtype(), gate.device());
  if (gate.numel() > 0)
    SPRIG_DISPATCH(gate.device(), swiglu_backward, gate.contiguous(), up.contiguous(),
                   dout.contiguous(), dgate, dup);
  return {dgate, dup};
}

// ---- cross-entropy ------------------------------------------------------------------------------

CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                 bool want_argmax) {
  const char* op = "cross_entropy";
  check_logits(op, logits, "logits");
  const int64_t R = logits.size(0), V = logits.size(1);
  check_targets(op, targets, logits);
  check_target_range(op, targets, V, ignore_index);
  CrossEntropyResult res;
  res.loss = Tensor::empty({R}, stat_dtype(logits), logits.device());
  res.lse = Tensor::empty({R}, stat_dtype(logits), logits.device());
  if (want_argmax) res.argmax = Tensor::empty({R}, DType::i64, logits.device());
  if (R > 0)
    SPRIG_DISPATCH(logits.device(), cross_entropy, logits.contiguous(), targets.contiguous(),
                   res.loss, res.lse, res.argmax, ignore_index);
  return res;
}

Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& logits, const Tensor& targets,
                              const Tensor& lse, int64_t ignore_index) {
  const char* op = "cross_entropy_backward";
  check_logits(op, logits, "logits");
  const int64_t R = logits.size(0);
  // The forward checked the target range; the backward never indexes by target.
  check_targets(op, targets, logits);
  check_stat(op, lse, logits, R, "lse");
  check_row_grad(op, dloss, R, "dloss");
  check_same_device(op, {&logits, &lse, &dloss});
  Tensor dlogits = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  if (R > 0)
    SPRIG_DISPATCH(logits.device(), cross_entropy_backward,
                   dloss.to(stat_dtype(logits)).contiguous(), logits.contiguous(),
                   targets.contiguous(), lse, dlogits, ignore_index);
  return dlogits;
}

// ---- KL divergence ------------------------------------------------------------------------------

namespace {

void check_kl(const char* op, const Tensor& teacher, const Tensor& student, double temperature) {
  check_logits(op, teacher, "teacher");
  check_logits(op, student, "student");
  check_shape(op, student, teacher.shape(), "student");
  check_same_dtype(op, teacher, student);
  check_same_device(op, {&teacher, &student});
  if (!(temperature > 0))
    fail(op, "temperature must be positive, got " + num_str(temperature));
}

}  // namespace

KLResult kl_div(const Tensor& teacher, const Tensor& student, double temperature) {
  check_kl("kl_div", teacher, student, temperature);
  const int64_t R = teacher.size(0);
  const DType stat = stat_dtype(teacher);
  const Device dev = teacher.device();
  KLResult res{Tensor::empty({R}, stat, dev), Tensor::empty({R}, stat, dev),
               Tensor::empty({R}, stat, dev)};
  if (R > 0)
    SPRIG_DISPATCH(teacher.device(), kl_div, teacher.contiguous(), student.contiguous(), res.kl,
                   res.teacher_lse, res.student_lse, temperature);
  return res;
}

Tensor kl_div_backward(const Tensor& dkl, const Tensor& teacher, const Tensor& student,
                       const KLResult& fwd, double temperature) {
  const char* op = "kl_div_backward";
  check_kl(op, teacher, student, temperature);
  const int64_t R = teacher.size(0);
  check_stat(op, fwd.teacher_lse, teacher, R, "teacher_lse");
  check_stat(op, fwd.student_lse, teacher, R, "student_lse");
  check_row_grad(op, dkl, R, "dkl");
  check_same_device(op, {&teacher, &fwd.teacher_lse, &fwd.student_lse, &dkl});
  Tensor dstudent = Tensor::empty(student.shape(), student.dtype(), student.device());
  if (R > 0)
    SPRIG_DISPATCH(teacher.device(), kl_div_backward, dkl.to(stat_dtype(teacher)).contiguous(),
                   teacher.contiguous(), student.contiguous(), fwd.teacher_lse, fwd.student_lse,
                   dstudent, temperature);
  return dstudent;
}

}  // namespace sprig

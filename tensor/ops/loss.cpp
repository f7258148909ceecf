// Losses over rows of logits: cross_entropy and kl_div with their backward functions. Argument
// checks and dispatch to tensor/cpu/loss.cpp or tensor/cuda/loss.cu; the kernels read the logits
// in their own dtype with fp32 math, so no f32 copy of the logits is ever made.
#include <optional>
#include <string>

#include "tensor/ops.h"
#include "tensor/ops/dispatch.h"

namespace sprig {

using detail::check_defined;
using detail::check_dim;
using detail::check_float_input;
using detail::check_index;
using detail::check_same_device;
using detail::check_same_dtype;
using detail::check_shape;
using detail::check_stat;
using detail::fail;
using detail::num_str;
using detail::stat_dtype;

namespace {

// An incoming per-row gradient [rows] (any floating dtype; converted to the statistics dtype).
void check_row_grad(const char* op, const Tensor& grad, int64_t rows, const char* name) {
  check_float_input(op, grad, name);
  check_shape(op, grad, {rows}, name);
}

// Targets [rows] (i32/i64) on the logits' device.
void check_targets(const char* op, const Tensor& targets, const Tensor& logits) {
  check_defined(op, targets, "targets");
  check_index(op, targets, "targets");
  check_shape(op, targets, {logits.size(0)}, "targets");
  check_same_device(op, {&logits, &targets});
}

void check_logits(const char* op, const Tensor& logits, const char* name) {
  check_float_input(op, logits, name);
  check_dim(op, logits, 2, name);
}

// teacher [Rt, V] and student [R, V] of one dtype and device; teacher_rows (i32/i64 [R], each in
// [0, Rt) unless the caller checked them), or none and Rt == R.
void check_kl(const char* op, const Tensor& teacher, const Tensor& student, double temperature,
              const Tensor& teacher_rows, IndexCheck check) {
  check_logits(op, teacher, "teacher");
  check_logits(op, student, "student");
  check_same_dtype(op, teacher, student);
  check_same_device(op, {&teacher, &student});
  if (!(temperature > 0)) fail(op, "temperature must be positive, got " + num_str(temperature));
  if (!teacher_rows.defined()) {
    check_shape(op, student, teacher.shape(), "student");
    return;
  }
  if (student.size(1) != teacher.size(1))
    fail(op, "student " + shape_str(student.shape()) + " and teacher " +
                 shape_str(teacher.shape()) + " must have the same vocabulary");
  check_index(op, teacher_rows, "teacher_rows");
  check_shape(op, teacher_rows, {student.size(0)}, "teacher_rows");
  check_same_device(op, {&teacher, &teacher_rows});
  if (check == IndexCheck::each_call) check_teacher_rows(op, teacher_rows, teacher.size(0));
}

}  // namespace

namespace {

// The position of idx's first value outside [0, limit) that is not `skip` (when given), or -1:
// found where idx lives, so a CUDA index costs one 8-byte read back, not a copy of all of it.
int64_t first_out_of_range(const Tensor& idx, int64_t limit, std::optional<int64_t> skip) {
  const int64_t n = idx.numel();
  const Tensor first = Tensor::full({1}, static_cast<double>(n), DType::i64, idx.device());
  SPRIG_DISPATCH(idx.device(), first_out_of_range, idx.contiguous(), limit, skip.has_value(),
                 skip.value_or(0), first);
  const int64_t i = first.to_vector<int64_t>()[0];
  return i < n ? i : -1;
}

int64_t value_at(const Tensor& idx, int64_t i) {
  return idx.contiguous().narrow(0, i, 1).to_vector<int64_t>()[0];
}

}  // namespace

void check_target_range(const char* op, const Tensor& targets, int64_t V, int64_t ignore_index) {
  if (const int64_t r = first_out_of_range(targets, V, ignore_index); r >= 0)
    fail(op, "target " + std::to_string(value_at(targets, r)) + " out of range [0, " +
                 std::to_string(V) + ") at row " + std::to_string(r));
}

void check_teacher_rows(const char* op, const Tensor& teacher_rows, int64_t rows) {
  if (const int64_t r = first_out_of_range(teacher_rows, rows, std::nullopt); r >= 0)
    fail(op, "teacher row " + std::to_string(value_at(teacher_rows, r)) + " out of range [0, " +
                 std::to_string(rows) + ") at row " + std::to_string(r));
}

CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                 bool want_argmax, IndexCheck check) {
  const char* op = "cross_entropy";
  check_logits(op, logits, "logits");
  const int64_t R = logits.size(0), V = logits.size(1);
  check_targets(op, targets, logits);
  if (check == IndexCheck::each_call) check_target_range(op, targets, V, ignore_index);
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
                              const Tensor& lse, int64_t ignore_index, const Tensor& out) {
  const char* op = "cross_entropy_backward";
  check_logits(op, logits, "logits");
  const int64_t R = logits.size(0);
  // The forward checked the target range; the backward never indexes by target.
  check_targets(op, targets, logits);
  check_stat(op, lse, logits, R, "lse");
  check_row_grad(op, dloss, R, "dloss");
  check_same_device(op, {&logits, &lse, &dloss});
  if (out.defined() && (out.shape() != logits.shape() || out.dtype() != logits.dtype() ||
                        out.device() != logits.device() || !out.is_contiguous()))
    throw std::invalid_argument(std::string("[") + op + "] out must be a contiguous " +
                                shape_str(logits.shape()) + " " + dtype_name(logits.dtype()) +
                                " tensor on " + logits.device().str() + ", got " +
                                shape_str(out.shape()) + " " + dtype_name(out.dtype()));
  // Each element of the result reads only the same element of the logits (and its row's lse), so
  // out may be the logits themselves.
  Tensor dlogits =
      out.defined() ? out : Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  if (R > 0)
    SPRIG_DISPATCH(logits.device(), cross_entropy_backward,
                   dloss.to(stat_dtype(logits)).contiguous(), logits.contiguous(),
                   targets.contiguous(), lse, dlogits, ignore_index);
  return dlogits;
}

namespace {

// base [R, V], features [R, E] and proj [V, E]: one floating dtype on one device, contiguous (the
// backward may write over base).
void check_corrected(const char* op, const Tensor& base, const Tensor& features, const Tensor& proj,
                     const Tensor& targets) {
  check_logits(op, base, "base");
  check_logits(op, features, "features");
  check_logits(op, proj, "proj");
  if (features.size(0) != base.size(0) || proj.size(0) != base.size(1) ||
      proj.size(1) != features.size(1))
    fail(op, "base " + shape_str(base.shape()) + ", features " + shape_str(features.shape()) +
                 " and proj " + shape_str(proj.shape()) + " must be [R, V], [R, E] and [V, E]");
  check_same_dtype(op, base, features);
  check_same_dtype(op, base, proj);
  check_same_device(op, {&base, &features, &proj});
  check_targets(op, targets, base);
  for (const Tensor* t : {&base, &features, &proj})
    if (!t->is_contiguous()) fail(op, "base, features and proj must be contiguous");
}

}  // namespace

CrossEntropyResult corrected_cross_entropy(const Tensor& base, const Tensor& features,
                                           const Tensor& proj, const Tensor& targets,
                                           int64_t ignore_index, bool want_argmax,
                                           IndexCheck check) {
  const char* op = "corrected_cross_entropy";
  check_corrected(op, base, features, proj, targets);
  const int64_t R = base.size(0);
  if (check == IndexCheck::each_call) check_target_range(op, targets, base.size(1), ignore_index);
  CrossEntropyResult res;
  res.loss = Tensor::empty({2, R}, stat_dtype(base), base.device());
  res.lse = Tensor::empty({2, R}, stat_dtype(base), base.device());
  if (want_argmax) res.argmax = Tensor::empty({2, R}, DType::i64, base.device());
  if (R > 0)
    SPRIG_DISPATCH(base.device(), corrected_cross_entropy, base, features, proj,
                   targets.contiguous(), res.loss, res.lse, res.argmax, ignore_index);
  return res;
}

void corrected_cross_entropy_backward_into(const Tensor& dloss, const Tensor& base,
                                           const Tensor& features, const Tensor& proj,
                                           const Tensor& targets, const Tensor& lse,
                                           const Tensor& dbase, const Tensor& dfeatures,
                                           const Tensor& dproj, bool accumulate_dproj,
                                           int64_t ignore_index) {
  const char* op = "corrected_cross_entropy_backward";
  check_corrected(op, base, features, proj, targets);
  const int64_t R = base.size(0);
  check_float_input(op, dloss, "dloss");
  check_shape(op, dloss, {2, R}, "dloss");
  check_defined(op, lse, "lse");
  check_shape(op, lse, {2, R}, "lse");
  if (lse.dtype() != stat_dtype(base))
    fail(op, std::string("lse must be ") + dtype_name(stat_dtype(base)) + ", got " +
                 dtype_name(lse.dtype()));
  const auto check_out = [&](const Tensor& out, const Tensor& like, const char* name) {
    check_defined(op, out, name);
    check_shape(op, out, like.shape(), name);
    check_same_dtype(op, base, out);
    if (!out.is_contiguous()) fail(op, std::string(name) + " must be contiguous");
    check_same_device(op, {&base, &out});
  };
  check_out(dbase, base, "dbase");
  check_out(dfeatures, features, "dfeatures");
  if (dproj.defined()) check_out(dproj, proj, "dproj");
  check_same_device(op, {&base, &dloss, &lse});
  if (R > 0)
    SPRIG_DISPATCH(base.device(), corrected_cross_entropy_backward,
                   dloss.to(stat_dtype(base)).contiguous(), base, features, proj,
                   targets.contiguous(), lse.contiguous(), dbase, dfeatures, dproj,
                   accumulate_dproj, ignore_index);
  else if (dproj.defined() && !accumulate_dproj)
    dproj.zero_();
}

KLResult kl_div(const Tensor& teacher, const Tensor& student, double temperature,
                const Tensor& teacher_rows, bool want_argmax, IndexCheck check) {
  check_kl("kl_div", teacher, student, temperature, teacher_rows, check);
  const int64_t R = student.size(0);
  const DType stat = stat_dtype(teacher);
  const Device dev = teacher.device();
  KLResult res{Tensor::empty({R}, stat, dev), Tensor::empty({R}, stat, dev),
               Tensor::empty({R}, stat, dev), Tensor()};
  if (want_argmax) res.student_argmax = Tensor::empty({R}, DType::i64, dev);
  const Tensor rows = teacher_rows.defined() ? teacher_rows.contiguous() : Tensor();
  if (R > 0)
    SPRIG_DISPATCH(teacher.device(), kl_div, teacher.contiguous(), student.contiguous(), rows,
                   res.kl, res.teacher_lse, res.student_lse, res.student_argmax, temperature);
  return res;
}

Tensor kl_div_backward(const Tensor& dkl, const Tensor& teacher, const Tensor& student,
                       const KLResult& fwd, double temperature, const Tensor& teacher_rows,
                       IndexCheck check) {
  const char* op = "kl_div_backward";
  check_kl(op, teacher, student, temperature, teacher_rows, check);
  const int64_t R = student.size(0);
  check_stat(op, fwd.teacher_lse, student, R, "teacher_lse");
  check_stat(op, fwd.student_lse, student, R, "student_lse");
  check_row_grad(op, dkl, R, "dkl");
  check_same_device(op, {&teacher, &fwd.teacher_lse, &fwd.student_lse, &dkl});
  Tensor dstudent = Tensor::empty(student.shape(), student.dtype(), student.device());
  const Tensor rows = teacher_rows.defined() ? teacher_rows.contiguous() : Tensor();
  if (R > 0)
    SPRIG_DISPATCH(teacher.device(), kl_div_backward, dkl.to(stat_dtype(teacher)).contiguous(),
                   teacher.contiguous(), student.contiguous(), rows, fwd.teacher_lse,
                   fwd.student_lse, dstudent, temperature);
  return dstudent;
}

}  // namespace sprig

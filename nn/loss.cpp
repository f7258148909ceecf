#include "nn/loss.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "tensor/ops.h"

namespace sprig {

namespace {

// Per-row statistics: f32, or f64 for f64 inputs (as the loss kernels').
DType stat_dtype(const Tensor& h) { return h.dtype() == DType::f64 ? DType::f64 : DType::f32; }

class CrossEntropyRows : public RowLoss {
 public:
  CrossEntropyRows(Tensor targets, int64_t ignore_index, const Tensor& hidden, bool want_argmax)
      : targets_(std::move(targets)),
        ignore_index_(ignore_index),
        lse_(Tensor::empty({hidden.size(0)}, stat_dtype(hidden), hidden.device())) {
    if (want_argmax) argmax = Tensor::empty({hidden.size(0)}, DType::i64, hidden.device());
  }

  Tensor forward(const Tensor& logits, int64_t r0) override {
    const int64_t n = logits.size(0);
    CrossEntropyResult ce =
        cross_entropy(logits, targets_.narrow(0, r0, n), ignore_index_, argmax.defined());
    lse_.narrow(0, r0, n).copy_(ce.lse);
    if (argmax.defined()) argmax.narrow(0, r0, n).copy_(ce.argmax);
    return ce.loss;
  }
  Tensor backward(const Tensor& dloss, const Tensor& logits, int64_t r0) const override {
    const int64_t n = logits.size(0);
    return cross_entropy_backward(dloss, logits, targets_.narrow(0, r0, n), lse_.narrow(0, r0, n),
                                  ignore_index_);
  }

  Tensor argmax;  // (N) i64, filled by forward when asked for

 private:
  Tensor targets_;
  int64_t ignore_index_;
  Tensor lse_;  // (N)
};

class KLRows : public RowLoss {
 public:
  KLRows(Tensor teacher, Tensor teacher_rows, double temperature, const Tensor& hidden,
         bool want_argmax)
      : teacher_(std::move(teacher)),
        teacher_rows_(std::move(teacher_rows)),
        temperature_(temperature),
        teacher_lse_(Tensor::empty({hidden.size(0)}, stat_dtype(hidden), hidden.device())),
        student_lse_(Tensor::empty({hidden.size(0)}, stat_dtype(hidden), hidden.device())) {
    if (want_argmax) argmax = Tensor::empty({hidden.size(0)}, DType::i64, hidden.device());
  }

  Tensor forward(const Tensor& logits, int64_t r0) override {
    const int64_t n = logits.size(0);
    KLResult kl = kl_div(teacher(r0, n), logits, temperature_);
    teacher_lse_.narrow(0, r0, n).copy_(kl.teacher_lse);
    student_lse_.narrow(0, r0, n).copy_(kl.student_lse);
    if (argmax.defined()) argmax.narrow(0, r0, n).copy_(sprig::argmax(logits, 1));
    return kl.kl;
  }
  Tensor backward(const Tensor& dloss, const Tensor& logits, int64_t r0) const override {
    const int64_t n = logits.size(0);
    const KLResult saved{Tensor(), teacher_lse_.narrow(0, r0, n), student_lse_.narrow(0, r0, n)};
    return kl_div_backward(dloss, teacher(r0, n), logits, saved, temperature_);
  }

  Tensor argmax;  // (N) i64, filled by forward when asked for

 private:
  Tensor teacher(int64_t r0, int64_t n) const {
    return teacher_rows_.defined() ? index_select(teacher_, 0, teacher_rows_.narrow(0, r0, n))
                                   : teacher_.narrow(0, r0, n);
  }

  Tensor teacher_, teacher_rows_;
  double temperature_;
  Tensor teacher_lse_, student_lse_;  // (N)
};

}  // namespace

int64_t head_chunk_rows(int64_t requested, int64_t vocab) {
  if (requested > 0) return requested;
  return std::max<int64_t>(1, (int64_t{1} << 25) / std::max<int64_t>(vocab, 1));
}

Var head_loss(const char* op, const Var& hidden, const Var& weight, std::shared_ptr<RowLoss> loss,
              int64_t chunk_rows) {
  if (hidden.dim() != 2 || weight.dim() != 2 || hidden.size(1) != weight.size(1))
    throw std::invalid_argument(std::string("[") + op + "] hidden " + shape_str(hidden.shape()) +
                                " and weight " + shape_str(weight.shape()) +
                                " must be (N, H) and (V, H)");
  const int64_t N = hidden.size(0);
  const int64_t chunk = head_chunk_rows(chunk_rows, weight.size(0));
  const Tensor h = hidden.value(), w = weight.value();
  Tensor out = Tensor::empty({N}, stat_dtype(h), h.device());
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t n = std::min(chunk, N - r0);
    out.narrow(0, r0, n).copy_(loss->forward(matmul(h.narrow(0, r0, n), w, false, true), r0));
  }
  // A frozen weight (a draft's shared LM head) gets no gradient: its GEMMs are skipped.
  const bool weight_grad = weight.requires_grad();
  return record(op, out, {hidden, weight},
                [h, w, loss, chunk, weight_grad](const Tensor& dloss) -> Grads {
                  const int64_t rows = h.size(0);
                  Tensor dh = Tensor::empty(h.shape(), h.dtype(), h.device());
                  Tensor dw;
                  if (weight_grad)
                    dw = rows > 0 ? Tensor::empty(w.shape(), w.dtype(), w.device())
                                  : Tensor::zeros(w.shape(), w.dtype(), w.device());
                  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
                    const int64_t n = std::min(chunk, rows - r0);
                    const Tensor hc = h.narrow(0, r0, n);
                    const Tensor dlogits =
                        loss->backward(dloss.narrow(0, r0, n), matmul(hc, w, false, true), r0);
                    matmul_into(dlogits, w, dh.narrow(0, r0, n), false, false, false);
                    if (weight_grad)
                      matmul_into(dlogits, hc, dw, true, false, /*accumulate=*/r0 > 0);
                  }
                  return {dh, dw};
                });
}

Var linear_cross_entropy(const Var& hidden, const Var& weight, const Tensor& targets,
                         int64_t ignore_index, int64_t chunk_rows, Tensor* argmax) {
  if (targets.dim() != 1 || hidden.dim() < 1 || targets.size(0) != hidden.size(0))
    throw std::invalid_argument("[linear_cross_entropy] targets must be (" +
                                std::to_string(hidden.dim() ? hidden.size(0) : 0) + "), got " +
                                shape_str(targets.shape()));
  const auto rows =
      std::make_shared<CrossEntropyRows>(targets, ignore_index, hidden.value(), argmax != nullptr);
  Var loss = head_loss("linear_cross_entropy", hidden, weight, rows, chunk_rows);
  if (argmax) *argmax = rows->argmax;
  return loss;
}

Var linear_kl_div(const Var& hidden, const Var& weight, const Tensor& teacher, double temperature,
                  int64_t chunk_rows, const Tensor& teacher_rows, Tensor* argmax) {
  const int64_t rows = hidden.dim() >= 1 ? hidden.size(0) : -1;
  if (teacher_rows.defined() && (teacher_rows.dim() != 1 || teacher_rows.size(0) != rows))
    throw std::invalid_argument("[linear_kl_div] teacher_rows " + shape_str(teacher_rows.shape()) +
                                " must be (" + std::to_string(rows) + ")");
  if (teacher.dim() != 2 || rows < 0 || (!teacher_rows.defined() && teacher.size(0) != rows) ||
      (weight.dim() == 2 && teacher.size(1) != weight.size(0)))
    throw std::invalid_argument("[linear_kl_div] teacher " + shape_str(teacher.shape()) +
                                " must be (N, V) for hidden " + shape_str(hidden.shape()) +
                                " and weight " + shape_str(weight.shape()));
  const auto rows_loss = std::make_shared<KLRows>(teacher, teacher_rows, temperature,
                                                  hidden.value(), argmax != nullptr);
  Var loss = head_loss("linear_kl_div", hidden, weight, rows_loss, chunk_rows);
  if (argmax) *argmax = rows_loss->argmax;
  return loss;
}

}  // namespace sprig

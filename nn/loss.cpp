#include "nn/loss.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "autograd/functions.h"
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
    CrossEntropyResult ce = cross_entropy(logits, targets_.narrow(0, r0, n), ignore_index_,
                                          argmax.defined(), IndexCheck::done);
    lse_.narrow(0, r0, n).copy_(ce.lse);
    if (argmax.defined()) argmax.narrow(0, r0, n).copy_(ce.argmax);
    return ce.loss;
  }
  Tensor backward(const Tensor& dloss, const Tensor& logits, int64_t r0) const override {
    const int64_t n = logits.size(0);
    return cross_entropy_backward(dloss, logits, targets_.narrow(0, r0, n), lse_.narrow(0, r0, n),
                                  ignore_index_, logits);  // in place
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
    KLResult kl = kl_div(teacher(r0, n), logits, temperature_, rows(r0, n), argmax.defined(),
                         IndexCheck::done);
    teacher_lse_.narrow(0, r0, n).copy_(kl.teacher_lse);
    student_lse_.narrow(0, r0, n).copy_(kl.student_lse);
    if (argmax.defined()) argmax.narrow(0, r0, n).copy_(kl.student_argmax);
    return kl.kl;
  }
  Tensor backward(const Tensor& dloss, const Tensor& logits, int64_t r0) const override {
    const int64_t n = logits.size(0);
    const KLResult saved{Tensor(), teacher_lse_.narrow(0, r0, n), student_lse_.narrow(0, r0, n),
                         Tensor()};
    return kl_div_backward(dloss, teacher(r0, n), logits, saved, temperature_, rows(r0, n),
                           IndexCheck::done);
  }

  Tensor argmax;  // (N) i64, filled by forward when asked for

 private:
  // Rows [r0, r0 + n)'s teachers: the rows teacher_rows names, read in place, or a slice.
  Tensor teacher(int64_t r0, int64_t n) const {
    return teacher_rows_.defined() ? teacher_ : teacher_.narrow(0, r0, n);
  }
  Tensor rows(int64_t r0, int64_t n) const {
    return teacher_rows_.defined() ? teacher_rows_.narrow(0, r0, n) : Tensor();
  }

  Tensor teacher_, teacher_rows_;
  double temperature_;
  Tensor teacher_lse_, student_lse_;  // (N)
};

// Cross-entropy of predictions (rows[k], targets[k]) over a hidden tensor holding exactly the
// predicting rows, ascending: row u owns the predictions [begin_[u], begin_[u + 1]).
class SharedRowCrossEntropy : public RowLoss {
 public:
  SharedRowCrossEntropy(std::vector<int64_t> begin, Tensor targets, const Tensor& hidden,
                        bool want_entropy)
      : begin_(std::move(begin)),
        targets_(std::move(targets)),
        lse_(Tensor::empty({targets_.size(0)}, stat_dtype(hidden), hidden.device())) {
    if (want_entropy)
      entropy = Tensor::empty({targets_.size(0)}, stat_dtype(hidden), hidden.device());
  }

  int64_t outputs(int64_t) const override { return targets_.size(0); }
  std::pair<int64_t, int64_t> outputs_of(int64_t r0, int64_t n) const override {
    return {begin_[r0], begin_[r0 + n] - begin_[r0]};
  }

  Tensor forward(const Tensor& logits, int64_t r0) override {
    const auto [e0, m] = outputs_of(r0, logits.size(0));
    const Tensor expanded = per_prediction(logits, r0);
    CrossEntropyResult ce =
        cross_entropy(expanded, targets_.narrow(0, e0, m), -100, false, IndexCheck::done);
    lse_.narrow(0, e0, m).copy_(ce.lse);
    if (entropy.defined())  // H = lse - sum_v p_v x_v
      entropy.narrow(0, e0, m).copy_(sub(ce.lse, sum(mul(softmax(expanded, 1), expanded), 1)));
    return ce.loss;
  }
  Tensor backward(const Tensor& dloss, const Tensor& logits, int64_t r0) const override {
    const auto [e0, m] = outputs_of(r0, logits.size(0));
    const Tensor expanded = per_prediction(logits, r0);  // the scratch logits, or a copy of rows
    const Tensor d = cross_entropy_backward(dloss, expanded, targets_.narrow(0, e0, m),
                                            lse_.narrow(0, e0, m), -100, expanded);  // in place
    if (m == logits.size(0)) return d;  // one prediction per row
    return index_select_backward(d, logits.shape(), 0, local_rows(r0, logits.size(0), logits));
  }

  Tensor entropy;  // (K), filled by forward when asked for

 private:
  // The chunk's rows of its predictions, relative to the chunk.
  Tensor local_rows(int64_t r0, int64_t n, const Tensor& like) const {
    std::vector<int64_t> local;
    local.reserve(static_cast<size_t>(begin_[r0 + n] - begin_[r0]));
    for (int64_t u = r0; u < r0 + n; ++u)
      local.insert(local.end(), static_cast<size_t>(begin_[u + 1] - begin_[u]), u - r0);
    return Tensor::from_vector(local, {static_cast<int64_t>(local.size())}, like.device());
  }
  // The logits of each prediction of the chunk (m, V): the chunk's own rows when each has one.
  Tensor per_prediction(const Tensor& logits, int64_t r0) const {
    const int64_t n = logits.size(0);
    if (begin_[r0 + n] - begin_[r0] == n) return logits;
    return index_select(logits, 0, local_rows(r0, n, logits));
  }

  std::vector<int64_t> begin_;
  Tensor targets_;
  Tensor lse_;  // (K)
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
  Tensor out = Tensor::empty({loss->outputs(N)}, stat_dtype(h), h.device());
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t n = std::min(chunk, N - r0);
    const auto [o0, m] = loss->outputs_of(r0, n);
    out.narrow(0, o0, m).copy_(loss->forward(matmul(h.narrow(0, r0, n), w, false, true), r0));
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
                    const auto [o0, m] = loss->outputs_of(r0, n);
                    const Tensor dlogits =
                        loss->backward(dloss.narrow(0, o0, m), matmul(hc, w, false, true), r0);
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
  // The targets are checked once here, not per chunk (each check reads them back).
  if (weight.dim() == 2)
    check_target_range("linear_cross_entropy", targets, weight.size(0), ignore_index);
  const auto rows =
      std::make_shared<CrossEntropyRows>(targets, ignore_index, hidden.value(), argmax != nullptr);
  Var loss = head_loss("linear_cross_entropy", hidden, weight, rows, chunk_rows);
  if (argmax) *argmax = rows->argmax;
  return loss;
}

Var linear_cross_entropy_at(const Var& hidden, const Var& weight, const std::vector<int64_t>& rows,
                            const Tensor& targets, int64_t chunk_rows, Tensor* entropy) {
  const int64_t K = static_cast<int64_t>(rows.size());
  if (hidden.dim() != 2 || targets.dim() != 1 || targets.size(0) != K)
    throw std::invalid_argument("[linear_cross_entropy_at] hidden " + shape_str(hidden.shape()) +
                                " must be (N, H) and targets " + shape_str(targets.shape()) + " (" +
                                std::to_string(K) + "), one per row given");
  // The distinct predicting rows, and where each one's predictions begin.
  std::vector<int64_t> unique, begin;
  for (int64_t k = 0; k < K; ++k) {
    if (rows[k] < 0 || rows[k] >= hidden.size(0) || (k > 0 && rows[k] < rows[k - 1]))
      throw std::invalid_argument("[linear_cross_entropy_at] rows must ascend within [0, " +
                                  std::to_string(hidden.size(0)) + "), got " +
                                  std::to_string(rows[k]) + " at " + std::to_string(k));
    if (k == 0 || rows[k] != rows[k - 1]) {
      unique.push_back(rows[k]);
      begin.push_back(k);
    }
  }
  begin.push_back(K);
  const Var h = index_select(
      hidden, 0,
      Tensor::from_vector(unique, {static_cast<int64_t>(unique.size())}, hidden.device()));
  if (weight.dim() == 2)
    check_target_range("linear_cross_entropy_at", targets, weight.size(0), -100);
  const auto loss = std::make_shared<SharedRowCrossEntropy>(std::move(begin), targets, h.value(),
                                                            entropy != nullptr);
  Var out = head_loss("linear_cross_entropy_at", h, weight, loss, chunk_rows);
  if (entropy) *entropy = loss->entropy;
  return out;
}

Var policy_gradient_losses(const Var& logp, const Tensor& advantages, const Tensor& old_logp,
                           double clip_eps, int64_t* clipped) {
  const Device device = logp.value().device();
  const DType dtype = logp.value().dtype();
  const Tensor a = advantages.to(device, dtype);
  if (a.shape() != logp.shape())
    throw std::invalid_argument("[policy_gradient_losses] advantages " +
                                shape_str(advantages.shape()) + " must match logp " +
                                shape_str(logp.shape()));
  if (clipped) *clipped = 0;
  if (clip_eps <= 0) return mul(logp, Var(neg(a)));
  if (!old_logp.defined() || old_logp.shape() != logp.shape())
    throw std::invalid_argument("[policy_gradient_losses] clipping needs old log-probs " +
                                shape_str(logp.shape()) + ", got " +
                                (old_logp.defined() ? shape_str(old_logp.shape()) : "none"));
  const Var ratio = exp(sub(logp, Var(old_logp.to(device, dtype))));
  // The clipped branch is a constant (its ratio is outside [1 - eps, 1 + eps]); PPO takes the
  // smaller of the two surrogates, so the loss takes the larger of their negatives.
  const std::vector<double> r = ratio.value().to(Device::cpu(), DType::f64).to_vector<double>();
  const std::vector<double> av = a.to(Device::cpu(), DType::f64).to_vector<double>();
  std::vector<double> clipped_loss(r.size());
  std::vector<bool> unclipped(r.size());
  for (size_t k = 0; k < r.size(); ++k) {
    const double c = std::clamp(r[k], 1.0 - clip_eps, 1.0 + clip_eps);
    clipped_loss[k] = -c * av[k];
    unclipped[k] = r[k] * av[k] <= c * av[k];
    if (clipped) *clipped += !unclipped[k];
  }
  const Tensor cond = Tensor::from_vector(unclipped, logp.shape()).to(device);
  return where(cond, mul(ratio, Var(neg(a))),
               Var(Tensor::from_vector(clipped_loss, logp.shape()).to(device, dtype)));
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
  if (teacher_rows.defined()) check_teacher_rows("linear_kl_div", teacher_rows, teacher.size(0));
  const auto rows_loss = std::make_shared<KLRows>(teacher, teacher_rows, temperature,
                                                  hidden.value(), argmax != nullptr);
  Var loss = head_loss("linear_kl_div", hidden, weight, rows_loss, chunk_rows);
  if (argmax) *argmax = rows_loss->argmax;
  return loss;
}

}  // namespace sprig

// Losses over the LM head that never hold a (rows, V) logits tensor for the whole batch: the rows
// of logits = hidden @ weight^T are evaluated chunk by chunk, in the forward and again in the
// backward (which recomputes each chunk's logits), and the weight gradient accumulates chunk by
// chunk into one buffer in place. Cross-entropy and forward KL are two row losses of one routine.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "autograd/var.h"

namespace sprig {

// The rows per chunk of logits with `vocab` columns: `requested`, or (0) about 32M elements.
int64_t head_chunk_rows(int64_t requested, int64_t vocab);

// A loss of rows of logits, evaluated by head_loss on one chunk of rows at a time: one output per
// row unless the loss says otherwise (outputs_of), as long as each chunk's outputs are contiguous.
class RowLoss {
 public:
  virtual ~RowLoss() = default;
  // The outputs of rows [r0, r0 + n): [first, first + count) of `outputs(rows)` in all.
  virtual int64_t outputs(int64_t rows) const { return rows; }
  virtual std::pair<int64_t, int64_t> outputs_of(int64_t r0, int64_t n) const { return {r0, n}; }
  // The outputs of rows [r0, r0 + n) given their logits (n, V); keeps what backward needs.
  virtual Tensor forward(const Tensor& logits, int64_t r0) = 0;
  // dlogits (n, V) of the same rows given their logits, a contiguous scratch it may overwrite
  // (and return as dlogits), and the outputs' gradient.
  virtual Tensor backward(const Tensor& doutputs, const Tensor& logits, int64_t r0) const = 0;
};

// The loss of (hidden @ weight^T): hidden (N, H), weight (V, H) -> (outputs) f32 (f64 for f64
// inputs). One autograd node (named `op`); `loss` sees chunks of at most `chunk_rows` rows
// (0: chosen so a chunk's logits stay near 32M elements). A weight that does not require a
// gradient (a frozen head) gets none, and its GEMMs are skipped.
Var head_loss(const char* op, const Var& hidden, const Var& weight, std::shared_ptr<RowLoss> loss,
              int64_t chunk_rows = 0);

// Cross-entropy of each row against targets (N) (ignore_index rows give 0 and no gradient). With
// `argmax`, also every row's argmax logit (N) i64, ignored rows included.
Var linear_cross_entropy(const Var& hidden, const Var& weight, const Tensor& targets,
                         int64_t ignore_index = -100, int64_t chunk_rows = 0,
                         Tensor* argmax = nullptr);

// Cross-entropy of K predictions: prediction k is -log softmax(hidden[rows[k]] @ weight^T)
// [targets[k]], with `rows` ascending (several predictions may share a row, whose logits are then
// computed once; a row no prediction names is never computed). targets (K) i64 on hidden's device.
// With `entropy`, also the entropy of each prediction's distribution (K) (no gradient).
Var linear_cross_entropy_at(const Var& hidden, const Var& weight, const std::vector<int64_t>& rows,
                            const Tensor& targets, int64_t chunk_rows = 0,
                            Tensor* entropy = nullptr);

// The token-level policy-gradient loss (K) of log-probs `logp` (K): -A_k * logp_k (REINFORCE /
// GRPO with advantages A (K)), or with clip_eps > 0 PPO's clipped surrogate
// -min(r_k A_k, clip(r_k, 1 - eps, 1 + eps) A_k) with ratio r_k = exp(logp_k - old_logp_k)
// (old_logp (K)). `clipped` (optional) receives how many entries take the clipped branch, whose
// gradient is 0. advantages and old_logp are f32 on the CPU or logp's device.
Var policy_gradient_losses(const Var& logp, const Tensor& advantages, const Tensor& old_logp,
                           double clip_eps, int64_t* clipped = nullptr);

// Forward KL(softmax(teacher / T) || softmax(logits / T)) of each row, against teacher logits
// (N, V) of hidden's dtype (read chunk by chunk as they are). With `teacher_rows` (N) i64, row i's
// teacher is teacher[teacher_rows[i]] instead, for teacher logits (M, V) that several rows share.
// With `argmax`, also every row's argmax logit (N) i64.
Var linear_kl_div(const Var& hidden, const Var& weight, const Tensor& teacher,
                  double temperature = 1.0, int64_t chunk_rows = 0, const Tensor& teacher_rows = {},
                  Tensor* argmax = nullptr);

}  // namespace sprig

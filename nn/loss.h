// Losses over the LM head that never hold a (rows, V) logits tensor for the whole batch: the rows
// of logits = hidden @ weight^T are evaluated chunk by chunk, in the forward and again in the
// backward (which recomputes each chunk's logits), and the weight gradient accumulates chunk by
// chunk into one buffer in place. Cross-entropy and forward KL are two row losses of one routine.
#pragma once

#include <cstdint>
#include <memory>

#include "autograd/var.h"

namespace sprig {

// The rows per chunk of logits with `vocab` columns: `requested`, or (0) about 32M elements.
int64_t head_chunk_rows(int64_t requested, int64_t vocab);

// A loss per row of logits, evaluated by head_loss on one chunk of rows at a time.
class RowLoss {
 public:
  virtual ~RowLoss() = default;
  // The loss (n) of rows [r0, r0 + n) given their logits (n, V); keeps what backward needs.
  virtual Tensor forward(const Tensor& logits, int64_t r0) = 0;
  // dlogits (n, V) of the same rows given their logits and dloss (n).
  virtual Tensor backward(const Tensor& dloss, const Tensor& logits, int64_t r0) const = 0;
};

// Per-row loss of (hidden @ weight^T): hidden (N, H), weight (V, H) -> (N) f32 (f64 for f64
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

// Forward KL(softmax(teacher / T) || softmax(logits / T)) of each row, against teacher logits
// (N, V) of hidden's dtype (read chunk by chunk as they are). With `teacher_rows` (N) i64, row i's
// teacher is teacher[teacher_rows[i]] instead, for teacher logits (M, V) that several rows share.
// With `argmax`, also every row's argmax logit (N) i64.
Var linear_kl_div(const Var& hidden, const Var& weight, const Tensor& teacher,
                  double temperature = 1.0, int64_t chunk_rows = 0, const Tensor& teacher_rows = {},
                  Tensor* argmax = nullptr);

}  // namespace sprig

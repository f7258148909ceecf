// The EAGLE-3 training-time test (docs/semantics.md §9.9): the target's side of a micro-batch,
// the unrolled steps under ttt_mask, the soft cross-entropy per step and the acceptance counts.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention/mask.h"
#include "nn/loss.h"
#include "speculative/eagle3.h"
#include "speculative/objective.h"  // acceptance

namespace sprig::speculative {

namespace {

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("[eagle3] " + message);
}

}  // namespace

double Eagle3Loss::chain_accept_len() const {
  double len = 1;
  for (size_t k = 0; k < step_prefix_hits.size(); ++k)
    len += step_prefix_hits[k] / std::max(step_prefix_valid[k], 1.0);
  return len;
}

Eagle3Teacher eagle3_teacher(const FrozenTarget& target, const Eagle3Draft& draft,
                             const DraftRows& rows) {
  Eagle3Teacher t;
  t.aux = target.capture(rows, draft.config().aux_layer_ids, &t.logits);
  t.embedding = target.model().model.embed_tokens.weight.value();
  return t;
}

namespace {

// What the steps read of a micro-batch, on the host: position t at step k shows the token at
// t + 1 + k and learns the target's distribution there.
struct TttPlan {
  int64_t B = 0, S = 0;
  std::vector<int64_t> ids, positions, remaining;  // (B * S) each
  std::vector<bool> masked_in;                     // the target row r: loss-masked in
  std::vector<bool> supervised;                    // and its argmax in the draft vocabulary

  // Whether position i = b * S + t learns at step k: its document holds token t + 1 + k, which is
  // supervised there.
  bool valid(int64_t i, int64_t k) const {
    return k < remaining[static_cast<size_t>(i)] && supervised[static_cast<size_t>(i + 1 + k)];
  }
  // Whether its chain may go on at step k: the token is its document's and loss-masked in, in the
  // draft vocabulary or not (one outside breaks the chain where serving would).
  bool chain_valid(int64_t i, int64_t k) const {
    return k < remaining[static_cast<size_t>(i)] && masked_in[static_cast<size_t>(i + 1 + k)];
  }
  // The tokens (B, S) shown at step k: 0 past the row's end.
  Tensor step_ids(int64_t k) const {
    std::vector<int64_t> out(ids.size(), 0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t + 1 + k < S; ++t) out[b * S + t] = ids[b * S + t + 1 + k];
    return Tensor::from_vector(out, {B, S});
  }
  Tensor step_positions(int64_t k) const {
    std::vector<int64_t> out(positions);
    for (int64_t& p : out) p += k;
    return Tensor::from_vector(out, {B, S});
  }
};

std::shared_ptr<const AttentionMask> step_mask(const DraftRows& rows, int64_t k) {
  const int64_t S = rows.seq_len();
  if (!rows.packed()) return compile_attention_mask(BatchMask(ttt_mask({S}, S, k)));
  std::vector<Mask> masks;
  for (const std::vector<int64_t>& lens : rows.doc_lens) masks.push_back(ttt_mask(lens, S, k));
  return compile_attention_mask(BatchMask(std::move(masks)));
}

}  // namespace

Eagle3Loss eagle3_loss(const Eagle3Draft& draft, const DraftRows& rows,
                       const Eagle3Teacher& teacher, const Eagle3LossOptions& o, Tensor* logits) {
  rows.check();
  if (o.ttt_steps < 1) fail("ttt_steps must be >= 1, got " + std::to_string(o.ttt_steps));
  const Eagle3Config& c = draft.config();
  const int64_t B = rows.rows(), S = rows.seq_len(), K = o.ttt_steps, V = c.layer.vocab_size;
  const int64_t H = c.layer.hidden_size;
  if (teacher.logits.dim() != 3 || teacher.logits.size(0) != B || teacher.logits.size(1) != S ||
      teacher.logits.size(2) != V || teacher.aux.dim() != 3 || teacher.aux.size(0) != B ||
      teacher.aux.size(1) != S || teacher.aux.size(2) != c.aux_width() ||
      teacher.embedding.dim() != 2 || teacher.embedding.size(0) != V ||
      teacher.embedding.size(1) != H)
    fail("the target's states and logits do not fit the rows and the draft");
  if (draft.vocabulary().size() != c.draft_vocab_size)
    fail("a draft of draft_vocab_size " + std::to_string(c.draft_vocab_size) +
         " needs its vocabulary's map to target ids (draft.vocab)");

  // The target's distribution over the draft vocabulary, one row per position (B * S, Vd).
  const Var& head = draft.lm_head.weight;
  const Device device = head.device();
  const DType dtype = head.dtype();
  const Tensor full = teacher.logits.reshape({B * S, V});
  const bool reduced = c.draft_vocab_size < V;
  const Tensor restricted =
      (reduced ? index_select(full, 1, draft.vocabulary().target_ids().to(full.device())) : full)
          .to(device, dtype)
          .contiguous();
  // Soft cross-entropy = KL + the target's entropy, which has no gradient.
  const std::vector<double> entropy =
      binary(BinaryOp::sub, logsumexp(restricted, 1),
             sum(binary(BinaryOp::mul, softmax(restricted, 1), restricted), 1))
          .to(Device::cpu(), DType::f64)
          .to_vector<double>();
  const std::vector<int64_t> teacher_top =
      argmax(restricted, 1).to(Device::cpu()).to_vector<int64_t>();

  TttPlan plan;
  plan.B = B;
  plan.S = S;
  plan.ids = rows.input_ids.to(Device::cpu()).contiguous().to_vector<int64_t>();
  const std::vector<int64_t> mask =
      rows.loss_mask.to(Device::cpu()).contiguous().to_vector<int64_t>();
  const std::vector<int64_t> top = argmax(full, 1).to(Device::cpu()).to_vector<int64_t>();
  const std::vector<int32_t> in_vocab = draft.vocabulary().t2d().to_vector<int32_t>();
  plan.supervised.resize(static_cast<size_t>(B * S));
  plan.masked_in.resize(static_cast<size_t>(B * S));
  for (size_t i = 0; i < plan.supervised.size(); ++i) {
    plan.masked_in[i] = mask[i] != 0;
    plan.supervised[i] = mask[i] != 0 && in_vocab[static_cast<size_t>(top[i])];
  }
  if (rows.packed()) {
    plan.positions = rows.position_ids.to(Device::cpu()).contiguous().to_vector<int64_t>();
    plan.remaining = rows.doc_remaining.to(Device::cpu()).contiguous().to_vector<int64_t>();
  } else {
    plan.positions.resize(static_cast<size_t>(B * S));
    plan.remaining.resize(static_cast<size_t>(B * S));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < S; ++t) {
        plan.positions[b * S + t] = t;
        plan.remaining[b * S + t] = S - 1 - t;
      }
  }
  std::vector<bool> valid(static_cast<size_t>(B * S * K));  // position-major: the acceptance grid
  for (int64_t i = 0; i < B * S; ++i)
    for (int64_t k = 0; k < K; ++k) valid[i * K + k] = plan.valid(i, k);
  if (std::find(valid.begin(), valid.end(), true) == valid.end())
    throw NoValidAnchors(
        "[eagle3] no supervised position: no token after a document's first is loss-masked in" +
        std::string(reduced ? " with the target's argmax in the draft vocabulary" : ""));

  Eagle3Loss out;
  std::vector<int64_t> pred(valid.size(), 0), truth(valid.size(), 0);
  std::vector<Tensor> step_logits;
  Var hidden = draft.project(Var(teacher.aux.to(device, dtype)));
  TttKeys keys;
  Var total;
  double weight_sum = 0;
  for (int64_t k = 0; k < K; ++k) {
    const Var embeds(embedding(teacher.embedding, plan.step_ids(k).to(teacher.embedding.device()))
                         .to(device, dtype));
    hidden =
        draft.step(embeds, hidden, plan.step_positions(k).to(device), keys, step_mask(rows, k));
    const Var normed = reshape(draft.norm.forward(hidden), {B * S, H});
    const double weight = std::pow(o.step_decay, static_cast<double>(k));
    weight_sum += weight;
    std::vector<int64_t> student_rows, teacher_rows;
    for (int64_t i = 0; i < B * S; ++i)
      if (valid[i * K + k]) {
        student_rows.push_back(i);
        teacher_rows.push_back(i + 1 + k);
      }
    const auto n = static_cast<int64_t>(student_rows.size());
    double entropy_sum = 0, correct = 0;
    if (n > 0) {
      Tensor student_pred;
      const Var kl =
          linear_kl_div(index_select(normed, 0, Tensor::from_vector(student_rows, {n}).to(device)),
                        head, restricted, 1.0, o.chunk_rows,
                        Tensor::from_vector(teacher_rows, {n}).to(device), &student_pred);
      const std::vector<int64_t> p = student_pred.to(Device::cpu()).to_vector<int64_t>();
      for (int64_t j = 0; j < n; ++j) {
        const auto r = static_cast<size_t>(teacher_rows[j]);
        const size_t cell = static_cast<size_t>(student_rows[j] * K + k);
        entropy_sum += entropy[r];
        pred[cell] = p[j];
        truth[cell] = teacher_top[r];
        correct += p[j] == teacher_top[r];
      }
      const Var step_sum = sum_all(kl) + entropy_sum;
      const Var term = step_sum * (weight / static_cast<double>(n));
      total = total.defined() ? total + term : term;
      out.step_loss_sum.push_back(step_sum.value().item());
    } else {
      out.step_loss_sum.push_back(0);
    }
    out.step_valid.push_back(static_cast<double>(n));
    out.step_correct.push_back(correct);
    out.step_loss.push_back(out.step_loss_sum.back() / std::max(static_cast<double>(n), 1.0));
    if (logits) step_logits.push_back(matmul(normed.value(), head.value(), false, true));
  }
  out.loss = total * (1.0 / weight_sum);
  const Acceptance accepted = acceptance(pred, truth, valid, K);
  out.accept_len_sum = accepted.accept_len_sum;
  out.valid_positions = accepted.valid_blocks;
  // The reference's chains: a position's drafts right (and supervised) at every step up to k,
  // among the positions whose chain is valid that far.
  out.step_prefix_hits.assign(static_cast<size_t>(K), 0);
  out.step_prefix_valid.assign(static_cast<size_t>(K), 0);
  out.chain_lengths.assign(static_cast<size_t>(B * S), 0);
  for (int64_t i = 0; i < B * S; ++i) {
    bool hit = true, chain = true;
    for (int64_t k = 0; k < K; ++k) {
      const auto cell = static_cast<size_t>(i * K + k);
      hit = hit && valid[cell] && pred[cell] == truth[cell];
      chain = chain && plan.chain_valid(i, k);
      out.step_prefix_hits[static_cast<size_t>(k)] += hit;
      out.step_prefix_valid[static_cast<size_t>(k)] += chain;
      out.chain_lengths[static_cast<size_t>(i)] += hit;
    }
  }
  if (logits) *logits = concat(step_logits, 0).to(Device::cpu(), DType::f32);
  return out;
}

}  // namespace sprig::speculative

#include "speculative/jetspec.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "autograd/functions.h"
#include "nn/loss.h"
#include "speculative/draft_kind.h"

namespace sprig::speculative {

DraftLoss jetspec_loss(const FrozenTarget& target, const DFlashDraft& draft, const DraftRows& rows,
                       const Anchors& anchors, const JetSpecOptions& o, Tensor* logits) {
  const DraftConfig& c = draft.config();
  check_draft_kind(c, jetspec_kind(), "the draft");
  const int64_t B = rows.rows(), S = rows.seq_len(), bs = c.block_size, K = bs - 1;
  const int64_t N = anchors.blocks();
  // The supervised slots k >= 1 (slot 0 holds the anchor's token), before any compute.
  Blocks blocks = make_blocks(rows, anchors, block_options(c));
  const std::vector<float> block_mask = blocks.block_mask.to_vector<float>();
  const std::vector<int64_t> at = anchors.anchors.to_vector<int64_t>();
  std::vector<int64_t> student_rows, teacher_rows;
  std::vector<bool> valid(static_cast<size_t>(B * N * K));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 1; k < bs; ++k) {
        if (!(block_mask[(b * N + j) * bs + k] > 0.5f)) continue;
        valid[static_cast<size_t>((b * N + j) * K + k - 1)] = true;
        student_rows.push_back((b * N + j) * bs + k);
        // The target's prediction of token anchor + k, made at anchor + k - 1.
        teacher_rows.push_back(b * S + std::min(at[b * N + j] + k - 1, S - 1));
      }
  if (student_rows.empty())
    throw NoValidAnchors(
        "[jetspec] no supervised slot: every label of the sampled blocks is loss-masked");

  const BlockForward f =
      block_forward(target, draft, rows, std::move(blocks), /*teacher_logits=*/true);
  const Var& hidden = f.hidden;
  const int64_t Q = hidden.size(1), H = hidden.size(2);
  const Device device = hidden.device();
  const auto n = static_cast<int64_t>(student_rows.size());
  // The target's logits over the draft's vocabulary (V: its size), whose argmax it may lack.
  const DraftVocabulary& vocab = draft.vocabulary();
  const Tensor full = f.teacher_logits.reshape({B * S, vocab.vocab_size});
  const Tensor teacher =
      (vocab.reduced() ? index_select(full, 1, vocab.target_ids().to(full.device())) : full)
          .to(device, hidden.dtype())
          .contiguous();
  const Tensor teacher_index = Tensor::from_vector(teacher_rows, {n}).to(device);
  const Var student = index_select(reshape(hidden, {B * Q, H}), 0,
                                   Tensor::from_vector(student_rows, {n}).to(device));
  Tensor student_pred;
  const Var kl = linear_kl_div(student, f.head, teacher, o.temperature, o.chunk_rows, teacher_index,
                               &student_pred);
  DraftLoss out;
  out.sum = sum_all(kl) * (o.temperature * o.temperature);

  // Accuracy and acceptance against the teacher's argmax over the whole vocabulary (its first
  // maximum), as a draft id: -1, a miss, where the draft vocabulary lacks it.
  const std::vector<int64_t> position_argmax =
      vocab.draft_ids(argmax(full, 1).to(Device::cpu()).to_vector<int64_t>());
  const std::vector<int64_t> pred = student_pred.to_vector<int64_t>();
  std::vector<int64_t> grid_pred(valid.size(), 0), grid_truth(valid.size(), 0);
  DraftMetrics& m = out.metrics;
  m.loss_weight = m.valid_tokens = static_cast<double>(n);
  for (size_t i = 0, v = 0; i < valid.size(); ++i) {
    if (!valid[i]) continue;
    grid_pred[i] = pred[v];
    grid_truth[i] = position_argmax[static_cast<size_t>(teacher_rows[v])];
    m.correct_tokens += pred[v] == grid_truth[i];
    ++v;
  }
  const Acceptance accepted = acceptance(grid_pred, grid_truth, valid, K);
  m.accept_len_sum = accepted.accept_len_sum;
  m.valid_blocks = accepted.valid_blocks;
  m.micro_batches = 1;
  out.denominator = jetspec_kind().mean_denominator(m.loss_weight);

  if (logits) *logits = slot_logits(hidden, f.head).to(Device::cpu(), DType::f32);
  return out;
}

namespace {

// The KL's temperature T, for training and evaluation alike. Outside [0.01, 100] the softened
// distributions collapse onto their argmax or flatten to uniform in fp32: the loss and its
// gradient vanish or overflow.
DraftSetting kd_temperature_setting() { return number_setting("kd_temperature", 1.0, 0.01, 100); }

// JetSpec's objective: T^2 times the forward KL at kd_temperature T, in chunks of kd_chunk_size
// rows (0: automatic).
class JetSpecObjective : public DraftObjective {
 public:
  explicit JetSpecObjective(const DraftSettings& s)
      : options_{s.number("kd_temperature", 1.0), s.integer("kd_chunk_size", 0)} {}

  DraftLoss loss(const FrozenTarget& target, const DFlashDraft& draft, const DraftBatch& batch,
                 Tensor* logits) const override {
    return jetspec_loss(target, draft, batch.rows, batch.anchors, options_, logits);
  }
  bool reads_teacher_logits() const override { return true; }

 private:
  JetSpecOptions options_;
};

class JetSpec : public DraftKind {
 public:
  std::string_view name() const override { return "jetspec"; }
  std::string_view title() const override { return "JetSpec"; }
  std::string_view train_help() const override {
    return "Train a JetSpec draft: in-block causal attention, distilled from the target's logits "
           "by forward KL (same sections as dflash, with draft.kd_temperature)";
  }
  std::string_view eval_help() const override {
    return "Teacher-forced JetSpec draft evaluation: the forward KL to the target's logits, "
           "accuracy and acceptance length against the target's argmax";
  }
  bool is_kind_of(const DraftConfig& c) const override { return c.causal && !c.head; }
  std::string_view requirement() const override {
    return "a JetSpec recipe needs an in-block causal draft (is_causal true)";
  }
  // Its loss_weight counts slots: a mean over them.
  double mean_denominator(double loss_weight) const override { return std::max(loss_weight, 1.0); }
  std::unique_ptr<DraftObjective> objective(const DraftSettings& s) const override {
    return std::make_unique<JetSpecObjective>(s);
  }
  std::vector<DraftSetting> train_settings() const override {
    return {kd_temperature_setting(), integer_setting("kd_chunk_size", 0, 0, " (0: automatic)")};
  }
  void shape(DraftOptions& options, const DraftSettings& /*settings*/) const override {
    options.causal = true;
  }
  std::vector<DraftVariant> variants(int64_t /*hidden_size*/) const override {
    return {{"jetspec", "forward KL to the target's logits (target <= 1.15x)", {}}};
  }
  std::vector<DraftOption> eval_options() const override {
    return {number_option("--kd-temperature", kd_temperature_setting(),
                          "Temperature T of the forward KL (the loss is T^2 KL)")};
  }
  DraftConfig exported(const DraftConfig& draft, const ServingExport& how) const override {
    if (how.engine == ServingEngine::sglang)
      throw std::invalid_argument(
          "[serve] SGLang's DFLASH worker drafts blocks bidirectionally and has no in-block "
          "causal attention, so it would serve this JetSpec draft as a DFlash one: export with "
          "--serve vllm");
    return DraftKind::exported(draft, how);
  }
  std::vector<std::string> serving_notes(const DraftConfig& /*original*/,
                                         const DraftConfig& /*exported*/,
                                         ServingEngine engine) const override {
    if (engine != ServingEngine::portable) return {};
    return {"SGLang has no in-block causal draft attention: serve this JetSpec draft with vLLM"};
  }
  bool sglang_serves(const DraftConfig& /*exported*/) const override { return false; }
};

}  // namespace

const DraftKind& jetspec_kind() {
  static const JetSpec kind;
  return kind;
}

}  // namespace sprig::speculative

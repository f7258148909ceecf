#include "speculative/dflash.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "autograd/functions.h"
#include "speculative/draft_kind.h"

namespace sprig::speculative {

BlockOptions block_options(const DraftConfig& c) {
  BlockOptions o;
  o.block_size = c.block_size;
  o.mask_token_id = c.mask_token_id;
  o.causal = c.causal;
  o.sliding_window = c.sliding_window;
  o.label_start = c.kind().label_shift(c);
  o.labels_within_document = o.label_start > 0;
  return o;
}

BlockForward block_forward(const FrozenTarget& target, const DFlashDraft& draft,
                           const DraftRows& rows, Blocks blocks, bool teacher_logits) {
  const DraftConfig& c = draft.config();
  BlockForward f;
  f.blocks = std::move(blocks);
  const Var& fc = draft.fc.weight;
  const Device device = fc.device();
  const DType dtype = fc.dtype();
  // The target's features and embeddings are constants of the draft's graph.
  const Var context(
      target.capture(rows, c.target_layer_ids, teacher_logits ? &f.teacher_logits : nullptr)
          .to(device, dtype));
  const Var noise(target.embed(f.blocks.noise_ids).value().to(device, dtype));
  f.hidden = draft.forward(noise, context, f.blocks.positions.to(device), f.blocks.mask);
  const DraftVocabulary& vocab = draft.vocabulary();
  f.head = Var((vocab.reduced() ? draft.lm_head() : target.head().value()).to(device, dtype));
  f.labels = vocab.reduced()
                 ? Tensor::from_vector(vocab.draft_ids(f.blocks.target_ids.to_vector<int64_t>()),
                                       f.blocks.target_ids.shape())
                 : f.blocks.target_ids;
  return f;
}

DraftLoss dflash_loss(const FrozenTarget& target, const DFlashDraft& draft, const DraftRows& rows,
                      const Anchors& anchors, const ObjectiveOptions& options,
                      const Tensor& prefix_lengths, Tensor* logits) {
  const BlockForward f =
      block_forward(target, draft, rows,
                    make_blocks(rows, anchors, block_options(draft.config()), prefix_lengths));
  Blocks labelled = f.blocks;
  labelled.target_ids = f.labels;
  return draft_loss(f.hidden, f.head, labelled, options, prefix_lengths, logits);
}

double dflash_flops(const FrozenTarget& target, const DFlashDraft& draft, int64_t rows,
                    int64_t seq_len, int64_t blocks, bool teacher_logits) {
  const DraftConfig& c = draft.config();
  const QwenConfig& t = target.config();
  const int64_t deepest =
      teacher_logits ? t.num_hidden_layers - 1
                     : *std::max_element(c.target_layer_ids.begin(), c.target_layer_ids.end());
  const double context = static_cast<double>(rows * seq_len);
  const double slots = static_cast<double>(rows * blocks * c.block_size);
  const double head = static_cast<double>(c.vocab_rows() * c.layers.hidden_size);
  // 2 per parameter per token forward, 6 with backward; the frozen head's backward skips dW.
  double flops = 2.0 * static_cast<double>(target.parameters_up_to(deepest)) * context +
                 6.0 * static_cast<double>(draft.num_parameters()) * slots + 4.0 * head * slots;
  if (teacher_logits) flops += 2.0 * static_cast<double>(t.vocab_size * t.hidden_size) * context;
  return flops;
}

namespace {

// DFlash's objective: the decay-weighted block cross-entropy (loss_type dflash), or the
// variable-prefix loss over prefix lengths drawn with weights prefix_weight_base^l
// (docs/semantics.md §9.1-§9.3).
class DFlashObjective : public DraftObjective {
 public:
  explicit DFlashObjective(const DraftSettings& s)
      : settings_(s),
        options_{loss_type_from_name(s.word("loss_type", "dflash")),
                 s.number("loss_decay_gamma", 7.0)},
        prefix_weight_base_(s.number("prefix_weight_base", 0.9)) {}

  void complete(const DraftConfig& draft, DraftBatch& batch, Generator& gen) const override {
    if (options_.type != DraftLossType::variable_prefix) {
      if (batch.prefix_lengths.defined())
        throw std::invalid_argument("\"prefix_lengths\" need " + settings_.named("loss_type") +
                                    " variable_prefix");
      return;
    }
    if (!batch.prefix_lengths.defined())
      batch.prefix_lengths = sample_prefix_lengths(batch.rows.rows(), batch.anchors.blocks(),
                                                   draft.block_size, prefix_weight_base_, gen);
  }
  DraftLoss loss(const FrozenTarget& target, const DFlashDraft& draft, const DraftBatch& batch,
                 Tensor* logits) const override {
    return dflash_loss(target, draft, batch.rows, batch.anchors, options_, batch.prefix_lengths,
                       logits);
  }

 private:
  DraftSettings settings_;
  ObjectiveOptions options_;
  double prefix_weight_base_;
};

class DFlash : public DraftKind {
 public:
  std::string_view name() const override { return "dflash"; }
  std::string_view title() const override { return "DFlash"; }
  std::string_view train_help() const override {
    return "Train a DFlash speculative-decoding draft on a frozen target's hidden states "
           "(target: and draft: sections; data packed by dflash or padded)";
  }
  std::string_view eval_help() const override {
    return "Teacher-forced DFlash draft evaluation: loss, accuracy and acceptance length per "
           "record (one JSON line each, then {\"aggregate\": ...}), with logits and gradients on "
           "request";
  }
  bool is_kind_of(const DraftConfig& c) const override { return !c.causal && !c.head; }
  std::string_view requirement() const override {
    return "a DFlash recipe needs a bidirectional draft without a correction head";
  }
  double mean_denominator(double loss_weight) const override {
    return weighted_mean_denominator(loss_weight);
  }
  std::unique_ptr<DraftObjective> objective(const DraftSettings& s) const override {
    return std::make_unique<DFlashObjective>(s);
  }
  std::vector<DraftSetting> train_settings() const override { return {gamma_setting()}; }
  std::vector<std::string> loss_types() const override { return {"dflash", "variable_prefix"}; }
  std::vector<DraftOption> eval_options() const override {
    return {word_option("--loss-type", "loss_type", "dflash or variable_prefix",
                        {"dflash", "variable_prefix"}),
            number_option("--prefix-weight-base", prefix_weight_base_setting(),
                          "Sampled prefix length l has weight base^l (variable_prefix)"),
            gamma_option()};
  }
  // The prefix lengths' weights apply to the variable-prefix loss alone.
  void check_options(const DraftSettings& given) const override {
    const std::string loss_type = given.word("loss_type", "dflash");
    if (given.numbers.count("prefix_weight_base") && loss_type != "variable_prefix")
      throw std::invalid_argument(given.named("prefix_weight_base") + " applies to " +
                                  given.named("loss_type") + " variable_prefix, not " +
                                  given.named("loss_type") + " " + loss_type);
  }
};

}  // namespace

const DraftKind& dflash_kind() {
  static const DFlash kind;
  return kind;
}

}  // namespace sprig::speculative

#include "train/draft.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "autograd/functions.h"
#include "nn/checkpoint.h"
#include "speculative/dflash.h"
#include "speculative/draft_kind.h"
#include "train/batch_input.h"
#include "train/plan.h"

namespace sprig {

namespace fs = std::filesystem;
using namespace speculative;

namespace {

FrozenTarget load_target(const TrainConfig& c, Device device) {
  const bool bf16 = device.is_cuda() && c.model_dtype == "bf16";
  const DType dtype = bf16 ? DType::bf16 : DType::f32;
  if (!c.target_path.empty()) {
    if (!fs::is_directory(c.target_path))
      throw std::runtime_error("target.path " + c.target_path + " is not a directory");
    return FrozenTarget(load_qwen(c.target_path), device, dtype);
  }
  if (!fs::exists(c.target_config))
    throw std::runtime_error("target.config " + c.target_config + " does not exist");
  Generator gen(c.seed);
  return FrozenTarget(std::make_unique<QwenForCausalLM>(QwenConfig::load(c.target_config), gen),
                      device, dtype);
}

}  // namespace

DraftTarget::DraftTarget(const TrainConfig& c, Device device)
    : target_(load_target(c, device)),
      fresh_(c.target_path.empty()),
      dir_(fresh_ ? "" : fs::absolute(c.target_path).string()) {}

data::DataConfig DraftTarget::fitted(data::DataConfig data) const {
  const int64_t vocab = config().vocab_size;
  if (data.vocab_size > vocab)
    throw std::invalid_argument("[train] data.vocab_size " + std::to_string(data.vocab_size) +
                                " exceeds the target's vocabulary of " + std::to_string(vocab));
  data.vocab_size = vocab;
  return data;
}

void DraftTarget::begin_run(const std::string& run_dir) {
  if (!fresh_) return;
  dir_ = fs::absolute(fs::path(run_dir) / "target").string();
  if (!fs::exists(dir_)) save_qwen(target_.model(), dir_);
}

namespace {

// The draft of draft.init, or a fresh one for the target (over draft.vocab's ids when given, with
// their rows of the target's head); either way it must fit the target and be of the recipe's kind
// (a Domino recipe needs the head, JetSpec a causal draft).
std::unique_ptr<DFlashDraft> build_draft(const TrainConfig& c, const FrozenTarget& frozen) {
  const DFlashConfig& d = c.dflash;
  const QwenConfig& target = frozen.config();
  if (d.init.empty()) {
    DraftOptions options = d.draft;
    std::optional<DraftVocabulary> vocab;
    if (!d.vocab.empty()) {
      vocab = read_draft_vocabulary(d.vocab, target.vocab_size);
      options.draft_vocab_size = vocab->size();
    }
    Generator gen(c.seed);
    auto draft = std::make_unique<DFlashDraft>(draft_config_for(target, options), gen);
    if (vocab) {
      const Tensor& head = frozen.head().value();
      Tensor rows = index_select(head, 0, vocab->target_ids().to(head.device()));
      draft->set_vocabulary(std::move(*vocab), std::move(rows));
    }
    return draft;
  }
  if (!fs::is_directory(d.init))
    throw std::runtime_error("draft.init " + d.init + " is not a directory");
  std::unique_ptr<DFlashDraft> draft = load_draft(d.init);
  check_draft_fits(draft->config(), target, "draft.init " + d.init);
  check_draft_kind(draft->config(), *c.draft_kind, "draft.init " + d.init);
  if (draft->config().reduced_vocab()) {  // its rows of this target's head, where the head is
    DraftVocabulary vocab = draft->vocabulary();
    const Tensor& head = frozen.head().value();
    Tensor rows = index_select(head, 0, vocab.target_ids().to(head.device()));
    draft->set_vocabulary(std::move(vocab), std::move(rows));
  }
  return draft;
}

// The block losses of the draft's slots, by the objective of the recipe's kind
// (speculative/draft_kind.h); a micro-batch's mean divides by the kind's mean_denominator.
class DraftRecipe : public Recipe {
 public:
  DraftRecipe(const TrainConfig& c, Device device, const Communicator& comm)
      : c_(c.dflash),
        kind_(*c.draft_kind),
        objective_(kind_.objective(c.dflash.settings)),
        target_(c, device),
        draft_(build_draft(c, target_.frozen())),
        data_(target_.fitted(c.data)),
        packed_(c.data.packing == data::Packing::dflash),
        gen_(c.seed + static_cast<uint64_t>(comm.rank())),
        val_seed_(c.seed + static_cast<uint64_t>(comm.world_size() + comm.rank())) {
    draft_->set_activation_checkpointing(c.activation_checkpointing);
  }

  Module& trainable() override { return *draft_; }
  const data::DataConfig& data() const override { return data_; }
  double mean_denominator(double weight) const override { return kind_.mean_denominator(weight); }
  std::vector<RatioMetric> ratios() const override {
    std::vector<RatioMetric> r = {{"accuracy", "correct_tokens", "valid_tokens"},
                                  {"accept_len", "accept_len_sum", "valid_blocks"}};
    for (const DraftRatio& extra : kind_.extra_ratios())
      r.push_back({extra.name, extra.numerator, extra.denominator});
    return r;
  }
  // The draft's layers run over the anchors' blocks and attend to the context's keys and values;
  // the target runs without gradients and keeps its captured hidden states.
  StepShapes step_shapes() const override {
    return draft_step_shapes(draft_->config(), target_.frozen().model().num_parameters(),
                             c_.num_anchors, data_);
  }
  std::string companion_files_dir() const override { return target_.dir(); }
  nlohmann::json checkpoint_config() const override {
    return draft_->config().to_json(DType::f32);  // the masters, a loadable draft
  }
  std::map<std::string, Tensor> checkpoint_buffers() const override {
    return draft_->vocabulary_tensors();
  }
  nlohmann::json checkpoint_metadata() const override {
    const DraftConfig& d = draft_->config();
    return {{"recipe", kind_.name()},
            {"block_size", d.block_size},
            {"mask_token_id", d.mask_token_id},
            {"target_layer_ids", d.target_layer_ids},
            {"draft_to_target", draft_->vocabulary().recorded_ids()},
            {"target", target_.dir()},
            {"rng", {{"seed", gen_.seed()}, {"offset", gen_.offset()}}}};
  }
  // A resume keeps the draft's shape and vocabulary (a checkpoint without draft_to_target was
  // made over the whole vocabulary).
  void restore(const nlohmann::json& saved) override {
    const DraftConfig& d = draft_->config();  // the trainer checked the recipe
    if (saved.value("draft_to_target", nlohmann::json()) != draft_->vocabulary().recorded_ids())
      throw std::invalid_argument(
          "[train] the checkpoint's draft has another draft_to_target (draft.vocab) than this "
          "config: resume with the settings it was trained with");
    for (const auto& [key, now] :
         {std::pair<const char*, nlohmann::json>{"block_size", d.block_size},
          {"mask_token_id", d.mask_token_id},
          {"target_layer_ids", d.target_layer_ids}})
      if (!saved.contains(key) || saved[key] != now)
        throw std::invalid_argument("[train] the checkpoint's draft has " + std::string(key) + " " +
                                    saved.value(key, nlohmann::json()).dump() + ", this config " +
                                    now.dump() + ": resume with the settings it was trained with");
    gen_.set_state(saved.at("rng").at("seed").get<uint64_t>(),
                   saved.at("rng").at("offset").get<uint64_t>());
  }
  void begin_run(const std::string& run_dir) override { target_.begin_run(run_dir); }
  void begin_validation() override { val_gen_ = Generator(val_seed_); }
  void begin_step(int64_t step, int64_t total_steps) override {
    objective_->begin_step(step, total_steps);
  }

  std::optional<MicroBatchLoss> loss(const data::Batch& batch) override {
    Generator& gen = draft_->is_training() ? gen_ : val_gen_;
    const DraftConfig& config = draft_->config();
    DraftBatch b{draft_rows(batch, packed_), {}, {}};
    DraftLoss l;
    try {
      b.anchors = sample_anchors(b.rows, config.block_size, c_.num_anchors, gen);
      objective_->complete(config, b, gen);
      l = objective_->loss(target_.frozen(), *draft_, b);
    } catch (const NoValidAnchors&) {  // no anchor, or (JetSpec) no supervised slot
      return std::nullopt;
    }
    const DraftMetrics& m = l.metrics;
    MicroBatchLoss out;
    out.sum = l.sum;
    out.weight = m.loss_weight;
    out.tokens = static_cast<int64_t>(m.valid_tokens);
    out.flops = dflash_flops(target_.frozen(), *draft_, b.rows.rows(), b.rows.seq_len(),
                             b.anchors.blocks(), objective_->reads_teacher_logits());
    for (const RatioMetric& r : ratios())
      for (const std::string& name : {r.numerator, r.denominator}) out.sums[name] = m.sum(name);
    return out;
  }

 private:
  const DFlashConfig& c_;
  const DraftKind& kind_;
  std::unique_ptr<DraftObjective> objective_;
  DraftTarget target_;
  std::unique_ptr<DFlashDraft> draft_;
  data::DataConfig data_;
  bool packed_;
  Generator gen_, val_gen_;
  // Rank r draws from seed + r in training and from seed + world + r in validation (which starts
  // afresh each pass): every stream is distinct, and one rank's are seed and seed + 1.
  uint64_t val_seed_;
};

}  // namespace

TrainSummary train_draft(const TrainConfig& config, bool resume, const StepCallback& on_step,
                         Communicator& comm) {
  if (config.draft_kind == nullptr)
    throw std::invalid_argument("[train] train_draft runs the configs of the DFlash drafts (" +
                                draft_kind_names() + ")");
  if (data::target_form(config.data.packing) != data::TargetForm::loss_mask)
    throw std::invalid_argument("[train] " + config.recipe_name() +
                                " trains on loss_mask rows: use data.packing dflash (packed "
                                "documents) or padded (one document per row)");
  Trainer trainer(config, resume, comm);
  DraftRecipe recipe(trainer.config(), trainer.device(), comm);
  return trainer.run(recipe, on_step);
}

}  // namespace sprig

#include "train/eagle3.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "speculative/eagle3.h"
#include "train/batch_input.h"
#include "train/draft.h"
#include "train/plan.h"

namespace sprig {

namespace {

using namespace speculative;

class Eagle3Recipe : public Recipe {
 public:
  Eagle3Recipe(const TrainConfig& c, Device device)
      : c_(c.eagle3_draft),
        target_(c, device),
        data_(target_.fitted(c.data)),
        packed_(c.data.packing == data::Packing::dflash) {
    draft_ = c_.init.empty() ? fresh_draft(c) : init_draft(c_.init);
    draft_->set_activation_checkpointing(c.activation_checkpointing);
  }

  Module& trainable() override { return *draft_; }
  const data::DataConfig& data() const override { return data_; }
  // accuracy and accept_len over every step, and each step's accuracy.
  std::vector<RatioMetric> ratios() const override {
    std::vector<RatioMetric> r = {{"accuracy", "correct_tokens", "valid_tokens"},
                                  {"accept_len", "accept_len_sum", "valid_positions"}};
    for (int64_t k = 0; k < c_.ttt_steps; ++k) {
      const std::string step = "step" + std::to_string(k);
      r.push_back({step + "_accuracy", step + "_correct", step + "_valid"});
    }
    return r;
  }
  StepShapes step_shapes() const override {
    return eagle3_step_shapes(draft_->config(), target_.frozen().model().num_parameters(),
                              c_.ttt_steps, data_);
  }
  std::string companion_files_dir() const override { return target_.dir(); }
  nlohmann::json checkpoint_config() const override {
    return draft_->config().to_json(DType::f32);  // the masters, a loadable draft
  }
  std::map<std::string, Tensor> checkpoint_buffers() const override {
    return draft_->vocabulary().tensors();
  }
  nlohmann::json checkpoint_metadata() const override {
    return {{"recipe", "eagle3"},
            {"aux_layer_ids", draft_->config().aux_layer_ids},
            {"draft_to_target", draft_->vocabulary().recorded_ids()},
            {"ttt_steps", c_.ttt_steps},
            {"target", target_.dir()}};
  }
  // A resume keeps the aux layers and the draft vocabulary the checkpoint was trained with.
  void restore(const nlohmann::json& saved) override {
    for (const auto& [key, now] :
         {std::pair<const char*, nlohmann::json>{"aux_layer_ids", draft_->config().aux_layer_ids},
          {"draft_to_target", draft_->vocabulary().recorded_ids()}})
      if (saved.value(key, nlohmann::json()) != now)
        throw std::invalid_argument(
            "[train] the checkpoint's draft has another " + std::string(key) + " (" +
            (std::string(key) == "draft_to_target" ? "draft.vocab" : "draft.aux_layer_ids") +
            ") than this config: resume with the settings it was trained with");
  }
  void begin_run(const std::string& run_dir) override { target_.begin_run(run_dir); }

  std::optional<MicroBatchLoss> loss(const data::Batch& batch) override {
    const DraftRows rows = draft_rows(batch, packed_);
    Eagle3Loss l;
    try {
      l = eagle3_loss(*draft_, rows, eagle3_teacher(target_.frozen(), *draft_, rows),
                      {c_.ttt_steps, 0.8, 0});
    } catch (const NoValidAnchors&) {  // no supervised position
      return std::nullopt;
    }
    MicroBatchLoss out;
    out.sum = l.loss;
    out.weight = 1;  // a mean already
    out.tokens = static_cast<int64_t>(l.valid_positions);
    out.flops = flops(rows.rows() * rows.seq_len());
    MetricSums& m = out.sums;
    for (int64_t k = 0; k < c_.ttt_steps; ++k) {
      const std::string step = "step" + std::to_string(k);
      m[step + "_correct"] = l.step_correct[k];
      m[step + "_valid"] = l.step_valid[k];
      m["correct_tokens"] += l.step_correct[k];
      m["valid_tokens"] += l.step_valid[k];
    }
    m["accept_len_sum"] = l.accept_len_sum;
    m["valid_positions"] = l.valid_positions;
    return out;
  }

 private:
  // A fresh draft for the target, over draft.vocab's ids when given.
  std::unique_ptr<Eagle3Draft> fresh_draft(const TrainConfig& c) const {
    Eagle3Options options = c_.draft;
    std::optional<DraftVocabulary> draft_vocab;
    if (!c_.vocab.empty()) {
      draft_vocab = read_draft_vocabulary(c_.vocab, target_.config().vocab_size);
      options.draft_vocab_size = draft_vocab->size();
    }
    Generator gen(c.seed);
    auto draft = std::make_unique<Eagle3Draft>(eagle3_config_for(target_.config(), options), gen);
    if (draft_vocab) draft->set_vocabulary(std::move(*draft_vocab));
    return draft;
  }
  // The draft of draft.init, which must fit the target.
  std::unique_ptr<Eagle3Draft> init_draft(const std::string& dir) const {
    if (!std::filesystem::is_directory(dir))
      throw std::runtime_error("draft.init " + dir + " is not a directory");
    if (!is_eagle3_dir(dir))
      throw std::invalid_argument("[draft] draft.init " + dir +
                                  " is not an EAGLE-3 draft (its config.json declares no "
                                  "LlamaForCausalLMEagle3)");
    auto draft = load_eagle3_draft(dir);
    check_eagle3_fits(draft->config(), target_.config(), "draft.init " + dir);
    return draft;
  }

  // Training FLOPs of `tokens` positions: the target's forward (2 per parameter and token) and
  // each step's forward and backward of the draft (6), its attention over the step's keys
  // neglected.
  double flops(int64_t tokens) const {
    const double target = static_cast<double>(target_.frozen().model().num_parameters());
    const double draft = static_cast<double>(draft_->num_parameters());
    return static_cast<double>(tokens) *
           (2 * target + 6 * draft * static_cast<double>(c_.ttt_steps));
  }

  const Eagle3TrainConfig& c_;
  DraftTarget target_;
  std::unique_ptr<Eagle3Draft> draft_;
  data::DataConfig data_;
  bool packed_;
};

}  // namespace

TrainSummary train_eagle3(const TrainConfig& config, bool resume, const StepCallback& on_step,
                          Communicator& comm) {
  if (!config.eagle3)
    throw std::invalid_argument("[train] train_eagle3 runs the configs of sprig train eagle3");
  if (data::target_form(config.data.packing) != data::TargetForm::loss_mask)
    throw std::invalid_argument(
        "[train] eagle3 trains on loss_mask rows: use data.packing dflash (packed documents) or "
        "padded (one document per row)");
  Trainer trainer(config, resume, comm);
  Eagle3Recipe recipe(trainer.config(), trainer.device());
  return trainer.run(recipe, on_step);
}

}  // namespace sprig

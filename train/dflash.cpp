#include "train/dflash.h"

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "nn/checkpoint.h"
#include "speculative/dflash.h"
#include "train/batch_input.h"

namespace sprig {

namespace {

namespace fs = std::filesystem;
using namespace speculative;

// The draft of draft.init, or a fresh one for the target; either way it must fit the target.
std::unique_ptr<DFlashDraft> build_draft(const TrainConfig& c, const QwenConfig& target) {
  const DFlashConfig& d = c.dflash;
  if (d.init.empty()) {
    Generator gen(c.seed);
    return std::make_unique<DFlashDraft>(draft_config_for(target, d.draft), gen);
  }
  if (!fs::is_directory(d.init))
    throw std::runtime_error("draft.init " + d.init + " is not a directory");
  std::unique_ptr<DFlashDraft> draft = load_draft(d.init);
  check_draft_fits(draft->config(), target, "draft.init " + d.init);
  return draft;
}

// The decay-weighted block loss of the draft's slots: each supervised slot weighs its decay
// weight, and a micro-batch's mean divides by their sum + 1e-6 (the reference's).
class DFlashRecipe : public Recipe {
 public:
  DFlashRecipe(const TrainConfig& c, Device device)
      : c_(c.dflash),
        target_(load_target(c, device)),
        draft_(build_draft(c, target_.config())),
        data_(c.data),
        packed_(c.data.packing == data::Packing::dflash),
        gen_(c.seed),
        seed_(c.seed),
        target_dir_(c.dflash.target_path.empty() ? ""
                                                 : fs::absolute(c.dflash.target_path).string()) {
    const int64_t vocab = target_.config().vocab_size;
    if (data_.vocab_size > vocab)
      throw std::invalid_argument("[train] data.vocab_size " + std::to_string(data_.vocab_size) +
                                  " exceeds the target's vocabulary of " + std::to_string(vocab));
    data_.vocab_size = vocab;
  }

  Module& trainable() override { return *draft_; }
  const data::DataConfig& data() const override { return data_; }
  double mean_denominator(double weight) const override { return weight + 1e-6; }
  std::vector<RatioMetric> ratios() const override {
    return {{"accuracy", "correct_tokens", "valid_tokens"},
            {"accept_len", "accept_len_sum", "valid_blocks"}};
  }
  nlohmann::json checkpoint_config() const override {
    return draft_->config().to_json(DType::f32);  // the masters, a loadable draft
  }
  nlohmann::json checkpoint_metadata() const override {
    const DraftConfig& d = draft_->config();
    return {{"block_size", d.block_size},
            {"mask_token_id", d.mask_token_id},
            {"target_layer_ids", d.target_layer_ids},
            {"target", target_dir_},
            {"rng", {{"seed", gen_.seed()}, {"offset", gen_.offset()}}}};
  }
  void restore(const nlohmann::json& saved) override {
    const DraftConfig& d = draft_->config();
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
  // A fresh target (target.config) is saved in the run directory once, so the run's drafts can be
  // evaluated and exported against it.
  void begin_run(const std::string& run_dir) override {
    if (!c_.target_path.empty()) return;
    target_dir_ = fs::absolute(fs::path(run_dir) / "target").string();
    if (!fs::exists(target_dir_)) save_qwen(target_.model(), target_dir_);
  }
  void begin_validation() override { val_gen_ = Generator(seed_ + 1); }

  std::optional<MicroBatchLoss> loss(const data::Batch& batch) override {
    Generator& gen = draft_->is_training() ? gen_ : val_gen_;
    const DraftRows rows = draft_rows(batch, packed_);
    const int64_t bs = draft_->config().block_size;
    Anchors anchors;
    try {
      anchors = sample_anchors(rows, bs, c_.num_anchors, gen);
    } catch (const NoValidAnchors&) {
      return std::nullopt;
    }
    Tensor prefix;
    if (c_.objective.type == DraftLossType::variable_prefix)
      prefix = sample_prefix_lengths(rows.rows(), anchors.blocks(), bs, c_.prefix_weight_base, gen);
    const DraftLoss l = dflash_loss(target_, *draft_, rows, anchors, c_.objective, prefix);
    const DraftMetrics& m = l.metrics;
    MicroBatchLoss out;
    out.sum = l.sum;
    out.weight = m.loss_weight;
    out.tokens = static_cast<int64_t>(m.valid_tokens);
    out.flops = dflash_flops(target_, *draft_, rows.rows(), rows.seq_len(), anchors.blocks());
    out.sums = {{"correct_tokens", m.correct_tokens},
                {"valid_tokens", m.valid_tokens},
                {"accept_len_sum", m.accept_len_sum},
                {"valid_blocks", m.valid_blocks}};
    return out;
  }

 private:
  static FrozenTarget load_target(const TrainConfig& c, Device device) {
    const bool bf16 = device.is_cuda() && c.model_dtype == "bf16";
    const DType dtype = bf16 ? DType::bf16 : DType::f32;
    const std::string& path = c.dflash.target_path;
    if (!path.empty()) {
      if (!fs::is_directory(path))
        throw std::runtime_error("target.path " + path + " is not a directory");
      return FrozenTarget(load_qwen(path), device, dtype);
    }
    const std::string& config = c.dflash.target_config;
    if (!fs::exists(config))
      throw std::runtime_error("target.config " + config + " does not exist");
    Generator gen(c.seed);
    return FrozenTarget(std::make_unique<QwenForCausalLM>(QwenConfig::load(config), gen), device,
                        dtype);
  }

  const DFlashConfig& c_;
  FrozenTarget target_;
  std::unique_ptr<DFlashDraft> draft_;
  data::DataConfig data_;
  bool packed_;
  Generator gen_, val_gen_;
  uint64_t seed_;
  std::string target_dir_;  // where the target is, as checkpoints record it
};

}  // namespace

TrainSummary train_dflash(const TrainConfig& config, bool resume, const StepCallback& on_step) {
  if (data::target_form(config.data.packing) != data::TargetForm::loss_mask)
    throw std::invalid_argument(
        "[train] dflash trains on loss_mask rows: use data.packing dflash (packed documents) or "
        "padded (one document per row)");
  Trainer trainer(config, resume);
  DFlashRecipe recipe(config, trainer.device());
  return trainer.run(recipe, on_step);
}

}  // namespace sprig

#include "train/sft.h"

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "autograd/functions.h"
#include "nn/checkpoint.h"
#include "train/batch_input.h"

namespace sprig {

namespace {

namespace fs = std::filesystem;

// The model of model.path (a checkpoint) or a fresh initialisation of model.config.
std::unique_ptr<QwenForCausalLM> build_model(const TrainConfig& c) {
  if (!c.model_path.empty()) {
    if (!fs::is_directory(c.model_path))
      throw std::runtime_error("model.path " + c.model_path + " is not a directory");
    return load_qwen(c.model_path);
  }
  if (!fs::exists(c.model_config))
    throw std::runtime_error("model.config " + c.model_config + " does not exist");
  Generator gen(c.seed);
  return std::make_unique<QwenForCausalLM>(QwenConfig::load(c.model_config), gen);
}

// The sum of the next-token losses of the supervised (labelled) tokens; each weighs 1.
class SftRecipe : public Recipe {
 public:
  SftRecipe(const TrainConfig& c, Device device)
      : model_(build_model(c)), data_(c.data), device_(device) {
    const int64_t vocab = model_->config().vocab_size;
    if (data_.vocab_size > vocab)
      throw std::invalid_argument("[train] data.vocab_size " + std::to_string(data_.vocab_size) +
                                  " exceeds the model's vocabulary of " + std::to_string(vocab));
    data_.vocab_size = vocab;  // every token id is checked against the model
  }

  Module& trainable() override { return *model_; }
  const data::DataConfig& data() const override { return data_; }
  nlohmann::json checkpoint_config() const override { return model_->config().to_json(); }
  StepShapes step_shapes() const override {
    StepShapes s;
    s.layers = model_->config();
    s.tokens = data_.micro_batch_size * data_.seq_len;
    return s;
  }

  std::optional<MicroBatchLoss> loss(const data::Batch& batch) override {
    const QwenInput in = batch_input(batch, model_->config(), device_);
    MicroBatchLoss m;
    m.sum = sum_all(model_->token_losses(model_->hidden(in), batch.labels.to(device_)));
    for (int64_t label : batch.labels.to_vector<int64_t>()) m.tokens += label != data::kIgnoreIndex;
    m.weight = static_cast<double>(m.tokens);
    // Matmul FLOPs of forward and backward: 6 per parameter per token.
    m.flops = 6.0 * static_cast<double>(model_->num_parameters()) *
              static_cast<double>(batch.num_tokens());
    return m;
  }

 private:
  std::unique_ptr<QwenForCausalLM> model_;
  data::DataConfig data_;
  Device device_;
};

}  // namespace

TrainSummary train_sft(const TrainConfig& config, bool resume, const StepCallback& on_step,
                       Communicator& comm) {
  if (data::target_form(config.data.packing) == data::TargetForm::loss_mask)
    throw std::invalid_argument("[train] sft needs labels: use data.packing sft, bfd or fold");
  Trainer trainer(config, resume, comm);
  SftRecipe recipe(config, trainer.device());
  return trainer.run(recipe, on_step);
}

}  // namespace sprig

#include "train/sft.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "autograd/functions.h"
#include "nn/checkpoint.h"
#include "nn/loss.h"
#include "train/batch_input.h"
#include "train/plan.h"

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

// loss.type pg over the scored tokens' cross-entropies `nll`: m with its sum, weight and the
// sums of the logged metrics.
MicroBatchLoss policy_gradient(const data::Batch& batch, const data::ScoredTokens& scored,
                               const Var& nll, const LossConfig& config, Device device,
                               MicroBatchLoss m) {
  if (!batch.advantages.defined())
    throw std::invalid_argument(
        "[train] loss.type pg needs \"advantages\" (one per completion) in every rollout record");
  if (config.clip_eps > 0 && !batch.old_logprobs.defined())
    throw std::invalid_argument("[train] loss.clip_eps " + std::to_string(config.clip_eps) +
                                " needs \"old_logprobs\" (one per completion token) in every "
                                "rollout record");
  const int64_t K = scored.size();
  const Tensor positions = Tensor::from_vector(scored.positions, {K});
  const auto at_targets = [&](const Tensor& per_token) {
    return per_token.defined() ? index_select(per_token.reshape({-1}), 0, positions) : Tensor();
  };
  int64_t clipped = 0;
  const Var logp = neg(nll);
  const Tensor advantages = at_targets(batch.advantages);
  Var per_token = policy_gradient_losses(logp, advantages, at_targets(batch.old_logprobs),
                                         config.clip_eps, &clipped);
  if (config.average == LossAverage::token) {
    m.weight = static_cast<double>(K);
  } else {  // the tokens of each completion share a weight of 1
    std::vector<int64_t> count(static_cast<size_t>(scored.num_sequences), 0);
    for (int64_t s : scored.sequences) ++count[static_cast<size_t>(s)];
    std::vector<double> w(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k)
      w[static_cast<size_t>(k)] = 1.0 / static_cast<double>(count[scored.sequences[k]]);
    per_token = mul(per_token, Var(Tensor::from_vector(w, {K}, logp.value().dtype(), device)));
    m.weight = static_cast<double>(
        std::count_if(count.begin(), count.end(), [](int64_t c) { return c > 0; }));
  }
  m.sum = sum_all(per_token);
  // The mean log-prob of the tokens with positive and with negative advantages: what the policy
  // learns to make likelier and less likely.
  const std::vector<double> lp = logp.value().to_vector<double>();
  const std::vector<double> a = advantages.to_vector<double>();
  for (const char* key : {"logprob_pos_sum", "pos_tokens", "logprob_neg_sum", "neg_tokens"})
    m.sums[key] = 0;
  for (int64_t k = 0; k < K; ++k) {
    if (a[k] == 0) continue;
    const char* sign = a[k] > 0 ? "pos" : "neg";
    m.sums[std::string("logprob_") + sign + "_sum"] += lp[k];
    m.sums[std::string(sign) + "_tokens"] += 1;
  }
  m.sums["scored_tokens"] = static_cast<double>(K);
  m.sums["clipped_tokens"] = static_cast<double>(clipped);
  return m;
}

// The recipe of next_token_loss.
class SftRecipe : public Recipe {
 public:
  SftRecipe(const TrainConfig& c, Device device)
      : model_(build_model(c)),
        model_dir_(c.model_path.empty() ? "" : fs::absolute(c.model_path).string()),
        data_(c.data),
        loss_(c.loss),
        device_(device) {
    const int64_t vocab = model_->config().vocab_size;
    if (data_.vocab_size > vocab)
      throw std::invalid_argument("[train] data.vocab_size " + std::to_string(data_.vocab_size) +
                                  " exceeds the model's vocabulary of " + std::to_string(vocab));
    data_.vocab_size = vocab;  // every token id is checked against the model
    model_->model.set_activation_checkpointing(c.activation_checkpointing);
  }

  Module& trainable() override { return *model_; }
  const data::DataConfig& data() const override { return data_; }
  nlohmann::json checkpoint_config() const override {
    QwenConfig c = model_->config();
    c.dtype = DType::f32;  // the checkpoint holds the f32 masters
    return c.to_json();
  }
  std::string companion_files_dir() const override { return model_dir_; }
  StepShapes step_shapes() const override { return sft_step_shapes(model_->config(), data_); }

  std::vector<RatioMetric> ratios() const override {
    if (loss_.type != LossType::pg) return {};
    std::vector<RatioMetric> r = {{"logprob_adv_pos", "logprob_pos_sum", "pos_tokens"},
                                  {"logprob_adv_neg", "logprob_neg_sum", "neg_tokens"}};
    if (loss_.clip_eps > 0) r.push_back({"clip_fraction", "clipped_tokens", "scored_tokens"});
    return r;
  }

  std::optional<MicroBatchLoss> loss(const data::Batch& batch) override {
    return next_token_loss(*model_, batch, loss_, data_.supervise_first_token, device_);
  }

 private:
  std::unique_ptr<QwenForCausalLM> model_;
  std::string model_dir_;  // model.path, absolute ("": a fresh model)
  data::DataConfig data_;
  LossConfig loss_;
  Device device_;
};

}  // namespace

MicroBatchLoss next_token_loss(const QwenForCausalLM& model, const data::Batch& batch,
                               const LossConfig& loss, bool supervise_first_token, Device device) {
  const QwenInput in = batch_input(batch, model.config(), device);
  const data::ScoredTokens scored = data::scored_tokens(batch, supervise_first_token);
  const int64_t K = scored.size();
  const Var nll = model.token_losses(model.hidden(in), scored.rows,
                                     Tensor::from_vector(scored.targets, {K}, device));
  MicroBatchLoss m;
  m.tokens = K;
  // Matmul FLOPs of forward and backward: 6 per parameter per token.
  m.flops =
      6.0 * static_cast<double>(model.num_parameters()) * static_cast<double>(batch.num_tokens());
  if (loss.type == LossType::pg) return policy_gradient(batch, scored, nll, loss, device, m);
  m.sum = sum_all(nll);
  m.weight = static_cast<double>(K);
  return m;
}

TrainSummary train_sft(const TrainConfig& config, bool resume, const StepCallback& on_step,
                       Communicator& comm) {
  if (data::target_form(config.data.packing) == data::TargetForm::loss_mask)
    throw std::invalid_argument("[train] sft needs labels: use data.packing sft, bfd or fold");
  Trainer trainer(config, resume, comm);
  SftRecipe recipe(trainer.config(), trainer.device());
  return trainer.run(recipe, on_step);
}

}  // namespace sprig

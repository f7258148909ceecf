#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <utility>

#include "autograd/functions.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "train/progress.h"
#include "train/schedule.h"

namespace sprig {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json state_json(const TrainerState& s, const json& recipe_metadata) {
  json j = {{"step", s.step},
            {"updates", s.updates},
            {"loader", {{"epoch", s.loader.epoch}, {"batch", s.loader.batch}}},
            {"rng", {{"seed", s.rng_seed}, {"offset", s.rng_offset}}},
            {"skipped_steps", s.skipped_steps},
            {"skipped_micro_batches", s.skipped_micro_batches},
            {"tokens", s.tokens}};
  if (!recipe_metadata.is_null()) j["recipe"] = recipe_metadata;
  return j;
}

TrainerState state_of(const json& j) {
  TrainerState s;
  s.step = j.at("step").get<int64_t>();
  // Checkpoints from before the count was saved: every step had updated.
  s.updates = j.contains("updates") ? j.at("updates").get<int64_t>() : s.step;
  s.loader.epoch = j.at("loader").at("epoch").get<int64_t>();
  s.loader.batch = j.at("loader").at("batch").get<int64_t>();
  s.rng_seed = j.at("rng").at("seed").get<uint64_t>();
  s.rng_offset = j.at("rng").at("offset").get<uint64_t>();
  s.skipped_steps = j.at("skipped_steps").get<int64_t>();
  s.skipped_micro_batches = j.value("skipped_micro_batches", int64_t{0});
  s.tokens = j.at("tokens").get<int64_t>();
  return s;
}

// The sums of several micro-batches.
void add_sums(MetricSums& into, const MetricSums& sums) {
  for (const auto& [name, value] : sums) into[name] += value;
}

// Validation over one pass of the val split: the weighted mean loss (val_loss) and the recipe's
// ratios (val_<name>), denominators of 0 counting as 1.
std::vector<std::pair<std::string, double>> validate(Recipe& recipe, data::DataLoader& val) {
  NoGradGuard no_grad;
  recipe.trainable().train(false);
  double sum = 0, weight = 0;
  MetricSums sums;
  val.restore({0, 0});
  for (int64_t i = 0; i < val.batches_per_epoch(); ++i) {
    const std::optional<MicroBatchLoss> m = recipe.loss(val.next());
    if (!m) continue;
    sum += m->sum.value().item();
    weight += m->weight;
    add_sums(sums, m->sums);
  }
  recipe.trainable().train(true);
  std::vector<std::pair<std::string, double>> out = {{"val_loss", weight > 0 ? sum / weight : 0}};
  for (const RatioMetric& r : recipe.ratios())
    out.emplace_back("val_" + r.name, sums[r.numerator] / std::max(sums[r.denominator], 1.0));
  return out;
}

}  // namespace

Trainer::Trainer(TrainConfig config, bool resume)
    : config_(std::move(config)),
      resume_(resume),
      device_(resolve_device(config_.device)),
      sync_(std::make_unique<GradientSync>()) {
  const std::string& run_dir = config_.run_dir;
  // Refused before anything in the run directory is touched.
  if (!resume && CheckpointManager(run_dir, config_.keep_last).has_checkpoint())
    throw std::runtime_error(run_dir +
                             " already holds checkpoints: pass --resume to continue "
                             "the run, or choose another run_dir");
  std::error_code error;
  fs::create_directories(run_dir, error);
  std::ofstream probe(fs::path(run_dir) / "config.resolved.yaml");
  if (error || !(probe << config_.resolved_yaml))
    throw std::runtime_error("run_dir " + run_dir + " is not writable" +
                             (error ? ": " + error.message() : std::string()));
}

TrainSummary Trainer::run(Recipe& recipe, const StepCallback& on_step) {
  const TrainConfig& c = config_;
  data::DataLoader loader(recipe.data(), data::Split::train);
  std::unique_ptr<data::DataLoader> val;
  if (!recipe.data().val.empty())
    val = std::make_unique<data::DataLoader>(recipe.data(), data::Split::val);

  // Mixed precision: fp32 masters are taken before the module is cast to the compute dtype.
  Module& module = recipe.trainable();
  const bool bf16 = device_.is_cuda() && c.model_dtype == "bf16";
  std::map<std::string, Tensor> masters = module.state_dict();
  module.to(device_, bf16 ? DType::bf16 : DType::f32);
  AdamW optimizer(module.named_parameters(), c.optimizer,
                  bf16 ? masters : std::map<std::string, Tensor>{});
  masters.clear();

  const int64_t G = c.grad_accumulation_steps;
  const int64_t total =
      c.max_steps > 0 ? c.max_steps : c.num_epochs * ((loader.batches_per_epoch() + G - 1) / G);
  const int64_t warmup = c.warmup_steps >= 0 ? std::max<int64_t>(c.warmup_steps, 1)
                                             : warmup_from_ratio(c.warmup_ratio, total);

  CheckpointManager checkpoints(c.run_dir, c.keep_last);
  TrainerState state;
  state.rng_seed = c.seed;
  const std::optional<LoadedCheckpoint> ck =
      resume_ ? checkpoints.load_latest({"model", "optimizer"}) : std::nullopt;
  if (ck) {
    try {
      state = state_of(ck->payload.state);
    } catch (const std::exception& e) {
      throw std::runtime_error("checkpoint " + ck->dir + " is corrupt: " + e.what());
    }
    recipe.check_resumed(ck->payload.state.value("recipe", json()));
    optimizer.load_state(ck->payload.tensors.at("model"), ck->payload.tensors.at("optimizer"),
                         state.updates);
    loader.restore(state.loader);
    std::cout << "resumed from " << ck->dir << " at step " << state.step << "\n";
  } else if (resume_) {
    std::cout << "no checkpoint in " << checkpoints.checkpoints_dir() << ": starting fresh\n";
  }
  std::string last_checkpoint = ck ? ck->dir : "";
  auto save = [&] {
    const CheckpointPayload payload{
        recipe.checkpoint_config(),
        {{"model", optimizer.masters()}, {"optimizer", optimizer.moments()}},
        state_json(state, recipe.checkpoint_metadata())};
    last_checkpoint = checkpoints.save(payload, state.step);
  };

  ProgressLog progress(c.run_dir, state.step, device_);
  std::cout << "training " << module.num_parameters() << " parameters on " << device_.str()
            << " for " << total << " steps (" << loader.summary() << ")\n";
  const std::vector<RatioMetric> ratios = recipe.ratios();
  const auto t_start = std::chrono::steady_clock::now();
  auto t_window = t_start;
  const int64_t start_step = state.step;
  int64_t window_tokens = 0, window_steps = 0, consecutive_skips = 0, idle_micro_batches = 0;
  double window_loss = 0, window_flops = 0, last_loss = 0, last_norm = 0;
  MetricSums window_sums;

  while (state.step < total) {
    // One optimizer step: G micro-batches of accumulated gradients.
    double step_loss = 0, step_weight = 0;
    int64_t step_tokens = 0;
    bool finite = true;
    for (int64_t g = 0; g < G;) {
      const data::Batch batch = loader.next();
      window_tokens += batch.num_tokens();
      const std::optional<MicroBatchLoss> m = recipe.loss(batch);
      if (!m) {  // nothing to train on in this micro-batch
        ++state.skipped_micro_batches;
        if (++idle_micro_batches > loader.batches_per_epoch())
          throw std::runtime_error("[train] no micro-batch of a whole epoch (" +
                                   std::to_string(loader.batches_per_epoch()) +
                                   " batches) had anything to train on");
        continue;
      }
      idle_micro_batches = 0;
      ++g;
      const double sum = m->sum.value().item();
      finite = finite && std::isfinite(sum);
      step_weight += m->weight;
      step_tokens += m->tokens;
      window_flops += m->flops;
      add_sums(window_sums, m->sums);
      if (c.loss_normalization == LossNormalization::mean) {  // mean per micro-batch, averaged
        const double denom = recipe.mean_denominator(m->weight);
        step_loss += sum / denom / static_cast<double>(G);
        (m->sum * (1.0 / (denom * static_cast<double>(G)))).backward();
      } else {  // summed over the window, divided by its weight below
        step_loss += sum;
        m->sum.backward();
      }
    }
    std::vector<Tensor> grads = optimizer.grads();
    sync_->sum(grads);
    const int64_t world = sync_->world_size();
    double scale = 1.0;
    if (c.loss_normalization == LossNormalization::tokens) {
      scale = 1.0 / recipe.mean_denominator(sync_->sum(step_weight));
      step_loss *= 1.0 / recipe.mean_denominator(step_weight);
    } else if (world > 1) {
      scale = 1.0 / static_cast<double>(world);
    }
    if (scale != 1.0)
      for (const Tensor& grad : grads) grad.copy_(binary_scalar(BinaryOp::mul, grad, scale));
    const double norm =
        c.max_grad_norm > 0 ? clip_grad_norm(grads, c.max_grad_norm) : global_norm(grads);
    const double lr = c.optimizer.lr * lr_multiplier(state.step, warmup, total, c.min_lr_ratio);
    if (finite && std::isfinite(norm)) {
      optimizer.step(lr);
      consecutive_skips = 0;
    } else {
      ++state.skipped_steps;
      if (++consecutive_skips > c.max_consecutive_skips)
        throw std::runtime_error("stopping: " + std::to_string(consecutive_skips) +
                                 " consecutive steps had a non-finite loss or gradient");
      std::cerr << "step " << state.step + 1 << ": non-finite loss or gradient, update skipped\n";
    }
    module.zero_grad();
    ++state.step;
    state.updates = optimizer.steps_taken();
    state.tokens += step_tokens;
    state.loader = loader.state();
    last_loss = step_loss;
    last_norm = norm;
    window_loss += step_loss;
    ++window_steps;
    if (on_step) on_step(state.step, step_loss);

    const bool last = state.step == total;
    if (state.step % c.log_every_steps == 0 || last) {
      const auto now = std::chrono::steady_clock::now();
      const double dt = std::chrono::duration<double>(now - t_window).count();
      const double elapsed = std::chrono::duration<double>(now - t_start).count();
      StepRecord r;
      r.step = state.step;
      r.total_steps = total;
      r.loss = window_loss / static_cast<double>(window_steps);
      r.lr = lr;
      r.grad_norm = last_norm;
      r.tokens = state.tokens;
      r.tokens_per_s = dt > 0 ? static_cast<double>(window_tokens) / dt : 0.0;
      r.flops_per_s = dt > 0 ? window_flops / dt : 0.0;
      r.skipped_steps = state.skipped_steps;
      r.epoch = state.loader.epoch;
      r.eta_seconds = elapsed / static_cast<double>(state.step - start_step) *
                      static_cast<double>(total - state.step);
      for (const RatioMetric& ratio : ratios)
        if (window_sums[ratio.denominator] != 0)
          r.extra.emplace_back(ratio.name,
                               window_sums[ratio.numerator] / window_sums[ratio.denominator]);
      if (val && (last || (c.val_every_steps > 0 && state.step % c.val_every_steps == 0)))
        for (auto& entry : validate(recipe, *val)) r.extra.push_back(std::move(entry));
      progress.log(r);
      window_tokens = 0;
      window_steps = 0;
      window_loss = 0;
      window_flops = 0;
      window_sums.clear();
      t_window = now;
    }
    if ((c.checkpoint_every_steps > 0 && state.step % c.checkpoint_every_steps == 0) || last)
      save();
  }
  std::cout << "done: " << state.step << " steps, last loss " << last_loss << "; run directory "
            << c.run_dir << " (metrics.jsonl, checkpoints/latest)\n";
  return {state.step, last_loss, state.skipped_steps, c.run_dir, last_checkpoint};
}

}  // namespace sprig

#include "train/trainer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "autograd/functions.h"
#include "nn/positions.h"
#include "train/checkpoint.h"
#include "train/gradient_buckets.h"
#include "train/optimizer.h"
#include "train/progress.h"
#include "train/run_directory.h"
#include "train/schedule.h"
#include "train/sharded_optimizer.h"
#include "train/stop_signals.h"
#include "train/trainer_state.h"

namespace sprig {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The outermost directory of `path` that does not exist yet (`path` itself when its parent
// exists); empty when `path` exists.
fs::path first_missing(const fs::path& path) {
  fs::path missing;
  for (fs::path p = fs::absolute(path); !fs::exists(p); p = p.parent_path()) missing = p;
  return missing;
}

// The sums of several micro-batches.
void add_sums(MetricSums& into, const MetricSums& sums) {
  for (const auto& [name, value] : sums) into[name] += value;
}

// Validation over one pass of the val split: the micro-batch losses weighted by their weights
// (val_loss) and the recipe's ratios (val_<name>), denominators below 1 counting as 1
// (docs/semantics.md §9.7, E17).
// Each rank validates its share of the rows; the sums are added over the ranks.
std::vector<std::pair<std::string, double>> validate(Recipe& recipe, data::DataLoader& val,
                                                     Communicator& comm) {
  NoGradGuard no_grad;
  recipe.begin_validation();
  recipe.trainable().train(false);
  double weighted_loss = 0, weight = 0;
  MetricSums sums;
  val.restore({0, 0});
  for (int64_t i = 0; i < val.batches_per_epoch(); ++i) {
    const std::optional<MicroBatchLoss> m = recipe.loss(val.next());
    if (!m) continue;
    const double loss = m->sum.value().item() / recipe.mean_denominator(m->weight);
    weighted_loss += loss * m->weight;
    weight += m->weight;
    add_sums(sums, m->sums);
  }
  recipe.trainable().train(true);
  std::vector<double> totals = {weighted_loss, weight};
  for (const RatioMetric& r : recipe.ratios())
    totals.insert(totals.end(), {sums[r.numerator], sums[r.denominator]});
  comm.all_reduce(totals, Reduction::sum);
  std::vector<std::pair<std::string, double>> out = {
      {"val_loss", totals[0] / std::max(totals[1], 1.0)}};
  size_t i = 2;
  for (const RatioMetric& r : recipe.ratios()) {
    out.emplace_back("val_" + r.name, totals[i] / std::max(totals[i + 1], 1.0));
    i += 2;
  }
  return out;
}

// Mixed precision: the fp32 masters are taken before the module is cast to the compute dtype
// (bf16 on CUDA when the config asks for it); in f32 every parameter is its own master. Several
// ranks sum their gradients in `buckets` (made here, once the parameters are on the device), and
// with train.shard: optimizer each keeps its shard of the optimizer's state.
std::unique_ptr<Optimizer> make_optimizer(Module& module, Device device, const TrainConfig& c,
                                          Communicator& comm,
                                          std::unique_ptr<GradientBuckets>& buckets) {
  const bool bf16 = device.is_cuda() && c.model_dtype == "bf16";
  const std::map<std::string, Tensor> masters =
      bf16 ? module.state_dict() : std::map<std::string, Tensor>{};
  module.to(device, bf16 ? DType::bf16 : DType::f32);
  const auto params = module.named_parameters();
  if (comm.world_size() == 1) return std::make_unique<AdamW>(params, c.optimizer, masters);
  std::vector<Var> vars;
  for (const auto& [name, p] : params) vars.push_back(p);
  buckets = std::make_unique<GradientBuckets>(vars, comm, kDefaultBucketBytes,
                                              c.shard == Sharding::gradients);
  if (c.shard != Sharding::none)
    return std::make_unique<ShardedAdamW>(params, c.optimizer, masters, *buckets, comm);
  return std::make_unique<AdamW>(params, c.optimizer, masters);
}

// One run of the loop: its loaders, optimizer, schedule, state and logging window.
class TrainingRun {
 public:
  // `run_dir`: the locked run directory (rank 0), nullptr on the other ranks.
  TrainingRun(const TrainConfig& c, Device device, Recipe& recipe, Communicator& comm,
              RunDirectory* run_dir)
      : c_(c),
        recipe_(recipe),
        comm_(comm),
        lead_(comm.rank() == 0),
        run_dir_(run_dir),
        loader_(recipe.data(), data::Split::train, comm.rank(), comm.world_size()),
        val_(recipe.data().val.empty()
                 ? nullptr
                 : std::make_unique<data::DataLoader>(recipe.data(), data::Split::val, comm.rank(),
                                                      comm.world_size())),
        optimizer_(make_optimizer(recipe.trainable(), device, c, comm, buckets_)),
        sharded_(c.shard != Sharding::none && comm.world_size() > 1),
        total_(c.max_steps > 0
                   ? c.max_steps
                   : c.num_epochs * ((loader_.batches_per_epoch() + c.grad_accumulation_steps - 1) /
                                     c.grad_accumulation_steps)),
        warmup_(c.warmup_steps >= 0 ? std::max<int64_t>(c.warmup_steps, 1)
                                    : warmup_from_ratio(c.warmup_ratio, total_)),
        checkpoints_(c.run_dir, c.keep_last),
        positions_(recipe.step_shapes().layers.max_position_embeddings, false, "train"),
        device_(device) {
    state_.rng_seed = c.seed;
  }

  // Continues from the latest checkpoint (saying so), or says there is none.
  void resume() {
    const std::optional<LoadedCheckpoint> ck = checkpoints_.load_latest({"model"});
    if (!ck) {
      if (lead_)
        std::cout << "no checkpoint in " << checkpoints_.checkpoints_dir() << ": starting fresh\n";
      return;
    }
    const json& saved = ck->payload.state;
    // Another recipe's checkpoint holds other tensors and settings: said first, in those words.
    if (const std::string made_by = recipe_that_saved(saved); made_by != c_.recipe_name())
      throw std::invalid_argument("[train] checkpoint " + ck->dir + " was made by sprig train " +
                                  made_by + ", not " + c_.recipe_name() +
                                  ": resume it with sprig train " + made_by);
    try {
      state_ = read_trainer_state(saved);
      if (!lead_) state_.window.sums.clear();  // rank 0 holds the sums of every rank
    } catch (const std::exception& e) {
      throw std::runtime_error("[train] checkpoint " + ck->dir +
                               "/trainer_state.json: " + e.what());
    }
    // The loader order and each rank's random draws depend on the number of ranks.
    const int64_t world = saved.value("world_size", int64_t{1});
    if (world != comm_.world_size())
      throw std::invalid_argument(
          "[train] checkpoint " + ck->dir + " was trained on " + std::to_string(world) +
          " rank(s), this run has " + std::to_string(comm_.world_size()) +
          ": resume it on as many (mpirun -np " + std::to_string(world) + ")");
    recipe_.restore(saved.contains("recipe_by_rank") ? saved["recipe_by_rank"].at(comm_.rank())
                                                     : saved.value("recipe", json()));
    check_config_changes(*ck);
    // Where the checkpoint keeps the moments: whole, or a file per rank of its shards.
    const json* shards = saved.contains("optimizer_shards") ? &saved["optimizer_shards"] : nullptr;
    if (shards && !(shards->is_number_integer() && shards->get<int64_t>() == world && world > 1))
      throw std::runtime_error("[train] checkpoint " + ck->dir +
                               "/trainer_state.json: optimizer_shards is " + shards->dump() +
                               ", not its world_size " + std::to_string(world) +
                               " (sharding needs several ranks)");
    // The moments in this run's layout: as saved, or converted from the other sharding.
    const auto params = recipe_.trainable().named_parameters();
    TensorMap moments;
    std::string moments_file = optimizer_file();
    if ((shards != nullptr) == sharded_) {
      moments = load_tensor_file(ck->dir, moments_file);
    } else {  // converted from the other sharding: the whole moments, or every rank's shards
      moments_file = sharded_ ? "optimizer" : "optimizer.rank*";
      std::vector<TensorMap> files;
      for (int64_t r = 0; r < (sharded_ ? 1 : world); ++r)
        files.push_back(load_tensor_file(
            ck->dir, sharded_ ? "optimizer" : "optimizer.rank" + std::to_string(r)));
      try {
        moments = sharded_ ? shard_moments(files[0], *buckets_, params, comm_.rank(), world)
                           : whole_moments(files, *buckets_, params);
      } catch (const std::runtime_error& e) {
        throw std::runtime_error("[train] checkpoint " + ck->dir + ": " + moments_file +
                                 ".safetensors: " + e.what());
      }
    }
    const TensorMap& model = ck->payload.tensors.at("model");
    check_optimizer_state(ck->dir, model, params, moments_file, moments, optimizer_->moments());
    optimizer_->load_state(model, moments, state_.updates);
    try {
      loader_.restore(state_.loader);
    } catch (const std::exception& e) {
      throw std::runtime_error("[train] checkpoint " + ck->dir +
                               "/trainer_state.json: loader: " + e.what());
    }
    last_checkpoint_ = ck->dir;
    saved_step_ = state_.step;
    if (lead_) std::cout << "resumed from " << ck->dir << " at step " << state_.step << "\n";
  }

  // `note` goes to stderr once the run directory is written.
  TrainSummary train(const StepCallback& on_step, const std::string& note) {
    // A resumed run whose checkpoint is at or past the schedule's end: nothing to train, and no
    // loss to report (docs/semantics.md §10.10).
    if (state_.step >= total_) {
      if (lead_)
        std::cout << "run already complete at step " << state_.step << " ("
                  << (c_.max_steps > 0 ? "train.max_steps " + std::to_string(c_.max_steps)
                                       : "train.num_epochs " + std::to_string(c_.num_epochs) +
                                             " is " + std::to_string(total_) + " steps")
                  << "): nothing to train; run directory " << c_.run_dir << "\n";
      return {state_.step, 0, state_.skipped_steps, c_.run_dir, last_checkpoint_};
    }
    if (lead_)
      std::cout << "training " << recipe_.trainable().num_parameters() << " parameters on "
                << device_.str()
                << (comm_.world_size() > 1 ? " x " + std::to_string(comm_.world_size()) +
                                                 " ranks (" + comm_.backend() + ")"
                                           : std::string())
                << " for " << total_ << " steps (" << loader_.summary() << ")\n";
    if (lead_ && sharded_) std::cout << sharding_summary() << "\n";
    reset_memory_peak(device_);  // the peak the progress lines report is this run's
    const auto start = Clock::now();
    const int64_t start_step = state_.step;
    start_step_ = start_step;
    updates_at_start_ = optimizer_->steps_taken();
    rates_.start = start;
    double last_loss = 0;
    const StopSignals signals;
    int stop = 0;  // the signal that stops the run (the same on every rank)
    while (state_.step < total_ && !(stop = received(signals))) {
      const Step step = optimizer_step();
      if (!opened_) {
        open_run_directory(start_step);
        if (lead_) std::cerr << note;
      }
      if (on_step) on_step(state_.step, step.loss);
      const bool last = state_.step == total_;
      if (state_.step % c_.log_every_steps == 0 || last) {
        const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        const StepRecord r = record(step, elapsed / static_cast<double>(state_.step - start_step) *
                                              static_cast<double>(total_ - state_.step));
        last_loss = r.loss;
        if (progress_) progress_->log(r);
      }
      if ((c_.checkpoint_every_steps > 0 && state_.step % c_.checkpoint_every_steps == 0) || last)
        save();
    }
    TrainSummary summary{state_.step, last_loss, state_.skipped_steps, c_.run_dir, {}};
    summary.stopped_by_signal = state_.step < total_ ? stop : 0;
    if (summary.stopped_by_signal && opened_ && saved_step_ != state_.step) save();
    summary.checkpoint = last_checkpoint_;
    if (!summary.stopped_by_signal && lead_)
      std::cout << "done: " << state_.step << " steps, last loss " << last_loss
                << "; run directory " << c_.run_dir << " (metrics.jsonl, checkpoints/latest)\n";
    return summary;
  }

 private:
  using Clock = std::chrono::steady_clock;

  struct Step {
    double loss = 0, grad_norm = 0, lr = 0;
  };

  // The rates since the last progress line (or since this process started): what the logging
  // window logs besides state_.window's means.
  struct Rates {
    int64_t tokens = 0;       // real tokens drawn
    double flops = 0;         // the recipe's FLOPs
    double comm_seconds = 0;  // spent waiting for the gradient sums and reduce-scatters (MPI)
    Clock::time_point start;
  };

  // The gradients and the loss of one accumulation window.
  struct Accumulated {
    double loss = 0, weight = 0;
    int64_t tokens = 0;
    bool finite = true;
  };

  // The signal that asked this run to stop, on any rank (0: none): every rank stops at the same
  // step.
  int received(const StopSignals& signals) const {
    const int sig = signals.received();
    return comm_.world_size() > 1
               ? static_cast<int>(comm_.all_reduce(static_cast<double>(sig), Reduction::max))
               : sig;
  }

  // The next micro-batch the recipe has something to train on, skipping (and counting) the others;
  // a micro-batch is skipped on every rank when one rank has nothing in it.
  MicroBatchLoss next_micro_batch() {
    for (int64_t idle = 0;; ++idle) {
      if (idle > loader_.batches_per_epoch())
        throw std::runtime_error("[train] no micro-batch of a whole epoch (" +
                                 std::to_string(loader_.batches_per_epoch()) +
                                 " batches) had anything to train on");
      const data::Batch batch = loader_.next();
      positions_.check(positions_end(batch.position_ids), "a training row");
      rates_.tokens += batch.num_tokens();
      std::optional<MicroBatchLoss> m = recipe_.loss(batch);
      const bool skip_anywhere =
          comm_.world_size() > 1 ? comm_.all_reduce(m ? 0.0 : 1.0, Reduction::max) > 0 : !m;
      if (!skip_anywhere) return std::move(*m);
      ++state_.skipped_micro_batches;
    }
  }

  // Backward of G micro-batches with the configured normalisation (docs/semantics.md §10.4).
  Accumulated accumulate() {
    const int64_t G = c_.grad_accumulation_steps;
    Accumulated a;
    for (int64_t g = 0; g < G; ++g) {
      const MicroBatchLoss m = next_micro_batch();
      const double sum = m.sum.value().item();
      a.finite = a.finite && std::isfinite(sum);
      a.weight += m.weight;
      a.tokens += m.tokens;
      rates_.flops += m.flops;
      add_sums(state_.window.sums, m.sums);
      if (buckets_) buckets_->arm(g == G - 1);  // its backward may start the bucket sums
      if (c_.loss_normalization == LossNormalization::mean) {  // each micro-batch's mean, averaged
        const double denom = recipe_.mean_denominator(m.weight);
        a.loss += sum / denom / static_cast<double>(G);
        (m.sum * (1.0 / (denom * static_cast<double>(G)))).backward();
      } else {  // summed over the window, divided by its weight (synchronise's scale)
        a.loss += sum;
        m.sum.backward();
      }
      if (buckets_) buckets_->backward_done();
    }
    return a;
  }

  // Sums the gradients, the loss and the counts over the data-parallel ranks and normalises the
  // loss; returns the factor that normalises the gradients (applied as the update reads them).
  double synchronise(Accumulated& a) {
    const int64_t world = comm_.world_size();
    if (buckets_) {
      const auto start = Clock::now();
      buckets_->sum();
      std::vector<double> sums = {a.loss, a.weight, static_cast<double>(a.tokens),
                                  a.finite ? 0.0 : 1.0};
      comm_.all_reduce(sums, Reduction::sum);
      a.loss = sums[0];
      a.weight = sums[1];
      a.tokens = static_cast<int64_t>(sums[2]);
      a.finite = sums[3] == 0;
      rates_.comm_seconds += std::chrono::duration<double>(Clock::now() - start).count() +
                             buckets_->take_reduce_seconds();
    }
    double scale = 1.0;
    if (c_.loss_normalization == LossNormalization::tokens) {
      scale = 1.0 / recipe_.mean_denominator(a.weight);
      a.loss *= scale;
    } else if (world > 1) {
      scale = 1.0 / static_cast<double>(world);
      a.loss *= scale;
    }
    return scale;
  }

  // One optimizer step: accumulation, synchronisation, clipping, the non-finite guard, the update.
  // The gradients are read twice, once for their norm and once by the update, which applies the
  // normalisation and the clipping coefficient as it reads them.
  Step optimizer_step() {
    recipe_.begin_step(state_.step, total_);
    Accumulated a = accumulate();
    const double scale = synchronise(a);
    Step step;
    step.loss = a.loss;
    step.grad_norm = scale * optimizer_->grad_norm();
    const double clip =
        c_.max_grad_norm > 0 ? clip_coefficient(step.grad_norm, c_.max_grad_norm) : 1.0;
    step.lr = c_.optimizer.lr * lr_multiplier(state_.step, warmup_, total_, c_.min_lr_ratio);
    if (a.finite && std::isfinite(step.grad_norm)) {
      optimizer_->step(step.lr, scale * clip);
      consecutive_skips_ = 0;
      last_update_ = {state_.step + 1, step};
    } else {
      ++state_.skipped_steps;
      if (++consecutive_skips_ > c_.max_consecutive_skips)
        throw std::runtime_error(
            "[train] steps " + std::to_string(state_.step + 2 - consecutive_skips_) + " to " +
            std::to_string(state_.step + 1) + " had a non-finite loss or gradient (" +
            std::to_string(consecutive_skips_) +
            " in a row, more than train.max_consecutive_skips " +
            std::to_string(c_.max_consecutive_skips) + "): stopping; " + likely_cause());
      std::cerr << "step " << state_.step + 1 << ": non-finite loss or gradient, update skipped\n";
    }
    // The gradients start the next step at zero, those of a skipped step too (with several ranks
    // they are the buckets, which hold the updated weights after a sharded update).
    if (buckets_)
      buckets_->zero();
    else
      recipe_.trainable().zero_grad();
    if (state_.step + 1 == total_ && optimizer_->steps_taken() == updates_at_start_)
      throw std::runtime_error("[train] every step of this run (" +
                               std::to_string(start_step_ + 1) + " to " + std::to_string(total_) +
                               ") had a non-finite loss or gradient and was skipped: nothing was "
                               "trained, and no checkpoint is written; " +
                               likely_cause());
    ++state_.step;
    state_.updates = optimizer_->steps_taken();
    state_.tokens += a.tokens;
    state_.loader = loader_.state();
    state_.window.loss += step.loss;
    ++state_.window.steps;
    return step;
  }

  // The progress record of the window that `step` closes (validating when it is time), which
  // starts the next window. Its sums are over every rank (tokens per second are the run's, FLOPs
  // per second a rank's mean, as MFU divides them by one device's peak).
  StepRecord record(const Step& step, double eta_seconds) {
    TrainerState::OpenWindow& window = state_.window;
    const std::vector<RatioMetric> ratios = recipe_.ratios();
    if (comm_.world_size() > 1) {
      std::vector<double> sums = {static_cast<double>(rates_.tokens),
                                  rates_.flops / static_cast<double>(comm_.world_size())};
      comm_.all_reduce(sums, Reduction::sum);
      rates_.tokens = static_cast<int64_t>(sums[0]);
      rates_.flops = sums[1];
      window.sums = summed_over_ranks(window.sums);
    }
    const auto now = Clock::now();
    const double dt = std::chrono::duration<double>(now - rates_.start).count();
    StepRecord r;
    r.step = state_.step;
    r.total_steps = total_;
    r.loss = window.loss / static_cast<double>(window.steps);
    r.lr = step.lr;
    r.grad_norm = step.grad_norm;
    r.tokens = state_.tokens;
    r.tokens_per_s = dt > 0 ? static_cast<double>(rates_.tokens) / dt : 0.0;
    r.flops_per_s = dt > 0 ? rates_.flops / dt : 0.0;
    r.skipped_steps = state_.skipped_steps;
    r.epoch = state_.loader.epoch;
    r.eta_seconds = eta_seconds;
    for (const RatioMetric& ratio : ratios)
      if (window.sums[ratio.denominator] != 0)
        r.extra.emplace_back(ratio.name,
                             window.sums[ratio.numerator] / window.sums[ratio.denominator]);
    // The share of the window rank 0 spent in the sums; with NCCL they overlap and the host does
    // not wait for them.
    if (buckets_ && !comm_.overlaps_backward())
      r.extra.emplace_back("comm_share", dt > 0 ? rates_.comm_seconds / dt : 0.0);
    const bool last = state_.step == total_;
    if (val_ && (last || (c_.val_every_steps > 0 && state_.step % c_.val_every_steps == 0))) {
      recipe_.begin_step(state_.step, total_);
      for (auto& entry : validate(recipe_, *val_, comm_)) r.extra.push_back(std::move(entry));
    }
    window = {};
    rates_ = Rates{};
    rates_.start = now;
    return r;
  }

  // The recipe's ratio sums added over every rank (each rank holds its own micro-batches'). Called
  // by every rank.
  MetricSums summed_over_ranks(MetricSums sums) const {
    std::vector<double> values;
    for (const RatioMetric& ratio : recipe_.ratios())
      values.insert(values.end(), {sums[ratio.numerator], sums[ratio.denominator]});
    comm_.all_reduce(values, Reduction::sum);
    size_t i = 0;
    for (const RatioMetric& ratio : recipe_.ratios()) {
      sums[ratio.numerator] = values[i++];
      sums[ratio.denominator] = values[i++];
    }
    return sums;
  }

  // Why the steps went non-finite, as far as the weights tell: the update that made them
  // non-finite, else the last update made, else none. Collective when the masters are sharded.
  std::string likely_cause() const {
    if (last_update_.step == 0)
      return "no step of this run updated the weights: the starting weights or the data give "
             "non-finite values";
    std::ostringstream update;
    update << "step " << last_update_.step << " (learning rate " << last_update_.values.lr
           << ", gradient norm " << last_update_.values.grad_norm << ")";
    if (const std::string name = optimizer_->first_non_finite(); !name.empty())
      return "the update of " + update.str() + " made " + name + " non-finite: lower optimizer.lr";
    return "the last update was " + update.str() +
           ": if the losses before it were finite, lower optimizer.lr";
  }

  // What a rank keeps of the optimizer's state and the gradients when they are sharded.
  std::string sharding_summary() const {
    const auto mib = [](double bytes) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f", bytes / (1024.0 * 1024.0));
      return std::string(buf);
    };
    double moments = 0, gradients = 0;
    for (const auto& [name, t] : optimizer_->moments()) moments += static_cast<double>(t.nbytes());
    for (const auto& [name, p] : recipe_.trainable().named_parameters())
      gradients += static_cast<double>(p.value().nbytes());
    const double world = static_cast<double>(comm_.world_size());
    const std::string kept_gradients =
        buckets_->shards_gradients() ? mib(static_cast<double>(buckets_->gradient_bytes())) + " of "
                                     : "all ";
    return "train.shard " + std::string(buckets_->shards_gradients() ? "gradients" : "optimizer") +
           ": each rank keeps " + mib(moments) + " of the " + mib(moments * world) +
           " MiB of AdamW moments and " + kept_gradients + "the " + mib(gradients) +
           " MiB of gradients";
  }

  // The checkpoint's file of this rank's moments: optimizer.safetensors, or one file per rank of
  // its shards (optimizer.rank<r>.safetensors).
  std::string optimizer_file() const {
    return sharded_ ? "optimizer.rank" + std::to_string(comm_.rank()) : "optimizer";
  }

  // Rank 0 writes the checkpoint with every rank's recipe state (and, sharded, every rank its
  // moments into the directory rank 0 stages); no rank goes on before it is complete (the gather
  // of its directory's name waits for rank 0). Weights that are not finite are never saved: every
  // rank holds the same masters and stops alike.
  void save() {
    if (const std::string name = optimizer_->first_non_finite(); !name.empty())
      throw std::runtime_error(
          "[train] step " + std::to_string(state_.step) + ": " + name +
          " holds non-finite values, so no checkpoint is written" +
          (last_checkpoint_.empty() ? "" : " (the last one, " + last_checkpoint_ + ", is intact)") +
          "; " + likely_cause());
    // model.safetensors: the fp32 masters, whole (gathered when sharded), and the recipe's buffers.
    std::map<std::string, Tensor> model = optimizer_->masters();
    std::vector<json> recipe_by_rank;
    for (const std::string& text : comm_.all_gather(recipe_.checkpoint_metadata().dump()))
      recipe_by_rank.push_back(json::parse(text));
    // The open logging window's sums are saved over every rank; a resumed rank 0 holds them.
    TrainerState saved = state_;
    if (comm_.world_size() > 1) saved.window.sums = summed_over_ranks(saved.window.sums);
    for (auto& [name, t] : recipe_.checkpoint_buffers()) model.emplace(name, t);
    CheckpointPayload payload{recipe_.checkpoint_config(),
                              {{"model", std::move(model)}},
                              trainer_state_json(saved, c_.recipe_name(), total_, recipe_by_rank),
                              c_.resolved_yaml,
                              recipe_.companion_files_dir()};
    if (sharded_) {
      const std::string staged = comm_.all_gather(lead_ ? checkpoints_.stage(state_.step) : "")[0];
      save_tensor_file(staged, optimizer_file(), optimizer_->moments());
      comm_.barrier();
      for (int64_t r = 0; lead_ && r < comm_.world_size(); ++r)
        if (!fs::exists(fs::path(staged) / ("optimizer.rank" + std::to_string(r) + ".safetensors")))
          throw std::runtime_error("[train] step " + std::to_string(state_.step) + ": rank " +
                                   std::to_string(r) + " did not write its optimizer shards into " +
                                   staged + ": every rank must see run_dir " + c_.run_dir +
                                   " (one host, or a filesystem the hosts share)");
      payload.state["optimizer_shards"] = comm_.world_size();
    } else {
      payload.tensors["optimizer"] = optimizer_->moments();
    }
    std::string dir;
    if (lead_)
      dir = sharded_ ? checkpoints_.commit(payload, state_.step)
                     : checkpoints_.save(payload, state_.step);
    last_checkpoint_ = comm_.all_gather(dir)[0];
    saved_step_ = state_.step;
  }

  // Writes config.resolved.yaml, what the recipe keeps in the run directory, and metrics.jsonl
  // (its records up to the resumed step kept). Called once this process has trained a step, so a
  // run that fails before leaves the directory as it was (RunDirectory removes what it created);
  // one that fails here removes what it wrote. Rank 0 alone writes there.
  void open_run_directory(int64_t resumed_step) {
    opened_ = true;
    if (!lead_) return;
    const fs::path dir = c_.run_dir;
    std::set<fs::path> existing;
    for (const auto& entry : fs::directory_iterator(dir)) existing.insert(entry.path());
    try {
      std::ofstream yaml(dir / "config.resolved.yaml");
      if (!(yaml << c_.resolved_yaml))
        throw std::runtime_error("run_dir " + c_.run_dir + " is not writable");
      yaml.close();
      recipe_.begin_run(c_.run_dir);
      progress_.emplace(c_.run_dir, resumed_step, device_);
    } catch (...) {
      std::error_code ignored;
      for (const auto& entry : fs::directory_iterator(dir, ignored))
        if (!existing.count(entry.path())) fs::remove_all(entry.path(), ignored);
      throw;
    }
    run_dir_->keep();
  }

  // Compares the config of the checkpoint being resumed (or, for checkpoints saved without one,
  // the run's config.resolved.yaml) with this run's: settings that alter the run are refused
  // unless allow_config_change, each listed with its old and new value; the others are reported.
  void check_config_changes(const LoadedCheckpoint& ck) const {
    std::string saved = ck.payload.resolved_config;
    if (saved.empty()) {
      std::ifstream in(fs::path(c_.run_dir) / "config.resolved.yaml");
      saved.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (saved.empty()) return;
    std::string altering, other;
    for (const ConfigChange& change : config_changes(saved, c_.resolved_yaml)) {
      std::string& list = change.alters_run ? altering : other;
      list += (list.empty() ? "" : ", ") + change.key + " " + change.before + " -> " + change.after;
    }
    if (!other.empty()) std::cout << "resuming with " << other << "\n";
    if (altering.empty()) return;
    if (!c_.allow_config_change)
      throw std::invalid_argument("[train] the config differs from the one checkpoint " + ck.dir +
                                  " was trained with: " + altering +
                                  "; resume with its settings, or pass --allow-config-change to "
                                  "continue with these");
    std::cerr << "[train] warning: continuing checkpoint " << ck.dir
              << " with changed settings: " << altering << "\n";
  }

  const TrainConfig& c_;
  Recipe& recipe_;
  Communicator& comm_;
  bool lead_;              // rank 0, which writes the run directory and prints
  RunDirectory* run_dir_;  // rank 0: the locked run directory
  data::DataLoader loader_;
  std::unique_ptr<data::DataLoader> val_;
  // Several ranks: the gradients' flat buffers. Declared before optimizer_, whose initializer
  // makes them (make_optimizer) and which refers to them.
  std::unique_ptr<GradientBuckets> buckets_;
  std::unique_ptr<Optimizer> optimizer_;
  bool sharded_;  // train.shard optimizer or gradients, over several ranks
  int64_t total_, warmup_;
  CheckpointManager checkpoints_;
  PositionLimit positions_;  // warns once when a row reaches past max_position_embeddings
  Device device_;
  TrainerState state_;
  std::string last_checkpoint_;
  int64_t saved_step_ = -1;              // the step of the latest checkpoint (-1: none)
  bool opened_ = false;                  // whether the run directory is written
  std::optional<ProgressLog> progress_;  // rank 0, once the run directory is written
  Rates rates_;
  int64_t consecutive_skips_ = 0;
  int64_t start_step_ = 0, updates_at_start_ = 0;  // where this process began
  struct {
    int64_t step = 0;  // the step of the last update this process made (0: none)
    Step values;
  } last_update_;
};

// The device of this rank: CUDA device <local rank> when the run computes on CUDA.
Device rank_device(const std::string& name, const Communicator& comm) {
  Device device = resolve_device(name);
  if (device.is_cuda()) device.index = static_cast<int>(comm.local_rank());
  return device;
}

// Refuses a run whose ranks were given different configs, naming the first rank that differs and
// how.
void check_same_config(const std::string& resolved_yaml, Communicator& comm) {
  const std::vector<std::string> configs = comm.all_gather(resolved_yaml);
  for (size_t r = 1; r < configs.size(); ++r) {
    if (configs[r] == configs[0]) continue;
    std::string changes;
    for (const ConfigChange& change : config_changes(configs[0], configs[r]))
      changes += (changes.empty() ? "" : ", ") + change.key + " " + change.before + " on rank 0, " +
                 change.after + " on rank " + std::to_string(r);
    throw std::invalid_argument("[train] rank " + std::to_string(r) +
                                " was given a different config than rank 0" +
                                (changes.empty() ? std::string() : ": " + changes) +
                                "; every rank must run the same command");
  }
}

}  // namespace

Trainer::Trainer(TrainConfig config, bool resume, Communicator& comm)
    : config_(std::move(config)),
      resume_(resume),
      comm_(comm),
      device_(rank_device(config_.device, comm)) {
  check_same_config(config_.resolved_yaml, comm_);
  set_attention_backend(config_.attention_backend);
  // The run records the dtype it computes in: auto's choice, and f32 on the CPU (saying so when
  // bf16 was asked for).
  const std::string dtype_key = config_.is_draft() ? "draft.dtype" : "model.dtype";
  const std::string computed = device_.is_cuda() && config_.model_dtype != "f32" ? "bf16" : "f32";
  if (config_.model_dtype == "bf16" && computed == "f32")
    dtype_note_ = "[train] " + dtype_key + " bf16 trains in f32 on the CPU; the run records f32\n";
  if (config_.model_dtype != computed) {
    config_.model_dtype = computed;
    config_.resolved_yaml = with_override(config_.resolved_yaml, dtype_key + "=" + computed);
  }
  const std::string& run_dir = config_.run_dir;
  const fs::path missing = first_missing(run_dir);
  const fs::path existing = missing.empty() ? fs::absolute(run_dir) : missing.parent_path();
  const char* why = !fs::is_directory(existing)                    ? "Not a directory"
                    : ::access(existing.c_str(), W_OK | X_OK) != 0 ? std::strerror(errno)
                                                                   : nullptr;
  if (why) throw std::runtime_error("run_dir " + run_dir + " is not writable: " + why);
  // Rank 0 takes the directory (sprig's, or new) and holds its lock for the whole run; the rest is
  // written once the recipe, the data and any checkpoint have loaded.
  if (comm_.rank() == 0) run_dir_ = std::make_unique<RunDirectory>(run_dir);
  const CheckpointManager checkpoints(run_dir, config_.keep_last);
  if (!resume && checkpoints.has_checkpoint())
    throw std::runtime_error(run_dir +
                             " already holds checkpoints: pass --resume to continue "
                             "the run, or choose another run_dir");
  checkpoints.check_checkpoints_are_sprigs();
}

TrainSummary Trainer::run(Recipe& recipe, const StepCallback& on_step) {
  // Before the loaders prefetch a batch or the module moves to the device.
  StepShapes shapes = recipe.step_shapes();
  shapes.batch_tokens = recipe.data().micro_batch_size * recipe.data().seq_len;
  shapes.checkpoint_every = config_.activation_checkpointing;
  if (config_.shard != Sharding::none) shapes.optimizer_shards = comm_.world_size();
  if (config_.shard == Sharding::gradients) shapes.gradient_shards = comm_.world_size();
  shapes.gradients_persist = comm_.world_size() > 1 || config_.grad_accumulation_steps > 1;
  check_step_fits(shapes, recipe.trainable().num_parameters(),
                  config_.model_dtype == "bf16" ? DType::bf16 : DType::f32, device_);
  TrainingRun run(config_, device_, recipe, comm_, run_dir_.get());
  if (resume_) run.resume();
  return run.train(on_step, dtype_note_);
}

}  // namespace sprig

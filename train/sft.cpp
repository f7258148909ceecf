#include "train/sft.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "autograd/functions.h"
#include "nn/checkpoint.h"
#include "tensor/cuda/kernels.h"
#include "train/checkpoint.h"
#include "train/schedule.h"

namespace sprig {

namespace fs = std::filesystem;

QwenInput batch_input(const data::Batch& batch, const QwenConfig& config, Device device) {
  const int64_t B = batch.rows(), S = batch.seq_len();
  int64_t window = 0;  // the sliding window of the model's windowed layers, if any
  for (int64_t w : config.sliding_window_per_layer) window = std::max(window, w);
  // One mask per row for attention limited to `w` keys back (0: unlimited).
  auto row_masks = [&](int64_t w) {
    std::vector<Mask> rows(static_cast<size_t>(B));
    if (!batch.groups.empty()) {  // folded rollouts: one prefix tree per group, side by side
      if (w > 0)
        throw std::invalid_argument(
            "[train] prefix-tree batches cannot train sliding-window models");
      std::vector<std::vector<Mask>> parts(static_cast<size_t>(B));
      for (const data::TreeGroup& g : batch.groups)
        parts[static_cast<size_t>(g.row)].push_back(
            prefix_tree_mask(g.node_lengths, g.sample_paths));
      for (int64_t b = 0; b < B; ++b) {
        auto& p = parts[static_cast<size_t>(b)];
        if (batch.num_pad[static_cast<size_t>(b)] > 0)
          p.push_back(causal_mask(batch.num_pad[static_cast<size_t>(b)]));
        rows[static_cast<size_t>(b)] = block_diagonal(p);
      }
    } else {  // packed documents: one causal square each (padding folded into the last one)
      const std::vector<int64_t> lens = batch.seq_lens.to_vector<int64_t>();
      const int64_t docs = batch.seq_lens.size(1);
      for (int64_t b = 0; b < B; ++b) {
        std::vector<int64_t> row;
        for (int64_t j = 0; j < docs; ++j)
          if (lens[static_cast<size_t>(b * docs + j)] > 0)
            row.push_back(lens[static_cast<size_t>(b * docs + j)]);
        rows[static_cast<size_t>(b)] = document_mask(row, S, w);
      }
    }
    return std::make_shared<AttentionMask>(compile_attention_mask(BatchMask(rows)));
  };
  QwenInput in;
  in.input_ids = batch.input_ids.to(device);
  in.position_ids = batch.position_ids.to(device);
  in.mask = row_masks(0);
  if (window > 0) in.window_mask = row_masks(window);
  return in;
}

namespace {

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

// Mean loss and supervised-token count of one micro-batch's per-token losses.
struct MicroLoss {
  Var sum;  // sum of the supervised tokens' losses
  int64_t tokens = 0;
};

MicroLoss micro_batch_loss(const QwenForCausalLM& model, const data::Batch& batch, Device device) {
  const QwenInput in = batch_input(batch, model.config(), device);
  const Tensor labels = batch.labels.to(device);
  MicroLoss m;
  m.sum = sum_all(model.token_losses(model.hidden(in), labels));
  for (int64_t l : batch.labels.to_vector<int64_t>()) m.tokens += l != data::kIgnoreIndex;
  return m;
}

double peak_memory_bytes(Device device) {
  return static_cast<double>(device.is_cuda() ? cuda::memory_peak(device.index)
                                              : cpu_memory_peak());
}

std::string format_duration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds);
  std::ostringstream os;
  if (s >= 3600) os << s / 3600 << "h";
  os << std::setw(s >= 3600 ? 2 : 1) << std::setfill('0') << (s % 3600) / 60 << "m" << std::setw(2)
     << s % 60 << "s";
  return os.str();
}

// Token-weighted validation loss over one pass of the val split.
double validate(const QwenForCausalLM& model, data::DataLoader& val, Device device) {
  NoGradGuard no_grad;
  double sum = 0;
  int64_t tokens = 0;
  val.restore({0, 0});
  for (int64_t i = 0; i < val.batches_per_epoch(); ++i) {
    const MicroLoss m = micro_batch_loss(model, val.next(), device);
    sum += m.sum.value().item();
    tokens += m.tokens;
  }
  return tokens ? sum / static_cast<double>(tokens) : 0.0;
}

// Approximate training FLOPs per supervised-or-not token: 6 * parameters (matmuls fwd + bwd).
double flops_per_token(const QwenForCausalLM& model) {
  return 6.0 * static_cast<double>(model.num_parameters());
}

// metrics.jsonl for appending, keeping only the records of steps up to `resumed_step` (a killed
// run may have logged steps after its last checkpoint).
std::ofstream open_metrics(const fs::path& path, int64_t resumed_step) {
  std::vector<std::string> kept;
  if (resumed_step > 0 && fs::exists(path)) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      const auto rec = nlohmann::json::parse(line, nullptr, false);
      if (!rec.is_discarded() && rec.value("step", int64_t{0}) <= resumed_step)
        kept.push_back(line);
    }
  }
  std::ofstream out(path, std::ios::trunc);
  for (const std::string& line : kept) out << line << "\n";
  if (!out) throw std::runtime_error(path.string() + ": cannot write");
  return out;
}

}  // namespace

TrainSummary train_sft(const TrainConfig& c, bool resume,
                       const std::function<void(int64_t, double)>& on_step) {
  if (c.data.packing == data::Packing::dflash)
    throw std::invalid_argument("[train] sft needs labels: use data.packing sft, bfd or fold");
  const Device device = resolve_device(c.device);
  CheckpointManager checkpoints(c.run_dir, c.keep_last);
  // Refused before anything in the run directory is touched.
  if (!resume && checkpoints.has_checkpoint())
    throw std::runtime_error(c.run_dir +
                             " already holds checkpoints: pass --resume to continue "
                             "the run, or choose another run_dir");
  {
    std::error_code error;
    fs::create_directories(c.run_dir, error);
    std::ofstream probe(fs::path(c.run_dir) / "config.resolved.yaml");
    if (error || !(probe << c.resolved_yaml))
      throw std::runtime_error("run_dir " + c.run_dir + " is not writable" +
                               (error ? ": " + error.message() : std::string()));
  }

  std::unique_ptr<QwenForCausalLM> model = build_model(c);
  data::DataConfig data_config = c.data;
  const int64_t vocab = model->config().vocab_size;
  if (data_config.vocab_size > vocab)
    throw std::invalid_argument("[train] data.vocab_size " +
                                std::to_string(data_config.vocab_size) +
                                " exceeds the model's vocabulary of " + std::to_string(vocab));
  data_config.vocab_size = vocab;  // every token id is checked against the model
  data::DataLoader loader(data_config, data::Split::train);
  std::unique_ptr<data::DataLoader> val;
  if (!data_config.val.empty())
    val = std::make_unique<data::DataLoader>(data_config, data::Split::val);

  // fp32 masters are taken before any cast to the compute dtype.
  const bool bf16 = device.is_cuda() && c.model_dtype == "bf16";
  std::map<std::string, Tensor> masters = model->state_dict();
  model->to(device, bf16 ? DType::bf16 : DType::f32);
  AdamW optimizer(model->named_parameters(), c.optimizer,
                  bf16 ? masters : std::map<std::string, Tensor>{});
  masters.clear();

  const int64_t G = c.grad_accumulation_steps;
  const int64_t total =
      c.max_steps > 0 ? c.max_steps : c.num_epochs * ((loader.batches_per_epoch() + G - 1) / G);
  const int64_t warmup = c.warmup_steps >= 0 ? std::max<int64_t>(c.warmup_steps, 1)
                                             : warmup_from_ratio(c.warmup_ratio, total);
  TrainerState state;
  state.rng_seed = c.seed;
  const std::optional<LoadedCheckpoint> ck = resume ? checkpoints.load_latest() : std::nullopt;
  if (ck) {
    optimizer.load_state(ck->model, ck->optimizer, ck->state.step);
    state = ck->state;
    loader.restore(state.loader);
    std::cout << "resumed from " << ck->dir << " at step " << state.step << "\n";
  } else if (resume) {
    std::cout << "no checkpoint in " << checkpoints.checkpoints_dir() << ": starting fresh\n";
  }
  std::string last_checkpoint = ck ? ck->dir : "";
  auto save = [&] {
    last_checkpoint =
        checkpoints.save(model->config(), optimizer.masters(), optimizer.moments(), state);
  };
  std::ofstream metrics = open_metrics(fs::path(c.run_dir) / "metrics.jsonl", state.step);
  std::cout << "training " << model->num_parameters() << " parameters on " << device.str()
            << " for " << total << " steps (" << loader.summary() << ")\n";
  const auto t_start = std::chrono::steady_clock::now();
  auto t_window = t_start;
  int64_t window_tokens = 0, consecutive_skips = 0, start_step = state.step;
  double window_loss = 0, last_loss = 0, last_norm = 0;
  int64_t window_steps = 0;

  while (state.step < total) {
    // One optimizer step: G micro-batches of accumulated gradients.
    double step_loss = 0;
    int64_t step_tokens = 0;
    bool finite = true;
    for (int64_t g = 0; g < G; ++g) {
      const data::Batch batch = loader.next();
      window_tokens += batch.num_tokens();
      const MicroLoss m = micro_batch_loss(*model, batch, device);
      const double sum = m.sum.value().item();
      finite = finite && std::isfinite(sum);
      step_tokens += m.tokens;
      if (c.loss_normalization == "mean") {  // the reference: mean per micro-batch, averaged
        const double denom = static_cast<double>(std::max<int64_t>(m.tokens, 1));
        step_loss += sum / denom / static_cast<double>(G);
        (m.sum * (1.0 / (denom * static_cast<double>(G)))).backward();
      } else {  // token-weighted over the window: gradients divided by its token count below
        step_loss += sum;
        m.sum.backward();
      }
    }
    std::vector<Tensor> grads = optimizer.grads();
    if (c.loss_normalization == "tokens") {
      const double inv = 1.0 / static_cast<double>(std::max<int64_t>(step_tokens, 1));
      step_loss *= inv;
      for (const Tensor& g : grads) g.copy_(binary_scalar(BinaryOp::mul, g, inv));
    }
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
    model->zero_grad();
    ++state.step;
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
      const double tps = dt > 0 ? static_cast<double>(window_tokens) / dt : 0.0;
      const double eta = elapsed / static_cast<double>(state.step - start_step) *
                         static_cast<double>(total - state.step);
      const double mean_loss = window_loss / static_cast<double>(window_steps);
      std::ostringstream line;
      line << "step " << state.step << "/" << total << " | loss " << std::fixed
           << std::setprecision(4) << mean_loss << " | lr " << std::scientific
           << std::setprecision(3) << lr << " | grad-norm " << std::fixed << std::setprecision(3)
           << last_norm << " | " << std::setprecision(0) << tps << " tok/s";
      if (device.is_cuda())
        line << " | MFU " << std::setprecision(1) << 100.0 * tps * flops_per_token(*model) / 989e12
             << "%";
      line << " | peak " << std::setprecision(1) << peak_memory_bytes(device) / (1 << 20)
           << " MiB | ETA " << format_duration(eta);
      std::cout << line.str() << std::endl;
      nlohmann::json rec = {{"step", state.step},
                            {"loss", mean_loss},
                            {"lr", lr},
                            {"grad_norm", last_norm},
                            {"tokens", state.tokens},
                            {"tokens_per_s", tps},
                            {"skipped_steps", state.skipped_steps},
                            {"epoch", state.loader.epoch}};
      if (val && c.val_every_steps > 0 && (state.step % c.val_every_steps == 0 || last))
        rec["val_loss"] = validate(*model, *val, device);
      metrics << rec.dump() << "\n" << std::flush;
      window_tokens = 0;
      window_loss = 0;
      window_steps = 0;
      t_window = now;
    }
    if ((c.checkpoint_every_steps > 0 && state.step % c.checkpoint_every_steps == 0) || last)
      save();
  }
  TrainSummary summary{state.step, last_loss, state.skipped_steps, c.run_dir, last_checkpoint};
  std::cout << "done: " << state.step << " steps, last loss " << last_loss << "; run directory "
            << c.run_dir << " (metrics.jsonl, checkpoints/latest)\n";
  return summary;
}

}  // namespace sprig

// `sprig bench memory`: what activation checkpointing (docs/semantics.md §10.15) buys and costs on
// one training step (forward, backward, AdamW) of an SFT model over one row of T tokens: for
// `none`, `every_2` and `layers`, the median step time and the peak memory above what the weights,
// masters and moments hold (the activations, the head's loss chunks and the gradients), each as a
// ratio to `none`, beside train/memory.h's estimate of the same part. The losses are printed too:
// checkpointing must not change them.
//
// Defaults: CPU, the 4-layer "tiny" Qwen3 at T = 4096 (targets: peak <= 0.35x and time <= 1.4x
// of none with `layers`); CUDA, a Qwen3-0.6B-shaped model in bf16 with fp32 masters at T = 8192.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "autograd/functions.h"
#include "data/batch.h"
#include "nn/qwen.h"
#include "tensor/cuda/kernels.h"
#include "tensor/random.h"
#include "tensor/storage.h"
#include "tools/bench/memory_check.h"
#include "tools/bench/models.h"
#include "tools/bench/reference.h"
#include "tools/commands.h"
#include "tools/options.h"
#include "train/memory.h"
#include "train/optimizer.h"
#include "train/progress.h"
#include "train/sft.h"

namespace sprig::tools {

namespace {

struct MemoryOptions {
  std::string device = "auto", model;
  int64_t tokens = 0;  // 0: the device's default
  int reps = 3;
};

size_t allocated(Device device) {
  return device.is_cuda() ? cuda::memory_allocated(device.index) : cpu_memory_allocated();
}

// One row of T random tokens, every position supervised.
data::Batch random_row(const QwenConfig& config, int64_t T, Generator& gen) {
  data::Corpus corpus;
  corpus.sources = {"bench"};
  data::Document doc;
  for (int64_t t = 0; t < T; ++t)
    doc.input_ids.push_back(static_cast<int32_t>(gen.next_int(0, config.vocab_size)));
  doc.labels.assign(doc.input_ids.begin() + 1, doc.input_ids.end());
  doc.labels.push_back(data::kIgnoreIndex);
  corpus.docs.push_back(std::move(doc));
  data::PackPlan plan;
  plan.rows.push_back({{0, T}});
  plan.seq_len = T;
  return data::collate(corpus, plan, {0}, 0);
}

void run_bench_memory(const MemoryOptions& o) {
  const Device device = resolve_device(o.device);
  const bool cuda = device.is_cuda();
  const std::string model_name = o.model.empty() ? (cuda ? "qwen3-0.6b" : "tiny") : o.model;
  const int64_t T = o.tokens != 0 ? o.tokens : (cuda ? 8192 : 4096);
  const DType compute = cuda ? DType::bf16 : DType::f32;
  const QwenConfig config = bench::model_config(model_name);
  const int64_t parameters = bench::parameter_count(config.parameter_parts());
  StepShapes shapes;
  shapes.layers = config;
  shapes.tokens = T;
  shapes.batch_tokens = T;
  shapes.gradients_persist = false;  // one process, one micro-batch a step
  bench::check_fits("bench memory", "--model " + model_name + " --tokens " + std::to_string(T),
                    estimate_step_memory(shapes, parameters, compute).total(), device);

  Generator gen(0);
  QwenForCausalLM model(config, gen);
  const std::map<std::string, Tensor> masters = model.state_dict();
  model.to(device, compute);
  AdamW optimizer(model.named_parameters(), {}, cuda ? masters : std::map<std::string, Tensor>{});
  const data::Batch batch = random_row(config, T, gen);
  // lr 0: the same work, the weights unchanged, so every setting sees the same model.
  const auto step = [&] {
    const MicroBatchLoss m = next_token_loss(model, batch, LossConfig{}, false, device);
    const Var mean = m.sum * (1.0 / m.weight);
    mean.backward();
    optimizer.step(0.0);
    model.zero_grad();
    return mean.value().item();
  };

  std::printf(
      "bench memory: %s (%.2fM parameters, %lld layers, %s) on %s; one row of %lld tokens; median "
      "of %d steps (forward, backward, AdamW)\n",
      model_name.c_str(), static_cast<double>(parameters) / 1e6,
      static_cast<long long>(config.num_hidden_layers), cuda ? "bf16, fp32 masters" : "f32",
      device.str().c_str(), static_cast<long long>(T), o.reps);
  std::printf("peak: the most held during a step above the weights, masters and moments\n");
  std::printf("%-10s %10s %8s %12s %8s %15s %12s\n", "checkpoint", "step (ms)", "time",
              "peak (MiB)", "peak", "estimate (MiB)", "loss");
  double base_seconds = 0, base_peak = 0;
  for (const auto& [name, every] :
       {std::pair<const char*, int64_t>{"none", 0}, {"every_2", 2}, {"layers", 1}}) {
    model.model.set_activation_checkpointing(every);
    const double loss = step();  // also allocates the moments
    reset_memory_peak(device);
    const size_t before = allocated(device);
    const double seconds = bench::median_seconds(device, 0, o.reps, [&] { step(); });
    const auto held = static_cast<double>(memory_peak(device) - before);
    shapes.checkpoint_every = every;
    const MemoryEstimate e = estimate_step_memory(shapes, parameters, compute);
    const double estimate = e.total() - e.parameters() - e.moments - e.batches;
    if (every == 0) base_seconds = seconds, base_peak = held;
    std::printf("%-10s %10.1f %7.2fx %12.1f %7.2fx %15.1f %12.6f\n", name, seconds * 1e3,
                seconds / base_seconds, held / (1 << 20), held / base_peak, estimate / (1 << 20),
                loss);
  }
  std::printf(
      "(estimate: train/memory.h's peak of the step less the weights, moments and batches; "
      "targets "
      "for the CPU default, layers: peak <= 0.35x, time <= 1.4x)\n");
}

}  // namespace

void add_bench_memory_command(CLI::App& bench) {
  auto opt = std::make_shared<MemoryOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "memory",
      "Activation checkpointing on an SFT step: peak memory and time of none, every_2 and layers");
  add_device_option(cmd, opt->device);
  cmd->add_option("--model", opt->model,
                  "tiny, wide, qwen3-0.6b or a config.json (default: tiny on CPU, qwen3-0.6b on "
                  "CUDA)");
  add_int_option(cmd, "--tokens", opt->tokens,
                 "T, tokens of the row (default: 4096 CPU, 8192 CUDA)")
      ->check(kPositive);
  add_int_option(cmd, "--reps", opt->reps, "timed steps per setting")
      ->check(kPositive)
      ->capture_default_str();
  cmd->callback([opt] { run_bench_memory(*opt); });
}

}  // namespace sprig::tools

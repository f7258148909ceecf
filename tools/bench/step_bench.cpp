// `sprig bench step`: one SFT training step (forward, backward, AdamW) on a shared-prefix rollout
// group of N completions of C tokens after a prompt of P tokens, in two layouts with the same
// supervised tokens: the prefix tree (the group folded into one row of P + N*C tokens, prefix-tree
// attention) and the naive layout (N rows of P + C tokens, causal attention). Prints the median
// step times, the speed-up against the ideal token ratio N*(P+C) / (P+N*C), and the peak memory
// of each layout.
//
// Defaults: CPU, a 5.25M-parameter Qwen3 ("tiny": the CPU yardstick of docs/architecture.md §9),
// N=8, P=256, C=64; CUDA, a Qwen3-0.6B-shaped model in bf16 with fp32 masters, N=8, P=2048, C=512.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "data/batch.h"
#include "data/prefix_tree.h"
#include "nn/qwen.h"
#include "tensor/cuda/kernels.h"
#include "tensor/random.h"
#include "tensor/storage.h"
#include "tools/bench/models.h"
#include "tools/bench/reference.h"
#include "tools/commands.h"
#include "train/batch_input.h"
#include "train/optimizer.h"

namespace sprig::tools {

namespace {

struct StepOptions {
  std::string device = "auto", model;
  int64_t completions = 8, prompt = 0, completion = 0;  // 0: the device's default
  int reps = 5;
};

// One layout of the group: the model input and the pre-shifted labels.
struct Layout {
  QwenInput input;
  Tensor labels;
  int64_t tokens = 0;  // positions the model runs over
};

Layout prefix_tree_layout(const data::RolloutGroup& group, const QwenConfig& config,
                          Device device) {
  data::Corpus corpus;
  corpus.folded = true;
  corpus.sources = {"bench"};
  corpus.docs.push_back(data::fold(group));
  const int64_t tokens = corpus.docs[0].size();
  const data::PackPlan plan = data::plan_rows(corpus, {data::Packing::fold, tokens});
  const data::Batch batch = data::collate(corpus, plan, {0}, 0);
  return {batch_input(batch, config, device), batch.labels.to(device), tokens};
}

// Row i is prompt ++ completion i; labels -100 on the prompt and on the completion's last token.
Layout naive_layout(const data::RolloutGroup& group, const QwenConfig& config, Device device) {
  const int64_t P = static_cast<int64_t>(group.prompt_ids.size());
  const int64_t N = static_cast<int64_t>(group.completions.size());
  const int64_t C = static_cast<int64_t>(group.completions[0].size());
  std::vector<int64_t> ids, labels;
  for (const std::vector<int32_t>& c : group.completions) {
    ids.insert(ids.end(), group.prompt_ids.begin(), group.prompt_ids.end());
    ids.insert(ids.end(), c.begin(), c.end());
    labels.insert(labels.end(), static_cast<size_t>(P), data::kIgnoreIndex);
    labels.insert(labels.end(), c.begin() + 1, c.end());
    labels.push_back(data::kIgnoreIndex);
  }
  const Tensor id_tensor = Tensor::from_vector(ids, {N, P + C}).to(device);
  return {causal_input(id_tensor, config), Tensor::from_vector(labels, {N, P + C}).to(device),
          N * (P + C)};
}

struct Measurement {
  double seconds = 0, loss = 0;
  size_t peak_bytes = 0;  // above what was allocated before the layout's first step
};

// Times the training step on `layout` (after one untimed step, whose loss it reports). The AdamW
// step runs with lr 0: the same work, weights unchanged, so both layouts see the same model and
// their losses must agree.
Measurement measure(QwenForCausalLM& model, AdamW& optimizer, const Layout& layout,
                    double inv_tokens, Device device, int reps) {
  const bool cuda = device.is_cuda();
  if (cuda) cuda::reset_memory_peak(device.index);
  const size_t before = cuda ? cuda::memory_allocated(device.index) : cpu_memory_allocated();
  const auto step = [&] {
    const Var loss =
        sum_all(model.token_losses(model.hidden(layout.input), layout.labels)) * inv_tokens;
    loss.backward();
    optimizer.step(0.0);
    model.zero_grad();
    return loss;
  };
  Measurement m;
  m.loss = step().value().item();
  m.seconds = bench::median_seconds(device, 0, reps, [&] { step(); });
  m.peak_bytes = (cuda ? cuda::memory_peak(device.index) : cpu_memory_peak()) - before;
  return m;
}

void run_bench_step(const StepOptions& o) {
  const Device device = resolve_device(o.device);
  const bool cuda = device.is_cuda();
  const std::string model_name = o.model.empty() ? (cuda ? "qwen3-0.6b" : "tiny") : o.model;
  const int64_t N = o.completions, P = o.prompt > 0 ? o.prompt : (cuda ? 2048 : 256),
                C = o.completion > 0 ? o.completion : (cuda ? 512 : 64);
  if (N < 1 || C < 2 || P < 1)
    throw std::invalid_argument(
        "[bench] need --completions >= 1, --completion >= 2, --prompt >= 1");

  const QwenConfig config = bench::model_config(model_name);
  Generator gen(0);
  QwenForCausalLM model(config, gen);
  const std::map<std::string, Tensor> masters = model.state_dict();
  model.to(device, cuda ? DType::bf16 : DType::f32);
  AdamW optimizer(model.named_parameters(), {}, cuda ? masters : std::map<std::string, Tensor>{});

  data::RolloutGroup group;
  const auto draw = [&](int64_t n) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t& id : ids) id = static_cast<int32_t>(gen.next_int(0, config.vocab_size));
    return ids;
  };
  group.prompt_ids = draw(P);
  for (int64_t i = 0; i < N; ++i) group.completions.push_back(draw(C));
  const Layout tree = prefix_tree_layout(group, config, device);
  const Layout naive = naive_layout(group, config, device);
  const double inv_tokens = 1.0 / static_cast<double>(N * (C - 1));

  std::printf(
      "bench step: %s (%.2fM parameters, %s) on %s; N=%lld completions, P=%lld, C=%lld; "
      "median of %d steps (forward, backward, AdamW)\n",
      model_name.c_str(), static_cast<double>(model.num_parameters()) / 1e6,
      cuda ? "bf16, fp32 masters" : "f32", device.str().c_str(), static_cast<long long>(N),
      static_cast<long long>(P), static_cast<long long>(C), o.reps);
  // The prefix tree runs first: CPU peak memory cannot be reset, and the naive layout's is larger.
  const Measurement t = measure(model, optimizer, tree, inv_tokens, device, o.reps);
  const Measurement n = measure(model, optimizer, naive, inv_tokens, device, o.reps);
  std::printf("%-12s %8s %11s %11s %10s %16s\n", "layout", "tokens", "step (ms)", "tokens/s",
              "loss", "peak mem (MiB)");
  for (const auto& [name, layout, m] :
       {std::tuple{"prefix tree", &tree, &t}, std::tuple{"naive", &naive, &n}})
    std::printf("%-12s %8lld %11.1f %11.0f %10.4f %16.1f\n", name,
                static_cast<long long>(layout->tokens), m->seconds * 1e3,
                static_cast<double>(layout->tokens) / m->seconds, m->loss,
                static_cast<double>(m->peak_bytes) / (1 << 20));
  const double ideal = static_cast<double>(naive.tokens) / static_cast<double>(tree.tokens);
  const double speedup = n.seconds / t.seconds;
  std::printf(
      "speed-up %.2fx, ideal token ratio %.2fx: %.2f of ideal; peak memory ratio %.2fx\n"
      "(targets: CPU >= 0.70 of ideal; GPU at N=8, P=2048, C=512 >= 2.3x with <= 0.75x memory)\n",
      speedup, ideal, speedup / ideal,
      static_cast<double>(t.peak_bytes) / static_cast<double>(n.peak_bytes));
  if (!cuda)
    std::printf(
        "(CPU peak memory: each layout's peak above what was held before it; the prefix "
        "tree runs first, as the CPU peak cannot be reset)\n");
}

}  // namespace

void add_bench_step_command(CLI::App& bench) {
  auto opt = std::make_shared<StepOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "step", "SFT step on a shared-prefix rollout group: prefix-tree layout vs naive layout");
  cmd->add_option("--device", opt->device, "cpu, cuda or auto (cuda when present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  cmd->add_option("--model", opt->model,
                  "tiny, qwen3-0.6b or a config.json (default: tiny on CPU, qwen3-0.6b on CUDA)");
  cmd->add_option("--completions", opt->completions, "N, completions per prompt")
      ->capture_default_str();
  cmd->add_option("--prompt", opt->prompt, "P, prompt tokens (default: 256 CPU, 2048 CUDA)");
  cmd->add_option("--completion", opt->completion,
                  "C, tokens per completion (default: 64 CPU, 512 CUDA)");
  cmd->add_option("--reps", opt->reps, "timed steps per layout")->capture_default_str();
  cmd->callback([opt] { run_bench_step(*opt); });
}

}  // namespace sprig::tools

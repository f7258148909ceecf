// `sprig bench step`: one training step (forward, backward, AdamW) on a shared-prefix rollout
// group of N completions of C tokens after a prompt of P tokens, in two layouts with the same
// scored tokens: the prefix tree (the group folded into one row of P + N*C tokens, prefix-tree
// attention) and the naive layout (N rows of P + C tokens, causal attention). The loss is SFT's
// cross-entropy or the policy-gradient loss (--loss pg, random advantages; --clip-eps for PPO's
// clipping), with or without each completion's first token (--supervise-first-token). Prints the
// median step times, the speed-up against the ideal token ratio N*(P+C) / (P+N*C) and the peak
// memory of each layout; then the same for scoring (`sprig score --logprobs`: one forward of the
// tree against N forwards, one per completion).
//
// Defaults: CPU, a 5.25M-parameter Qwen3 ("tiny": the CPU yardstick of docs/architecture.md §9),
// N=8, P=256, C=64; CUDA, a Qwen3-0.6B-shaped model in bf16 with fp32 masters, N=8, P=2048, C=512.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "autograd/functions.h"
#include "data/batch.h"
#include "data/prefix_tree.h"
#include "nn/qwen.h"
#include "tensor/cuda/kernels.h"
#include "tensor/random.h"
#include "tensor/storage.h"
#include "tools/bench/memory_check.h"
#include "tools/bench/models.h"
#include "tools/bench/reference.h"
#include "tools/commands.h"
#include "tools/options.h"
#include "train/batch_input.h"
#include "train/memory.h"
#include "train/optimizer.h"
#include "train/progress.h"
#include "train/sft.h"

namespace sprig::tools {

namespace {

struct StepOptions {
  std::string device = "auto", model, loss = "sft";
  int64_t completions = 8, prompt = 0, completion = 0;  // 0: the device's default
  bool supervise_first_token = false;
  double clip_eps = 0;
  int reps = 5;
};

// One layout of the group: its batches (the naive layout's rows one by one for scoring) and the
// positions the model runs over.
struct Layout {
  data::Batch batch;
  std::vector<data::Batch> rows;  // naive only: each completion alone
  int64_t tokens = 0;
};

data::Batch collate_all(const data::Corpus& corpus, const data::PackPlan& plan) {
  std::vector<int64_t> rows(plan.rows.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  return data::collate(corpus, plan, rows, 0);
}

Layout prefix_tree_layout(const data::RolloutGroup& group) {
  data::Corpus corpus;
  corpus.folded = true;
  corpus.sources = {"bench"};
  corpus.docs.push_back(data::fold(group));
  const int64_t tokens = corpus.docs[0].size();
  return {collate_all(corpus, data::plan_rows(corpus, {data::Packing::fold, tokens})), {}, tokens};
}

// Row i is prompt ++ completion i, labelled from the last prompt position (with `first_token`) or
// from the completion's first token on; the advantages and old log-probs follow its tokens.
Layout naive_layout(const data::RolloutGroup& group, bool first_token) {
  const size_t P = group.prompt_ids.size();
  data::Corpus corpus;
  corpus.sources = {"bench"};
  data::PackPlan plan;
  for (size_t j = 0; j < group.completions.size(); ++j) {
    const std::vector<int32_t>& c = group.completions[j];
    data::Document doc;
    doc.input_ids = group.prompt_ids;
    doc.input_ids.insert(doc.input_ids.end(), c.begin(), c.end());
    doc.labels.assign(doc.input_ids.begin() + 1, doc.input_ids.end());
    doc.labels.push_back(data::kIgnoreIndex);
    std::fill_n(doc.labels.begin(), first_token ? P - 1 : P, data::kIgnoreIndex);
    doc.advantages.assign(P, 0.0f);
    doc.advantages.insert(doc.advantages.end(), c.size(), group.advantages[j]);
    doc.old_logprobs.assign(P, 0.0f);
    doc.old_logprobs.insert(doc.old_logprobs.end(), group.old_logprobs[j].begin(),
                            group.old_logprobs[j].end());
    plan.rows.push_back({{static_cast<int64_t>(j), doc.size()}});
    plan.seq_len = doc.size();
    corpus.docs.push_back(std::move(doc));
  }
  Layout layout{collate_all(corpus, plan), {}, 0};
  for (size_t j = 0; j < plan.rows.size(); ++j)
    layout.rows.push_back(data::collate(corpus, plan, {static_cast<int64_t>(j)}, 0));
  layout.tokens = layout.batch.num_tokens();
  return layout;
}

// Multiply-adds of one forward over a layout: the layers' projections per token, attention per
// (query, key) pair it keeps, and the LM head per scored row (the same rows in both layouts).
// A training step costs about three times this (the backward computes two products per one).
double forward_macs(const QwenConfig& c, int64_t N, int64_t P, int64_t C, bool tree) {
  const auto H = static_cast<double>(c.hidden_size), D = static_cast<double>(c.head_dim);
  const auto q = static_cast<double>(c.num_attention_heads) * D,
             kv = static_cast<double>(c.num_key_value_heads) * D;
  const double per_token =
      H * q + 2 * H * kv + q * H + 3 * H * static_cast<double>(c.intermediate_size);
  // Keys each query attends: a causal prompt, then each completion token sees the prompt and the
  // completion so far; the naive layout repeats the prompt in every row.
  const auto p = static_cast<double>(P), cc = static_cast<double>(C), n = static_cast<double>(N);
  const double prompt_pairs = p * (p + 1) / 2, completion_pairs = cc * p + cc * (cc + 1) / 2;
  const double pairs = (tree ? prompt_pairs : n * prompt_pairs) + n * completion_pairs;
  const double tokens = tree ? p + n * cc : n * (p + cc);
  const auto layers = static_cast<double>(c.num_hidden_layers);
  return layers * (tokens * per_token + 2 * q * pairs) +
         n * cc * H * static_cast<double>(c.vocab_size);
}

struct Measurement {
  double seconds = 0, loss = 0, score_seconds = 0;
  size_t peak_bytes = 0;  // above what was allocated before the layout's first step
};

// Times the training step on `layout` (after one untimed step, whose loss it reports), then
// scoring: the forward and the scored tokens' log-probs, the naive layout one completion at a
// time. The AdamW step runs with lr 0: the same work, weights unchanged, so both layouts see the
// same model and their losses must agree.
Measurement measure(QwenForCausalLM& model, AdamW& optimizer, const Layout& layout,
                    const LossConfig& loss, bool first_token, Device device, int reps) {
  const bool cuda = device.is_cuda();
  reset_memory_peak(device);
  const size_t before = cuda ? cuda::memory_allocated(device.index) : cpu_memory_allocated();
  const auto step = [&] {
    const MicroBatchLoss m = next_token_loss(model, layout.batch, loss, first_token, device);
    const Var mean = m.sum * (1.0 / m.weight);
    mean.backward();
    optimizer.step(0.0);
    model.zero_grad();
    return mean;
  };
  Measurement m;
  m.loss = step().value().item();
  m.seconds = bench::median_seconds(device, 0, reps, [&] { step(); });
  m.peak_bytes = static_cast<size_t>(memory_peak(device)) - before;
  const auto score = [&](const data::Batch& batch) {
    const data::ScoredTokens s = data::scored_tokens(batch, first_token);
    model.token_losses(model.hidden(batch_input(batch, model.config(), device)), s.rows,
                       Tensor::from_vector(s.targets, {s.size()}, device));
  };
  NoGradGuard no_grad;
  m.score_seconds = bench::median_seconds(device, 1, reps, [&] {
    if (layout.rows.empty()) score(layout.batch);
    for (const data::Batch& row : layout.rows) score(row);
  });
  return m;
}

void run_bench_step(const StepOptions& o) {
  const Device device = resolve_device(o.device);
  const bool cuda = device.is_cuda();
  const std::string model_name = o.model.empty() ? (cuda ? "qwen3-0.6b" : "tiny") : o.model;
  // --prompt and --completion left out (0) take the device's defaults.
  const int64_t N = o.completions, P = o.prompt != 0 ? o.prompt : (cuda ? 2048 : 256),
                C = o.completion != 0 ? o.completion : (cuda ? 512 : 64);
  LossConfig loss;
  loss.type = o.loss == "pg" ? LossType::pg : LossType::sft;
  loss.clip_eps = o.clip_eps;
  if (loss.type == LossType::sft && o.clip_eps > 0)
    throw CLI::ValidationError("--clip-eps applies to --loss pg, not --loss sft");

  const QwenConfig config = bench::model_config(model_name);
  // The step's memory at the naive layout's N x (P + C) tokens, the larger layout; its batches
  // stand for both layouts' and the naive rows'.
  StepShapes shapes;
  shapes.layers = config;
  shapes.tokens = bench::shape_count(static_cast<double>(N) *
                                     (static_cast<double>(P) + static_cast<double>(C)));
  shapes.batch_tokens = shapes.tokens;
  bench::check_fits("bench step",
                    "--model " + model_name + " --completions " + std::to_string(N) + " --prompt " +
                        std::to_string(P) + " --completion " + std::to_string(C),
                    estimate_step_memory(shapes, bench::parameter_count(config.parameter_parts()),
                                         cuda ? DType::bf16 : DType::f32)
                        .total(),
                    device);
  Generator gen(0);
  QwenForCausalLM model(config, gen);
  const std::map<std::string, Tensor> masters = model.state_dict();
  model.to(device, cuda ? DType::bf16 : DType::f32);
  AdamW optimizer(model.named_parameters(), {}, cuda ? masters : std::map<std::string, Tensor>{});

  // Random tokens and advantages; old log-probs near a fresh model's -log V, so ratios fall on
  // both sides of a clip.
  data::RolloutGroup group;
  const auto draw = [&](int64_t n) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t& id : ids) id = static_cast<int32_t>(gen.next_int(0, config.vocab_size));
    return ids;
  };
  group.prompt_ids = draw(P);
  const float uniform = -static_cast<float>(std::log(static_cast<double>(config.vocab_size)));
  for (int64_t i = 0; i < N; ++i) {
    group.completions.push_back(draw(C));
    group.advantages.push_back(static_cast<float>(gen.next_normal()));
    group.old_logprobs.emplace_back();
    for (int64_t t = 0; t < C; ++t)
      group.old_logprobs.back().push_back(uniform + 0.2f * static_cast<float>(gen.next_normal()));
  }
  const Layout tree = prefix_tree_layout(group);
  const Layout naive = naive_layout(group, o.supervise_first_token);

  std::printf(
      "bench step: %s (%.2fM parameters, %s) on %s; N=%lld completions, P=%lld, C=%lld; loss "
      "%s%s%s; "
      "median of %d steps (forward, backward, AdamW)\n",
      model_name.c_str(), static_cast<double>(model.num_parameters()) / 1e6,
      cuda ? "bf16, fp32 masters" : "f32", device.str().c_str(), static_cast<long long>(N),
      static_cast<long long>(P), static_cast<long long>(C), o.loss.c_str(),
      o.clip_eps > 0 ? (" clip " + std::to_string(o.clip_eps)).c_str() : "",
      o.supervise_first_token ? ", first tokens supervised" : "", o.reps);
  const Measurement t =
      measure(model, optimizer, tree, loss, o.supervise_first_token, device, o.reps);
  const Measurement n = measure(model, optimizer, naive, loss, false, device, o.reps);
  std::printf("%-12s %8s %11s %11s %10s %16s %11s\n", "layout", "tokens", "step (ms)", "tokens/s",
              "loss", "peak mem (MiB)", "score (ms)");
  for (const auto& [name, layout, m] :
       {std::tuple{"prefix tree", &tree, &t}, std::tuple{"naive", &naive, &n}})
    std::printf("%-12s %8lld %11.1f %11.0f %10.4f %16.1f %11.1f\n", name,
                static_cast<long long>(layout->tokens), m->seconds * 1e3,
                static_cast<double>(layout->tokens) / m->seconds, m->loss,
                static_cast<double>(m->peak_bytes) / (1 << 20), m->score_seconds * 1e3);
  const double ideal = static_cast<double>(naive.tokens) / static_cast<double>(tree.tokens);
  const double speedup = n.seconds / t.seconds;
  const double work_ratio =
      forward_macs(config, N, P, C, false) / forward_macs(config, N, P, C, true);
  std::printf(
      "step speed-up %.2fx, ideal token ratio %.2fx: %.2f of ideal; peak memory ratio %.2fx\n"
      "work ratio %.2fx (multiply-adds: the LM head's scored rows are the same in both layouts): "
      "%.2f of it\n"
      "score speed-up (one folded forward vs one forward per completion) %.2fx\n"
      "(targets: CPU >= 0.70 of ideal and score >= 2x; GPU at N=8, P=2048, C=512 >= 2.3x with "
      "<= 0.75x memory)\n",
      speedup, ideal, speedup / ideal,
      static_cast<double>(t.peak_bytes) / static_cast<double>(n.peak_bytes), work_ratio,
      speedup / work_ratio, n.score_seconds / t.score_seconds);
}

}  // namespace

void add_bench_step_command(CLI::App& bench) {
  auto opt = std::make_shared<StepOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "step",
      "Training step and scoring on a shared-prefix rollout group: prefix-tree layout vs naive");
  add_device_option(cmd, opt->device);
  cmd->add_option("--model", opt->model,
                  "tiny, qwen3-0.6b or a config.json (default: tiny on CPU, qwen3-0.6b on CUDA)");
  add_int_option(cmd, "--completions", opt->completions, "N, completions per prompt")
      ->check(kPositive)
      ->capture_default_str();
  add_int_option(cmd, "--prompt", opt->prompt, "P, prompt tokens (default: 256 CPU, 2048 CUDA)")
      ->check(kPositive);
  add_int_option(cmd, "--completion", opt->completion,
                 "C, tokens per completion (default: 64 CPU, 512 CUDA)")
      ->check(number_check([](double v) { return v >= 2; }, "at least 2", "AT-LEAST-2"));
  cmd->add_option("--loss", opt->loss,
                  "sft (cross-entropy) or pg (policy gradient, random advantages)")
      ->check(CLI::IsMember({"sft", "pg"}))
      ->capture_default_str();
  cmd->add_option("--clip-eps", opt->clip_eps, "--loss pg: PPO's ratio clipping (0: none)")
      ->check(
          number_check([](double v) { return v >= 0 && v < 1; }, "a number in [0, 1)", "[0, 1)"));
  cmd->add_flag("--supervise-first-token", opt->supervise_first_token,
                "Also train each completion's first token (from the last prompt position)");
  add_int_option(cmd, "--reps", opt->reps, "timed steps per layout")
      ->check(kPositive)
      ->capture_default_str();
  cmd->callback([opt] { run_bench_step(*opt); });
}

}  // namespace sprig::tools

// The hidden helpers of the scripts that time a training step against PyTorch on the same files:
//   `sprig bench step-qwen` (tools/bench/qwen_step_vs_torch.py): one training step of a Qwen model
//   on next-token cross-entropy (forward, backward, AdamW update), and the norm of the weights'
//   total change over all steps, which PyTorch's side computes too;
//   `sprig bench draft-step` (tools/bench/draft_step_vs_torch.py): one DFlash draft step (target
//   capture, draft forward and backward) on given rows and anchors.
// Each prints the loss (so both sides can be seen to compute the same thing), the median and
// minimum wall times over the repetitions, and the median process CPU time of a step (all
// threads; less disturbed than wall time on a shared machine).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "nn/checkpoint.h"
#include "speculative/dflash.h"
#include "tensor/ops.h"
#include "tools/bench/reference.h"
#include "tools/commands.h"
#include "tools/options.h"
#include "train/optimizer.h"

namespace sprig::tools {

namespace {

struct StepOptions {
  std::string model, input;
  int64_t batch = 4, seq = 256, reps = 5;
  double lr = 1e-3, weight_decay = 0.01;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

// Wall and CPU seconds of each timed repetition of a step (after one warm-up run).
struct StepTimes {
  std::vector<double> wall, cpu;

  void print(int64_t reps) const {
    std::cout << "step " << bench::median(wall) << " s median, "
              << *std::min_element(wall.begin(), wall.end()) << " s min over " << reps << " reps\n"
              << "cpu " << bench::median(cpu) << " s per step (median, all threads)\n";
  }
};

// `reset` runs before each step, untimed (gradients cleared, as PyTorch's side does).
StepTimes time_steps(int64_t reps, const std::function<void()>& reset,
                     const std::function<void()>& step) {
  StepTimes t;
  for (int64_t r = -1; r < reps; ++r) {  // r = -1: warm-up (allocations, page faults)
    reset();
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = cpu_seconds();
    step();
    if (r < 0) continue;
    t.wall.push_back(seconds_since(start));
    t.cpu.push_back(cpu_seconds() - cpu_start);
  }
  return t;
}

// (B, T) i64 token ids: the `input_ids` tensor of --input, else seeded uniform draws.
Tensor step_inputs(const StepOptions& o, int64_t vocab) {
  if (!o.input.empty()) {
    const Tensor ids = SafetensorsFile(o.input).load("input_ids");
    if (ids.dim() != 2 || ids.dtype() != DType::i64)
      throw std::runtime_error(o.input + ": input_ids must be a (B, T) I64 tensor, got " +
                               shape_str(ids.shape()));
    return ids;
  }
  Generator gen(0);
  return randint({o.batch, o.seq}, 0, vocab, DType::i64, Device::cpu(), gen);
}

void run_step_bench(const StepOptions& o) {
  auto model = load_qwen(o.model);
  const Tensor ids = step_inputs(o, model->config().vocab_size);
  const QwenInput in = causal_input(ids, model->config());
  const Tensor labels = shift_labels(ids);
  const double supervised = static_cast<double>(ids.size(0) * (ids.size(1) - 1));

  AdamW optimizer(model->named_parameters(), {.lr = o.lr, .weight_decay = o.weight_decay});
  std::vector<Tensor> initial;
  for (const Var& p : model->parameters()) initial.push_back(p.value().clone());

  std::vector<double> forward_s, backward_s;
  double loss_value = 0;
  const StepTimes t = time_steps(
      o.reps, [&] { model->zero_grad(); },
      [&] {
        const auto start = std::chrono::steady_clock::now();
        const Var loss = sum_all(model->token_losses(model->hidden(in), labels)) / supervised;
        loss_value = loss.value().item();
        forward_s.push_back(seconds_since(start));
        loss.backward();
        backward_s.push_back(seconds_since(start) - forward_s.back());
        optimizer.step(o.lr);
      });
  forward_s.erase(forward_s.begin());  // the warm-up's
  backward_s.erase(backward_s.begin());
  std::vector<double> adamw_s;
  for (size_t i = 0; i < forward_s.size(); ++i)
    adamw_s.push_back(t.wall[i] - forward_s[i] - backward_s[i]);
  // The norm of (now - initial) over every weight: what all reps + 1 updates moved.
  std::vector<Tensor> moved;
  const std::vector<Var> params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) moved.push_back(sub(params[i].value(), initial[i]));
  std::cout << "model " << o.model << ": " << model->num_parameters() << " parameters, batch "
            << ids.size(0) << " x " << ids.size(1) << "\n"
            << "loss " << loss_value << "\n"
            << "update_norm " << std::setprecision(9) << global_norm(moved) << std::setprecision(6)
            << "\n"
            << "forward " << bench::median(forward_s) << " s, backward "
            << bench::median(backward_s) << " s, adamw " << bench::median(adamw_s)
            << " s (medians)\n";
  t.print(o.reps);
}

struct DraftStepOptions {
  std::string target, draft, input;
  double gamma = 7.0;
  int64_t reps = 5;
};

void run_draft_step(const DraftStepOptions& o) {
  using namespace speculative;
  const FrozenTarget target(load_qwen(o.target), Device::cpu(), DType::f32);
  const std::unique_ptr<DFlashDraft> draft = load_draft(o.draft);
  check_draft_fits(draft->config(), target.config(), "--draft " + o.draft);
  const SafetensorsFile in(o.input);
  DraftRows rows;
  rows.input_ids = in.load("input_ids");
  rows.loss_mask = in.load("loss_mask");
  const Anchors anchors{in.load("anchors"), in.load("keep").to(DType::boolean)};
  const ObjectiveOptions objective{.type = DraftLossType::dflash, .gamma = o.gamma};
  double loss_value = 0;
  const StepTimes t = time_steps(
      o.reps, [&] { draft->zero_grad(); },
      [&] {
        const DraftLoss l = dflash_loss(target, *draft, rows, anchors, objective);
        loss_value = l.value();
        (l.sum * (1.0 / (l.metrics.loss_weight + 1e-6))).backward();
      });
  std::cout << "draft " << o.draft << ": " << draft->num_parameters() << " parameters, "
            << rows.rows() << " x " << rows.seq_len() << " tokens, " << anchors.blocks()
            << " blocks of " << draft->config().block_size << " per row\n"
            << "loss " << loss_value << "\n";
  t.print(o.reps);
}

}  // namespace

void add_bench_torch_step_commands(CLI::App& bench) {
  auto o = std::make_shared<StepOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "step-qwen", "Training step time of a Qwen checkpoint (see qwen_step_vs_torch.py)");
  cmd->group("");  // hidden: a helper of tools/bench/qwen_step_vs_torch.py
  cmd->add_option("--model", o->model, "HF directory or sprig checkpoint")->required();
  cmd->add_option("--input", o->input, "safetensors file holding input_ids (B, T) I64");
  add_int_option(cmd, "--batch", o->batch, "Rows of random ids when there is no --input")
      ->check(kPositive);
  add_int_option(cmd, "--seq", o->seq, "Tokens per row of random ids when there is no --input")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  add_int_option(cmd, "--reps", o->reps, "Timed repetitions after one warm-up")->check(kPositive);
  cmd->add_option("--lr", o->lr, "AdamW learning rate")->check(kNonNegative);
  cmd->add_option("--weight-decay", o->weight_decay, "AdamW weight decay")->check(kNonNegative);
  cmd->callback([o] { run_step_bench(*o); });

  auto d = std::make_shared<DraftStepOptions>();
  CLI::App* draft = bench.add_subcommand(
      "draft-step", "DFlash draft step time on given rows (see draft_step_vs_torch.py)");
  draft->group("");  // hidden: a helper of tools/bench/draft_step_vs_torch.py
  draft->add_option("--target", d->target, "The frozen target: HF directory or checkpoint")
      ->required();
  draft->add_option("--draft", d->draft, "Draft directory (serving layout)")->required();
  draft
      ->add_option("--input", d->input,
                   "safetensors file: input_ids, loss_mask (B, S) I64, anchors, keep (B, N)")
      ->required();
  draft->add_option("--gamma", d->gamma, "Decay of the slot weights")->capture_default_str();
  add_int_option(draft, "--reps", d->reps, "Timed repetitions after one warm-up")->check(kPositive);
  draft->callback([d] { run_draft_step(*d); });
}

}  // namespace sprig::tools

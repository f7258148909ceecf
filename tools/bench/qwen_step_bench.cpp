// `sprig bench step-qwen` (hidden; driven by tools/bench/qwen_step_vs_torch.py): the wall time of
// one forward + backward of a Qwen model on next-token cross-entropy, for the same checkpoint and
// tokens that the script gives PyTorch. Prints the loss (so both sides can be seen to compute the
// same thing) and the median, minimum and per-phase wall times over the repetitions, and the median
// process CPU time of a step (all threads; less disturbed than wall time on a shared machine).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "nn/checkpoint.h"
#include "tools/commands.h"

namespace sprig::tools {

namespace {

struct StepOptions {
  std::string model, input;
  int64_t batch = 4, seq = 256, reps = 5;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
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

  std::vector<double> forward_s, backward_s, step_s, cpu_s;
  double loss_value = 0;
  for (int64_t r = -1; r < o.reps; ++r) {  // r = -1: warm-up (allocations, page faults)
    model->zero_grad();
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = cpu_seconds();
    const Var loss = sum_all(model->token_losses(model->hidden(in), labels)) / supervised;
    loss_value = loss.value().item();
    const double forward = seconds_since(start);
    loss.backward();
    const double step = seconds_since(start), cpu = cpu_seconds() - cpu_start;
    if (r < 0) continue;
    forward_s.push_back(forward);
    backward_s.push_back(step - forward);
    step_s.push_back(step);
    cpu_s.push_back(cpu);
  }
  std::cout << "model " << o.model << ": " << model->num_parameters() << " parameters, batch "
            << ids.size(0) << " x " << ids.size(1) << "\n"
            << "loss " << loss_value << "\n"
            << "forward " << median(forward_s) << " s, backward " << median(backward_s)
            << " s (medians)\n"
            << "step " << median(step_s) << " s median, "
            << *std::min_element(step_s.begin(), step_s.end()) << " s min over " << o.reps
            << " reps\n"
            << "cpu " << median(cpu_s) << " s per step (median, all threads)\n";
}

}  // namespace

void add_bench_qwen_step_command(CLI::App& bench) {
  auto o = std::make_shared<StepOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "step-qwen", "Forward + backward time of a Qwen checkpoint (see qwen_step_vs_torch.py)");
  cmd->group("");  // hidden: a helper of tools/bench/qwen_step_vs_torch.py
  cmd->add_option("--model", o->model, "HF directory or sprig checkpoint")->required();
  cmd->add_option("--input", o->input, "safetensors file holding input_ids (B, T) I64");
  cmd->add_option("--batch", o->batch, "Rows of random ids when there is no --input")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seq", o->seq, "Tokens per row of random ids when there is no --input")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  cmd->add_option("--reps", o->reps, "Timed repetitions after one warm-up")
      ->check(CLI::PositiveNumber);
  cmd->callback([o] { run_step_bench(*o); });
}

}  // namespace sprig::tools

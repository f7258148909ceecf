// `sprig spec-eval`: real greedy speculative decoding with a trained draft (speculative/
// spec_decode.h) on JSONL prompts {"prompt_ids": [...]}. Per prompt it checks the output against
// the target's own greedy decoding (lossless), measures the true acceptance length τ (tokens
// committed per target forward, bonus-inclusive), tokens per second with and without the draft,
// and the draft's teacher-forced accept_len on the same text (as `sprig eval` computes it).
// stdout: one JSON line per prompt, then {"aggregate": {...}}; the human table goes to stderr.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "nn/checkpoint.h"
#include "nn/generate.h"
#include "speculative/dflash.h"
#include "speculative/domino.h"
#include "speculative/jetspec.h"
#include "speculative/spec_decode.h"
#include "tools/commands.h"
#include "tools/jsonl.h"
#include "tools/options.h"

namespace sprig::tools {

namespace {

using json = nlohmann::json;
using namespace speculative;
using Clock = std::chrono::steady_clock;

struct SpecEvalOptions {
  std::string target, draft, input, device = "cpu", dtype = "f32";
  int64_t max_new_tokens = 128, block_size = 0, stop_id = -1, num_anchors = 512;
  uint64_t seed = 0;
};

// The draft's teacher-forced acceptance on prompt ++ output with the output supervised: blocks at
// `at`, or at anchors sampled as `sprig eval` samples them when `at` is empty; nullopt when there
// is no valid anchor.
std::optional<DraftMetrics> teacher_forced(const FrozenTarget& target, const DFlashDraft& draft,
                                           const std::vector<int64_t>& prompt,
                                           const std::vector<int64_t>& output, int64_t num_anchors,
                                           Generator& gen, const std::vector<int64_t>& at = {}) {
  std::vector<int64_t> ids = prompt, mask(prompt.size(), 0);
  ids.insert(ids.end(), output.begin(), output.end());
  mask.resize(ids.size(), 1);
  DraftRows rows;
  const auto S = static_cast<int64_t>(ids.size());
  rows.input_ids = Tensor::from_vector(ids, {1, S});
  rows.loss_mask = Tensor::from_vector(mask, {1, S});
  try {
    const auto n = static_cast<int64_t>(at.size());
    const Anchors anchors =
        at.empty() ? sample_anchors(rows, draft.config().block_size, num_anchors, gen)
                   : Anchors{Tensor::from_vector(at, {1, n}), Tensor::ones({1, n}, DType::boolean)};
    switch (draft.config().kind()) {
      case DraftKind::domino: return domino_loss(target, draft, rows, anchors, {}).metrics;
      case DraftKind::jetspec: return jetspec_loss(target, draft, rows, anchors, {}).metrics;
      case DraftKind::dflash: return dflash_loss(target, draft, rows, anchors, {}).metrics;
    }
  } catch (const NoValidAnchors&) {
  }
  return std::nullopt;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Sums over prompts for the aggregate line.
struct Pooled {
  int64_t prompts = 0, lossless = 0, tokens = 0, steps = 0, committed = 0;
  int64_t whole_steps = 0, whole_committed = 0;  // whole_block_steps
  double tau_sum = 0, spec_seconds = 0, greedy_seconds = 0;
  double draft_seconds = 0, verify_seconds = 0, decode_step_seconds = 0, decode_steps = 0;
  DraftMetrics forced, forced_here;
  std::vector<int64_t> verified_by_slot, accepted_by_slot;  // slot i: draft i + 1
  std::vector<int64_t> histogram;                           // steps committing i + 1 tokens

  void add_steps(const SpecDecodeResult& r) {
    for (size_t i = 0; i < r.accepted_per_step.size(); ++i) {
      const int64_t drafted = r.drafted_per_step[i], committed = r.accepted_per_step[i];
      if (static_cast<int64_t>(verified_by_slot.size()) < drafted) {
        verified_by_slot.resize(static_cast<size_t>(drafted), 0);
        accepted_by_slot.resize(static_cast<size_t>(drafted), 0);
      }
      for (int64_t k = 0; k < drafted; ++k) {
        ++verified_by_slot[static_cast<size_t>(k)];
        accepted_by_slot[static_cast<size_t>(k)] += k < committed - 1;
      }
      if (static_cast<int64_t>(histogram.size()) < committed)
        histogram.resize(static_cast<size_t>(committed), 0);
      ++histogram[static_cast<size_t>(committed - 1)];
      ++steps;
      this->committed += committed;
    }
  }
};

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

void run_spec_eval(const SpecEvalOptions& o) {
  if (!std::ifstream(o.input)) throw std::runtime_error(o.input + ": cannot open the input file");
  const Device device = resolve_device(o.device);
  const FrozenTarget target(load_qwen(o.target), device, dtype_from_name(o.dtype));
  const QwenForCausalLM& model = target.model();
  std::unique_ptr<DFlashDraft> draft = load_draft(o.draft);
  check_draft_fits(draft->config(), target.config(), "--draft " + o.draft);
  draft->to(device, dtype_from_name(o.dtype));
  draft->train(false);
  const DraftConfig& dc = draft->config();
  const int64_t vocab = target.config().vocab_size;
  const int64_t bs = o.block_size ? o.block_size : dc.block_size;
  std::fprintf(stderr,
               "spec-eval: %s draft, block %lld (%lld drafts per step), up to %lld new tokens per "
               "prompt, %s\n",
               draft_kind_name(dc.kind()), static_cast<long long>(bs),
               static_cast<long long>(drafts_per_block(dc, bs)),
               static_cast<long long>(o.max_new_tokens), device.str().c_str());
  std::fprintf(stderr, "%6s %6s %6s %8s %8s %10s %10s %8s %8s\n", "prompt", "tokens", "steps",
               "tau", "forced", "tok/s", "greedy/s", "speedup", "lossless");

  Generator gen(o.seed);
  Pooled pooled;
  const int64_t records = for_each_record(o.input, [&](const json& rec, const std::string& where) {
    if (!rec.contains("prompt_ids") || !rec["prompt_ids"].is_array() || rec["prompt_ids"].empty())
      throw std::runtime_error(where + ": a record needs \"prompt_ids\", a non-empty list of ids");
    std::vector<int64_t> prompt;
    for (const json& v : rec["prompt_ids"]) {
      if (!v.is_number_integer())
        throw std::runtime_error(where + ": \"prompt_ids\" holds a non-integer " + v.dump());
      const int64_t id = v.get<int64_t>();
      if (id < 0 || id >= vocab)
        throw std::runtime_error(where + ": prompt id " + std::to_string(id) +
                                 " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
      prompt.push_back(id);
    }
    // The target alone: its greedy decoding, timed, and its per-token decoding step.
    auto start = Clock::now();
    Clock::time_point first_token;
    const std::vector<int64_t> greedy =
        generate_greedy(model, prompt, o.max_new_tokens, o.stop_id, [&](int64_t) {
          if (first_token == Clock::time_point()) first_token = Clock::now();
        });
    const double greedy_seconds = seconds_since(start);
    const double decode_seconds = std::chrono::duration<double>(Clock::now() - first_token).count();

    start = Clock::now();
    const SpecDecodeResult r =
        speculative_generate(model, *draft, prompt, {o.max_new_tokens, o.block_size, o.stop_id});
    const double spec_seconds = seconds_since(start);
    const std::optional<DraftMetrics> tf =
        teacher_forced(target, *draft, prompt, r.output_ids, o.num_anchors, gen);
    // At the decoding's own anchors (whole blocks of the draft's size only) teacher forcing
    // accepts what decoding did: a gap to `tf` comes from where the anchors fall.
    std::vector<int64_t> at;
    for (const WholeBlockStep& step :
         whole_block_steps(r, static_cast<int64_t>(prompt.size()), dc, dc.block_size)) {
      at.push_back(step.anchor);
      if (bs != dc.block_size) continue;
      ++pooled.whole_steps;
      pooled.whole_committed += step.committed;
    }
    const std::optional<DraftMetrics> tf_here =
        bs == dc.block_size && !at.empty()
            ? teacher_forced(target, *draft, prompt, r.output_ids, o.num_anchors, gen, at)
            : std::nullopt;

    const bool lossless = r.output_ids == greedy;
    const auto tokens = static_cast<double>(r.output_ids.size());
    const double spec_rate = ratio(tokens, spec_seconds);
    const double greedy_rate = ratio(static_cast<double>(greedy.size()), greedy_seconds);
    json line = {{"prompt", pooled.prompts},
                 {"output_ids", r.output_ids},
                 {"tau", r.tau()},
                 {"target_forwards", r.target_forwards()},
                 {"accepted_per_step", r.accepted_per_step},
                 {"lossless", lossless},
                 {"teacher_forced_accept_len", tf ? json(tf->accept_len()) : json(nullptr)},
                 {"teacher_forced_at_decoding_anchors",
                  tf_here ? json(tf_here->accept_len()) : json(nullptr)},
                 {"tokens_per_second", spec_rate},
                 {"greedy_tokens_per_second", greedy_rate},
                 {"speedup", ratio(spec_rate, greedy_rate)}};
    std::cout << line.dump() << "\n" << std::flush;
    std::fprintf(stderr, "%6lld %6zu %6lld %8.3f %8s %10.1f %10.1f %7.2fx %8s\n",
                 static_cast<long long>(pooled.prompts), r.output_ids.size(),
                 static_cast<long long>(r.target_forwards()), r.tau(),
                 tf ? std::to_string(tf->accept_len()).substr(0, 5).c_str() : "-", spec_rate,
                 greedy_rate, ratio(spec_rate, greedy_rate), lossless ? "yes" : "NO");

    ++pooled.prompts;
    pooled.lossless += lossless;
    pooled.tokens += static_cast<int64_t>(r.output_ids.size());
    pooled.tau_sum += r.tau();
    pooled.spec_seconds += spec_seconds;
    pooled.greedy_seconds += greedy_seconds;
    pooled.draft_seconds += r.draft_seconds;
    pooled.verify_seconds += r.verify_seconds;
    pooled.decode_step_seconds += decode_seconds;
    pooled.decode_steps += static_cast<double>(greedy.size()) - 1;
    if (tf) pooled.forced.add(*tf);
    if (tf_here) pooled.forced_here.add(*tf_here);
    pooled.add_steps(r);
  });
  if (records == 0) throw std::runtime_error(o.input + ": no records");

  const double steps = static_cast<double>(pooled.steps);
  const double decode_step = ratio(pooled.decode_step_seconds, pooled.decode_steps);
  std::vector<double> by_slot;
  for (size_t k = 0; k < pooled.verified_by_slot.size(); ++k)
    by_slot.push_back(ratio(static_cast<double>(pooled.accepted_by_slot[k]),
                            static_cast<double>(pooled.verified_by_slot[k])));
  const double spec_rate = ratio(static_cast<double>(pooled.tokens), pooled.spec_seconds);
  const double greedy_rate = ratio(static_cast<double>(pooled.tokens), pooled.greedy_seconds);
  const json aggregate = {
      {"prompts", pooled.prompts},
      {"lossless_prompts", pooled.lossless},
      {"new_tokens", pooled.tokens},
      {"target_forwards", pooled.steps},
      {"tau", ratio(static_cast<double>(pooled.committed), steps)},  // pooled over steps
      {"tau_per_prompt_mean", ratio(pooled.tau_sum, static_cast<double>(pooled.prompts))},
      {"tau_whole_blocks",
       ratio(static_cast<double>(pooled.whole_committed), static_cast<double>(pooled.whole_steps))},
      {"teacher_forced_accept_len",
       pooled.forced.valid_blocks > 0 ? json(pooled.forced.accept_len()) : json(nullptr)},
      {"teacher_forced_at_decoding_anchors",
       pooled.forced_here.valid_blocks > 0 ? json(pooled.forced_here.accept_len()) : json(nullptr)},
      {"acceptance_by_slot", by_slot},
      {"committed_per_step_histogram", pooled.histogram},
      {"tokens_per_second", spec_rate},
      {"greedy_tokens_per_second", greedy_rate},
      {"speedup", ratio(spec_rate, greedy_rate)},
      {"verify_step_vs_decode_step", ratio(ratio(pooled.verify_seconds, steps), decode_step)},
      {"draft_step_vs_decode_step", ratio(ratio(pooled.draft_seconds, steps), decode_step)}};
  std::cout << json{{"aggregate", aggregate}}.dump() << "\n";

  std::fprintf(stderr, "pooled: tau %.3f over %lld target forwards (per-prompt mean %.3f)",
               aggregate["tau"].get<double>(), static_cast<long long>(pooled.steps),
               aggregate["tau_per_prompt_mean"].get<double>());
  if (pooled.forced.valid_blocks > 0)
    std::fprintf(stderr, ", teacher-forced accept_len %.3f", pooled.forced.accept_len());
  if (pooled.forced_here.valid_blocks > 0)
    std::fprintf(stderr,
                 "\n  at the decoding's own anchors: teacher-forced %.3f, decoding %.3f over the "
                 "same %lld whole-block steps",
                 pooled.forced_here.accept_len(), aggregate["tau_whole_blocks"].get<double>(),
                 static_cast<long long>(pooled.whole_steps));
  std::fprintf(stderr, "\nacceptance by draft slot:");
  for (double a : by_slot) std::fprintf(stderr, " %.2f", a);
  std::fprintf(stderr,
               "\n%.1f tokens/s with the draft, %.1f without: speed-up %.2fx; a verify step costs "
               "%.2fx a decoding step of the target, a draft step %.2fx\n",
               spec_rate, greedy_rate, ratio(spec_rate, greedy_rate),
               aggregate["verify_step_vs_decode_step"].get<double>(),
               aggregate["draft_step_vs_decode_step"].get<double>());
  if (pooled.lossless != pooled.prompts)
    std::fprintf(stderr,
                 "warning: %lld of %lld outputs differ from the target's greedy decoding (argmax "
                 "ties broken differently by the block and the one-token kernels)\n",
                 static_cast<long long>(pooled.prompts - pooled.lossless),
                 static_cast<long long>(pooled.prompts));
}

}  // namespace

void add_spec_eval_command(CLI::App& app) {
  const auto o = std::make_shared<SpecEvalOptions>();
  CLI::App* cmd = app.add_subcommand(
      "spec-eval",
      "Speculative decoding with a trained draft (DFlash, Domino or JetSpec) on prompts: lossless "
      "check against greedy decoding, true acceptance length, speed-up, teacher-forced "
      "accept_len on the same text");
  cmd->add_option("--target", o->target, "The target: HF directory or sprig checkpoint")
      ->required();
  cmd->add_option("--draft", o->draft, "Draft directory (serving layout) or draft checkpoint")
      ->required();
  cmd->add_option("--input", o->input, "JSONL, one prompt per line: {\"prompt_ids\": [...]}")
      ->required();
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "New tokens per prompt at most")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--block-size", o->block_size,
                  "Slots per draft block, from 2 to the draft's block size (0: the draft's)")
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_option("--stop-id", o->stop_id, "Stop a prompt after this id (a vocabulary id)")
      ->check(kNonNegative);
  cmd->add_option("--num-anchors", o->num_anchors,
                  "Blocks sampled per prompt for the teacher-forced accept_len at most")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of those anchors")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu, cuda or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "Compute dtype: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd->callback([o] { run_spec_eval(*o); });
}

}  // namespace sprig::tools

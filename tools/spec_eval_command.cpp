// `sprig spec-eval`: speculative decoding with a trained draft (of the DFlash family or EAGLE-3) on
// JSONL prompts {"prompt_ids": [...]}, evaluated by speculative/spec_eval.h. stdout: one JSON line
// per prompt, then
// {"aggregate":
// {...}}; the human table goes to stderr.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "nn/checkpoint.h"
#include "nn/positions.h"
#include "speculative/eagle3.h"
#include "speculative/spec_eval.h"
#include "tensor/input_file.h"
#include "tensor/names.h"
#include "tools/commands.h"
#include "tools/jsonl.h"
#include "tools/options.h"
#include "train/memory.h"

namespace sprig::tools {

namespace {

using json = nlohmann::json;
using namespace speculative;

struct SpecEvalOptions {
  std::string target, draft, input, device = "auto", dtype = "f32";
  speculative::SpecEvalSettings settings;
  bool strict_positions = false;
  bool draft_tokens_given = false;
};

void run_spec_eval(const SpecEvalOptions& o) {
  check_input_file(o.input, "a JSONL file");
  if (!std::ifstream(o.input)) throw std::runtime_error(o.input + ": cannot open the input file");
  const Device device = resolve_device(o.device);
  // Every option and record is checked against the two configs before any weight is read.
  const QwenConfig target_config = QwenConfig::load(model_config_path(o.target));
  const bool eagle3 = is_eagle3_dir(o.draft);
  const int64_t vocab = target_config.vocab_size, block = o.settings.block_size;
  if (eagle3) {
    check_eagle3_fits(load_eagle3_config(o.draft), target_config, "--draft " + o.draft);
    if (block != 0)
      throw CLI::ValidationError(
          "--block-size applies to the DFlash drafts; an EAGLE-3 draft "
          "drafts a chain of --draft-tokens");
    if (o.settings.tree_topk > 0 && target_config.sliding_window() > 0)
      throw std::runtime_error(
          "[spec-eval] --tree-topk: the target has sliding-window layers, over which a tree of "
          "drafts is not verified; draft a chain (--tree-topk 0)");
  } else {
    const DraftConfig draft_config = load_draft_config(o.draft);
    check_draft_fits(draft_config, target_config, "--draft " + o.draft);
    if (o.draft_tokens_given)
      throw CLI::ValidationError("--draft-tokens and --tree-topk apply to EAGLE-3 drafts; a " +
                                 std::string(draft_config.kind().name()) +
                                 " draft drafts a block of --block-size");
    const int64_t draft_block = draft_config.block_size;
    if (block != 0 && (block < 2 || block > draft_block))
      throw std::runtime_error("[spec-eval] --block-size " + std::to_string(block) +
                               " must be in [2, " + std::to_string(draft_block) +
                               "], the draft's block size (or 0)");
  }
  if (o.settings.stop_id >= vocab)
    throw std::runtime_error("[spec-eval] --stop-id " + std::to_string(o.settings.stop_id) +
                             " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  PositionLimit positions(target_config.max_position_embeddings, o.strict_positions, "spec-eval");
  int64_t longest = 0;
  std::vector<std::vector<int64_t>> prompts;
  for_each_record(o.input, [&](const json& rec, const std::string& where) {
    for (const auto& entry : rec.items())
      if (const std::string why = unknown_record_key(entry.key(), {"prompt_ids"}); !why.empty())
        throw std::runtime_error(where + ": " + why);
    if (!rec.contains("prompt_ids") || !rec["prompt_ids"].is_array() || rec["prompt_ids"].empty())
      throw std::runtime_error(where + ": a record needs \"prompt_ids\", a non-empty list of ids");
    std::vector<int64_t>& prompt = prompts.emplace_back();
    for (const json& v : rec["prompt_ids"]) {
      if (!v.is_number_integer())
        throw std::runtime_error(where + ": \"prompt_ids\" holds a non-integer " + v.dump());
      // Read as uint64_t, a negative id wraps past any vocabulary (and 2^64 - 1 stays itself).
      if (v.get<uint64_t>() >= static_cast<uint64_t>(vocab))
        throw std::runtime_error(where + ": prompt id " + v.dump() +
                                 " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
      prompt.push_back(v.get<int64_t>());
    }
    const std::string what = where + ": decoding a " + std::to_string(prompt.size()) +
                             "-token prompt with --max-new-tokens " +
                             std::to_string(o.settings.max_new_tokens);
    const int64_t end =
        decoding_end(prompt.size(), o.settings.max_new_tokens, "[spec-eval] " + what);
    positions.check(end, what);
    longest = std::max(longest, end);
  });
  if (prompts.empty()) throw std::runtime_error(o.input + ": no records");
  // The target's KV cache of the longest decoding (the draft's few layers fit in what it leaves).
  // A tree's nodes join the cache while they are verified.
  longest += o.settings.tree_topk * o.settings.draft_tokens;
  check_kv_cache_fits(target_config, longest, dtype_from_name(o.dtype), device, "spec-eval");
  const FrozenTarget target(load_qwen(o.target), device, dtype_from_name(o.dtype));
  std::unique_ptr<Module> draft;
  std::unique_ptr<SpecEvaluator> evaluator;
  if (eagle3) {
    std::unique_ptr<Eagle3Draft> d = load_eagle3_draft(o.draft);
    d->to(device, dtype_from_name(o.dtype));
    evaluator = std::make_unique<SpecEvaluator>(target, *d, o.settings);
    draft = std::move(d);
  } else {
    std::unique_ptr<DFlashDraft> d = load_draft(o.draft);
    d->to(device, dtype_from_name(o.dtype));
    evaluator = std::make_unique<SpecEvaluator>(target, *d, o.settings);
    draft = std::move(d);
  }
  draft->train(false);
  SpecEvaluator& e = *evaluator;
  e.print_header(stderr);
  for (const std::vector<int64_t>& prompt : prompts)
    std::cout << e.evaluate(prompt, stderr).dump() << "\n" << std::flush;
  std::cout << json{{"aggregate", e.aggregate()}}.dump() << "\n";
  e.print_summary(stderr);
}

}  // namespace

void add_spec_eval_command(CLI::App& app) {
  const auto o = std::make_shared<SpecEvalOptions>();
  CLI::App* cmd = app.add_subcommand(
      "spec-eval",
      "Speculative decoding with a trained draft (" + draft_kind_names() +
          ", eagle3) on prompts: lossless check against greedy decoding, true acceptance "
          "length, speed-up, teacher-forced accept_len on the same text");
  cmd->add_option(
         "--target", o->target,
         "The target: HF directory or sprig checkpoint; a run directory: its latest checkpoint")
      ->transform(kFollowsLatest)
      ->required();
  cmd->add_option("--draft", o->draft,
                  "Draft directory (serving layout) or draft checkpoint; a run directory: its "
                  "latest checkpoint")
      ->transform(kFollowsLatest)
      ->required();
  cmd->add_option("--input", o->input, "JSONL, one prompt per line: {\"prompt_ids\": [...]}")
      ->required();
  add_int_option(cmd, "--max-new-tokens", o->settings.max_new_tokens,
                 "New tokens per prompt at most")
      ->check(kPositive)
      ->capture_default_str();
  add_int_option(cmd, "--block-size", o->settings.block_size,
                 "Slots per draft block, from 2 to the draft's block size (0: the draft's)")
      ->check(kNonNegative)
      ->capture_default_str();
  add_int_option(cmd, "--draft-tokens", o->settings.draft_tokens,
                 "EAGLE-3: tokens drafted per step, a chain of one draft forward each")
      ->check(kPositive)
      ->capture_default_str();
  add_int_option(cmd, "--tree-topk", o->settings.tree_topk,
                 "EAGLE-3: draft a tree of --draft-tokens depths, keeping the K best nodes per "
                 "depth (each node's K best children compete), verified in one target forward "
                 "(0: a chain; at most " +
                     std::to_string(kMaxTreeTopk) + ")")
      ->check(CLI::Range(int64_t{0}, kMaxTreeTopk))
      ->capture_default_str();
  add_int_option(cmd, "--stop-id", o->settings.stop_id,
                 "Stop a prompt after this id (a vocabulary id)")
      ->check(kNonNegative);
  add_int_option(cmd, "--num-anchors", o->settings.num_anchors,
                 "Blocks sampled per prompt for the teacher-forced accept_len at most")
      ->check(kPositive)
      ->capture_default_str();
  add_int_option(cmd, "--seed", o->settings.seed, "Seed of those anchors")->capture_default_str();
  add_strict_positions_flag(cmd, o->strict_positions);
  add_device_option(cmd, o->device);
  add_compute_dtype_option(cmd, o->dtype);
  cmd->callback([o, cmd] {
    o->draft_tokens_given = cmd->count("--draft-tokens") + cmd->count("--tree-topk") > 0;
    run_spec_eval(*o);
  });
}

}  // namespace sprig::tools

// `sprig eval dflash|domino|jetspec`: teacher-forced evaluation of a draft on JSONL records (the
// format of speculative/records.h), one JSON line of metrics per record and their aggregate on
// stdout, and optionally every record's logits, anchors, metrics and draft gradients in a
// safetensors file: the seam for comparing sprig's numbers with another implementation's.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "nn/checkpoint.h"
#include "nn/positions.h"
#include "speculative/evaluation.h"
#include "speculative/records.h"
#include "tensor/input_file.h"
#include "tensor/storage.h"
#include "tools/commands.h"
#include "tools/jsonl.h"
#include "tools/options.h"
#include "tools/progress_line.h"

namespace sprig::tools {

namespace {

using json = nlohmann::json;
using namespace speculative;

struct EvalOptions {
  const DraftKind* kind = nullptr;
  DraftSettings settings;  // the objective's: the kind's options (DraftKind::eval_options)
  std::string target, draft, input, out;
  bool grads = false, overwrite = false, strict_positions = false;
  uint64_t seed = 0;
  int64_t num_anchors = 512;
  std::string device = "auto", dtype = "f32";
};

// The check of a kind's number option: its setting's rule (DraftSetting::refusal), as a config's
// draft: key has it.
CLI::Validator setting_check(const DraftSetting& setting) {
  return CLI::Validator(
      [setting](std::string& value) -> std::string {
        double v = std::numeric_limits<double>::quiet_NaN();
        try {
          size_t used = 0;
          v = std::stod(value, &used);
          if (used != value.size()) return "must be a number, got " + value;
        } catch (const std::exception&) {
          return "must be a number, got " + value;
        }
        const std::string refusal = setting.refusal(v);
        return refusal.empty() ? "" : refusal + ", got " + value;
      },
      "NUMBER");
}

void run_eval(const EvalOptions& o) {
  if (o.grads && o.out.empty())
    throw CLI::ValidationError("--grads", "writes into --out: give one");
  std::optional<Output> out;
  if (!o.out.empty())
    out.emplace(
        o.out, safetensors_output("eval"), o.overwrite, "--out",
        std::vector<InputPath>{
            {"--target", o.target, true}, {"--draft", o.draft, true}, {"--input", o.input}});
  check_input_file(o.input, "a JSONL file");
  if (!std::ifstream(o.input)) throw std::runtime_error(o.input + ": cannot open the input file");
  const Device device = resolve_device(o.device);
  const DType dtype = dtype_from_name(o.dtype);
  const FrozenTarget target(load_qwen(o.target), device, dtype);
  std::unique_ptr<DFlashDraft> draft = load_draft(o.draft);
  check_draft_fits(draft->config(), target.config(), "--draft " + o.draft);
  check_draft_kind(draft->config(), *o.kind, "--draft " + o.draft);
  draft->to(device, dtype);
  draft->train(false);
  TeacherForced evaluator(target, *draft, o.settings, o.num_anchors, o.seed);
  const int64_t bs = draft->config().block_size, vocab = target.config().vocab_size;
  PositionLimit positions(target.config().max_position_embeddings, o.strict_positions, "eval");

  std::vector<SafetensorsEntry> entries;
  size_t out_bytes = 0;
  const size_t available = cpu_memory_available();
  int64_t index = -1;
  ProgressLine progress;
  const auto evaluate = [&](const json& rec, const std::string& where) {
    ++index;
    DraftRecord r = parse_draft_record(rec, vocab, bs, where);
    const int64_t end = r.rows.packed() ? positions_end(r.rows.position_ids) : r.rows.seq_len();
    check_positions(positions, progress, end, where);
    DraftBatch batch{std::move(r.rows), r.anchors.value_or(Anchors{}), r.prefix_lengths};
    const Anchors& anchors = batch.anchors;
    const auto skip = [&](const std::string& why) {
      std::cout << json{{"record", index}, {"skipped", why}}.dump() << "\n";
    };
    try {
      if (const std::string why = evaluator.prepare(batch); !why.empty()) return skip(why);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(where + ": " + e.what());
    }

    if (out) {  // what this record adds to the file, before computing it
      out_bytes += static_cast<size_t>(anchors.blocks() * bs * vocab) * sizeof(float);
      if (o.grads) out_bytes += static_cast<size_t>(draft->num_parameters()) * sizeof(float);
      if (out_bytes > available / 2)
        throw std::runtime_error(where + ": --out would hold " + std::to_string(out_bytes >> 20) +
                                 " MiB by this record, over " + "half the " +
                                 std::to_string(available >> 20) +
                                 " MiB of memory available: split the input");
    }
    Tensor logits;
    std::optional<DraftLoss> loss;
    {
      std::optional<NoGradGuard> no_grad;
      if (!o.grads) no_grad.emplace();
      loss = evaluator.score(batch, &logits);
    }
    // JetSpec's blocks whose labels are all loss-masked, or any record whose blocks score nothing.
    if (!loss) return skip("no supervised slot");
    const std::string key = std::to_string(index) + ".";
    if (o.grads) {
      draft->zero_grad();
      loss->mean().backward();
      for (const auto& [name, p] : draft->named_parameters())
        entries.push_back({key + "grad." + name, p.grad().to(Device::cpu(), DType::f32)});
    }
    json j = metrics_json(loss->value(), loss->metrics, *o.kind);
    j["record"] = index;
    std::cout << j.dump() << "\n" << std::flush;
    if (!out) return;
    entries.push_back({key + "logits", logits});
    entries.push_back({key + "anchors", anchors.anchors.reshape({anchors.blocks()})});
    entries.push_back({key + "keep", anchors.keep.reshape({anchors.blocks()})});
    if (batch.prefix_lengths.defined())
      entries.push_back({key + "prefix_lengths", batch.prefix_lengths.reshape({-1})});
    for (const auto& [name, value] : j.items())
      if (name != "record")
        entries.push_back({key + name, Tensor::scalar(value.get<double>(), DType::f64)});
  };
  const int64_t records = for_each_record(o.input, [&](const json& rec, const std::string& where) {
    evaluate(rec, where);
    progress.show("evaluated " + std::to_string(index + 1) + " records (" +
                  std::to_string(evaluator.skipped()) + " skipped)");
  });
  progress.finish();
  if (records == 0) throw std::runtime_error(o.input + ": no records");
  // Loss and accept_len of nothing would read as 0: no aggregate and no output then.
  if (evaluator.scored() == 0)
    throw std::runtime_error(o.input + ": nothing to score: every one of the " +
                             std::to_string(records) +
                             " records was skipped (no valid anchor or no supervised slot)");
  std::cout << json{{"aggregate", evaluator.aggregate()}}.dump() << "\n";
  if (out) {
    save_safetensors(out->temp(), entries, out->metadata());
    out->commit();
    std::cerr << "wrote " << entries.size() << " tensors to " << o.out << "\n";
  }
}

// One draft recipe's subcommand: the shared options, and those of its objective.
void add_draft_eval(CLI::App* eval, const DraftKind& kind) {
  const auto o = std::make_shared<EvalOptions>();
  o->kind = &kind;
  CLI::App* cmd = eval->add_subcommand(std::string(kind.name()), std::string(kind.eval_help()));
  cmd->add_option("--target", o->target,
                  "The frozen target: HF directory or sprig checkpoint; a run directory: its "
                  "latest checkpoint")
      ->transform(kFollowsLatest)
      ->required();
  cmd->add_option("--draft", o->draft,
                  "Draft directory (serving layout) or draft checkpoint; a run directory: its "
                  "latest checkpoint")
      ->transform(kFollowsLatest)
      ->required();
  cmd->add_option("--input", o->input,
                  "JSONL, one row per line: {\"input_ids\", \"loss_mask\"} or {\"documents\": "
                  "[{\"input_ids\", \"loss_mask\"}, ...]}, optionally with \"anchors\", "
                  "\"keep\" and \"prefix_lengths\" (sampled from --seed when absent)")
      ->required();
  cmd->add_option("--out", o->out,
                  "New safetensors file: per record i, i.logits [N*bs, V] f32, i.anchors, "
                  "i.keep and every metric as an f64 scalar i.<name>");
  add_overwrite_flag(cmd, o->overwrite);
  cmd->add_flag("--grads", o->grads,
                "Also i.grad.<param>: the gradient of record i's loss for every draft "
                "parameter (f32, serving-layout names)");
  add_int_option(cmd, "--seed", o->seed, "Seed of the sampled anchors and prefix lengths")
      ->capture_default_str();
  // The kind's own options, bound to the settings its objective reads.
  const std::vector<DraftOption> options = kind.eval_options();
  for (const DraftOption& option : options) {
    DraftSettings& values = o->settings;
    if (option.choices.empty())
      cmd->add_option(option.flag, values.numbers[option.setting.key] = option.setting.fallback,
                      option.help)
          ->check(setting_check(option.setting))
          ->capture_default_str();
    else
      cmd->add_option(option.flag, values.words[option.setting.key] = option.choices[0],
                      option.help)
          ->check(CLI::IsMember(option.choices))
          ->capture_default_str();
  }
  add_int_option(cmd, "--num-anchors", o->num_anchors, "Blocks sampled per record at most")
      ->check(kPositive)
      ->capture_default_str();
  add_strict_positions_flag(cmd, o->strict_positions);
  add_device_option(cmd, o->device);
  add_compute_dtype_option(cmd, o->dtype);
  cmd->callback([o, cmd, options] {
    o->settings.command_line = true;
    DraftSettings given = o->settings;  // the options given, for the kind's check
    for (const DraftOption& option : options)
      if (cmd->count(option.flag) == 0) {
        given.numbers.erase(option.setting.key);
        given.words.erase(option.setting.key);
      }
    try {
      o->kind->check_options(given);
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError(e.what());
    }
    run_eval(*o);
  });
}

}  // namespace

void add_eval_command(CLI::App& app) {
  CLI::App* eval =
      app.add_subcommand("eval", "Evaluate a trained model (recipes: " + draft_kind_names() + ")");
  eval->require_subcommand(1);
  for (const DraftKind* kind : draft_kinds()) add_draft_eval(eval, *kind);
}

}  // namespace sprig::tools

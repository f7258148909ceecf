// `sprig eval dflash|domino|jetspec|eagle3`: teacher-forced evaluation of a draft on JSONL records
// (the format of speculative/records.h), one JSON line of metrics per record and their aggregate
// on stdout, and optionally every record's logits, anchors, metrics and draft gradients in a
// safetensors file: the seam for comparing sprig's numbers with another implementation's.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "nn/checkpoint.h"
#include "nn/positions.h"
#include "speculative/eagle3.h"
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

// What every eval checks first: --grads writes into --out, which is made (checked against the
// inputs) before any work, and the input is a readable file.
template <class Options> void open_eval(const Options& o, std::optional<Output>& out) {
  if (o.grads && o.out.empty())
    throw CLI::ValidationError("--grads", "writes into --out: give one");
  if (!o.out.empty())
    out.emplace(
        o.out, safetensors_output("eval"), o.overwrite, "--out",
        std::vector<InputPath>{
            {"--target", o.target, true}, {"--draft", o.draft, true}, {"--input", o.input}});
  check_input_file(o.input, "a JSONL file");
  if (!std::ifstream(o.input)) throw std::runtime_error(o.input + ": cannot open the input file");
}

void run_eval(const EvalOptions& o) {
  std::optional<Output> out;
  open_eval(o, out);
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
  const int64_t logit_columns = draft->config().vocab_rows();  // a draft vocabulary's, or V
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
      out_bytes += static_cast<size_t>(anchors.blocks() * bs * logit_columns) * sizeof(float);
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

struct Eagle3EvalOptions {
  std::string target, draft, input, out;
  int64_t ttt_steps = 7;
  bool grads = false, overwrite = false, strict_positions = false;
  std::string device = "auto", dtype = "f32";
};

// The training-time test of an EAGLE-3 draft on each record (docs/semantics.md §9.9): its loss
// and per-step metrics; the aggregate weighs every record alike in the loss, as training's
// micro-batches, and pools the counts.
void run_eagle3_eval(const Eagle3EvalOptions& o) {
  std::optional<Output> out;
  open_eval(o, out);
  const Device device = resolve_device(o.device);
  const DType dtype = dtype_from_name(o.dtype);
  if (!is_eagle3_dir(o.draft))
    throw std::runtime_error("--draft " + o.draft +
                             " is not an EAGLE-3 draft (its config.json declares no "
                             "LlamaForCausalLMEagle3): evaluate it with sprig eval " +
                             draft_kind_names());
  const FrozenTarget target(load_qwen(o.target), device, dtype);
  std::unique_ptr<Eagle3Draft> draft = load_eagle3_draft(o.draft);
  check_eagle3_fits(draft->config(), target.config(), "--draft " + o.draft);
  draft->to(device, dtype);
  draft->train(false);
  const int64_t vocab = target.config().vocab_size, K = o.ttt_steps;
  PositionLimit positions(target.config().max_position_embeddings, o.strict_positions, "eval");

  std::vector<SafetensorsEntry> entries;
  size_t out_bytes = 0;
  const size_t available = cpu_memory_available();
  int64_t index = -1, scored = 0, skipped = 0;
  double loss_sum = 0, accept_sum = 0, positions_sum = 0;
  std::vector<double> correct(static_cast<size_t>(K)), valid(static_cast<size_t>(K)),
      prefix_hits(static_cast<size_t>(K)), prefix_valid(static_cast<size_t>(K));
  ProgressLine progress;
  const auto evaluate = [&](const json& rec, const std::string& where) {
    ++index;
    DraftRecord r = parse_draft_record(rec, vocab, kMinBlockSize, where);
    if (r.anchors || r.prefix_lengths.defined())
      throw std::runtime_error(where +
                               ": \"anchors\", \"keep\" and \"prefix_lengths\" apply to the "
                               "DFlash drafts; an EAGLE-3 draft learns at every position");
    const int64_t end = r.rows.packed() ? positions_end(r.rows.position_ids) : r.rows.seq_len();
    check_positions(positions, progress, end, where);
    if (out) {  // what this record adds to the file, before computing it
      out_bytes += static_cast<size_t>(K * r.rows.seq_len() * draft->config().draft_vocab_size) *
                   sizeof(float);
      if (o.grads) out_bytes += static_cast<size_t>(draft->num_parameters()) * sizeof(float);
      if (out_bytes > available / 2)
        throw std::runtime_error(where + ": --out would hold " + std::to_string(out_bytes >> 20) +
                                 " MiB by this record, over half the " +
                                 std::to_string(available >> 20) +
                                 " MiB of memory available: split the input");
    }
    Tensor logits;
    std::optional<Eagle3Loss> loss;
    try {
      std::optional<NoGradGuard> no_grad;
      if (!o.grads) no_grad.emplace();
      loss =
          eagle3_loss(*draft, r.rows, eagle3_teacher(target, *draft, r.rows), {K, 0.8, 0}, &logits);
    } catch (const NoValidAnchors&) {
      ++skipped;
      std::cout << json{{"record", index}, {"skipped", "no supervised position"}}.dump() << "\n";
      return;
    }
    ++scored;
    const std::string key = std::to_string(index) + ".";
    if (o.grads) {
      draft->zero_grad();
      loss->loss.backward();
      for (const auto& [name, p] : draft->named_parameters())
        entries.push_back({key + "grad." + name, p.grad().to(Device::cpu(), DType::f32)});
    }
    double c = 0, v = 0;
    std::vector<double> step_accuracy;
    for (int64_t k = 0; k < K; ++k) {
      c += loss->step_correct[k];
      v += loss->step_valid[k];
      correct[k] += loss->step_correct[k];
      valid[k] += loss->step_valid[k];
      prefix_hits[k] += loss->step_prefix_hits[k];
      prefix_valid[k] += loss->step_prefix_valid[k];
      step_accuracy.push_back(loss->step_correct[k] / std::max(loss->step_valid[k], 1.0));
    }
    loss_sum += loss->value();
    accept_sum += loss->accept_len_sum;
    positions_sum += loss->valid_positions;
    const json j = {{"record", index},
                    {"loss", loss->value()},
                    {"accuracy", c / std::max(v, 1.0)},
                    {"accept_len", loss->accept_len_sum / std::max(loss->valid_positions, 1.0)},
                    {"accept_len_sum", loss->accept_len_sum},
                    {"valid_positions", loss->valid_positions},
                    {"step_loss", loss->step_loss},
                    {"step_accuracy", step_accuracy},
                    {"step_valid", loss->step_valid},
                    {"step_correct", loss->step_correct},
                    {"chain_accept_len", loss->chain_accept_len()},
                    {"step_prefix_hits", loss->step_prefix_hits},
                    {"step_prefix_valid", loss->step_prefix_valid}};
    std::cout << j.dump() << "\n" << std::flush;
    if (!out) return;
    entries.push_back({key + "logits", logits});
    for (const auto& [name, value] : j.items()) {
      if (name == "record") continue;
      if (value.is_array())
        entries.push_back(
            {key + name, Tensor::from_vector(value.get<std::vector<double>>(), {K}, DType::f64)});
      else
        entries.push_back({key + name, Tensor::scalar(value.get<double>(), DType::f64)});
    }
  };
  const int64_t records = for_each_record(o.input, [&](const json& rec, const std::string& where) {
    evaluate(rec, where);
    progress.show("evaluated " + std::to_string(index + 1) + " records (" +
                  std::to_string(skipped) + " skipped)");
  });
  progress.finish();
  if (records == 0) throw std::runtime_error(o.input + ": no records");
  if (scored == 0)
    throw std::runtime_error(o.input + ": nothing to score: every one of the " +
                             std::to_string(records) +
                             " records was skipped (no supervised position)");
  std::vector<double> step_accuracy;
  double c = 0, v = 0, chain_accept_len = 1;
  for (int64_t k = 0; k < K; ++k) {
    step_accuracy.push_back(correct[k] / std::max(valid[k], 1.0));
    c += correct[k];
    v += valid[k];
    chain_accept_len += prefix_hits[k] / std::max(prefix_valid[k], 1.0);
  }
  std::cout << json{{"aggregate",
                     {{"loss", loss_sum / static_cast<double>(scored)},
                      {"accuracy", c / std::max(v, 1.0)},
                      {"accept_len", accept_sum / std::max(positions_sum, 1.0)},
                      {"chain_accept_len", chain_accept_len},
                      {"step_accuracy", step_accuracy},
                      {"records", scored},
                      {"skipped_records", skipped}}}}
                   .dump()
            << "\n";
  if (out) {
    save_safetensors(out->temp(), entries, out->metadata());
    out->commit();
    std::cerr << "wrote " << entries.size() << " tensors to " << o.out << "\n";
  }
}

void add_eagle3_eval(CLI::App* eval) {
  const auto o = std::make_shared<Eagle3EvalOptions>();
  CLI::App* cmd = eval->add_subcommand(
      "eagle3",
      "Teacher-forced EAGLE-3 draft evaluation: the training-time test's loss, each step's "
      "accuracy against the target's argmax and the simulated acceptance length");
  cmd->add_option("--target", o->target,
                  "The frozen target: HF directory or sprig checkpoint; a run directory: its "
                  "latest checkpoint")
      ->transform(kFollowsLatest)
      ->required();
  cmd->add_option("--draft", o->draft,
                  "EAGLE-3 draft directory (serving layout) or checkpoint; a run directory: its "
                  "latest checkpoint")
      ->transform(kFollowsLatest)
      ->required();
  cmd->add_option("--input", o->input,
                  "JSONL, one row per line: {\"input_ids\", \"loss_mask\"} or {\"documents\": "
                  "[{\"input_ids\", \"loss_mask\"}, ...]}")
      ->required();
  cmd->add_option("--out", o->out,
                  "New safetensors file: per record i, i.logits [ttt_steps * S, draft vocabulary] "
                  "f32 (step-major) and every metric as f64 i.<name>");
  add_overwrite_flag(cmd, o->overwrite);
  cmd->add_flag("--grads", o->grads,
                "Also i.grad.<param>: the gradient of record i's loss for every draft parameter "
                "(f32, serving-layout names)");
  add_int_option(cmd, "--ttt-steps", o->ttt_steps, "Steps of the training-time test")
      ->check(kPositive)
      ->capture_default_str();
  add_strict_positions_flag(cmd, o->strict_positions);
  add_device_option(cmd, o->device);
  add_compute_dtype_option(cmd, o->dtype);
  cmd->callback([o] { run_eagle3_eval(*o); });
}

}  // namespace

void add_eval_command(CLI::App& app) {
  CLI::App* eval = app.add_subcommand(
      "eval", "Evaluate a trained model (recipes: " + draft_kind_names() + ", eagle3)");
  eval->require_subcommand(1);
  for (const DraftKind* kind : draft_kinds()) add_draft_eval(eval, *kind);
  add_eagle3_eval(eval);
}

}  // namespace sprig::tools

// `sprig convert`, `sprig score` and `sprig generate`: Hugging Face checkpoints (models and DFlash
// drafts) in and out, scoring records (plain sequences, packed documents, folded rollouts) and
// greedy decoding (ids, or text through the model's tokenizer).
#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/batch.h"
#include "data/prefix_tree.h"
#include "data/tokenizer.h"
#include "nn/checkpoint.h"
#include "nn/generate.h"
#include "nn/positions.h"
#include "speculative/draft.h"
#include "speculative/draft_kind.h"
#include "speculative/serving.h"
#include "tensor/cuda/kernels.h"
#include "tensor/json_text.h"
#include "tensor/names.h"
#include "tensor/storage.h"
#include "tools/commands.h"
#include "tools/jsonl.h"
#include "tools/options.h"
#include "tools/progress_line.h"
#include "tools/score_records.h"
#include "train/batch_input.h"
#include "train/memory.h"

namespace sprig::tools {

namespace {

using json = nlohmann::json;

// Model device and compute dtype from the --device / --dtype options.
struct Placement {
  std::string device = "auto", dtype = "f32";
};

void add_placement_options(CLI::App* cmd, Placement& p) {
  add_device_option(cmd, p.device);
  add_compute_dtype_option(cmd, p.dtype);
}

std::unique_ptr<QwenForCausalLM> load_placed(const std::string& dir, const Placement& p) {
  auto model = load_qwen(dir);
  model->to(resolve_device(p.device), dtype_from_name(p.dtype));
  model->train(false);
  return model;
}

// `--logprobs`: the scored tokens' log-probs (and entropies) per sequence, [sequences, longest]
// f32 with zeros past each one's length, and the lengths (I64).
std::vector<SafetensorsEntry> logprob_entries(const std::string& prefix,
                                              const data::ScoredTokens& scored, const Tensor& nll,
                                              const Tensor& entropy) {
  const int64_t n = scored.num_sequences;
  std::vector<int64_t> lengths(static_cast<size_t>(n), 0);
  for (int64_t s : scored.sequences) ++lengths[static_cast<size_t>(s)];
  const int64_t longest = n ? *std::max_element(lengths.begin(), lengths.end()) : 0;
  const auto matrix = [&](const Tensor& values, double sign) {
    const std::vector<double> v = values.to_vector<double>();
    std::vector<float> out(static_cast<size_t>(n * longest), 0.0f);
    std::vector<int64_t> next(static_cast<size_t>(n), 0);
    for (int64_t k = 0; k < scored.size(); ++k) {
      const int64_t s = scored.sequences[k];
      out[s * longest + next[s]++] = static_cast<float>(sign * v[k]);
    }
    return Tensor::from_vector(out, {n, longest});
  };
  std::vector<SafetensorsEntry> entries = {
      {prefix + ".logprobs", matrix(nll, -1.0)},
      {prefix + ".lengths", Tensor::from_vector(lengths, {n})}};
  if (entropy.defined()) entries.push_back({prefix + ".entropy", matrix(entropy, 1.0)});
  return entries;
}

// What `sprig score` writes: the logits of every record (the default), or with `logprobs` the
// log-probs of the scored tokens (docs/semantics.md §1.7), with their entropies under `entropy`.
struct ScoreOptions {
  bool logprobs = false, entropy = false, supervise_first_token = false, strict_positions = false;
};

void run_score(const std::string& model_dir, const std::string& input, const std::string& out_path,
               bool overwrite, const Placement& placement, const ScoreOptions& options) {
  Output out(out_path, safetensors_output("score"), overwrite, "--out",
             {{"--model", model_dir, true}, {"--input", input}});
  auto model = load_placed(model_dir, placement);
  const QwenConfig& config = model->config();
  const Device device = model->head_weight().device();
  NoGradGuard no_grad;
  std::vector<SafetensorsEntry> entries;
  int64_t records = 0, rollouts = 0;
  double nll_sum = 0;
  int64_t nll_count = 0;
  size_t out_bytes = 0;
  const size_t available = cpu_memory_available();
  ProgressLine progress;
  PositionLimit positions(config.max_position_embeddings, options.strict_positions, "score");
  for_each_record(input, [&](const json& rec, const std::string& where) {
    const data::Batch batch =
        parse_score_record(rec, config.vocab_size, where, options.supervise_first_token);
    const int64_t T = batch.seq_len();
    rollouts += !batch.groups.empty();
    const data::ScoredTokens scored = data::scored_tokens(batch, options.supervise_first_token);
    out_bytes += static_cast<size_t>(options.logprobs ? 2 * T : T * config.vocab_size) * 4;
    if (out_bytes > available / 2)
      throw std::runtime_error(
          where + ": the " + (options.logprobs ? "log-probs" : "logits") + " would hold " +
          std::to_string(out_bytes >> 20) + " MiB by this record, over half the " +
          std::to_string(available >> 20) + " MiB of memory available: split the input");
    check_positions(positions, progress, positions_end(batch.position_ids), where);
    const Var hidden = model->hidden(batch_input(batch, config, device));
    Tensor entropy;
    const Tensor nll =
        model
            ->token_losses(hidden, scored.rows,
                           Tensor::from_vector(scored.targets, {scored.size()}, device),
                           options.entropy ? &entropy : nullptr)
            .value();
    nll_sum += scored.size() ? sum_all(nll).item() : 0.0;
    nll_count += scored.size();
    const std::string prefix = std::to_string(records++);
    if (options.logprobs) {
      for (SafetensorsEntry& e : logprob_entries(prefix, scored, nll, entropy))
        entries.push_back(std::move(e));
    } else {
      const Tensor logits = model->logits(hidden).value();  // (1, T, V)
      entries.push_back({"logits." + prefix, logits.select(0, 0).to(Device::cpu(), DType::f32)});
    }
    progress.show("scored " + std::to_string(records) + " records");
  });
  progress.finish();
  if (records == 0) throw std::runtime_error(input + ": no records");
  if (nll_count == 0)
    throw std::runtime_error(input + ": nothing to score: none of the " + std::to_string(records) +
                             " records has a token with a next token to predict");
  save_safetensors(out.temp(), entries, out.metadata());
  out.commit();
  std::cout << "records: " << records << "\nscored tokens: " << nll_count
            << "\nmean next-token NLL: " << nll_sum / static_cast<double>(nll_count) << "\n"
            << (options.logprobs ? "log-probs" : "logits") << " written to " << out.path() << "\n";
  // Known only once every record is scored: a warning, as the scores are right either way.
  if (options.supervise_first_token && rollouts == 0)
    std::cerr << "sprig: [score] warning: --supervise-first-token applies to rollout records "
                 "(prompt_ids with completions); "
              << input << " has none\n";
}

std::vector<int64_t> parse_id_csv(const std::string& s) {
  std::vector<int64_t> ids;
  std::stringstream ss(s);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    try {
      size_t used = 0;
      ids.push_back(std::stoll(tok, &used));
      if (used != tok.size()) throw std::invalid_argument(tok);
    } catch (const std::exception&) {
      throw std::runtime_error("--prompt-ids: \"" + tok + "\" is not an integer");
    }
  }
  return ids;
}

// The target a draft training checkpoint records (trainer_state.json), or "".
std::string recorded_target(const std::string& src) {
  std::ifstream state(std::filesystem::path(src) / "trainer_state.json");
  const json j = json::parse(state, nullptr, false);
  if (j.is_object() && j.contains("recipe") && j["recipe"].value("target", "") != "")
    return j["recipe"]["target"].get<std::string>();
  return "";
}

// `convert` of a model: its config, weights (as stored, or cast to `dtype`) and companion files;
// then what was written.
void convert_model(const std::string& src, const std::string& out, bool overwrite,
                   std::optional<DType> dtype) {
  const ConvertedModel written = convert_checkpoint(src, out, overwrite, dtype);
  std::cout << "wrote " << out << " from " << src << ": " << torch_dtype_name(written.dtype)
            << " weights";
  const std::vector<std::string>& carried = written.companion_files;
  if (carried.empty()) std::cout << ", no tokenizer or generation files";
  for (size_t i = 0; i < carried.size(); ++i) std::cout << (i ? " " : "; with ") << carried[i];
  std::cout << "\n";
}

// A draft's tokenizer files come from --tokenizer-from, else the source itself (an export), else
// the target its training checkpoint records.
std::string tokenizer_source(const std::string& src, const std::string& given) {
  if (!given.empty()) return given;
  for (const std::string& name : kTokenizerFiles)
    if (std::filesystem::exists(std::filesystem::path(src) / name)) return src;
  return recorded_target(src);
}

// One past the largest id of a vocab.json or added_tokens.json, {"token": id, ...}.
int64_t id_count(const std::string& file) {
  const json tokens = read_json_file(file);
  if (!tokens.is_object())
    throw std::runtime_error("[convert] " + file +
                             " must be a JSON object of token ids, {\"token\": id, ...}");
  int64_t count = 0;
  for (const auto& [token, id] : tokens.items()) {
    // Read as uint64_t, a negative id wraps past 2^31 (and 2^64 - 1 stays itself).
    if (!id.is_number_integer() || id.get<uint64_t>() > std::numeric_limits<int32_t>::max())
      throw std::runtime_error("[convert] " + file + ": " + json(token).dump() + " maps to " +
                               id.dump() + ", not a token id (an integer in [0, 2^31))");
    count = std::max(count, id.get<int64_t>() + 1);
  }
  return count;
}

// The tokenizer a draft ships with is its target's: it must load, and name no id past the
// draft's vocabulary (engines index the draft's embedding and head with its ids). Without a
// tokenizer.json, engines take the ids of vocab.json and added_tokens.json.
void check_tokenizer_fits(const std::string& dir, int64_t vocab_size) {
  const std::filesystem::path path(dir);
  int64_t ids = 0;
  if (std::filesystem::is_regular_file(path / "tokenizer.json")) {
    ids = data::Tokenizer::load(dir).vocab_size();
  } else {
    for (const char* name : {"vocab.json", "added_tokens.json"})
      if (std::filesystem::is_regular_file(path / name))
        ids = std::max(ids, id_count((path / name).string()));
  }
  if (ids > vocab_size)
    throw std::runtime_error("[convert] the tokenizer of " + dir + " has " + std::to_string(ids) +
                             " ids, past the draft's vocabulary of " + std::to_string(vocab_size) +
                             ": a draft ships with its target's tokenizer");
}

// `convert` of a draft: its serving layout in `dtype` as `how` asks, with the tokenizer files of
// `tokenizer` (when not empty) beside it; then what the engines will make of it and the lines
// that serve it.
void convert_draft(const std::string& src, const std::string& out, DType dtype,
                   const std::string& tokenizer, bool overwrite,
                   const speculative::ServingExport& how) {
  const auto draft = speculative::load_draft(src);
  if (!tokenizer.empty()) check_tokenizer_fits(tokenizer, draft->config().layers.vocab_size);
  const speculative::DraftConfig exported = speculative::exported_config(draft->config(), how);
  const speculative::SavedDraft saved =
      speculative::save_draft(*draft, out, dtype, tokenizer, overwrite, how);
  const std::vector<std::string>& copied = saved.tokenizer_files;
  std::cout << "wrote " << out << ": " << exported.kind().name() << " draft";
  if (exported.reduced_vocab())
    std::cout << " (" << exported.draft_vocab_size << " of " << exported.layers.vocab_size
              << " ids)";
  std::cout << ", " << speculative::serving_engine_name(how.engine) << " layout, " << saved.tensors
            << " " << dtype_name(dtype) << " tensors";
  if (copied.empty()) {
    std::cout << "; no tokenizer files" << (tokenizer.empty() ? "" : " in " + tokenizer);
  } else {
    std::cout << "; tokenizer files from " << tokenizer << ":";
    for (const std::string& name : copied) std::cout << " " << name;
  }
  std::cout << "\n";
  for (const std::string& note : speculative::serving_notes(draft->config(), exported, how.engine))
    std::cout << "note: " << note << "\n";
  std::string target = recorded_target(src);
  if (target.empty()) target = "<target model>";
  const std::string dir = std::filesystem::absolute(out).lexically_normal().string();
  const std::vector<std::string> lines =
      speculative::launch_lines(exported, dir, target, how.engine);
  if (!lines.empty()) std::cout << "serve it with:\n";
  for (const std::string& line : lines) std::cout << "  " << line << "\n";
}

// `convert` of an EAGLE-3 draft: an export in `dtype` with the tokenizer files of `tokenizer`, or
// (dtype f32, no tokenizer) an import as f32 masters; then the lines that serve an export.
void convert_eagle3(const std::string& src, const std::string& out, DType dtype,
                    const std::string& tokenizer, bool overwrite, bool exporting) {
  const auto draft = speculative::load_eagle3_draft(src);
  const speculative::Eagle3Config& c = draft->config();
  if (!tokenizer.empty()) check_tokenizer_fits(tokenizer, c.layer.vocab_size);
  const speculative::SavedDraft saved =
      speculative::save_draft(*draft, out, dtype, tokenizer, overwrite);
  std::cout << "wrote " << out << ": eagle3 draft (" << c.draft_vocab_size << " of "
            << c.layer.vocab_size << " ids), " << saved.tensors << " " << dtype_name(dtype)
            << " tensors";
  if (saved.tokenizer_files.empty() && exporting) {
    std::cout << "; no tokenizer files" << (tokenizer.empty() ? "" : " in " + tokenizer);
  } else if (!saved.tokenizer_files.empty()) {
    std::cout << "; tokenizer files from " << tokenizer << ":";
    for (const std::string& name : saved.tokenizer_files) std::cout << " " << name;
  }
  std::cout << "\n";
  if (!exporting) return;
  for (const std::string& note : speculative::eagle3_serving_notes(c))
    std::cout << "note: " << note << "\n";
  std::string target = recorded_target(src);
  if (target.empty()) target = "<target model>";
  std::cout << "serve it with:\n";
  for (const std::string& line : speculative::eagle3_launch_lines(
           std::filesystem::absolute(out).lexically_normal().string(), target))
    std::cout << "  " << line << "\n";
}

}  // namespace

void add_model_commands(CLI::App& app) {
  static std::string from_hf, to_hf, out, model_dir, input, prompt, tokenizer_from;
  static std::string dtype;  // --dtype ("": drafts bf16, models as stored)
  static Placement placement;
  static int64_t max_new_tokens = 16, stop_id = -1;
  static bool overwrite = false, drop_correction_head = false, strict_positions = false;
  static std::string serve = "portable";

  CLI::App* convert = app.add_subcommand(
      "convert",
      "Convert a Hugging Face Qwen checkpoint to a sprig checkpoint, or back; --to-hf on a draft "
      "(DFlash family or EAGLE-3; a training checkpoint or an export) writes the serving layout "
      "vLLM and SGLang load");
  auto* from = convert->add_option("--from-hf", from_hf,
                                   "HF directory (config.json + "
                                   "model.safetensors or a sharded index), or a draft export");
  convert
      ->add_option(
          "--to-hf", to_hf,
          "sprig checkpoint or draft checkpoint to export; a run directory: its latest checkpoint")
      ->transform(kFollowsLatest)
      ->excludes(from);
  convert->add_option("--out", out, "Output directory: new or empty")->required();
  add_overwrite_flag(convert, overwrite);
  convert
      ->add_option("--dtype", dtype,
                   "The written weights' dtype: bf16, f16 or f32 (default: a model keeps every "
                   "tensor's bytes, a draft export is bf16, a draft import f32)")
      ->check(CLI::IsMember({"bf16", "f16", "f32"}));
  convert->add_option("--tokenizer-from", tokenizer_from,
                      "Drafts: the directory whose tokenizer files ship with the export (default: "
                      "the source's own, else the target the checkpoint was trained against)");
  convert
      ->add_option("--serve", serve,
                   "Drafts: the engine the export is for: vllm, sglang, reference (the "
                   "reference implementation's layout), or portable (every engine that can "
                   "serve the draft loads it)")
      ->check(CLI::IsMember({"portable", "vllm", "sglang", "reference"}))
      ->capture_default_str();
  convert->add_flag("--drop-correction-head", drop_correction_head,
                    "Domino drafts: export the DFlash part alone (decoding uses the base logits)");
  convert->callback([convert] {
    if (from_hf.empty() == to_hf.empty())
      throw CLI::ValidationError("give exactly one of --from-hf or --to-hf");
    const std::string& src = from_hf.empty() ? to_hf : from_hf;
    if (!tokenizer_from.empty() && !std::filesystem::is_directory(tokenizer_from))
      throw std::runtime_error("--tokenizer-from " + tokenizer_from + " is not a directory");
    const bool eagle3 = speculative::is_eagle3_dir(src);
    const bool draft = eagle3 || speculative::is_draft_dir(src);
    if (eagle3 && (convert->count("--serve") || drop_correction_head))
      throw CLI::ValidationError(
          "--serve and --drop-correction-head apply to the DFlash drafts; an EAGLE-3 export is "
          "the one layout vLLM and SGLang both load");
    if (!draft &&
        (convert->count("--tokenizer-from") || convert->count("--serve") || drop_correction_head))
      throw CLI::ValidationError(
          "--tokenizer-from, --serve and --drop-correction-head apply to "
          "drafts; a model conversion carries its own tokenizer files");
    if (draft && to_hf.empty() && !dtype.empty())
      throw CLI::ValidationError("--dtype applies to exports; a draft import is f32 masters");
    if (to_hf.empty() && (convert->count("--serve") || drop_correction_head))
      throw CLI::ValidationError("--serve and --drop-correction-head apply to --to-hf exports");
    const speculative::ServingExport how{speculative::serving_engine_from_name(serve),
                                         drop_correction_head};
    // An export takes the tokenizer files of the directory tokenizer_source names.
    const std::string tokenizer =
        draft && !to_hf.empty() ? tokenizer_source(src, tokenizer_from) : "";
    check_output(out, kCheckpointDirOutput, overwrite, "--out",
                 {{from_hf.empty() ? "--to-hf" : "--from-hf", src, true},
                  {tokenizer_from.empty() ? "the draft's tokenizer source" : "--tokenizer-from",
                   tokenizer, true}});
    if (eagle3) {
      convert_eagle3(src, out,
                     to_hf.empty() ? DType::f32 : dtype_from_name(dtype.empty() ? "bf16" : dtype),
                     tokenizer, overwrite, !to_hf.empty());
      return;
    }
    if (draft) {
      // An import becomes f32 masters (a training init).
      convert_draft(src, out,
                    to_hf.empty() ? DType::f32 : dtype_from_name(dtype.empty() ? "bf16" : dtype),
                    tokenizer, overwrite, to_hf.empty() ? speculative::ServingExport{} : how);
      return;
    }
    convert_model(src, out, overwrite,
                  dtype.empty() ? std::nullopt : std::optional<DType>(dtype_from_name(dtype)));
  });

  CLI::App* score = app.add_subcommand(
      "score",
      "Run records through a model: logits (or the scored tokens' log-probs) per record and the "
      "mean next-token NLL");
  score
      ->add_option("--model", model_dir,
                   "sprig checkpoint or HF directory; a run directory: its latest checkpoint")
      ->transform(kFollowsLatest)
      ->required();
  score
      ->add_option("--input", input,
                   "JSONL records: {\"input_ids\": [...]}, {\"documents\": [[...], ...]} "
                   "(one packed row) or {\"prompt_ids\": [...], \"completions\": [[...], ...]} "
                   "(folded prefix tree)")
      ->required();
  score
      ->add_option("--out", out,
                   "safetensors file receiving logits.<i> (f32, [T_i, V]), or with --logprobs "
                   "<i>.logprobs and <i>.lengths")
      ->required();
  static ScoreOptions score_options;
  score->add_flag("--logprobs", score_options.logprobs,
                  "Write the log-prob of each scored token instead of the logits: <i>.logprobs "
                  "(f32, [sequences, longest]; entry [j, t] is the t-th scored token of "
                  "completion or document j, 0 past its length) and <i>.lengths (I64)");
  score
      ->add_flag("--entropy", score_options.entropy,
                 "With --logprobs: also <i>.entropy, the entropy of each scored token's "
                 "distribution")
      ->needs("--logprobs");
  score->add_flag("--supervise-first-token", score_options.supervise_first_token,
                  "Folded rollouts: also score each completion's first token, from the last prompt "
                  "position (entry t is then token t of the completion, else token t + 1)");
  add_strict_positions_flag(score, score_options.strict_positions);
  add_overwrite_flag(score, overwrite);
  add_placement_options(score, placement);
  score->callback([] { run_score(model_dir, input, out, overwrite, placement, score_options); });

  CLI::App* generate = app.add_subcommand(
      "generate",
      "Greedy decoding with a KV cache: ids in and out (--prompt-ids), or text (--prompt)");
  generate
      ->add_option("--model", model_dir,
                   "sprig checkpoint or HF directory; a run directory: its latest checkpoint")
      ->transform(kFollowsLatest)
      ->required();
  static std::string prompt_text, tokenizer_dir;
  auto* ids_option =
      generate->add_option("--prompt-ids", prompt, "Comma-separated prompt token ids");
  generate
      ->add_option("--prompt", prompt_text,
                   "Prompt text, encoded with the tokenizer; the new tokens are printed as text")
      ->excludes(ids_option);
  generate->add_option("--tokenizer", tokenizer_dir,
                       "Directory with tokenizer.json for --prompt (default: --model's own)");
  add_int_option(generate, "--max-new-tokens", max_new_tokens, "Tokens to generate")
      ->check(kPositive)
      ->capture_default_str();
  add_int_option(generate, "--stop-id", stop_id, "Stop after generating this id (a vocabulary id)")
      ->check(kNonNegative);
  add_strict_positions_flag(generate, strict_positions);
  add_placement_options(generate, placement);
  // The positions rule and the KV cache's memory, checked before the first token.
  static const auto check_room = [](const QwenForCausalLM& model, size_t prompt_tokens) {
    const std::string what = "decoding a " + std::to_string(prompt_tokens) +
                             "-token prompt with --max-new-tokens " +
                             std::to_string(max_new_tokens);
    const int64_t end = decoding_end(prompt_tokens, max_new_tokens, "[generate] " + what);
    PositionLimit(model.config().max_position_embeddings, strict_positions, "generate")
        .check(end, what);
    check_kv_cache_fits(model.config(), end, model.head_weight().dtype(),
                        model.head_weight().device(), "generate");
  };
  generate->callback([generate] {
    const bool text = generate->count("--prompt") > 0;
    if (!text && prompt.empty()) throw CLI::ValidationError("give --prompt-ids or --prompt");
    if (!text && !tokenizer_dir.empty())
      throw CLI::ValidationError("--tokenizer applies to --prompt");
    if (!text) {
      const std::vector<int64_t> ids = parse_id_csv(prompt);
      auto model = load_placed(model_dir, placement);
      check_room(*model, ids.size());
      bool first = true;  // each id is printed as it is produced
      generate_greedy(*model, ids, max_new_tokens, stop_id, [&](int64_t id) {
        std::cout << (first ? "" : ",") << id << std::flush;
        first = false;
      });
      std::cout << "\n";
      return;
    }
    const data::Tokenizer tokenizer =
        data::Tokenizer::load(tokenizer_dir.empty() ? model_dir : tokenizer_dir);
    const std::vector<int32_t> encoded = tokenizer.encode(prompt_text);
    if (encoded.empty()) throw std::runtime_error("--prompt: the text encodes to no token");
    auto model = load_placed(model_dir, placement);
    check_room(*model, encoded.size());
    // The text of the new ids, printed as it grows; held back while it ends in an incomplete
    // character (decoded as U+FFFD), which a later id may complete.
    std::vector<int32_t> generated;
    size_t printed = 0;
    auto flush = [&](bool last) {
      const std::string decoded = tokenizer.decode(generated);
      const bool incomplete =
          decoded.size() >= 3 && decoded.compare(decoded.size() - 3, 3, "\xEF\xBF\xBD") == 0;
      if ((incomplete && !last) || decoded.size() <= printed) return;
      std::cout << decoded.substr(printed) << std::flush;
      printed = decoded.size();
    };
    generate_greedy(*model, std::vector<int64_t>(encoded.begin(), encoded.end()), max_new_tokens,
                    stop_id, [&](int64_t id) {
                      generated.push_back(static_cast<int32_t>(id));
                      flush(false);
                    });
    flush(true);
    std::cout << "\n";
  });
}

}  // namespace sprig::tools

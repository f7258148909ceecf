// `sprig convert`, `sprig score` and `sprig generate`: Hugging Face checkpoints (models and DFlash
// drafts) in and out, scoring records (plain sequences, packed documents, folded rollouts) and
// greedy decoding.
#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/prefix_tree.h"
#include "nn/checkpoint.h"
#include "nn/generate.h"
#include "speculative/draft.h"
#include "tensor/cuda/kernels.h"
#include "tensor/storage.h"
#include "tools/commands.h"
#include "tools/jsonl.h"
#include "tools/options.h"

namespace sprig::tools {

namespace {

using json = nlohmann::json;

// Model device and compute dtype from the --device / --dtype options.
struct Placement {
  std::string device = "auto", dtype = "f32";
};

void add_placement_options(CLI::App* cmd, Placement& p) {
  cmd->add_option("--device", p.device, "cpu, cuda or auto (cuda when present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_option("--dtype", p.dtype, "Compute dtype of the weights: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
}

std::unique_ptr<QwenForCausalLM> load_placed(const std::string& dir, const Placement& p) {
  auto model = load_qwen(dir);
  model->to(resolve_device(p.device), dtype_from_name(p.dtype));
  model->train(false);
  return model;
}

// One record of a score file as a model input plus its pre-shifted labels.
struct ScoreItem {
  QwenInput input;
  Tensor labels;  // (1, T)
};

std::vector<int64_t> id_list(const json& j, const char* what, int64_t vocab,
                             const std::string& where) {
  if (!j.is_array() || j.empty())
    throw std::runtime_error(where + ": \"" + what + "\" must be a non-empty list of token ids");
  std::vector<int64_t> ids;
  for (const json& v : j) {
    if (!v.is_number_integer())
      throw std::runtime_error(where + ": \"" + what + "\" holds a non-integer " + v.dump());
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id >= vocab)
      throw std::runtime_error(where + ": token id " + std::to_string(id) + " in \"" + what +
                               "\" is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    ids.push_back(id);
  }
  return ids;
}

// {"input_ids"}: one causal sequence. {"documents"}: one packed row, each document causal with its
// own positions. {"prompt_ids", "completions"}: the folded prefix-tree layout of docs/semantics.md
// §1.
ScoreItem parse_score_record(const json& rec, const QwenConfig& config, const std::string& where,
                             Device device) {
  const int64_t vocab = config.vocab_size;
  std::vector<int64_t> ids, positions, labels;
  // The record's row as tensors on the device: (1, T).
  auto row = [&](const std::vector<int64_t>& values) {
    return Tensor::from_vector(values, {1, static_cast<int64_t>(values.size())}, device);
  };
  auto append_sequence = [&](const std::vector<int64_t>& seq) {
    for (size_t t = 0; t < seq.size(); ++t) {
      ids.push_back(seq[t]);
      positions.push_back(static_cast<int64_t>(t));
      labels.push_back(t + 1 < seq.size() ? seq[t + 1] : -100);
    }
  };
  int layouts = 0;
  for (const char* key : {"input_ids", "documents", "prompt_ids"}) layouts += rec.contains(key);
  if (layouts > 1)
    throw std::runtime_error(where +
                             ": a record holds one layout: \"input_ids\", \"documents\", or "
                             "\"prompt_ids\" with \"completions\", not several");
  if (rec.contains("input_ids")) {
    append_sequence(id_list(rec["input_ids"], "input_ids", vocab, where));
    return {causal_input(row(ids), config), row(labels)};
  }
  if (rec.contains("documents")) {
    const json& docs = rec["documents"];
    if (!docs.is_array() || docs.empty())
      throw std::runtime_error(where + ": \"documents\" must be a non-empty list of id lists");
    std::vector<int64_t> lens;
    for (const json& d : docs) {
      const std::vector<int64_t> seq = id_list(d, "documents", vocab, where);
      lens.push_back(static_cast<int64_t>(seq.size()));
      append_sequence(seq);
    }
    return {documents_input(row(ids), row(positions), {lens}, config), row(labels)};
  }
  if (rec.contains("prompt_ids") && rec.contains("completions")) {
    data::RolloutGroup group;
    for (int64_t id : id_list(rec["prompt_ids"], "prompt_ids", vocab, where))
      group.prompt_ids.push_back(static_cast<int32_t>(id));
    if (!rec["completions"].is_array() || rec["completions"].empty())
      throw std::runtime_error(where + ": \"completions\" must be a non-empty list of id lists");
    for (const json& c : rec["completions"]) {
      group.completions.emplace_back();
      for (int64_t id : id_list(c, "completions", vocab, where))
        group.completions.back().push_back(static_cast<int32_t>(id));
    }
    const data::Document doc = data::fold(group);
    ids.assign(doc.input_ids.begin(), doc.input_ids.end());
    labels.assign(doc.labels.begin(), doc.labels.end());
    positions.resize(ids.size());
    data::write_tree_positions(doc.node_lengths, positions.data());
    const PrefixTree tree{{doc.node_lengths.begin(), doc.node_lengths.end()},
                          data::tree_sample_paths(doc.node_lengths)};
    return {prefix_tree_input(row(ids), row(positions), {{tree}}, {0}, config), row(labels)};
  }
  throw std::runtime_error(where +
                           ": a record needs \"input_ids\", \"documents\", or "
                           "\"prompt_ids\" and \"completions\"");
}

// A progress line on stderr, ended by finish() or when its scope exits (so an error message
// starts on a line of its own).
class ProgressLine {
 public:
  ~ProgressLine() { finish(); }
  void show(const std::string& text) {
    std::cerr << "\r" << text << std::flush;
    shown_ = true;
  }
  void finish() {
    if (shown_) std::cerr << "\n";
    shown_ = false;
  }

 private:
  bool shown_ = false;
};

void run_score(const std::string& model_dir, const std::string& input, const std::string& out_path,
               bool overwrite, const Placement& placement) {
  Output out(out_path, kSafetensorsOutput, overwrite);
  auto model = load_placed(model_dir, placement);
  const QwenConfig& config = model->config();
  const Device device = model->head_weight().device();
  NoGradGuard no_grad;
  std::vector<SafetensorsEntry> entries;
  double nll_sum = 0;
  int64_t nll_count = 0;
  size_t out_bytes = 0;
  const size_t available = cpu_memory_available();
  ProgressLine progress;
  for_each_record(input, [&](const json& rec, const std::string& where) {
    const ScoreItem item = parse_score_record(rec, config, where, device);
    const int64_t T = item.labels.size(1);
    out_bytes += static_cast<size_t>(T * config.vocab_size) * sizeof(float);
    if (out_bytes > available / 2)
      throw std::runtime_error(
          where + ": the logits would hold " + std::to_string(out_bytes >> 20) +
          " MiB by this record, over half the " + std::to_string(available >> 20) +
          " MiB of memory available: split the input");
    if (T > config.max_position_embeddings) {
      progress.finish();
      std::cerr << where << ": warning: " << T << " tokens exceed the model's "
                << "max_position_embeddings " << config.max_position_embeddings
                << "; positions past it were not trained\n";
    }
    const Var hidden = model->hidden(item.input);
    const Tensor losses = model->token_losses(hidden, item.labels).value();
    const std::vector<float> l = losses.to_vector<float>();
    const std::vector<int64_t> lab = item.labels.to_vector<int64_t>();
    for (size_t t = 0; t < l.size(); ++t)
      if (lab[t] != -100) {
        nll_sum += l[t];
        ++nll_count;
      }
    const Tensor logits = model->logits(hidden).value();  // (1, T, V)
    entries.push_back({"logits." + std::to_string(entries.size()),
                       logits.select(0, 0).to(Device::cpu(), DType::f32)});
    progress.show("scored " + std::to_string(entries.size()) + " records");
  });
  progress.finish();
  if (entries.empty()) throw std::runtime_error(input + ": no records");
  save_safetensors(out.temp(), entries);
  out.commit();
  std::cout << "records: " << entries.size() << "\nscored tokens: " << nll_count
            << "\nmean next-token NLL: " << (nll_count ? nll_sum / nll_count : 0.0)
            << "\nlogits written to " << out.path() << "\n";
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

// A draft's tokenizer files come from --tokenizer-from, else the source itself (an export), else
// the target its training checkpoint records.
std::string tokenizer_source(const std::string& src, const std::string& given) {
  if (!given.empty()) return given;
  for (const std::string& name : kTokenizerFiles)
    if (std::filesystem::exists(std::filesystem::path(src) / name)) return src;
  std::ifstream state(std::filesystem::path(src) / "trainer_state.json");
  const json j = json::parse(state, nullptr, false);
  if (j.is_object() && j.contains("recipe") && j["recipe"].value("target", "") != "")
    return j["recipe"]["target"].get<std::string>();
  return "";
}

// `convert` of a draft: its serving layout in `dtype`, with the tokenizer files of `tokenizer`
// (when not empty) beside it.
void convert_draft(const std::string& src, const std::string& out, DType dtype,
                   const std::string& tokenizer, bool overwrite) {
  check_output(out, kCheckpointDirOutput, overwrite);
  const auto draft = speculative::load_draft(src);
  const std::vector<std::string> copied =
      speculative::save_draft(*draft, out, dtype, tokenizer, overwrite);
  std::cout << "wrote " << out << ": DFlash draft, " << draft->named_parameters().size() << " "
            << dtype_name(dtype) << " tensors, " << draft->num_parameters() << " parameters";
  if (copied.empty()) {
    std::cout << "; no tokenizer files" << (tokenizer.empty() ? "" : " in " + tokenizer);
  } else {
    std::cout << "; tokenizer files from " << tokenizer << ":";
    for (const std::string& name : copied) std::cout << " " << name;
  }
  std::cout << "\n";
}

}  // namespace

void add_model_commands(CLI::App& app) {
  static std::string from_hf, to_hf, out, model_dir, input, prompt, tokenizer_from;
  static std::string draft_dtype = "bf16";
  static Placement placement;
  static int64_t max_new_tokens = 16, stop_id = -1;
  static bool overwrite = false;

  CLI::App* convert = app.add_subcommand(
      "convert",
      "Convert a Hugging Face Qwen checkpoint to a sprig checkpoint, or back; --to-hf on a DFlash "
      "draft (a training checkpoint or an export) writes the serving layout vLLM and SGLang load");
  auto* from = convert->add_option("--from-hf", from_hf,
                                   "HF directory (config.json + "
                                   "model.safetensors or a sharded index), or a draft export");
  convert->add_option("--to-hf", to_hf, "sprig checkpoint or draft checkpoint to export")
      ->excludes(from);
  convert->add_option("--out", out, "Output directory: new or empty")->required();
  add_overwrite_flag(convert, overwrite);
  convert->add_option("--dtype", draft_dtype, "Drafts: the exported weights' dtype")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  convert->add_option("--tokenizer-from", tokenizer_from,
                      "Drafts: the directory whose tokenizer files ship with the export (default: "
                      "the source's own, else the target the checkpoint was trained against)");
  convert->callback([convert] {
    if (from_hf.empty() == to_hf.empty())
      throw CLI::ValidationError("convert", "give exactly one of --from-hf or --to-hf");
    const std::string& src = from_hf.empty() ? to_hf : from_hf;
    if (!tokenizer_from.empty() && !std::filesystem::is_directory(tokenizer_from))
      throw std::runtime_error("--tokenizer-from " + tokenizer_from + " is not a directory");
    if (speculative::is_draft_dir(src)) {
      if (to_hf.empty())  // an export imported as f32 masters (a training init)
        convert_draft(src, out, DType::f32, "", overwrite);
      else
        convert_draft(src, out, dtype_from_name(draft_dtype), tokenizer_source(src, tokenizer_from),
                      overwrite);
      return;
    }
    if (convert->count("--dtype") || convert->count("--tokenizer-from"))
      throw CLI::ValidationError("convert",
                                 "--dtype and --tokenizer-from apply to drafts; a model "
                                 "conversion keeps every tensor's bytes");
    convert_checkpoint(src, out, overwrite);
    std::cout << "wrote " << out << " from " << src << "\n";
  });

  CLI::App* score = app.add_subcommand(
      "score", "Run records through a model: logits per record and the mean next-token NLL");
  score->add_option("--model", model_dir, "sprig checkpoint or HF directory")->required();
  score
      ->add_option("--input", input,
                   "JSONL records: {\"input_ids\": [...]}, {\"documents\": [[...], ...]} "
                   "(one packed row) or {\"prompt_ids\": [...], \"completions\": [[...], ...]} "
                   "(folded prefix tree)")
      ->required();
  score->add_option("--out", out, "safetensors file receiving logits.<i> (f32, [T_i, V])")
      ->required();
  add_overwrite_flag(score, overwrite);
  add_placement_options(score, placement);
  score->callback([] { run_score(model_dir, input, out, overwrite, placement); });

  CLI::App* generate = app.add_subcommand("generate", "Greedy decoding with a KV cache");
  generate->add_option("--model", model_dir, "sprig checkpoint or HF directory")->required();
  generate->add_option("--prompt-ids", prompt, "Comma-separated prompt token ids")->required();
  generate
      ->add_option("--max-new-tokens", max_new_tokens,
                   "Tokens to generate, at most max_position_embeddings less the prompt")
      ->check(kPositive)
      ->capture_default_str();
  generate->add_option("--stop-id", stop_id, "Stop after generating this id (a vocabulary id)")
      ->check(kNonNegative);
  add_placement_options(generate, placement);
  generate->callback([] {
    auto model = load_placed(model_dir, placement);
    bool first = true;  // each id is printed as it is produced
    generate_greedy(*model, parse_id_csv(prompt), max_new_tokens, stop_id, [&](int64_t id) {
      std::cout << (first ? "" : ",") << id << std::flush;
      first = false;
    });
    std::cout << "\n";
  });
}

}  // namespace sprig::tools

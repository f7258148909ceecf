#include "speculative/serving.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "nn/checkpoint.h"
#include "speculative/draft_kind.h"
#include "tensor/output.h"

namespace sprig::speculative {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("[serve] " + message);
}

}  // namespace

const char* serving_engine_name(ServingEngine engine) {
  switch (engine) {
    case ServingEngine::portable: return "portable";
    case ServingEngine::vllm: return "vllm";
    case ServingEngine::sglang: return "sglang";
    case ServingEngine::reference: return "reference";
  }
  return "?";
}

ServingEngine serving_engine_from_name(const std::string& name) {
  for (ServingEngine e : {ServingEngine::portable, ServingEngine::vllm, ServingEngine::sglang,
                          ServingEngine::reference})
    if (name == serving_engine_name(e)) return e;
  fail("unknown engine \"" + name + "\" (vllm, sglang, reference, or portable)");
}

DraftConfig exported_config(const DraftConfig& draft, const ServingExport& how) {
  return draft.kind().exported(draft, how);
}

json serving_config(const DraftConfig& exported, DType dtype, ServingEngine engine) {
  json j = exported.to_json(dtype);
  // The reference's recipes save the draft under its own class name (and rename it to serve).
  if (engine == ServingEngine::reference) j["architectures"] = {"Qwen3DFlashDraftModel"};
  return j;
}

std::vector<std::string> serving_notes(const DraftConfig& original, const DraftConfig& exported,
                                       ServingEngine engine) {
  std::vector<std::string> notes = original.kind().serving_notes(original, exported, engine);
  if (engine == ServingEngine::reference)
    notes.push_back(
        "architectures names the reference's Qwen3DFlashDraftModel; the engines load the "
        "portable export (no --serve) instead");
  if (exported.reduced_vocab() && engine != ServingEngine::vllm)
    notes.push_back(
        "the draft's head covers " + std::to_string(exported.draft_vocab_size) + " of the " +
        std::to_string(exported.layers.vocab_size) +
        " target ids (lm_head, d2t and t2d): vLLM reads them; SGLang's DFLASH ignores them and "
        "drafts through the target's whole head, ids the draft was not trained to rank (still "
        "lossless, the target verifies)");
  return notes;
}

std::vector<std::string> launch_lines(const DraftConfig& exported, const std::string& dir,
                                      const std::string& target, ServingEngine engine) {
  const bool portable = engine == ServingEngine::portable;
  const DraftKind& kind = exported.kind();
  std::vector<std::string> lines;
  if ((portable || engine == ServingEngine::vllm) && kind.vllm_serves(exported))
    lines.push_back("vllm serve " + target + " --speculative-config '" +
                    json({{"method", "dflash"},
                          {"model", dir},
                          {"num_speculative_tokens", exported.block_size - 1}})
                        .dump() +
                    "'");
  if ((portable || engine == ServingEngine::sglang) && kind.sglang_serves(exported))
    lines.push_back("python3 -m sglang.launch_server --model-path " + target +
                    " --speculative-algorithm DFLASH --speculative-draft-model-path " + dir +
                    " --speculative-num-draft-tokens " + std::to_string(exported.block_size));
  return lines;
}

namespace {

// A draft directory: `config`, the tensors `entries` and the tokenizer files of `tokenizer_dir`.
SavedDraft save_draft_dir(const std::string& dir, const json& config,
                          const std::vector<SafetensorsEntry>& entries,
                          const std::string& tokenizer_dir, bool overwrite) {
  Output out(dir, kCheckpointDirOutput, overwrite);
  SavedDraft saved;
  if (!tokenizer_dir.empty())
    for (const std::string& name : kTokenizerFiles)
      if (fs::is_regular_file(fs::path(tokenizer_dir) / name))
        saved.tokenizer_files.push_back(name);
  const fs::path tmp = out.temp();
  std::ofstream file(tmp / "config.json");
  file << config.dump(2) << "\n";
  if (!file) throw std::runtime_error((tmp / "config.json").string() + ": write failed");
  file.close();
  save_safetensors((tmp / "model.safetensors").string(), entries, out.metadata());
  for (const std::string& name : saved.tokenizer_files)
    fs::copy_file(fs::path(tokenizer_dir) / name, tmp / name);
  out.commit();
  saved.tensors = static_cast<int64_t>(entries.size());
  return saved;
}

}  // namespace

SavedDraft save_draft(const DFlashDraft& draft, const std::string& dir, DType dtype,
                      const std::string& tokenizer_dir, bool overwrite, const ServingExport& how) {
  const DraftConfig exported = exported_config(draft.config(), how);
  std::set<std::string> dropped;  // the parameters of a head the export leaves out
  if (draft.head() && !exported.head)
    for (const auto& [name, p] : draft.head()->named_parameters()) dropped.insert(name);
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, p] : draft.named_parameters())
    if (!dropped.contains(name)) entries.push_back({name, p.value().to(Device::cpu(), dtype)});
  for (const auto& [name, t] : draft.vocabulary_tensors())  // the head's rows in `dtype`
    entries.push_back({name, t.dtype() == DType::boolean || t.dtype() == DType::i64
                                 ? t
                                 : t.to(Device::cpu(), dtype)});
  return save_draft_dir(dir, serving_config(exported, dtype, how.engine), entries, tokenizer_dir,
                        overwrite);
}

SavedDraft save_draft(const Eagle3Draft& draft, const std::string& dir, DType dtype,
                      const std::string& tokenizer_dir, bool overwrite) {
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, p] : draft.named_parameters())
    entries.push_back({name, p.value().to(Device::cpu(), dtype)});
  for (const auto& [name, t] : draft.vocabulary().tensors()) entries.push_back({name, t});
  return save_draft_dir(dir, draft.config().to_json(dtype), entries, tokenizer_dir, overwrite);
}

std::vector<std::string> eagle3_serving_notes(const Eagle3Config& draft) {
  if (draft.aux_layer_ids.size() == 3) return {};
  return {"this draft reads " + std::to_string(draft.aux_layer_ids.size()) +
          " target layers; SGLang's and vLLM's Llama EAGLE-3 layers read exactly 3 (fc of 3 x "
          "hidden_size inputs): train with three aux_layer_ids to serve it there"};
}

std::vector<std::string> eagle3_launch_lines(const std::string& dir, const std::string& target,
                                             int64_t draft_tokens) {
  return {"vllm serve " + target + " --speculative-config '" +
              json({{"method", "eagle3"}, {"model", dir}, {"num_speculative_tokens", draft_tokens}})
                  .dump() +
              "'",
          "python3 -m sglang.launch_server --model-path " + target +
              " --speculative-algorithm EAGLE3 --speculative-draft-model-path " + dir +
              " --speculative-num-steps " + std::to_string(draft_tokens) +
              " --speculative-eagle-topk 1 --speculative-num-draft-tokens " +
              std::to_string(draft_tokens + 1)};
}

}  // namespace sprig::speculative

#include "speculative/serving.h"

#include <filesystem>
#include <fstream>
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

bool is_head_parameter(const std::string& name) {
  return name.starts_with("prefix_gru.") || name.starts_with("embed_proj.");
}

// SGLang's Domino worker corrects from slot 1 only (dflash_utils.py's parse_dflash_draft_config).
bool sglang_serves_head(const DominoHeadConfig& head) { return head.pure_draft_prefix_len == 1; }

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
  const std::string kind = std::string(draft.kind().name());
  if (how.drop_correction_head && !draft.domino)
    fail("--drop-correction-head: this is a " + kind +
         " draft; only a Domino draft has a correction head");
  if (how.drop_correction_head && draft.domino->shift_label)
    fail(
        "--drop-correction-head: this Domino draft was trained with shift_label (slot k predicts "
        "the token at anchor + 1 + k, one further than a DFlash draft's slot), so an engine's "
        "dflash method would read every draft one position off; only a draft trained without "
        "shift_label can drop its head");
  DraftConfig out = draft;
  if (how.drop_correction_head) out.domino.reset();
  // The way out of a refusal for a head an engine cannot serve: dropping it, where the draft's
  // slots are a DFlash draft's.
  const auto drop_head_or = [&](const std::string& otherwise) {
    return out.domino->shift_label
               ? "; its head cannot be dropped (trained with shift_label, every slot would be read "
                 "one position off): " +
                     otherwise
               : "; add --drop-correction-head to write the DFlash part alone (decoding then uses "
                 "the base logits; `sprig spec-eval` shows tau with and without the head), or " +
                     otherwise;
  };
  if (how.engine == ServingEngine::vllm && out.domino)
    fail(
        "vLLM has no Domino runtime: its DFlash loader rejects the correction head's tensors "
        "(prefix_gru, embed_proj)" +
        drop_head_or(sglang_serves_head(*out.domino) ? "export with --serve sglang"
                                                     : "export with --serve reference"));
  if (how.engine == ServingEngine::sglang && out.causal)
    fail(
        "SGLang's DFLASH worker drafts blocks bidirectionally and has no in-block causal "
        "attention, so it would serve this JetSpec draft as a DFlash one: export with --serve "
        "vllm");
  if (how.engine == ServingEngine::sglang && out.domino && !sglang_serves_head(*out.domino))
    fail("SGLang serves a Domino head only with pure_draft_prefix_len 1; this draft has " +
         std::to_string(out.domino->pure_draft_prefix_len) +
         drop_head_or("export with --serve reference"));
  return out;
}

json serving_config(const DraftConfig& exported, DType dtype, ServingEngine engine) {
  json j = exported.to_json(dtype);
  // The reference's recipes save the draft under its own class name (and rename it to serve).
  if (engine == ServingEngine::reference) j["architectures"] = {"Qwen3DFlashDraftModel"};
  return j;
}

std::vector<std::string> serving_notes(const DraftConfig& original, const DraftConfig& exported,
                                       ServingEngine engine) {
  std::vector<std::string> notes;
  const bool portable = engine == ServingEngine::portable;
  if (original.domino && !exported.domino)
    notes.push_back(
        "the Domino correction head is not exported: decoding uses the backbone's base logits "
        "(`sprig spec-eval` shows tau with and without the head)");
  if (exported.domino && portable)
    notes.push_back(std::string("vLLM cannot serve this export (no Domino runtime)") +
                    (exported.domino->shift_label
                         ? ""
                         : "; `--serve vllm --drop-correction-head` writes the DFlash part alone"));
  if (exported.domino && engine != ServingEngine::reference && sglang_serves_head(*exported.domino))
    notes.push_back(
        "SGLang applies the correction head in its DFlash V2 worker (CUDA, bf16, greedy); an "
        "SGLang without Domino support ignores the head and decodes with the base logits");
  if (exported.domino && portable && !sglang_serves_head(*exported.domino))
    notes.push_back(
        "SGLang cannot serve this export: its Domino worker needs "
        "pure_draft_prefix_len 1, this draft has " +
        std::to_string(exported.domino->pure_draft_prefix_len));
  if (exported.causal && portable)
    notes.push_back(
        "SGLang has no in-block causal draft attention: serve this JetSpec draft with vLLM");
  if (engine == ServingEngine::reference)
    notes.push_back(
        "architectures names the reference's Qwen3DFlashDraftModel; the engines load the "
        "portable export (no --serve) instead");
  return notes;
}

std::vector<std::string> launch_lines(const DraftConfig& exported, const std::string& dir,
                                      const std::string& target, ServingEngine engine) {
  const bool portable = engine == ServingEngine::portable;
  std::vector<std::string> lines;
  if ((portable || engine == ServingEngine::vllm) && !exported.domino)
    lines.push_back("vllm serve " + target + " --speculative-config '" +
                    json({{"method", "dflash"},
                          {"model", dir},
                          {"num_speculative_tokens", exported.block_size - 1}})
                        .dump() +
                    "'");
  const bool sglang_can =
      !exported.causal && (!exported.domino || sglang_serves_head(*exported.domino));
  if ((portable || engine == ServingEngine::sglang) && sglang_can)
    lines.push_back("python3 -m sglang.launch_server --model-path " + target +
                    " --speculative-algorithm DFLASH --speculative-draft-model-path " + dir +
                    " --speculative-num-draft-tokens " + std::to_string(exported.block_size));
  return lines;
}

SavedDraft save_draft(const DFlashDraft& draft, const std::string& dir, DType dtype,
                      const std::string& tokenizer_dir, bool overwrite, const ServingExport& how) {
  const DraftConfig exported = exported_config(draft.config(), how);
  Output out(dir, kCheckpointDirOutput, overwrite);
  SavedDraft saved;
  if (!tokenizer_dir.empty())
    for (const std::string& name : kTokenizerFiles)
      if (fs::is_regular_file(fs::path(tokenizer_dir) / name))
        saved.tokenizer_files.push_back(name);
  const fs::path tmp = out.temp();
  std::ofstream config(tmp / "config.json");
  config << serving_config(exported, dtype, how.engine).dump(2) << "\n";
  if (!config) throw std::runtime_error((tmp / "config.json").string() + ": write failed");
  config.close();
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, p] : draft.named_parameters())
    if (exported.domino || !is_head_parameter(name))
      entries.push_back({name, p.value().to(Device::cpu(), dtype)});
  save_safetensors((tmp / "model.safetensors").string(), entries, out.metadata());
  for (const std::string& name : saved.tokenizer_files)
    fs::copy_file(fs::path(tokenizer_dir) / name, tmp / name);
  out.commit();
  saved.tensors = static_cast<int64_t>(entries.size());
  return saved;
}

}  // namespace sprig::speculative

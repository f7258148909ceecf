// A draft's serving export (docs/serving.md): the directory vLLM, SGLang or the reference
// implementation loads, written for one engine or in the portable layout every engine that can
// serve the draft loads, and the lines that launch the engines on it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "speculative/draft.h"
#include "speculative/eagle3.h"

namespace sprig::speculative {

// portable: architectures DFlashDraftModel and every key each engine reads, consistent; the
// others add what one engine needs and refuse what it cannot serve.
enum class ServingEngine { portable, vllm, sglang, reference };
const char* serving_engine_name(ServingEngine engine);
// "portable", "vllm", "sglang" or "reference"; throws std::invalid_argument naming the choices.
ServingEngine serving_engine_from_name(const std::string& name);

struct ServingExport {
  ServingEngine engine = ServingEngine::portable;
  bool drop_correction_head = false;  // Domino without shift_label: the DFlash part alone
};

// The config of the exported draft: `draft` without its Domino head when the export drops it.
// Throws std::invalid_argument "[serve] ..." with a sentence when the engine cannot serve the
// draft (a Domino head on vLLM, a JetSpec draft on SGLang, SGLang's Domino prefix rule) or when
// --drop-correction-head is given for a draft without a head, or with shifted labels (its slots
// would be read one position off).
DraftConfig exported_config(const DraftConfig& draft, const ServingExport& how);

// The config.json of an exported draft `exported` with `dtype` weights, for `engine`.
nlohmann::json serving_config(const DraftConfig& exported, DType dtype, ServingEngine engine);

// What the engines will do with the export that the user should know (one sentence each).
std::vector<std::string> serving_notes(const DraftConfig& original, const DraftConfig& exported,
                                       ServingEngine engine);

// The commands that serve the draft in `dir` beside `target` (a path, or a placeholder), for the
// engines that can: vLLM's `dflash` method and SGLang's DFLASH algorithm, with
// num_speculative_tokens = block_size - 1 (the slots after the anchor).
std::vector<std::string> launch_lines(const DraftConfig& exported, const std::string& dir,
                                      const std::string& target, ServingEngine engine);

// Writes the serving layout (config.json and model.safetensors, weights in `dtype`) into `dir`, a
// new directory unless `overwrite` lets it replace an earlier checkpoint directory
// (tensor/output.h). With `tokenizer_dir`, its tokenizer files (kTokenizerFiles, the serving
// engines read the target's) are copied beside them. A bf16 draft saved in bf16 again is
// bit-identical.
struct SavedDraft {
  std::vector<std::string> tokenizer_files;  // those copied
  int64_t tensors = 0;                       // written
};
SavedDraft save_draft(const DFlashDraft& draft, const std::string& dir, DType dtype,
                      const std::string& tokenizer_dir = {}, bool overwrite = false,
                      const ServingExport& how = {});

// An EAGLE-3 draft's export: config.json (Eagle3Config::to_json) and model.safetensors with the
// names both engines read, weights in `dtype`, d2t and t2d of a reduced vocabulary as they are
// (i64, bool), and the tokenizer files of `tokenizer_dir`, as save_draft writes them.
SavedDraft save_draft(const Eagle3Draft& draft, const std::string& dir, DType dtype,
                      const std::string& tokenizer_dir = {}, bool overwrite = false);

// What the engines will do with an EAGLE-3 export (one sentence each): SGLang's and vLLM's Llama
// EAGLE-3 layers read exactly three aux layers.
std::vector<std::string> eagle3_serving_notes(const Eagle3Config& draft);

// The commands that serve an EAGLE-3 draft in `dir` beside `target`, drafting a chain of
// `draft_tokens` per step: vLLM's eagle3 method and SGLang's EAGLE3 algorithm (top-1 chains).
std::vector<std::string> eagle3_launch_lines(const std::string& dir, const std::string& target,
                                             int64_t draft_tokens = 3);

}  // namespace sprig::speculative

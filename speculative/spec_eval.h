// Speculative decoding evaluated prompt by prompt (`sprig spec-eval`, the end of `sprig demo`):
// each prompt decoded by the target alone and with the draft (speculative/spec_decode.h), the
// outputs compared (lossless), the true acceptance length τ (tokens committed per target forward,
// bonus-inclusive), tokens per second with and without the draft, and the draft's teacher-forced
// accept_len on the same text: at anchors sampled as `sprig eval` samples them and at the
// decoding's own anchors (docs/semantics.md §13.3). A Domino draft also decodes without its
// correction head, so τ shows what the head adds. An EAGLE-3 draft drafts a chain of
// settings.draft_tokens per step (§13.4); its teacher-forced figures are the training-time test's
// over the same text, at every position and at the decoding's own anchors.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "speculative/evaluation.h"
#include "speculative/spec_decode.h"

namespace sprig::speculative {

struct SpecEvalSettings {
  int64_t max_new_tokens = 128, block_size = 0, stop_id = -1;  // as SpecDecodeOptions
  int64_t draft_tokens = 3, tree_topk = 0;                     // EAGLE-3
  int64_t num_anchors = 512;  // teacher-forced blocks sampled per prompt at most
  uint64_t seed = 0;          // of those anchors
};

class SpecEvaluator {
 public:
  // The draft must fit the target and be on its device in its dtype.
  SpecEvaluator(const FrozenTarget& target, const DFlashDraft& draft, SpecEvalSettings settings);
  SpecEvaluator(const FrozenTarget& target, const Eagle3Draft& draft, SpecEvalSettings settings);

  // Decodes `prompt` both ways; returns its JSON line {"prompt", "output_ids", "tau",
  // "target_forwards", "accepted_per_step", "lossless", ...} and, with `table`, prints its row.
  nlohmann::json evaluate(const std::vector<int64_t>& prompt, std::FILE* table = nullptr);
  // Every prompt so far, pooled: τ over all steps and per prompt, the teacher-forced lengths,
  // acceptance by draft slot, the committed-per-step histogram, speeds and step costs.
  nlohmann::json aggregate() const;
  void print_header(std::FILE* out) const;   // the settings and the table's column names
  void print_summary(std::FILE* out) const;  // aggregate() in sentences

 private:
  // Sums over the prompts evaluated.
  struct Totals {
    int64_t prompts = 0, lossless = 0, tokens = 0, steps = 0, committed = 0;
    int64_t whole_steps = 0, whole_committed = 0;  // whole_block_steps
    int64_t base_steps = 0, base_committed = 0;    // Domino without its correction head
    double tau_sum = 0, spec_seconds = 0, greedy_seconds = 0;
    double draft_seconds = 0, verify_seconds = 0, decode_seconds = 0, decode_steps = 0;
    DraftMetrics forced, forced_here;                         // sampled anchors, the decoding's own
    std::vector<int64_t> verified_by_slot, accepted_by_slot;  // slot k: draft k + 1
    std::vector<int64_t> histogram;                           // steps committing k + 1 tokens
  };

  // One prompt's speculative decoding with the draft.
  SpecDecodeResult decode(const std::vector<int64_t>& prompt, bool correction_head = true) const;
  // An EAGLE-3 draft's teacher-forced acceptance on prompt ++ output with chains of
  // draft_tokens: at every position (§9.2's rule) and at the decoding's own anchors (the chain
  // lengths, counting the steps of whole chains in the totals).
  void eagle3_forced(const std::vector<int64_t>& prompt, const SpecDecodeResult& r,
                     std::optional<DraftMetrics>& forced, std::optional<DraftMetrics>& here);

  const FrozenTarget& target_;
  const DFlashDraft* dflash_ = nullptr;  // one of the two
  const Eagle3Draft* eagle3_ = nullptr;
  SpecEvalSettings settings_;
  int64_t block_size_;  // a DFlash draft's block; an EAGLE-3 draft's chain and its anchor
  // A DFlash draft's teacher-forced metrics at sampled anchors, and at the decoding's own (no
  // draws).
  std::optional<TeacherForced> sampled_, at_decoding_;
  Totals totals_;
};

}  // namespace sprig::speculative

// Greedy speculative decoding of one sequence with a draft and its target (docs/semantics.md §13):
// the draft proposes tokens from the target's hidden states of the committed tokens (a DFlash
// draft a block at once, an EAGLE-3 draft a chain, one draft forward per token), the target
// verifies them in one forward, the longest agreeing prefix and the target's own next token are
// committed, and both caches roll back past the rejection. The output is the target's own greedy
// decoding; the per-step counts give the true acceptance length.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/qwen.h"
#include "speculative/draft.h"
#include "speculative/eagle3.h"

namespace sprig::speculative {

// The most nodes per depth a tree of drafts keeps (each expands as many children).
constexpr int64_t kMaxTreeTopk = 64;

struct SpecDecodeOptions {
  int64_t max_new_tokens = 128;
  int64_t block_size = 0;       // slots per draft block, in [2, the draft's]; 0: the draft's
  int64_t stop_id = -1;         // stop after committing this id (it is included); < 0: none
  bool correction_head = true;  // Domino: false drafts from the backbone's base logits alone
  int64_t draft_tokens = 3;     // EAGLE-3: tokens drafted per step (>= 1): a chain's length
  int64_t tree_topk = 0;        // EAGLE-3: > 0 drafts a tree of draft_tokens depths, tree_topk
                                // nodes each (docs/semantics.md §13.5); 0 a chain
};

struct SpecDecodeResult {
  std::vector<int64_t> output_ids;         // the new tokens, stop id included
  std::vector<int64_t> accepted_per_step;  // per verify step: drafts accepted + 1 (the bonus)
  std::vector<int64_t> drafted_per_step;   // per verify step: drafts the target checked
  bool stopped = false;                    // the last step committed the stop id (and no more)
  double prefill_seconds = 0, draft_seconds = 0, verify_seconds = 0;

  int64_t target_forwards() const { return static_cast<int64_t>(accepted_per_step.size()); }
  // Tokens committed per verify step (bonus-inclusive); 0 when no step ran.
  double tau() const;
};

// Decodes `prompt` (ids of the target's vocabulary) for at most max_new_tokens new tokens. The
// draft must fit the target (check_draft_fits) and be on its device in its dtype. Throws
// std::invalid_argument "[spec-decode] ..." for an empty prompt, ids outside the vocabulary, no
// budget or a block size outside [2, the draft's]. Positions past max_position_embeddings are
// computed as any other (callers apply nn/positions.h's rule first).
SpecDecodeResult speculative_generate(const QwenForCausalLM& target, const DFlashDraft& draft,
                                      const std::vector<int64_t>& prompt,
                                      const SpecDecodeOptions& options);

// The same with an EAGLE-3 draft, chaining options.draft_tokens drafts per step (docs/semantics.md
// §13.4); the draft fits the target (check_eagle3_fits). Throws as above, and for draft_tokens < 1.
SpecDecodeResult speculative_generate(const QwenForCausalLM& target, const Eagle3Draft& draft,
                                      const std::vector<int64_t>& prompt,
                                      const SpecDecodeOptions& options);

// The greedy drafts (drafts_per_block of them) of the block [anchor, MASK x (bs - 1)] at
// positions s .. s + bs - 1 over the context in `draft_cache` (DFlashDraft::extend_context), as
// the draft's kind makes them (DraftKind::drafts): Domino's head corrects them one at a time, its
// GRU reading the drafts themselves (unless `correction_head` is false: then the slots' base
// logits draft alone, on the same slots).
std::vector<int64_t> propose_block(const QwenForCausalLM& target, const DFlashDraft& draft,
                                   int64_t anchor, int64_t s, int64_t bs, KVCache& draft_cache,
                                   bool correction_head = true);

// The steps that verified a whole block of drafts inside the text (the last one not when it
// committed the stop id, which ends a block without its bonus token):
// their anchor positions in prompt ++ output and the tokens they committed. There, the
// teacher-forced acceptance of the same draft on the same text is the step's own
// (docs/semantics.md §13.3).
struct WholeBlockStep {
  int64_t anchor = 0, committed = 0;
};
std::vector<WholeBlockStep> whole_block_steps(const SpecDecodeResult& result, int64_t prompt_length,
                                              const DraftConfig& draft, int64_t block_size);

// The number of drafts a block of `block_size` slots proposes (DraftKind::drafts_per_block):
// block_size - 1 (slot 0 shows the anchor), or block_size for a Domino draft with shift_label
// (slot k predicts anchor + 1 + k).
int64_t drafts_per_block(const DraftConfig& draft, int64_t block_size);

}  // namespace sprig::speculative

#include "speculative/spec_decode.h"

#include <chrono>
#include <numeric>
#include <stdexcept>
#include <string>

#include "nn/qwen_input.h"
#include "speculative/draft_kind.h"

namespace sprig::speculative {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("[spec-decode] " + what);
}

Tensor positions_from(int64_t start, int64_t count, Device device) {
  std::vector<int64_t> pos(static_cast<size_t>(count));
  std::iota(pos.begin(), pos.end(), start);
  return Tensor::from_vector(pos, {1, count}, device);
}

// The target's view of a run of tokens: its hidden states at the draft's target layers (1, T,
// L * H), concatenated as the draft was trained on them, and the greedy successor of each token
// (of the last one only with `last_only`).
struct TargetStep {
  Tensor features;
  std::vector<int64_t> next;
};

TargetStep run_target(const QwenForCausalLM& target, const std::vector<int64_t>& layers,
                      const std::vector<int64_t>& ids, KVCache& cache, bool last_only = false) {
  const QwenInput in =
      decode_input(ids, cache.length(), target.config(), target.head_weight().device());
  Var final_hidden;
  const std::vector<Var> outputs = target.model.layer_outputs(in, layers, &final_hidden, &cache);
  std::vector<Tensor> captured;
  for (const Var& o : outputs) captured.push_back(o.value());
  const int64_t T = final_hidden.size(1);
  if (last_only) final_hidden = narrow(final_hidden, 1, T - 1, 1);
  const Tensor logits = target.logits(final_hidden).value();  // (1, T or 1, V)
  return {concat(captured, 2), argmax(logits.reshape({logits.size(1), logits.size(2)}), 1)
                                   .to(Device::cpu())
                                   .to_vector<int64_t>()};
}

// Refuses what no draft can decode: an empty prompt, ids outside the vocabulary, no budget, a
// stop id outside the vocabulary.
void check_request(const QwenConfig& tc, const std::vector<int64_t>& prompt,
                   const SpecDecodeOptions& o) {
  if (prompt.empty()) fail("the prompt is empty");
  for (int64_t id : prompt)
    if (id < 0 || id >= tc.vocab_size)
      fail("prompt id " + std::to_string(id) + " is outside the vocabulary [0, " +
           std::to_string(tc.vocab_size) + ")");
  if (o.max_new_tokens < 1)
    fail("max_new_tokens must be >= 1, got " + std::to_string(o.max_new_tokens));
  if (o.stop_id >= tc.vocab_size)
    fail("stop id " + std::to_string(o.stop_id) + " is outside the vocabulary [0, " +
         std::to_string(tc.vocab_size) + ")");
}

// The tokens a step verifies: its anchor and the drafts that fit the budget (k drafts and the
// bonus commit at most k + 1 tokens), and what it commits: the longest agreeing prefix and the
// target's token after it. Returns the tokens committed.
struct Verifier {
  std::vector<int64_t>& output;
  int64_t max_new_tokens, stop_id;
  bool stopped = false;

  bool done() const { return stopped || static_cast<int64_t>(output.size()) >= max_new_tokens; }
  // Commits `id` unless the run is over; returns whether it was committed.
  bool commit(int64_t id) {
    if (done()) return false;
    output.push_back(id);
    stopped = id == stop_id;
    return true;
  }
  void fit_budget(std::vector<int64_t>& drafts) const {
    const int64_t remaining = max_new_tokens - static_cast<int64_t>(output.size());
    if (static_cast<int64_t>(drafts.size()) > remaining - 1)
      drafts.resize(static_cast<size_t>(remaining - 1));
  }
  int64_t accept(const std::vector<int64_t>& drafts, const std::vector<int64_t>& next) {
    int64_t accepted = 0;
    while (accepted < static_cast<int64_t>(drafts.size()) &&
           drafts[static_cast<size_t>(accepted)] == next[static_cast<size_t>(accepted)])
      ++accepted;
    int64_t committed = 0;
    for (int64_t i = 0; i < accepted && commit(drafts[static_cast<size_t>(i)]); ++i) ++committed;
    if (commit(next[static_cast<size_t>(committed)])) ++committed;
    return committed;
  }
};

}  // namespace

double SpecDecodeResult::tau() const {
  if (accepted_per_step.empty()) return 0.0;
  const double total = std::accumulate(accepted_per_step.begin(), accepted_per_step.end(), 0.0);
  return total / static_cast<double>(accepted_per_step.size());
}

std::vector<int64_t> propose_block(const QwenForCausalLM& target, const DFlashDraft& draft,
                                   int64_t anchor, int64_t s, int64_t bs, KVCache& draft_cache,
                                   bool correction_head) {
  const DraftConfig& c = draft.config();
  const Device device = target.head_weight().device();
  std::vector<int64_t> ids(static_cast<size_t>(bs), c.mask_token_id);
  ids[0] = anchor;
  const Embedding& embed = target.model.embed_tokens;
  const Var noise = embed.forward(Tensor::from_vector(ids, {1, bs}, device));
  const int64_t H = c.layers.hidden_size;
  const Tensor hidden = draft.decode_block(noise, positions_from(s, bs, device), draft_cache)
                            .value()
                            .reshape({bs, H});
  // (bs, Vd): through the target's head, or the draft vocabulary's rows of it.
  const Tensor base = c.reduced_vocab()
                          ? matmul(hidden, draft.lm_head().to(device, hidden.dtype()), false, true)
                          : target.logits(Var(hidden)).value();
  const TokenEmbedding embedded = [&](int64_t id) {
    return embed.forward(Tensor::from_vector<int64_t>({id}, {1, 1}, device))
        .value()
        .reshape({1, H});
  };
  return c.kind().drafts(draft, hidden, base, anchor, embedded, correction_head);
}

std::vector<WholeBlockStep> whole_block_steps(const SpecDecodeResult& r, int64_t prompt_length,
                                              const DraftConfig& draft, int64_t block_size) {
  // Whole blocks whose drafts' positions all lie in the text (a stop id may end it sooner).
  const int64_t drafts = drafts_per_block(draft, block_size);
  const int64_t length = prompt_length + static_cast<int64_t>(r.output_ids.size());
  std::vector<WholeBlockStep> steps;
  int64_t s = prompt_length;
  for (size_t i = 0; i < r.accepted_per_step.size(); ++i) {
    if (r.drafted_per_step[i] == drafts && s + std::max(drafts, block_size - 1) < length)
      steps.push_back({s, r.accepted_per_step[i]});
    s += r.accepted_per_step[i];
  }
  return steps;
}

int64_t drafts_per_block(const DraftConfig& draft, int64_t block_size) {
  return draft.kind().drafts_per_block(draft, block_size);
}

SpecDecodeResult speculative_generate(const QwenForCausalLM& target, const DFlashDraft& draft,
                                      const std::vector<int64_t>& prompt,
                                      const SpecDecodeOptions& o) {
  const QwenConfig& tc = target.config();
  const DraftConfig& dc = draft.config();
  const int64_t n = static_cast<int64_t>(prompt.size());
  check_request(tc, prompt, o);
  const int64_t bs = o.block_size == 0 ? dc.block_size : o.block_size;
  if (bs < 2 || bs > dc.block_size)
    fail("block size " + std::to_string(bs) + " must be in [2, " + std::to_string(dc.block_size) +
         "], the draft's block size");

  NoGradGuard no_grad;
  const Device device = target.head_weight().device();
  SpecDecodeResult r;
  Verifier verifier{r.output_ids, o.max_new_tokens, o.stop_id};
  KVCache target_cache, draft_cache;

  auto start = Clock::now();
  TargetStep step = run_target(target, dc.target_layer_ids, prompt, target_cache, true);
  verifier.commit(step.next.back());
  r.prefill_seconds = seconds_since(start);
  Tensor pending = step.features;  // target features of committed tokens the draft has not seen
  int64_t s = n;                   // the anchor's position: committed, not yet run by the target
  while (!verifier.done()) {
    const int64_t anchor = r.output_ids.back();
    start = Clock::now();
    const int64_t m = pending.size(1);
    draft.extend_context(pending, positions_from(s - m, m, device), draft_cache);
    std::vector<int64_t> drafts =
        propose_block(target, draft, anchor, s, bs, draft_cache, o.correction_head);
    r.draft_seconds += seconds_since(start);

    verifier.fit_budget(drafts);
    std::vector<int64_t> block = {anchor};
    block.insert(block.end(), drafts.begin(), drafts.end());
    start = Clock::now();
    step = run_target(target, dc.target_layer_ids, block, target_cache);
    r.verify_seconds += seconds_since(start);
    const int64_t committed = verifier.accept(drafts, step.next);
    r.accepted_per_step.push_back(committed);
    r.drafted_per_step.push_back(static_cast<int64_t>(drafts.size()));
    // The anchor and the accepted drafts are now context; the rest of the block rolls back.
    target_cache.truncate(s + committed);
    pending = step.features.narrow(1, 0, committed);
    s += committed;
  }
  return r;
}

SpecDecodeResult speculative_generate(const QwenForCausalLM& target, const Eagle3Draft& draft,
                                      const std::vector<int64_t>& prompt,
                                      const SpecDecodeOptions& o) {
  check_request(target.config(), prompt, o);
  if (o.draft_tokens < 1) fail("draft_tokens must be >= 1, got " + std::to_string(o.draft_tokens));
  NoGradGuard no_grad;
  const Device device = target.head_weight().device();
  const Embedding& embed = target.model.embed_tokens;
  const std::vector<int64_t>& draft_to_target = draft.vocabulary().draft_to_target;
  const std::vector<int64_t>& layers = draft.config().aux_layer_ids;
  SpecDecodeResult r;
  Verifier verifier{r.output_ids, o.max_new_tokens, o.stop_id};
  KVCache target_cache, draft_cache;
  // The target token the draft's state `g` (1, 1, H) predicts.
  const auto predict = [&](const Var& g) {
    const auto id = static_cast<int64_t>(
        argmax(draft.logits(g).value().reshape({1, draft.config().draft_vocab_size}), 1).item());
    return draft_to_target[static_cast<size_t>(id)];
  };

  auto start = Clock::now();
  TargetStep step = run_target(target, layers, prompt, target_cache, true);
  verifier.commit(step.next.back());
  r.prefill_seconds = seconds_since(start);
  std::vector<int64_t> ids = prompt;  // every committed token
  ids.push_back(r.output_ids.back());
  Tensor pending = step.features;  // target states of positions [s - m, s), whose next tokens
  int64_t s = static_cast<int64_t>(prompt.size());  // are committed; s: the anchor's position
  while (!verifier.done()) {
    start = Clock::now();
    // The committed positions enter the draft's cache as step 0 of training saw them: the
    // target's state and the next token; the last one's output drafts the first token.
    const int64_t m = pending.size(1);
    const std::vector<int64_t> next(ids.end() - m, ids.end());
    Var g =
        draft.decode(embed.forward(Tensor::from_vector(next, {1, m}, device)),
                     draft.project(Var(pending)), positions_from(s - m, m, device), draft_cache);
    g = narrow(g, 1, m - 1, 1);
    const int64_t context = draft_cache.length();
    // Each further draft reads the previous one and the state that drafted it, one position on.
    std::vector<int64_t> drafts = {predict(g)};
    for (int64_t j = 1; j < o.draft_tokens; ++j) {
      g = draft.decode(embed.forward(Tensor::from_vector<int64_t>({drafts.back()}, {1, 1}, device)),
                       g, positions_from(s - 1 + j, 1, device), draft_cache);
      drafts.push_back(predict(g));
    }
    draft_cache.truncate(context);
    r.draft_seconds += seconds_since(start);

    verifier.fit_budget(drafts);
    std::vector<int64_t> block = {ids.back()};
    block.insert(block.end(), drafts.begin(), drafts.end());
    start = Clock::now();
    step = run_target(target, layers, block, target_cache);
    r.verify_seconds += seconds_since(start);
    const int64_t committed = verifier.accept(drafts, step.next);
    r.accepted_per_step.push_back(committed);
    r.drafted_per_step.push_back(static_cast<int64_t>(drafts.size()));
    ids.insert(ids.end(), r.output_ids.end() - committed, r.output_ids.end());
    target_cache.truncate(s + committed);
    pending = step.features.narrow(1, 0, committed);
    s += committed;
  }
  return r;
}

}  // namespace sprig::speculative

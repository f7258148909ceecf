#include "speculative/spec_decode.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <stdexcept>
#include <string>
#include <tuple>

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

// `parents` (one per id, -1 for the root) makes the run a tree: each token sees its ancestors.
TargetStep run_target(const QwenForCausalLM& target, const std::vector<int64_t>& layers,
                      const std::vector<int64_t>& ids, KVCache& cache, bool last_only = false,
                      const std::vector<int64_t>& parents = {}) {
  const Device device = target.head_weight().device();
  const QwenInput in = parents.empty()
                           ? decode_input(ids, cache.length(), target.config(), device)
                           : tree_input(ids, parents, cache.length(), target.config(), device);
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
  const size_t count = r.accepted_per_step.size();
  for (size_t i = 0; i < count; ++i) {
    if (r.drafted_per_step[i] == drafts && s + std::max(drafts, block_size - 1) < length &&
        !(r.stopped && i + 1 == count))
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
  r.stopped = verifier.stopped;
  return r;
}

namespace {

// A tree of drafts (docs/semantics.md §13.5): node i holds a target id, its parent (-1: the
// anchor), the draft's cumulative log-probability and the state that drafted it.
struct DraftTree {
  std::vector<int64_t> tokens, parents;
  std::vector<double> scores;
  std::vector<Var> states;  // (1, 1, H)
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
};

// The tree an EAGLE-3 draft grows from the output `g` (1, 1, H) at the last context position
// s - 1 over `cache` (left as it was): depth 1 holds g's `topk` best tokens; each further depth
// holds the `topk` best (by cumulative log-probability) of the children the previous depth's
// nodes draft, `topk` each, one draft forward per depth.
DraftTree grow_tree(const Eagle3Draft& draft, const Embedding& embed, const Var& g, int64_t s,
                    int64_t depth, int64_t topk, KVCache& cache) {
  const Device device = g.device();
  const int64_t context = cache.length(), Vd = draft.config().draft_vocab_size;
  const int64_t k = std::min(topk, Vd);
  const std::vector<int64_t>& draft_to_target = draft.vocabulary().draft_to_target;
  DraftTree tree;
  std::vector<int64_t> cache_row;  // per node expanded: its row in `cache`
  // Candidates: the k best children of each state of `outputs` (n, H) drafting for `parents`.
  const auto children = [&](const Tensor& outputs, const std::vector<int64_t>& parents) {
    const Tensor logp =
        log_softmax(draft.logits(Var(outputs)).value().to(Device::cpu(), DType::f64), 1);
    const std::vector<double> lp = logp.to_vector<double>();
    std::vector<std::tuple<double, int64_t, int64_t, int64_t>> c;  // score, parent, row, id
    for (size_t r = 0; r < parents.size(); ++r) {
      std::vector<int64_t> ids(static_cast<size_t>(Vd));
      std::iota(ids.begin(), ids.end(), 0);
      const double* row = lp.data() + r * static_cast<size_t>(Vd);
      std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int64_t a, int64_t b) {
        return row[a] > row[b] || (row[a] == row[b] && a < b);
      });
      const double base = parents[r] < 0 ? 0.0 : tree.scores[static_cast<size_t>(parents[r])];
      for (int64_t i = 0; i < k; ++i)
        c.emplace_back(base + row[ids[i]], parents[r], static_cast<int64_t>(r), ids[i]);
    }
    std::stable_sort(c.begin(), c.end(),
                     [](const auto& a, const auto& b) { return std::get<0>(a) > std::get<0>(b); });
    c.resize(std::min<size_t>(c.size(), static_cast<size_t>(k)));
    return c;
  };
  std::vector<int64_t> frontier;
  const auto add = [&](const auto& chosen, const std::vector<Var>& states) {
    frontier.clear();
    for (const auto& [score, parent, row, id] : chosen) {
      frontier.push_back(tree.size());
      tree.tokens.push_back(draft_to_target[static_cast<size_t>(id)]);
      tree.parents.push_back(parent);
      tree.scores.push_back(score);
      tree.states.push_back(states[static_cast<size_t>(row)]);
    }
  };
  add(children(g.value().reshape({1, g.size(2)}), {-1}), {g});
  for (int64_t d = 1; d < depth; ++d) {
    // The frontier's nodes, each over the context, its ancestors' rows and itself.
    const auto n = static_cast<int64_t>(frontier.size());
    const int64_t past = cache.length();
    Mask mask{n, past + n, {}};
    if (context > 0) mask.rects.push_back({0, n, 0, context});
    std::vector<int64_t> ids;
    std::vector<Var> states;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t node = frontier[static_cast<size_t>(i)];
      ids.push_back(tree.tokens[static_cast<size_t>(node)]);
      states.push_back(tree.states[static_cast<size_t>(node)]);
      mask.rects.push_back({i, i + 1, past + i, past + i + 1});
      for (int64_t a = tree.parents[static_cast<size_t>(node)]; a >= 0;
           a = tree.parents[static_cast<size_t>(a)])
        mask.rects.push_back(
            {i, i + 1, cache_row[static_cast<size_t>(a)], cache_row[static_cast<size_t>(a)] + 1});
    }
    cache_row.resize(static_cast<size_t>(tree.size()), -1);
    for (int64_t i = 0; i < n; ++i) cache_row[static_cast<size_t>(frontier[i])] = past + i;
    const Var out =
        draft.decode(embed.forward(Tensor::from_vector(ids, {1, n}, device)), concat(states, 1),
                     Tensor::from_vector(std::vector<int64_t>(static_cast<size_t>(n), s - 1 + d),
                                         {1, n}, device),
                     cache, std::move(mask));
    std::vector<Var> outputs;
    for (int64_t i = 0; i < n; ++i) outputs.push_back(narrow(out, 1, i, 1));
    add(children(out.value().reshape({n, out.size(2)}), frontier), outputs);
  }
  cache.truncate(context);
  return tree;
}

}  // namespace

SpecDecodeResult speculative_generate(const QwenForCausalLM& target, const Eagle3Draft& draft,
                                      const std::vector<int64_t>& prompt,
                                      const SpecDecodeOptions& o) {
  check_request(target.config(), prompt, o);
  if (o.draft_tokens < 1) fail("draft_tokens must be >= 1, got " + std::to_string(o.draft_tokens));
  if (o.tree_topk < 0 || o.tree_topk > kMaxTreeTopk)
    fail("tree_topk must be in [0, " + std::to_string(kMaxTreeTopk) + "], got " +
         std::to_string(o.tree_topk));
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
    if (o.tree_topk > 0) {  // a tree of drafts, verified at once; its accepted path commits
      const int64_t remaining = o.max_new_tokens - static_cast<int64_t>(r.output_ids.size());
      const int64_t depth = std::min(o.draft_tokens, remaining - 1);
      const DraftTree tree =
          depth > 0 ? grow_tree(draft, embed, g, s, depth, o.tree_topk, draft_cache) : DraftTree{};
      r.draft_seconds += seconds_since(start);
      std::vector<int64_t> block = {ids.back()}, parents = {-1};
      for (int64_t i = 0; i < tree.size(); ++i) {
        block.push_back(tree.tokens[static_cast<size_t>(i)]);
        parents.push_back(tree.parents[static_cast<size_t>(i)] + 1);
      }
      start = Clock::now();
      step = run_target(target, layers, block, target_cache, false, parents);
      r.verify_seconds += seconds_since(start);
      // From the anchor, the child holding the target's token, while there is one.
      std::vector<int64_t> path = {0};
      for (bool found = true; found;) {
        found = false;
        for (size_t c = 1; c < block.size() && !found; ++c)
          if (parents[c] == path.back() &&
              block[c] == step.next[static_cast<size_t>(path.back())]) {
            path.push_back(static_cast<int64_t>(c));
            found = true;
          }
      }
      std::vector<int64_t> drafts, next;
      for (size_t i = 1; i < path.size(); ++i)
        drafts.push_back(block[static_cast<size_t>(path[i])]);
      for (const int64_t row : path) next.push_back(step.next[static_cast<size_t>(row)]);
      const int64_t committed = verifier.accept(drafts, next);
      r.accepted_per_step.push_back(committed);
      r.drafted_per_step.push_back(depth);
      ids.insert(ids.end(), r.output_ids.end() - committed, r.output_ids.end());
      path.resize(static_cast<size_t>(committed));  // the anchor and the committed drafts
      target_cache.keep(s, path);
      pending = index_select(step.features, 1,
                             Tensor::from_vector(path, {committed}).to(step.features.device()));
      s += committed;
      continue;
    }
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
  r.stopped = verifier.stopped;
  return r;
}

}  // namespace sprig::speculative

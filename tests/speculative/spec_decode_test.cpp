// Speculative decoding (docs/semantics.md §13) on the golden target qwen3_tiny with DFlash,
// JetSpec and Domino (both shift_label settings) drafts: the output is the target's own greedy
// decoding for every prompt, block size and budget (a budget below the block, a stop id, a prompt
// that ends on a document boundary); a draft that agrees with the target is accepted whole, up to
// the budget; the drafts proposed from the cached context equal the training layout's predictions
// at the same anchor (the cache, positions and block mask are the trained draft's), so every
// whole-block step accepts what teacher forcing accepts at its anchor; and bad arguments are
// refused.
#include "speculative/spec_decode.h"

#include <gtest/gtest.h>

#include "nn/generate.h"
#include "speculative/domino.h"
#include "speculative/draft_kind.h"
#include "tests/speculative/draft_test_util.h"
#include "tests/tensor/op_test_util.h"

namespace sprig::speculative {
namespace {

using namespace testing_rows;

std::unique_ptr<DFlashDraft> variant(std::string_view kind, bool shift_label = true) {
  auto plain = load_draft(kGolden + "dflash_tiny");
  DraftConfig c = plain->config();
  if (kind == "jetspec") c.causal = true;
  if (kind == "domino")
    c.head = domino_head({.emb_dim = 8, .gru_hidden_dim = 6, .shift_label = shift_label});
  Generator gen(5);
  auto draft = std::make_unique<DFlashDraft>(c, gen);
  std::map<std::string, Var> params;
  for (const auto& [name, p] : draft->named_parameters()) params[name] = p;
  for (const auto& [name, value] : plain->state_dict()) params.at(name).value().copy_(value);
  if (draft->head())  // a correction large enough to change drafts
    for (const Var& w : {domino_head_module(*draft).embed_proj_in.weight,
                         domino_head_module(*draft).embed_proj_out.weight})
      w.value().copy_(testing::rand_normal(w.shape(), 3, w.dtype()));
  draft->train(false);
  return draft;
}

struct Case {
  const char* name;
  std::string_view kind;
  bool shift_label = true;
};
const Case kCases[] = {{"dflash", "dflash"},
                       {"jetspec", "jetspec"},
                       {"domino", "domino", true},
                       {"domino unshifted", "domino", false}};

TEST(SpecDecode, OutputIsTheTargetsGreedyDecoding) {
  const FrozenTarget target = golden_target();
  const QwenForCausalLM& model = target.model();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const auto draft = variant(c.kind, c.shift_label);
    for (uint64_t seed : {1, 2, 3}) {
      const std::vector<int64_t> prompt = tokens(seed, 5 + 4 * static_cast<int64_t>(seed));
      for (int64_t bs : {2, 3, 4})
        for (int64_t budget : {1, 3, 24}) {
          SCOPED_TRACE("prompt " + std::to_string(seed) + ", block " + std::to_string(bs) +
                       ", budget " + std::to_string(budget));
          const SpecDecodeResult r = speculative_generate(
              model, *draft, prompt, {.max_new_tokens = budget, .block_size = bs});
          EXPECT_EQ(r.output_ids, generate_greedy(model, prompt, budget));
          // Every step commits what it verified at most, and the steps add up to the output
          // (less the prefill's token).
          int64_t total = 1;
          for (size_t i = 0; i < r.accepted_per_step.size(); ++i) {
            EXPECT_GE(r.accepted_per_step[i], 1);
            EXPECT_LE(r.accepted_per_step[i], r.drafted_per_step[i] + 1);
            EXPECT_LE(r.drafted_per_step[i], drafts_per_block(draft->config(), bs));
            total += r.accepted_per_step[i];
          }
          EXPECT_EQ(total, static_cast<int64_t>(r.output_ids.size()));
        }
    }
  }
}

TEST(SpecDecode, StopsAfterTheStopIdAsGreedyDecodingDoes) {
  const FrozenTarget target = golden_target();
  const auto draft = variant("dflash");
  const std::vector<int64_t> prompt = tokens(4, 9);
  const std::vector<int64_t> greedy = generate_greedy(target.model(), prompt, 20);
  const int64_t stop = greedy[5];
  const SpecDecodeResult r =
      speculative_generate(target.model(), *draft, prompt, {.max_new_tokens = 20, .stop_id = stop});
  EXPECT_EQ(r.output_ids, generate_greedy(target.model(), prompt, 20, stop));
  EXPECT_EQ(r.output_ids.back(), stop);
}

// A prompt that ends on a document boundary (its last token the stop id: the next document starts
// at the first new token), decoded up to the next boundary or the budget, with every draft kind.
TEST(SpecDecode, PromptEndingOnADocumentBoundary) {
  const FrozenTarget target = golden_target();
  std::vector<int64_t> prompt = tokens(6, 7);
  const std::vector<int64_t> greedy = generate_greedy(target.model(), prompt, 12);
  const int64_t end = greedy[7];  // stands for the document-end id
  prompt.push_back(end);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const auto draft = variant(c.kind, c.shift_label);
    for (int64_t bs : {2, 4}) {
      const SpecDecodeResult r = speculative_generate(
          target.model(), *draft, prompt, {.max_new_tokens = 16, .block_size = bs, .stop_id = end});
      EXPECT_EQ(r.output_ids, generate_greedy(target.model(), prompt, 16, end));
    }
  }
}

TEST(SpecDecode, AgreeingDraftIsAcceptedWholeUpToTheBudget) {
  // Zero final norms: the target and the draft both give all-zero logits, so every greedy token
  // is id 0 and every draft agrees. Budget 10, prefill 1 token, then blocks commit drafts + 1.
  const FrozenTarget target = golden_target();
  target.model().model.norm->weight.value().zero_();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const auto draft = variant(c.kind, c.shift_label);
    draft->norm->weight.value().zero_();
    if (draft->head()) domino_head_module(*draft).embed_proj_out.weight.value().zero_();
    const SpecDecodeResult r =
        speculative_generate(target.model(), *draft, tokens(6, 7), {.max_new_tokens = 10});
    EXPECT_EQ(r.output_ids, std::vector<int64_t>(10, 0));
    // bs 4: 3 drafts per block (4 for shifted Domino): 1 + 4 + 4 + 1, or 1 + 5 + 4.
    const bool four = drafts_per_block(draft->config(), 4) == 4;
    EXPECT_EQ(r.accepted_per_step,
              four ? std::vector<int64_t>({5, 4}) : std::vector<int64_t>({4, 4, 1}));
    EXPECT_DOUBLE_EQ(r.tau(), four ? 4.5 : 3.0);
  }
}

TEST(SpecDecode, ProposalsEqualTheTrainingLayoutsPredictions) {
  // The context reaches the draft's cache in two pieces (as decoding commits it); the block's
  // drafts must be the argmax of the teacher-forced slot logits at the same anchor on a text
  // whose tokens after the anchor are the drafts (Domino's GRU then reads what it read when
  // proposing them).
  const FrozenTarget target = golden_target();
  const QwenForCausalLM& model = target.model();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const auto draft = variant(c.kind, c.shift_label);
    const DraftConfig& dc = draft->config();
    const int64_t bs = dc.block_size, s = 9;
    const std::vector<int64_t> text = tokens(7, s + 1);  // context [0, s) and the anchor
    KVCache target_cache, draft_cache;
    for (const auto& [from, count] : {std::pair<int64_t, int64_t>{0, 6}, {6, s - 6}}) {
      const std::vector<int64_t> piece(text.begin() + from, text.begin() + from + count);
      const QwenInput in = decode_input(piece, from, model.config(), Device::cpu());
      Var final_hidden;
      std::vector<Tensor> captured;
      for (const Var& o :
           model.model.layer_outputs(in, dc.target_layer_ids, &final_hidden, &target_cache))
        captured.push_back(o.value());
      std::vector<int64_t> pos(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) pos[i] = from + i;
      draft->extend_context(concat(captured, 2), Tensor::from_vector(pos, {1, count}), draft_cache);
    }
    const std::vector<int64_t> drafts = propose_block(model, *draft, text[s], s, bs, draft_cache);
    ASSERT_EQ(static_cast<int64_t>(drafts.size()), drafts_per_block(dc, bs));
    EXPECT_EQ(draft_cache.length(), s);  // the block's rows were dropped

    std::vector<int64_t> forced = text;
    forced.insert(forced.end(), drafts.begin(), drafts.end());
    forced.resize(static_cast<size_t>(s + bs + 1), 0);
    const DraftRows rows = unpacked_row(forced);
    const Anchors anchors = anchors_at({s});
    Tensor logits;
    draft->config().kind().objective({})->loss(target, *draft, {rows, anchors, {}}, &logits);
    const std::vector<int64_t> predicted = argmax(logits, 1).to_vector<int64_t>();  // per slot
    const int64_t first = bs - static_cast<int64_t>(drafts.size());
    for (size_t j = 0; j < drafts.size(); ++j)
      EXPECT_EQ(drafts[j], predicted[first + j]) << "draft " << j + 1;
  }
}

// Without its head a Domino draft proposes from the backbone's base logits on its own slots: the
// slots of the DFlash draft with the same backbone (and slot 0 too with shift_label), and the
// decoding stays the target's own.
TEST(SpecDecode, DominoWithoutItsHeadDraftsFromTheBaseLogits) {
  const FrozenTarget target = golden_target();
  const QwenForCausalLM& model = target.model();
  const auto plain = load_draft(kGolden + "dflash_tiny");
  const DraftConfig& dc = plain->config();
  const int64_t bs = dc.block_size, s = 9;
  const std::vector<int64_t> text = tokens(7, s + 1);
  const auto proposals = [&](const DFlashDraft& draft, bool head) {
    KVCache target_cache, draft_cache;
    const QwenInput in = decode_input(std::vector<int64_t>(text.begin(), text.begin() + s), 0,
                                      model.config(), Device::cpu());
    Var final_hidden;
    std::vector<Tensor> captured;
    for (const Var& o :
         model.model.layer_outputs(in, dc.target_layer_ids, &final_hidden, &target_cache))
      captured.push_back(o.value());
    std::vector<int64_t> pos(static_cast<size_t>(s));
    for (int64_t i = 0; i < s; ++i) pos[i] = i;
    draft.extend_context(concat(captured, 2), Tensor::from_vector(pos, {1, s}), draft_cache);
    return propose_block(model, draft, text[s], s, bs, draft_cache, head);
  };
  const std::vector<int64_t> dflash = proposals(*plain, true);
  for (bool shift_label : {true, false}) {
    SCOPED_TRACE(shift_label ? "shifted" : "unshifted");
    const auto domino = variant("domino", shift_label);
    std::vector<int64_t> base = proposals(*domino, false);
    EXPECT_NE(base, proposals(*domino, true));  // the head changes drafts here
    if (shift_label) base.erase(base.begin());  // slot 0 predicts anchor + 1
    EXPECT_EQ(base, dflash);
    const std::vector<int64_t> prompt = tokens(2, 13);
    EXPECT_EQ(speculative_generate(model, *domino, prompt,
                                   {.max_new_tokens = 24, .correction_head = false})
                  .output_ids,
              generate_greedy(model, prompt, 24));
  }
}

// The teacher-forced metrics of `draft` on `text` (supervised from `prompt_length` on) at `at`.
DraftMetrics teacher_forced(const FrozenTarget& target, const DFlashDraft& draft,
                            const std::vector<int64_t>& text, int64_t prompt_length,
                            const std::vector<int64_t>& at) {
  DraftRows rows = unpacked_row(text);
  std::vector<int64_t> mask(text.size(), 1);
  std::fill(mask.begin(), mask.begin() + prompt_length, 0);
  rows.loss_mask = Tensor::from_vector(mask, {1, static_cast<int64_t>(text.size())});
  const Anchors anchors = anchors_at(at);
  return draft.config().kind().objective({})->loss(target, draft, {rows, anchors, {}}).metrics;
}

TEST(SpecDecode, EveryFullStepAcceptsWhatTeacherForcingAcceptsAtItsAnchor) {
  // Decoding commits drafts + 1 where the teacher-forced block at the same anchor counts its
  // leading correct slots + 1: the same number, step by step, on the decoded text. With the zeroed
  // target and Domino's base, slot 0's draft (id 0) is right and the corrected slots decide.
  for (const bool zeroed : {false, true})
    for (const Case& c : kCases) {
      if (zeroed && c.kind != "domino") continue;
      SCOPED_TRACE(std::string(c.name) + (zeroed ? ", zeroed target" : ""));
      const FrozenTarget target = golden_target();
      const auto draft = variant(c.kind, c.shift_label);
      if (zeroed) {
        target.model().model.norm->weight.value().zero_();
        draft->norm->weight.value().zero_();
      }
      const std::vector<int64_t> prompt = tokens(8, 6);
      const SpecDecodeResult r =
          speculative_generate(target.model(), *draft, prompt, {.max_new_tokens = 40});
      const int64_t bs = draft->config().block_size;
      std::vector<int64_t> at;
      int64_t committed = 0, steps = 0;
      for (const WholeBlockStep& step : whole_block_steps(r, 6, draft->config(), bs)) {
        at.push_back(step.anchor);
        committed += step.committed;
        ++steps;
      }
      ASSERT_GT(steps, 5);
      if (zeroed) {
        EXPECT_GE(committed, 2 * steps);
      }
      std::vector<int64_t> text = prompt;
      text.insert(text.end(), r.output_ids.begin(), r.output_ids.end());
      const DraftMetrics m = teacher_forced(target, *draft, text, 6, at);
      EXPECT_EQ(m.valid_blocks, steps);
      EXPECT_EQ(m.accept_len_sum, committed);
    }
}

// A last block that committed the stop id has no bonus token after it: teacher forcing would
// count one more, so it is not a whole block.
TEST(SpecDecode, WholeBlockStepsLeaveOutABlockEndedByTheStopId) {
  const auto draft = load_draft(kGolden + "dflash_tiny");
  const int64_t bs = draft->config().block_size, drafts = drafts_per_block(draft->config(), bs);
  SpecDecodeResult r;
  r.accepted_per_step = {drafts + 1, drafts};  // all accepted, the second ending on the stop id
  r.drafted_per_step = {drafts, drafts};
  r.output_ids.assign(static_cast<size_t>(1 + 2 * drafts + 1), 7);
  EXPECT_EQ(whole_block_steps(r, 5, draft->config(), bs).size(), 2u);
  r.stopped = true;
  const std::vector<WholeBlockStep> steps = whole_block_steps(r, 5, draft->config(), bs);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].anchor, 5);
  EXPECT_EQ(steps[0].committed, drafts + 1);
}

TEST(SpecDecode, RefusesBadArguments) {
  const FrozenTarget target = golden_target();
  const auto draft = variant("dflash");
  const auto refuses = [&](const std::vector<int64_t>& prompt, const SpecDecodeOptions& o,
                           const std::string& message) {
    EXPECT_TRUE(testing::throws_invalid(
        [&] { speculative_generate(target.model(), *draft, prompt, o); }, message));
  };
  refuses({}, {}, "[spec-decode] the prompt is empty");
  refuses({96}, {}, "[spec-decode] prompt id 96 is outside the vocabulary [0, 96)");
  refuses({1, 2}, {.max_new_tokens = 0}, "[spec-decode] max_new_tokens must be >= 1, got 0");
  refuses({1}, {.max_new_tokens = 4, .block_size = 5},
          "[spec-decode] block size 5 must be in [2, 4], the draft's");
  refuses({1}, {.max_new_tokens = 4, .block_size = 1},
          "[spec-decode] block size 1 must be in [2, 4]");
  refuses({1}, {.max_new_tokens = 4, .stop_id = 96},
          "[spec-decode] stop id 96 is outside the vocabulary [0, 96)");
}

TEST(KVCache, TruncateKeepsThePrefixAndRefusesToGrow) {
  KVCache cache;
  cache.k = {Tensor::from_vector<float>({1, 2, 3}, {1, 3, 1, 1})};
  cache.v = {Tensor::from_vector<float>({4, 5, 6}, {1, 3, 1, 1})};
  cache.truncate(2);
  EXPECT_EQ(cache.length(), 2);
  EXPECT_EQ(cache.v[0].to_vector<float>(), (std::vector<float>{4, 5}));
  EXPECT_TRUE(testing::throws_invalid([&] { cache.truncate(3); },
                                      "[kv cache] cannot keep 3 positions of 2"));
}

}  // namespace
}  // namespace sprig::speculative

// Draft vocabularies of the DFlash family (docs/semantics.md §9.10) on the golden target
// qwen3_tiny: a draft whose head covers some of the target's ids (the target's rows of them,
// frozen) has the whole-vocabulary draft's logits at those ids, and its loss is the
// whole-vocabulary logits' loss restricted to them, for DFlash, Domino and JetSpec: a label
// outside the vocabulary counts as a miss and has no loss (DFlash, Domino), the teacher is
// renormalised over the vocabulary (JetSpec). Its directory holds lm_head.weight, d2t and t2d and
// reads back; one without d2t is refused; speculative decoding with it drafts only its ids and
// stays the target's greedy decoding.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "nn/generate.h"
#include "speculative/domino.h"
#include "speculative/jetspec.h"
#include "speculative/serving.h"
#include "speculative/spec_decode.h"
#include "tensor/safetensors.h"
#include "tests/nn/checkpoint_fixtures.h"
#include "tests/speculative/draft_test_util.h"
#include "tests/tensor/op_test_util.h"
#include "tests/test_util.h"

namespace sprig::speculative {
namespace {

using namespace testing_rows;
constexpr int64_t kS = 16;

// Every third id of the target's, and the mask token (the label of no slot): about a third of the
// labels fall outside.
DraftVocabulary thirds(int64_t vocab_size) {
  DraftVocabulary v;
  v.vocab_size = vocab_size;
  for (int64_t id = 0; id < vocab_size; id += 3) v.draft_to_target.push_back(id);
  if (v.draft_to_target.back() != kMask) v.draft_to_target.push_back(kMask);
  return v;
}

// `full`'s weights under a config over `vocab`, its head the target's rows of those ids and a
// Domino correction's projection its rows of them.
std::unique_ptr<DFlashDraft> restricted(const DFlashDraft& full, const FrozenTarget& target,
                                        const DraftVocabulary& vocab) {
  DraftConfig c = full.config();
  c.draft_vocab_size = vocab.size();
  Generator gen(0);
  auto draft = std::make_unique<DFlashDraft>(c, gen);
  std::map<std::string, Tensor> state = full.state_dict();
  if (state.contains("embed_proj.2.weight"))
    state["embed_proj.2.weight"] =
        index_select(state["embed_proj.2.weight"], 0, vocab.target_ids());
  draft->load_state_dict(state);
  draft->set_vocabulary(vocab, index_select(target.head().value(), 0, vocab.target_ids()));
  draft->train(false);
  return draft;
}

std::unique_ptr<DFlashDraft> golden_draft(std::string_view kind) {
  auto plain = load_draft(kGolden + "dflash_tiny");
  DraftConfig c = plain->config();
  c.causal = kind == "jetspec";
  if (kind == "domino") c.head = domino_head({.emb_dim = 8, .gru_hidden_dim = 6});
  Generator gen(5);
  auto draft = std::make_unique<DFlashDraft>(c, gen);
  std::map<std::string, Var> params;
  for (const auto& [name, p] : draft->named_parameters()) params[name] = p;
  for (const auto& [name, value] : plain->state_dict()) params.at(name).value().copy_(value);
  if (draft->head())  // a correction large enough to move the logits
    for (const Var& w : {domino_head_module(*draft).embed_proj_in.weight,
                         domino_head_module(*draft).embed_proj_out.weight})
      w.value().copy_(testing::rand_normal(w.shape(), 3, w.dtype()));
  draft->train(false);
  return draft;
}

DraftLoss run(std::string_view kind, const FrozenTarget& target, const DFlashDraft& draft,
              const DraftRows& rows, const Anchors& anchors, Tensor* logits) {
  if (kind == "domino") return domino_loss(target, draft, rows, anchors, {7.0, 0.0}, logits);
  if (kind == "jetspec") return jetspec_loss(target, draft, rows, anchors, {1.0, 0}, logits);
  return dflash_loss(target, draft, rows, anchors, {}, {}, logits);
}

// log softmax of row `r` of `logits` over the columns `ids`.
std::vector<double> log_softmax_over(const std::vector<float>& logits, int64_t V, int64_t r,
                                     const std::vector<int64_t>& ids) {
  std::vector<double> z;
  double top = -INFINITY;
  for (int64_t id : ids) top = std::max(top, z.emplace_back(logits[r * V + id]));
  double sum = 0;
  for (double v : z) sum += std::exp(v - top);
  for (double& v : z) v -= top + std::log(sum);
  return z;
}

struct Expected {
  double loss = 0, valid = 0, correct = 0, outside = 0;
};

// The loss and metrics of the restricted draft computed from the whole-vocabulary draft's slot
// logits (B * Q, V) and, for JetSpec, the target's logits (S, V).
Expected restricted_from_full(std::string_view kind, const Tensor& full_logits,
                              const Tensor& target_logits, const Blocks& blocks,
                              const std::vector<int64_t>& anchors, const DraftVocabulary& vocab) {
  const int64_t V = vocab.vocab_size, bs = blocks.block_size, N = blocks.target_ids.size(1);
  const std::vector<float> logits = full_logits.to_vector<float>();
  const std::vector<int64_t> ids = blocks.target_ids.to_vector<int64_t>();
  const std::vector<float> mask = blocks.block_mask.to_vector<float>();
  const std::vector<int64_t> labels = vocab.draft_ids(ids);
  const int64_t first = kind == "domino" ? 0 : 1;  // Domino's shifted labels: every slot
  Expected e;
  double weighted = 0, weights = 0;
  for (int64_t j = 0; j < N; ++j)
    for (int64_t k = first; k < bs; ++k) {
      const int64_t i = j * bs + k;
      if (mask[i] < 0.5f) continue;
      const std::vector<double> q = log_softmax_over(logits, V, i, vocab.draft_to_target);
      const auto pred = std::max_element(q.begin(), q.end()) - q.begin();
      e.valid += 1;
      if (kind == "jetspec") {  // the teacher: the target at anchor + k - 1, renormalised
        const std::vector<float> t = target_logits.to_vector<float>();
        const int64_t row = std::min(anchors[j] + k - 1, kS - 1);
        const std::vector<double> p = log_softmax_over(t, V, row, vocab.draft_to_target);
        for (size_t v = 0; v < p.size(); ++v) weighted += std::exp(p[v]) * (p[v] - q[v]);
        weights += 1;
        const auto top = std::max_element(t.begin() + row * V, t.begin() + (row + 1) * V) -
                         (t.begin() + row * V);
        const int64_t teacher = vocab.draft_ids({top})[0];
        e.outside += teacher < 0;
        e.correct += pred == teacher;
        continue;
      }
      if (labels[i] < 0) {  // a miss without a loss
        e.outside += 1;
        continue;
      }
      const double w =
          kind == "domino" ? domino_slot_weight(k, true, 7.0) : std::exp(-(k - 1) / 7.0);
      weighted += -w * q[labels[i]];
      weights += w;
      e.correct += pred == labels[i];
    }
  e.loss = kind == "jetspec" ? weighted / weights : weighted / (weights + 1e-6);
  return e;
}

TEST(ReducedVocab, EachKindsLossIsTheWholeVocabularysRestricted) {
  const FrozenTarget target = golden_target();
  const DraftVocabulary vocab = thirds(target.config().vocab_size);
  const DraftRows rows = unpacked_row(tokens(4, kS));
  const std::vector<int64_t> at = {0, 3, 7, 12};
  for (std::string_view kind : {"dflash", "domino", "jetspec"}) {
    SCOPED_TRACE(std::string(kind));
    const auto full = golden_draft(kind);
    const auto reduced = restricted(*full, target, vocab);
    Tensor full_logits, reduced_logits;
    const DraftLoss whole = run(kind, target, *full, rows, anchors_at(at), &full_logits);
    const DraftLoss part = run(kind, target, *reduced, rows, anchors_at(at), &reduced_logits);
    // The logits: the whole vocabulary's at the draft's ids.
    EXPECT_LE(
        testing::max_abs_diff(reduced_logits, index_select(full_logits, 1, vocab.target_ids())),
        1e-5);
    Tensor teacher;
    target.capture(rows, {0}, &teacher);
    const Blocks blocks = make_blocks(rows, anchors_at(at), block_options(full->config()));
    const Expected e =
        restricted_from_full(kind, full_logits, teacher.reshape({kS, -1}), blocks, at, vocab);
    EXPECT_GT(e.outside, 0);  // the case of a label outside the vocabulary is exercised
    EXPECT_LT(e.outside, e.valid);
    EXPECT_NEAR(part.value(), e.loss, 1e-5 * std::max(1.0, e.loss));
    EXPECT_EQ(part.metrics.valid_tokens, whole.metrics.valid_tokens);
    EXPECT_EQ(part.metrics.valid_tokens, e.valid);
    EXPECT_EQ(part.metrics.correct_tokens, e.correct);
    EXPECT_LE(part.metrics.accept_len_sum, whole.metrics.accept_len_sum + 1e-9);
  }
}

TEST(ReducedVocab, TheDirectoryHoldsTheHeadsRowsAndTheMap) {
  const FrozenTarget target = golden_target();
  const DraftVocabulary vocab = thirds(target.config().vocab_size);
  const auto draft = restricted(*golden_draft("dflash"), target, vocab);
  const testing::NamedTempDir tmp("reduced_vocab_files");
  const std::string dir = tmp.path + "/draft", bad = tmp.path + "/no_map";
  save_draft(*draft, dir, DType::f32);
  const nlohmann::json j = nlohmann::json::parse(testing::read_text(dir + "/config.json"));
  EXPECT_EQ(j.at("draft_vocab_size"), vocab.size());
  std::vector<SafetensorsEntry> entries;  // all but d2t
  {
    const SafetensorsFile saved(dir + "/model.safetensors");
    EXPECT_EQ(saved.load("lm_head.weight").shape(),
              (Shape{vocab.size(), target.config().hidden_size}));
    EXPECT_EQ(saved.load("d2t").dtype(), DType::i64);
    EXPECT_TRUE(bit_identical(saved.load("d2t"), vocab.d2t()));
    EXPECT_EQ(saved.info("t2d").dtype, StDType::BOOL);
    for (const StTensorInfo& t : saved.tensors())
      if (t.name != "d2t") entries.push_back({t.name, saved.load(t.name)});
  }

  const auto loaded = load_draft(dir);
  EXPECT_EQ(loaded->config().draft_vocab_size, vocab.size());
  EXPECT_EQ(loaded->vocabulary().draft_to_target, vocab.draft_to_target);
  EXPECT_TRUE(bit_identical(loaded->lm_head(), draft->lm_head()));
  EXPECT_TRUE(
      bit_identical(loaded->lm_head(), index_select(target.head().value(), 0, vocab.target_ids())));

  // Without d2t the draft's ids cannot be mapped back: refused.
  std::filesystem::create_directory(bad);
  std::filesystem::copy_file(dir + "/config.json", bad + "/config.json");
  save_safetensors(bad + "/model.safetensors", entries);
  const std::string refusal = testing::runtime_error_message([&] { load_draft(bad); });
  EXPECT_NE(refusal.find("d2t"), std::string::npos) << refusal;
}

TEST(ReducedVocab, SpeculativeDecodingDraftsItsIdsAndStaysLossless) {
  const FrozenTarget target = golden_target();
  const QwenForCausalLM& model = target.model();
  const DraftVocabulary vocab = thirds(target.config().vocab_size);
  for (std::string_view kind : {"dflash", "domino", "jetspec"}) {
    SCOPED_TRACE(std::string(kind));
    const auto draft = restricted(*golden_draft(kind), target, vocab);
    for (uint64_t seed : {1, 2}) {
      const std::vector<int64_t> prompt = tokens(seed, 9);
      const SpecDecodeResult r =
          speculative_generate(model, *draft, prompt, {.max_new_tokens = 20, .block_size = 4});
      EXPECT_EQ(r.output_ids, generate_greedy(model, prompt, 20));
      // A block proposed over the prompt's context holds ids of the vocabulary alone.
      KVCache cache;
      draft->extend_context(target.capture(unpacked_row(prompt), draft->config().target_layer_ids),
                            Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8}, {1, 9}),
                            cache);
      for (int64_t id : propose_block(model, *draft, r.output_ids[0], 9, 4, cache))
        EXPECT_GE(vocab.draft_ids({id})[0], 0) << id;
    }
  }
}

}  // namespace
}  // namespace sprig::speculative

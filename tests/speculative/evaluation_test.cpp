// Draft kinds and teacher-forced evaluation as a library (speculative/draft_kind.h,
// speculative/evaluation.h, speculative/spec_eval.h) on the golden target qwen3_tiny: every draft
// config has exactly one kind; the aggregate weighs each record's loss by its loss_weight and
// pools the ratios' sums; records that score nothing are skipped and counted; anchors and prefix
// lengths follow the seed; a kind's own ratios come from its sums; and speculative decoding
// evaluated prompt by prompt is lossless, with teacher forcing at the decoding's own anchors
// accepting what the whole-block steps committed.
#include "speculative/evaluation.h"

#include <gtest/gtest.h>

#include <optional>

#include "nn/checkpoint.h"
#include "nn/generate.h"
#include "speculative/dflash.h"
#include "speculative/domino.h"
#include "speculative/spec_eval.h"
#include "tests/speculative/draft_test_util.h"

namespace sprig::speculative {
namespace {

using namespace testing_rows;
using json = nlohmann::json;

std::unique_ptr<DFlashDraft> golden_draft() {
  auto draft = load_draft(kGolden + "dflash_tiny");
  draft->train(false);
  return draft;
}

DraftBatch batch_at(const std::vector<int64_t>& ids, const std::vector<int64_t>& at = {}) {
  return {unpacked_row(ids), at.empty() ? Anchors{} : anchors_at(at), {}};
}

TEST(DraftKinds, EveryConfigHasExactlyOneKind) {
  EXPECT_EQ(draft_kind_names(), "dflash, domino, jetspec");
  DraftConfig c = golden_draft()->config();
  EXPECT_EQ(c.kind().name(), "dflash");
  c.causal = true;
  EXPECT_EQ(c.kind().name(), "jetspec");
  c.causal = false;
  c.head = domino_head({});
  EXPECT_EQ(c.kind().name(), "domino");
  for (const DraftKind* kind : draft_kinds()) {
    EXPECT_EQ(find_draft_kind(kind->name()), kind);
    EXPECT_EQ(kind->is_kind_of(c), kind == &domino_kind()) << kind->name();
  }
  EXPECT_EQ(find_draft_kind("eagle3"), nullptr);
  EXPECT_EQ(testing::invalid_argument_message([&] { check_draft_kind(c, jetspec_kind(), "d"); }),
            "[draft] d is a domino draft: a JetSpec recipe needs an in-block causal draft "
            "(is_causal true)");
}

TEST(TeacherForced, TheAggregateWeighsEachRecordByItsLossWeight) {
  const FrozenTarget target = golden_target();
  const auto draft = golden_draft();
  NoGradGuard no_grad;
  TeacherForced evaluator(target, *draft, {}, 512, 0);
  double weighted = 0, weight = 0, accepted = 0, blocks = 0;
  for (const auto& [seed, at] :
       {std::pair<uint64_t, std::vector<int64_t>>{1, {1, 6}}, {2, {3}}, {3, {0, 5, 9}}}) {
    DraftBatch batch = batch_at(tokens(seed), at);
    ASSERT_EQ(evaluator.prepare(batch), "");
    const std::optional<DraftLoss> loss = evaluator.score(batch);
    ASSERT_TRUE(loss.has_value());
    const DraftLoss direct =
        dflash_loss(target, *draft, batch.rows, batch.anchors, ObjectiveOptions{});
    EXPECT_EQ(loss->value(), direct.value());
    weighted += direct.value() * direct.metrics.loss_weight;
    weight += direct.metrics.loss_weight;
    accepted += direct.metrics.accept_len_sum;
    blocks += direct.metrics.valid_blocks;
  }
  const json a = evaluator.aggregate();
  EXPECT_EQ(a["records"], 3);
  EXPECT_EQ(a["skipped_records"], 0);
  EXPECT_EQ(blocks, 6);
  EXPECT_NEAR(a["loss"].get<double>(), weighted / weight, 1e-12);
  EXPECT_DOUBLE_EQ(a["accept_len"].get<double>(), accepted / blocks);
  EXPECT_EQ(a["valid_blocks"], blocks);
}

TEST(TeacherForced, RecordsThatScoreNothingAreSkippedAndCounted) {
  const FrozenTarget target = golden_target();
  const auto draft = golden_draft();
  TeacherForced evaluator(target, *draft, {}, 512, 0);
  DraftBatch unsupervised = batch_at(tokens(1));
  unsupervised.rows.loss_mask = Tensor::zeros(unsupervised.rows.input_ids.shape(), DType::i64);
  EXPECT_EQ(evaluator.prepare(unsupervised), "no valid anchor");
  EXPECT_FALSE(evaluator.metrics(unsupervised).has_value());
  EXPECT_EQ(evaluator.skipped(), 2);
  EXPECT_EQ(evaluator.scored(), 0);
  ASSERT_TRUE(evaluator.metrics(batch_at(tokens(2))).has_value());
  EXPECT_EQ(evaluator.scored(), 1);
}

TEST(TeacherForced, SampledAnchorsAndPrefixLengthsFollowTheSeed) {
  const FrozenTarget target = golden_target();
  const auto draft = golden_draft();
  DraftSettings variable_prefix;
  variable_prefix.words["loss_type"] = "variable_prefix";
  const auto drawn = [&](uint64_t seed) {
    TeacherForced evaluator(target, *draft, variable_prefix, 3, seed);
    DraftBatch batch = batch_at(tokens(4, 32));
    EXPECT_EQ(evaluator.prepare(batch), "");
    EXPECT_EQ(batch.anchors.blocks(), 3);
    EXPECT_EQ(batch.prefix_lengths.shape(), (Shape{1, 3}));
    return std::pair{batch.anchors.anchors.to_vector<int64_t>(),
                     batch.prefix_lengths.to_vector<int64_t>()};
  };
  EXPECT_EQ(drawn(5), drawn(5));
  EXPECT_NE(drawn(5), drawn(6));

  // Given prefix lengths need the variable-prefix loss; the message names the setting as given.
  DraftBatch given = batch_at(tokens(4), {1});
  given.prefix_lengths = Tensor::from_vector(std::vector<int64_t>{2}, {1, 1});
  DraftSettings command_line;
  command_line.command_line = true;
  for (const auto& [settings, name] :
       {std::pair{DraftSettings{}, "draft.loss_type"}, {command_line, "--loss-type"}}) {
    TeacherForced evaluator(target, *draft, settings, 3, 0);
    EXPECT_EQ(testing::invalid_argument_message([&] { evaluator.prepare(given); }),
              std::string("\"prefix_lengths\" need ") + name + " variable_prefix");
  }
}

TEST(MetricsJson, AKindsOwnRatiosComeFromItsSums) {
  DraftMetrics m;
  m.loss_weight = 4;
  m.valid_tokens = 8;
  m.valid_blocks = 2;
  m.micro_batches = 2;
  m.extra = {{"final_loss_sum", 6},
             {"base_loss_sum", 2},
             {"base_correct_tokens", 2},
             {"base_accept_len_sum", 5},
             {"lambda_base_sum", 0.8}};
  const json j = metrics_json(1.5, m, domino_kind());
  EXPECT_EQ(j["loss"], 1.5);
  EXPECT_DOUBLE_EQ(j["final_loss"].get<double>(), 6 / (4 + 1e-6));
  EXPECT_DOUBLE_EQ(j["base_loss"].get<double>(), 2 / (4 + 1e-6));
  EXPECT_EQ(j["base_accuracy"], 0.25);
  EXPECT_EQ(j["base_accept_len"], 2.5);
  EXPECT_DOUBLE_EQ(j["lambda_base"].get<double>(), 0.4);
  EXPECT_EQ(j["base_correct_tokens"], 2);
  EXPECT_FALSE(metrics_json(1.5, m, dflash_kind()).contains("base_accuracy"));
}

TEST(SpecEvaluator, LosslessAndTeacherForcingAtTheDecodingsAnchorsAcceptsWhatItCommitted) {
  const FrozenTarget target = golden_target();
  const auto draft = golden_draft();
  SpecEvaluator evaluator(target, *draft, {.max_new_tokens = 24});
  for (uint64_t seed : {1, 2, 3}) {
    const json line = evaluator.evaluate(tokens(seed, 6));
    EXPECT_TRUE(line["lossless"].get<bool>()) << seed;
    EXPECT_EQ(line["output_ids"].size(), 24u);
  }
  const json a = evaluator.aggregate();
  EXPECT_EQ(a["prompts"], 3);
  EXPECT_EQ(a["lossless_prompts"], 3);
  ASSERT_TRUE(a["teacher_forced_at_decoding_anchors"].is_number()) << a.dump();
  EXPECT_DOUBLE_EQ(a["teacher_forced_at_decoding_anchors"].get<double>(),
                   a["tau_whole_blocks"].get<double>());
  EXPECT_TRUE(a["teacher_forced_accept_len"].is_number());
}

// An EAGLE-3 draft's chains (the reference's fixtures, tests/golden/make_eagle3_reference.py: the
// whole vocabulary and a reduced one, whose out-of-vocabulary tokens end a chain): at the
// decoding's own anchors the training-time test accepts what decoding committed.
TEST(SpecEvaluator, Eagle3TeacherForcingAtTheDecodingsAnchorsAcceptsWhatItCommitted) {
  const std::string dir = kGolden + "reference_eagle3/";
  const FrozenTarget target(load_qwen(dir + "target"), Device::cpu(), DType::f32);
  for (const char* name : {"unpacked", "packed_reduced"}) {
    SCOPED_TRACE(name);
    const auto draft = load_eagle3_draft(dir + name);
    draft->train(false);
    SpecEvaluator evaluator(target, *draft, {.max_new_tokens = 24, .draft_tokens = 3});
    for (uint64_t seed : {1, 2, 3}) {
      const json line = evaluator.evaluate(tokens(seed, 6));
      EXPECT_TRUE(line["lossless"].get<bool>()) << seed;
      EXPECT_TRUE(line["teacher_forced_accept_len"].is_number()) << line.dump();
    }
    const json a = evaluator.aggregate();
    std::cout << name << ": tau " << a["tau"] << ", whole chains " << a["tau_whole_blocks"]
              << ", teacher-forced " << a["teacher_forced_accept_len"] << "\n";
    ASSERT_TRUE(a["teacher_forced_at_decoding_anchors"].is_number()) << a.dump();
    EXPECT_DOUBLE_EQ(a["teacher_forced_at_decoding_anchors"].get<double>(),
                     a["tau_whole_blocks"].get<double>());
    EXPECT_GT(a["tau_whole_blocks"].get<double>(), 1.0);  // some drafts were accepted
  }
}

// With a stop id the last step may end on it without its bonus token: whatever the stop id, at
// the decoding's own anchors teacher forcing still accepts what decoding committed (the stopped
// step is not a whole one), for a DFlash draft and an EAGLE-3 draft.
TEST(SpecEvaluator, TeacherForcingAtTheDecodingsAnchorsHoldsWhereAStopIdEndsTheRun) {
  const FrozenTarget golden = golden_target();
  const auto dflash = golden_draft();
  const std::string dir = kGolden + "reference_eagle3/";
  const FrozenTarget fixture(load_qwen(dir + "target"), Device::cpu(), DType::f32);
  const auto eagle3 = load_eagle3_draft(dir + "unpacked");
  eagle3->train(false);
  const std::vector<int64_t> prompt = tokens(4, 6);
  for (const bool use_eagle3 : {false, true}) {
    const FrozenTarget& target = use_eagle3 ? fixture : golden;
    const std::vector<int64_t> greedy = generate_greedy(target.model(), prompt, 16, -1);
    for (size_t at = 1; at < greedy.size(); ++at) {  // each output token as the stop id
      SCOPED_TRACE((use_eagle3 ? "eagle3, stop at " : "dflash, stop at ") + std::to_string(at));
      const SpecEvalSettings settings{.max_new_tokens = 16, .stop_id = greedy[at]};
      std::optional<SpecEvaluator> e;
      if (use_eagle3)
        e.emplace(target, *eagle3, settings);
      else
        e.emplace(target, *dflash, settings);
      EXPECT_TRUE(e->evaluate(prompt)["lossless"].get<bool>());
      const json a = e->aggregate();
      if (!a["teacher_forced_at_decoding_anchors"].is_number()) continue;  // no whole step
      EXPECT_DOUBLE_EQ(a["teacher_forced_at_decoding_anchors"].get<double>(),
                       a["tau_whole_blocks"].get<double>());
    }
  }
}

}  // namespace
}  // namespace sprig::speculative

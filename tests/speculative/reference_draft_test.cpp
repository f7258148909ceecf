// Drafts saved by the reference implementation's own recipes and save path
// (tests/golden/make_reference_drafts.py): each loads as its own kind (the JetSpec one despite the
// top-level is_causal false the reference writes, with a warning) and gives the block logits and
// loss the reference's trainer modules compute on the same rows and anchors.
#include <gtest/gtest.h>

#include "speculative/draft_kind.h"
#include "tests/speculative/dflash_golden_check.h"

namespace sprig::testing {
namespace {

void check_reference_draft(const std::string& kind_name) {
  const std::string dir = kGolden + "reference_drafts/" + kind_name;
  ::testing::internal::CaptureStderr();
  const auto draft = speculative::load_draft(dir);
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(draft->config().kind().name(), kind_name);
  // Only the JetSpec draft's keys disagree (dflash_config.causal true, is_causal false).
  EXPECT_EQ(warnings.find("dflash_config.causal is true but the top-level is_causal is false") !=
                std::string::npos,
            kind_name == "jetspec")
      << warnings;
  draft->to(Device::cpu(), DType::f64);

  SafetensorsFile rows_file(kGolden + "dflash_tiny_expected.safetensors");
  speculative::DraftRows rows;
  speculative::Anchors anchors;
  load_golden_rows(rows_file, "unpacked", rows, anchors);
  const speculative::FrozenTarget target(load_qwen(kGolden + "qwen3_tiny"), Device::cpu(),
                                         DType::f64);
  SafetensorsFile expected(kGolden + "reference_drafts_expected.safetensors");
  const nlohmann::json meta = nlohmann::json::parse(expected.metadata().at("cases")).at(kind_name);
  // The case's settings, as the reference's recipe was given them.
  speculative::DraftSettings settings;
  settings.numbers["loss_decay_gamma"] = meta.at("gamma").get<double>();
  for (const char* key : {"lambda_base", "kd_temperature"})
    if (meta.contains(key) && meta[key].is_number())
      settings.numbers[key] = meta[key].get<double>();

  Tensor logits;
  NoGradGuard no_grad;
  const speculative::DraftLoss loss = draft->config().kind().objective(settings)->loss(
      target, *draft, {rows, anchors, {}}, &logits);
  // f64 against the reference's f64 modules (their RoPE tables are f32).
  const double logits_err = relative_error(logits, expected.load(kind_name + ".logits"));
  EXPECT_LE(logits_err, 1e-6) << kind_name;
  const double want = expected.load(kind_name + ".loss").item();
  EXPECT_LE(std::abs(loss.value() - want) / std::abs(want), 1e-7) << kind_name;
  std::cout << kind_name << ": relative error logits " << logits_err << ", loss " << loss.value()
            << " vs " << want << "\n";
}

TEST(ReferenceDrafts, DFlashLoadsAndMatchesTheReferenceModule) { check_reference_draft("dflash"); }

TEST(ReferenceDrafts, DominoLoadsAndMatchesTheReferenceModule) { check_reference_draft("domino"); }

TEST(ReferenceDrafts, JetSpecLoadsAsCausalAndMatchesTheReferenceModule) {
  check_reference_draft("jetspec");
}

}  // namespace
}  // namespace sprig::testing

// EAGLE-3 drafts saved by the reference's recipe (tests/golden/make_eagle3_reference.py: its own
// classes, its consolidated export inside a checkpoint directory, draft ids ordered by frequency)
// load in sprig from the checkpoint directory, and sprig's training-time test equals the
// reference's Eagle3TrainerModule on the same rows: the loss, accuracy, valid tokens, the chain
// counts of its simulated acceptance and every trained parameter's gradient, in f64 and in f32
// (metrics within 1e-4 relative, gradients within 2e-3).
#include <gtest/gtest.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "nn/checkpoint.h"
#include "speculative/eagle3.h"
#include "tests/nn/checkpoint_fixtures.h"
#include "tests/nn/golden_check.h"
#include "tests/speculative/dflash_golden_check.h"  // load_golden_rows
#include "tests/speculative/eagle3_golden_check.h"  // reference_name

namespace sprig::speculative {
namespace {

const std::string kDir = testing::kGolden + "reference_eagle3/";

struct Tolerance {
  double metrics, grads;
};

void check_case(const std::string& name, DType dtype, Tolerance tol) {
  SafetensorsFile expected(testing::kGolden + "reference_eagle3_expected.safetensors");
  const nlohmann::json meta = nlohmann::json::parse(expected.metadata().at("cases")).at(name);
  auto get = [&](const std::string& key) { return expected.load(name + "." + key); };
  const FrozenTarget target(load_qwen(kDir + "target"), Device::cpu(), dtype);

  ASSERT_TRUE(is_eagle3_dir(kDir + name));  // the checkpoint directory, not its export inside
  std::unique_ptr<Eagle3Draft> draft = load_eagle3_draft(kDir + name);
  EXPECT_EQ(draft->config().aux_layer_ids, (std::vector<int64_t>{1, 3, 4}));
  // The reference's draft ids in its order, and where each lands in sprig's ascending one.
  std::vector<int64_t> ids(static_cast<size_t>(target.config().vocab_size));
  std::iota(ids.begin(), ids.end(), 0);
  if (!meta.at("vocab").is_null()) ids = meta.at("vocab").get<std::vector<int64_t>>();
  std::vector<int64_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
  std::vector<int64_t> ascending;
  for (int64_t i : order) ascending.push_back(ids[static_cast<size_t>(i)]);
  EXPECT_EQ(draft->vocabulary().draft_to_target, ascending);
  draft->to(Device::cpu(), dtype);

  const DraftRows rows = testing::load_golden_rows(expected, name);
  const Eagle3Loss loss = eagle3_loss(*draft, rows, eagle3_teacher(target, *draft, rows),
                                      {meta.at("ttt_steps").get<int64_t>(), 0.8, 0});
  const double correct = std::accumulate(loss.step_correct.begin(), loss.step_correct.end(), 0.0);
  const double valid = std::accumulate(loss.step_valid.begin(), loss.step_valid.end(), 0.0);
  const double loss_err =
      std::abs(loss.value() - get("loss").item()) / std::abs(get("loss").item());
  EXPECT_LE(loss_err, tol.metrics) << name << " loss";
  EXPECT_NEAR(correct / valid, get("accuracy").item(), tol.metrics) << name << " accuracy";
  EXPECT_EQ(valid, get("valid_tokens").item()) << name;
  EXPECT_EQ(loss.step_prefix_hits, get("step_prefix_hits").to_vector<double>()) << name;
  EXPECT_EQ(loss.step_prefix_valid, get("step_valid").to_vector<double>()) << name;

  loss.loss.backward();
  double worst = 0;
  int checked = 0;
  for (const auto& [pname, p] : draft->named_parameters()) {
    Tensor reference = get("grad." + testing::reference_name(pname));
    if (pname == "lm_head.weight")  // its rows in the ascending order of their ids
      reference = index_select(reference, 0,
                               Tensor::from_vector(order, {static_cast<int64_t>(order.size())}));
    const double err = testing::relative_error(p.grad(), reference);
    EXPECT_LE(err, tol.grads) << name << " " << pname;
    worst = std::max(worst, err);
    ++checked;
  }
  EXPECT_EQ(checked, 13);
  std::cout << "eagle3 reference " << name << " (" << dtype_name(dtype) << "): relative error loss "
            << loss_err << ", worst gradient " << worst << "\n";
}

// In f64 the reference's RoPE is still f32 (transformers computes its angles in f32): the two
// agree to that rounding, not to f64's.
TEST(Eagle3Reference, UnpackedInF64) { check_case("unpacked", DType::f64, {1e-7, 1e-6}); }
TEST(Eagle3Reference, PackedReducedVocabularyInF64) {
  check_case("packed_reduced", DType::f64, {1e-7, 1e-6});
}
TEST(Eagle3Reference, UnpackedInF32) { check_case("unpacked", DType::f32, {1e-4, 2e-3}); }
TEST(Eagle3Reference, PackedReducedVocabularyInF32) {
  check_case("packed_reduced", DType::f32, {1e-4, 2e-3});
}

}  // namespace
}  // namespace sprig::speculative

// The Domino and JetSpec golden-parity check shared by the CPU (f64, f32) and GPU (bf16) tests:
// the drafts of tests/golden/make_draft_heads_golden.py (domino_tiny; JetSpec on dflash_tiny's
// weights with in-block causal attention) and their target qwen3_tiny, run on the fixture's rows
// and anchors, and compared with PyTorch's f64 loss, metrics, logits and every draft gradient.
#pragma once

#include "speculative/domino.h"
#include "speculative/jetspec.h"
#include "tests/speculative/dflash_golden_check.h"

namespace sprig::testing {

// Every case of the fixture.
inline const char* const kHeadGoldenCases[] = {
    "domino_unpacked", "domino_packed", "domino_unshifted", "jetspec_unpacked", "jetspec_packed"};

// The case's draft: domino_tiny with the case's shift_label, or dflash_tiny made causal.
inline std::unique_ptr<speculative::DFlashDraft> golden_head_draft(const nlohmann::json& meta) {
  const bool domino = meta.at("kind") == "domino";
  auto stored = speculative::load_draft(kGolden + (domino ? "domino_tiny" : "dflash_tiny"));
  speculative::DraftConfig c = stored->config();
  if (domino) {
    speculative::DominoHeadConfig head = speculative::domino_head_config(c);
    head.shift_label = meta.at("shift_label").get<bool>();
    c.head = speculative::domino_head(head);
  } else {
    c.causal = true;
  }
  Generator gen(0);
  auto draft = std::make_unique<speculative::DFlashDraft>(c, gen);
  draft->load_state_dict(stored->state_dict());
  return draft;
}

inline void check_head_golden(const std::string& name, Device device, DType dtype,
                              GoldenTolerance tol) {
  SafetensorsFile expected(kGolden + "draft_heads_expected.safetensors");
  const nlohmann::json meta = nlohmann::json::parse(expected.metadata().at("cases")).at(name);
  speculative::DraftRows rows;
  speculative::Anchors anchors;
  load_golden_rows(expected, name, rows, anchors);
  const speculative::FrozenTarget target(load_qwen(kGolden + "qwen3_tiny"), device, dtype);
  auto draft = golden_head_draft(meta);
  draft->to(device, dtype);
  const bool domino = meta.at("kind") == "domino";

  Tensor logits;
  const speculative::DraftLoss loss =
      domino ? speculative::domino_loss(
                   target, *draft, rows, anchors,
                   {meta.at("gamma").get<double>(), meta.at("lambda_base").get<double>()}, &logits)
             : speculative::jetspec_loss(target, *draft, rows, anchors,
                                         {meta.at("kd_temperature").get<double>(), 0}, &logits);
  const double logits_err = relative_error(logits, expected.load(name + ".logits"));
  EXPECT_LE(logits_err, tol.logits) << name << " logits";
  auto scalar = [&](const std::string& key) { return expected.load(name + "." + key).item(); };
  const auto relative = [](double got, double want) {
    return std::abs(got - want) / std::abs(want);
  };
  const double loss_err = relative(loss.value(), scalar("loss"));
  EXPECT_LE(loss_err, tol.loss) << name << " loss";
  const speculative::DraftMetrics& m = loss.metrics;
  EXPECT_NEAR(m.loss_weight, scalar("loss_weight"), 1e-9 + 1e-6 * scalar("loss_weight"));
  EXPECT_EQ(m.valid_tokens, scalar("valid_tokens")) << name;
  EXPECT_EQ(m.valid_blocks, scalar("valid_blocks")) << name;
  if (dtype != DType::bf16) {  // the fixture's argmaxes are far from ties
    EXPECT_EQ(m.correct_tokens, scalar("correct_tokens")) << name;
    EXPECT_EQ(m.accept_len_sum, scalar("accept_len_sum")) << name;
  }
  if (domino) {
    const double denominator = m.loss_weight + 1e-6;
    EXPECT_LE(relative(m.sum("final_loss_sum") / denominator, scalar("final_loss")), tol.loss)
        << name;
    EXPECT_LE(relative(m.sum("base_loss_sum") / denominator, scalar("base_loss")), tol.loss)
        << name;
    if (dtype != DType::bf16) {
      EXPECT_EQ(m.sum("base_correct_tokens"), scalar("base_correct_tokens")) << name;
      EXPECT_EQ(m.sum("base_accept_len_sum"), scalar("base_accept_len_sum")) << name;
    }
  }

  loss.mean().backward();
  // The backbone's 25 parameters, and the Domino head's 4.
  const double worst_grad_err =
      check_golden_grads(*draft, expected, name, tol.grads, domino ? 29 : 25);
  std::cout << name << " (" << device.str() << ", " << dtype_name(dtype)
            << "): relative error logits " << logits_err << ", loss " << loss_err
            << ", worst gradient " << worst_grad_err << "\n";
}

}  // namespace sprig::testing

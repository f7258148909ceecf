// The DFlash golden-parity check shared by the CPU (f64, f32) and GPU (bf16) tests: the draft
// written by tests/golden/make_dflash_golden.py and its target qwen3_tiny, loaded through the real
// readers, run on the fixture's rows and anchors, and compared with PyTorch's f64 loss, metrics,
// logits and every draft parameter's gradient. A case with rope_parameters (YaRN) runs target and
// draft with them.
#pragma once

#include <gtest/gtest.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "nn/checkpoint.h"
#include "speculative/dflash.h"
#include "tests/nn/checkpoint_fixtures.h"
#include "tests/nn/golden_check.h"

namespace sprig::testing {

struct DFlashGoldenCase {
  speculative::DraftRows rows;
  speculative::Anchors anchors;
  Tensor prefix_lengths;  // the variable-prefix case only
  speculative::ObjectiveOptions objective;
};

// The rows of case `name` of a golden file: unpacked, or packed with positions, doc_remaining and
// seq_lens.
inline speculative::DraftRows load_golden_rows(const SafetensorsFile& f, const std::string& name) {
  auto get = [&](const std::string& key) { return f.load(name + "." + key); };
  speculative::DraftRows rows;
  rows.input_ids = get("input_ids");
  rows.loss_mask = get("loss_mask");
  if (f.contains(name + ".seq_lens")) {
    rows.position_ids = get("position_ids");
    rows.doc_remaining = get("doc_remaining");
    const Tensor lens = get("seq_lens");
    for (int64_t b = 0; b < lens.size(0); ++b)
      rows.doc_lens.push_back(lens.select(0, b).contiguous().to_vector<int64_t>());
  }
  return rows;
}

// The rows and anchors of case `name` of a golden file.
inline void load_golden_rows(const SafetensorsFile& f, const std::string& name,
                             speculative::DraftRows& rows, speculative::Anchors& anchors) {
  rows = load_golden_rows(f, name);
  anchors.anchors = f.load(name + ".anchors");
  anchors.keep = f.load(name + ".keep").to(DType::boolean);
}

inline DFlashGoldenCase load_dflash_case(const SafetensorsFile& f, const std::string& name) {
  const nlohmann::json cases = nlohmann::json::parse(f.metadata().at("cases"));
  const nlohmann::json& meta = cases.at(name);
  auto get = [&](const std::string& key) { return f.load(name + "." + key); };
  DFlashGoldenCase c;
  load_golden_rows(f, name, c.rows, c.anchors);
  c.objective.type = speculative::loss_type_from_name(meta.at("loss_type"));
  c.objective.gamma = meta.at("gamma").get<double>();
  if (c.objective.type == speculative::DraftLossType::variable_prefix) {
    c.prefix_lengths = get("prefix_lengths");
  }
  return c;
}

// The golden model directory `model`, or a copy in `dir` whose config.json has the case's
// rope_parameters when it gives some.
inline std::string golden_with_rope(const std::string& model, const nlohmann::json& meta,
                                    const std::string& dir) {
  if (!meta.contains("rope_parameters")) return kGolden + model;
  const std::string copy = dir + "/" + model;
  fs::copy(kGolden + model, copy, fs::copy_options::recursive);
  nlohmann::json config = nlohmann::json::parse(read_text(copy + "/config.json"));
  config.erase("rope_theta");
  config["rope_parameters"] = meta["rope_parameters"];
  write_text(copy + "/config.json", config.dump());
  return copy;
}

inline void check_dflash_golden(const std::string& name, Device device, DType dtype,
                                GoldenTolerance tol) {
  SafetensorsFile expected(kGolden + "dflash_tiny_expected.safetensors");
  const DFlashGoldenCase c = load_dflash_case(expected, name);
  const nlohmann::json meta = nlohmann::json::parse(expected.metadata().at("cases")).at(name);
  const NamedTempDir dir("dflash_golden_" + name);
  const speculative::FrozenTarget target(load_qwen(golden_with_rope("qwen3_tiny", meta, dir.path)),
                                         device, dtype);
  auto draft = speculative::load_draft(golden_with_rope("dflash_tiny", meta, dir.path));
  draft->to(device, dtype);

  Tensor logits;
  const speculative::DraftLoss loss = speculative::dflash_loss(
      target, *draft, c.rows, c.anchors, c.objective, c.prefix_lengths, &logits);
  const double logits_err = relative_error(logits, expected.load(name + ".logits"));
  EXPECT_LE(logits_err, tol.logits) << name << " logits";
  auto scalar = [&](const std::string& key) { return expected.load(name + "." + key).item(); };
  const double loss_err = std::abs(loss.value() - scalar("loss")) / std::abs(scalar("loss"));
  EXPECT_LE(loss_err, tol.loss) << name << " loss";
  EXPECT_NEAR(loss.metrics.loss_weight, scalar("loss_weight"), 1e-9 + 1e-6 * scalar("loss_weight"));
  // Counts are exact whenever the argmax is: the fixture's logits are far from ties.
  EXPECT_EQ(loss.metrics.valid_tokens, scalar("valid_tokens")) << name;
  EXPECT_EQ(loss.metrics.valid_blocks, scalar("valid_blocks")) << name;
  if (dtype != DType::bf16) {
    EXPECT_EQ(loss.metrics.correct_tokens, scalar("correct_tokens")) << name;
    EXPECT_EQ(loss.metrics.accept_len_sum, scalar("accept_len_sum")) << name;
  }

  (loss.sum * (1.0 / (loss.metrics.loss_weight + 1e-6))).backward();
  const double worst_grad_err = check_golden_grads(*draft, expected, name, tol.grads, 25);
  std::cout << "dflash " << name << " (" << device.str() << ", " << dtype_name(dtype)
            << "): relative error logits " << logits_err << ", loss " << loss_err
            << ", worst gradient " << worst_grad_err << "\n";
}

}  // namespace sprig::testing

// The EAGLE-3 golden-parity check shared by the CPU (f64, f32) and GPU (bf16, f32) tests: the
// draft written by tests/golden/make_eagle3_golden.py and its target qwen3_tiny, run through the
// training-time test on the fixture's rows and compared with PyTorch's f64 target states, loss,
// per-step metrics, logits and every trained parameter's gradient.
#pragma once

#include <gtest/gtest.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "nn/checkpoint.h"
#include "speculative/eagle3.h"
#include "tests/nn/checkpoint_fixtures.h"
#include "tests/nn/golden_check.h"
#include "tests/speculative/dflash_golden_check.h"  // load_golden_rows

namespace sprig::testing {

// The reference's name of a parameter sprig names as the engines do (fc, midlayer, norm).
inline std::string reference_name(const std::string& name) {
  if (name.rfind("midlayer.", 0) == 0) return "model.layers.0." + name.substr(9);
  return name == "fc.weight" || name == "norm.weight" ? "model." + name : name;
}

inline void check_eagle3_golden(const std::string& name, Device device, DType dtype,
                                GoldenTolerance tol) {
  SafetensorsFile expected(kGolden + "eagle3_tiny_expected.safetensors");
  const nlohmann::json meta = nlohmann::json::parse(expected.metadata().at("cases")).at(name);
  auto get = [&](const std::string& key) { return expected.load(name + "." + key); };
  const speculative::FrozenTarget target(load_qwen(kGolden + "qwen3_tiny"), device, dtype);

  speculative::Eagle3Options options;
  options.aux_layer_ids = meta.at("aux_layer_ids").get<std::vector<int64_t>>();
  options.draft_vocab_size = meta.at("draft_vocab_size").get<int64_t>();
  Generator gen(0);
  speculative::Eagle3Draft draft(speculative::eagle3_config_for(target.config(), options), gen);
  std::map<std::string, Tensor> weights;
  SafetensorsFile file(kGolden + "eagle3_tiny/model.safetensors");
  // The fixture has the reference's names.
  for (const auto& [pname, p] : draft.named_parameters())
    weights[pname] = file.load(reference_name(pname));
  // The fixture's draft holds the target's embedding, which sprig's reads from the target.
  EXPECT_EQ(
      max_abs_diff(file.load("model.embed_tokens.weight"),
                   target.model().model.embed_tokens.weight.value().to(Device::cpu(), DType::f32)),
      0);
  if (expected.contains(name + ".selected")) {  // a draft vocabulary: the head's rows of its ids
    const Tensor selected = get("selected");
    weights["lm_head.weight"] = index_select(weights["lm_head.weight"], 0, selected);
    draft.set_vocabulary({target.config().vocab_size, selected.to_vector<int64_t>()});
  }
  draft.load_state_dict(weights);
  draft.to(device, dtype);

  const speculative::DraftRows rows = load_golden_rows(expected, name);
  const speculative::Eagle3Teacher teacher = speculative::eagle3_teacher(target, draft, rows);
  const double aux_err = relative_error(teacher.aux, get("aux"));
  EXPECT_LE(aux_err, tol.logits) << name << " target states";
  EXPECT_LE(relative_error(teacher.logits, get("target_logits")), tol.logits) << name;
  Tensor logits;
  const speculative::Eagle3Loss loss = speculative::eagle3_loss(
      draft, rows, teacher, {meta.at("ttt_steps").get<int64_t>(), 0.8, 0}, &logits);
  const double logits_err = relative_error(logits, get("logits"));
  EXPECT_LE(logits_err, tol.logits) << name << " logits";
  const double loss_err =
      std::abs(loss.value() - get("loss").item()) / std::abs(get("loss").item());
  EXPECT_LE(loss_err, tol.loss) << name << " loss";
  const auto vec = [](const std::vector<double>& v) {
    return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, DType::f64);
  };
  EXPECT_LE(relative_error(vec(loss.step_loss), get("step_loss")), tol.loss) << name;
  EXPECT_LE(relative_error(vec(loss.step_loss_sum), get("step_loss_sum")), tol.loss) << name;
  // Counts are exact whenever the argmaxes are: the fixture's logits are far from ties.
  EXPECT_EQ(loss.step_valid, get("step_valid").to_vector<double>()) << name;
  if (dtype != DType::bf16) {
    EXPECT_EQ(loss.step_correct, get("step_correct").to_vector<double>()) << name;
    EXPECT_EQ(loss.accept_len_sum, get("accept_len_sum").item()) << name;
    EXPECT_EQ(loss.valid_positions, get("valid_positions").item()) << name;
  }

  loss.loss.backward();
  const double worst_grad_err =
      check_golden_grads(draft, expected, name, tol.grads, 13, reference_name);
  std::cout << "eagle3 " << name << " (" << device.str() << ", " << dtype_name(dtype)
            << "): relative error target states " << aux_err << ", logits " << logits_err
            << ", loss " << loss_err << ", worst gradient " << worst_grad_err << "\n";
}

}  // namespace sprig::testing

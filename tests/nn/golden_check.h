// The golden-parity check shared by the CPU (f32) and GPU (bf16) tests: load a model written by
// tests/golden/make_qwen_golden.py through the real checkpoint reader, run it on `device` in
// `dtype`, and compare logits, loss and every parameter gradient with PyTorch's f64 values.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <iostream>

#include "nn/checkpoint.h"
#include "tests/test_util.h"

namespace sprig::testing {

inline const std::string kGolden = testing::source_dir() + "/tests/golden/";

// max |a - b| / max |b|: the relative error of a whole tensor.
inline double relative_error(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num = std::max(num, std::abs(x[i] - y[i]));
    den = std::max(den, std::abs(y[i]));
  }
  return num / std::max(den, 1e-30);
}

struct GoldenTolerance {
  double logits, loss, grads;  // relative errors (relative_error above)
};

// Every trained parameter's gradient against the fixture's `<name>.grad.<param>` (`count` of them:
// every trained parameter has one), `param` the fixture's name of it (`fixture_name`, by default
// the same); returns the worst relative error.
inline double check_golden_grads(
    const Module& model, const SafetensorsFile& expected, const std::string& name, double tolerance,
    int count, const std::function<std::string(const std::string&)>& fixture_name = {}) {
  int checked = 0;
  double worst = 0;
  for (const auto& [pname, p] : model.named_parameters()) {
    if (!p.requires_grad()) continue;  // frozen
    EXPECT_TRUE(p.grad().defined()) << pname;
    if (!p.grad().defined()) continue;
    const double err = relative_error(
        p.grad(), expected.load(name + ".grad." + (fixture_name ? fixture_name(pname) : pname)));
    EXPECT_LE(err, tolerance) << name << " " << pname;
    worst = std::max(worst, err);
    ++checked;
  }
  EXPECT_EQ(checked, count) << name;
  return worst;
}

inline void check_golden_model(const std::string& name, Device device, DType dtype,
                               GoldenTolerance tol) {
  auto model = load_qwen(kGolden + name);
  model->to(device, dtype);
  SafetensorsFile expected(kGolden + name + "_expected.safetensors");
  const Tensor ids = expected.load("input_ids").to(device);
  const QwenInput in = causal_input(ids, model->config());

  const Var hidden = model->hidden(in);
  const double logits_err = relative_error(model->logits(hidden).value(), expected.load("logits"));
  EXPECT_LE(logits_err, tol.logits) << name << " logits";

  const Var losses = model->token_losses(hidden, shift_labels(ids));
  const int64_t supervised = ids.size(0) * (ids.size(1) - 1);
  const Var loss = sum_all(losses) / static_cast<double>(supervised);
  const double loss_err = relative_error(loss.value().reshape({1}), expected.load("loss"));
  EXPECT_LE(loss_err, tol.loss) << name << " loss";

  loss.backward();
  int checked = 0;
  double worst_grad_err = 0;
  for (const auto& [pname, p] : model->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << pname;
    const double err = relative_error(p.grad(), expected.load("grad." + pname));
    EXPECT_LE(err, tol.grads) << pname;
    worst_grad_err = std::max(worst_grad_err, err);
    ++checked;
  }
  std::cout << name << " (" << device.str() << ", " << dtype_name(dtype)
            << "): relative error logits " << logits_err << ", loss " << loss_err
            << ", worst gradient " << worst_grad_err << "\n";
  EXPECT_EQ(checked, static_cast<int>(expected.tensors().size()) - 3);  // ids, logits, loss
}

}  // namespace sprig::testing

// The GRU module: PyTorch's parameter names and shapes (also under a parent module), its seeded
// uniform(-1/sqrt(G), 1/sqrt(G)) initialisation, and a PyTorch state dict loaded by name giving
// nn.GRU's output (tests/golden/make_gru_golden.py).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "tensor/safetensors.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;

// A parent registering the GRU as "prefix_gru", as a model holding one would.
class WithGru : public Module {
 public:
  explicit WithGru(Generator& gen)
      : gru(register_module("prefix_gru", std::make_unique<GRU>(5, 6, gen))) {}
  GRU& gru;
};

TEST(GruModule, PyTorchParameterNamesAndShapes) {
  Generator gen(1);
  const GRU gru(5, 6, gen);
  const auto params = gru.named_parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].first, "weight_ih_l0");
  EXPECT_EQ(params[0].second.shape(), (Shape{18, 5}));
  EXPECT_EQ(params[1].first, "weight_hh_l0");
  EXPECT_EQ(params[1].second.shape(), (Shape{18, 6}));
  EXPECT_TRUE(params[0].second.requires_grad());
  EXPECT_EQ(gru.hidden_size, 6);

  const WithGru parent(gen);
  std::vector<std::string> names;
  for (const auto& [name, p] : parent.named_parameters()) names.push_back(name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"prefix_gru.weight_ih_l0", "prefix_gru.weight_hh_l0"}));
}

TEST(GruModule, SeededUniformInitialisation) {
  Generator a(7), b(7);
  const GRU g1(8, 16, a), g2(8, 16, b);
  const double k = 1 / std::sqrt(16.0);
  for (const Var* w : {&g1.weight_ih_l0, &g1.weight_hh_l0}) {
    const std::vector<double> v = w->value().to_vector<double>();
    double lo = 1, hi = -1, sum = 0;
    for (const double e : v) lo = std::min(lo, e), hi = std::max(hi, e), sum += e;
    // Inside [-k, k] and spread over it (384 and 768 draws reach within 0.05 k of both ends).
    EXPECT_GE(lo, -k);
    EXPECT_LE(hi, k);
    EXPECT_LT(lo, -0.95 * k);
    EXPECT_GT(hi, 0.95 * k);
    EXPECT_NEAR(sum / static_cast<double>(v.size()), 0.0, 0.1 * k);
  }
  EXPECT_TRUE(all_close(g1.weight_ih_l0.value(), g2.weight_ih_l0.value(), 0.0));
  EXPECT_TRUE(all_close(g1.weight_hh_l0.value(), g2.weight_hh_l0.value(), 0.0));
  // The two weights are separate draws.
  EXPECT_FALSE(all_close(g1.weight_ih_l0.value(), g1.weight_hh_l0.value().narrow(1, 0, 8), 1e-3));
}

TEST(GruModule, PyTorchStateDictGivesPyTorchOutput) {
  const SafetensorsFile golden(testing::source_dir() + "/tests/golden/gru_expected.safetensors");
  Generator gen(0);
  GRU gru(8, 6, gen);
  gru.to(Device::cpu(), DType::f64);
  gru.load_state_dict({{"weight_ih_l0", golden.load("weight_ih_l0")},
                       {"weight_hh_l0", golden.load("weight_hh_l0")}});
  const Var out = gru.forward(Var(golden.load("x")));
  EXPECT_TRUE(all_close(out.value(), golden.load("out"), 1e-12, 1e-12));
}

}  // namespace
}  // namespace sprig

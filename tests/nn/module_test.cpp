// Module: parameter names in transformers' order (an unnamed child's as its parent's own),
// dtype/device moves, train/eval, state dicts
// (round trip, one error listing every missing, unexpected and mis-shaped name) and HF-style
// seeded initialisation.
#include "nn/module.h"

#include <gtest/gtest.h>

#include <cmath>

#include "nn/layers.h"
#include "nn/qwen.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using json = nlohmann::json;

QwenConfig config(const std::string& type, bool tied, double init_range = 0.02) {
  return QwenConfig::from_json({{"model_type", type},
                                {"vocab_size", 40},
                                {"hidden_size", 16},
                                {"intermediate_size", 24},
                                {"num_hidden_layers", 2},
                                {"num_attention_heads", 4},
                                {"num_key_value_heads", 2},
                                {"head_dim", 8},
                                {"initializer_range", init_range},
                                {"tie_word_embeddings", tied}});
}

// transformers' registration order: embed, per layer self_attn (q, k, v, o [, q_norm, k_norm]),
// mlp (gate, up, down), input_layernorm, post_attention_layernorm; final norm; untied lm_head.
std::vector<std::string> hf_names(bool qwen3, bool tied, int layers) {
  std::vector<std::string> names = {"model.embed_tokens.weight"};
  for (int i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      names.push_back(p + "self_attn." + proj + ".weight");
      if (!qwen3 && std::string(proj) != "o_proj")
        names.push_back(p + "self_attn." + proj + ".bias");
    }
    if (qwen3) {
      names.push_back(p + "self_attn.q_norm.weight");
      names.push_back(p + "self_attn.k_norm.weight");
    }
    for (const char* m : {"gate_proj", "up_proj", "down_proj"})
      names.push_back(p + "mlp." + m + ".weight");
    names.push_back(p + "input_layernorm.weight");
    names.push_back(p + "post_attention_layernorm.weight");
  }
  names.push_back("model.norm.weight");
  if (!tied) names.push_back("lm_head.weight");
  return names;
}

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> out;
  for (const auto& [name, p] : m.named_parameters()) out.push_back(name);
  return out;
}

TEST(Module, NamedParametersInTransformersOrder) {
  Generator gen(1);
  QwenForCausalLM qwen3(config("qwen3", false), gen);
  EXPECT_EQ(names_of(qwen3), hf_names(true, false, 2));
  QwenForCausalLM qwen2(config("qwen2", true), gen);
  EXPECT_EQ(names_of(qwen2), hf_names(false, true, 2));
  // Parameter count by hand: embed 40*16, per layer q 32*16, k/v 16*16, o 16*32, q/k norms 8,
  // mlp 3*24*16, two norms 16; final norm 16; lm_head 40*16.
  const int64_t layer = 32 * 16 + 2 * 16 * 16 + 16 * 32 + 2 * 8 + 3 * 24 * 16 + 2 * 16;
  EXPECT_EQ(qwen3.num_parameters(), 40 * 16 + 2 * layer + 16 + 40 * 16);
  EXPECT_EQ(qwen3.parameters().size(), hf_names(true, false, 2).size());
}

// A module with an integer parameter, to see that dtype moves touch floating parameters only.
class Counter : public Module {
 public:
  explicit Counter(Generator& gen)
      : linear(register_module("linear", std::make_unique<Linear>(3, 2, true, 1.0, gen))) {
    register_parameter("step", step, Tensor::from_vector<int64_t>({7}, {1}), false);
  }
  Linear& linear;
  Var step;
};

TEST(Module, ToConvertsFloatingParametersAndKeepsFlags) {
  Generator gen(2);
  Counter m(gen);
  m.linear.bias.set_requires_grad(false);
  const Tensor w = m.linear.weight.value().clone();
  m.to(Device::cpu(), DType::f64);
  EXPECT_EQ(m.linear.weight.dtype(), DType::f64);
  EXPECT_EQ(m.linear.bias.dtype(), DType::f64);
  EXPECT_EQ(m.step.dtype(), DType::i64);
  EXPECT_TRUE(m.linear.weight.requires_grad());
  EXPECT_FALSE(m.linear.bias.requires_grad());
  EXPECT_EQ(testing::max_abs_diff(m.linear.weight.value(), w), 0.0);  // f32 -> f64 is exact
  m.to(Device::cpu(), DType::bf16);
  EXPECT_EQ(testing::max_abs_diff(m.linear.weight.value(), w.to(DType::bf16)), 0.0);
  EXPECT_EQ(m.step.value().to_vector<int64_t>(), std::vector<int64_t>{7});
  // named_parameters() hands out the moved Vars (own parameters first, then children's).
  const auto named = m.named_parameters();
  ASSERT_EQ(named.size(), 3u);
  EXPECT_EQ(named[0].first, "step");
  EXPECT_EQ(named[1].first, "linear.weight");
  EXPECT_EQ(named[1].second.dtype(), DType::bf16);
}

TEST(Module, TrainEvalRequiresGradAndZeroGrad) {
  Generator gen(3);
  QwenForCausalLM model(config("qwen3", true), gen);
  EXPECT_TRUE(model.model.layers[1]->mlp.is_training());
  model.train(false);
  EXPECT_FALSE(model.is_training());
  EXPECT_FALSE(model.model.layers[1]->mlp.up_proj.is_training());
  model.train();
  EXPECT_TRUE(model.model.norm->is_training());

  Var loss = sum_all(model.model.norm->forward(Var(testing::rand_normal({2, 16}, 4))));
  loss.backward();
  EXPECT_TRUE(model.model.norm->weight.grad().defined());
  model.zero_grad();
  EXPECT_FALSE(model.model.norm->weight.grad().defined());
  model.set_requires_grad(false);
  for (const Var& p : model.parameters()) EXPECT_FALSE(p.requires_grad());
}

// A child registered without a name (a part built elsewhere, as a draft's head is): its
// parameters are named as the parent's own, and state dicts reach them under those names.
class WithUnnamedPart : public Module {
 public:
  explicit WithUnnamedPart(Generator& gen)
      : norm(register_module("norm", std::make_unique<RMSNorm>(3, 1e-6))),
        part(register_module("", std::make_unique<Linear>(3, 2, false, 0.02, gen))) {}
  RMSNorm& norm;
  Linear& part;
};

TEST(Module, AnUnnamedChildsParametersAreNamedAsTheParents) {
  Generator gen(3);
  WithUnnamedPart m(gen);
  EXPECT_EQ(names_of(m), (std::vector<std::string>{"norm.weight", "weight"}));
  std::map<std::string, Tensor> state = m.state_dict();
  state.at("weight") = Tensor::full({2, 3}, 0.5);
  m.load_state_dict(state);
  EXPECT_EQ(m.part.weight.value().to_vector<float>(), std::vector<float>(6, 0.5f));
}

TEST(Module, StateDictRoundTripCopiesValues) {
  Generator gen_a(10), gen_b(11);
  QwenForCausalLM a(config("qwen2", false), gen_a);
  QwenForCausalLM b(config("qwen2", false), gen_b);
  const std::map<std::string, Tensor> state = a.state_dict();
  EXPECT_EQ(state.size(), a.named_parameters().size());
  EXPECT_GT(testing::max_abs_diff(b.model.embed_tokens.weight.value(),
                                  a.model.embed_tokens.weight.value()),
            0.0);
  // Loading an f64 copy converts to each parameter's dtype (f32).
  std::map<std::string, Tensor> as_f64;
  for (const auto& [name, t] : state) as_f64[name] = t.to(DType::f64);
  b.load_state_dict(as_f64);
  for (const auto& [name, p] : b.named_parameters()) {
    EXPECT_EQ(p.dtype(), DType::f32) << name;
    EXPECT_EQ(testing::max_abs_diff(p.value(), state.at(name)), 0.0) << name;
  }
  // b holds copies: writing into a's tensors leaves b alone.
  a.model.norm->weight.value().fill_(5.0);
  b.load_state_dict(state);
  a.model.norm->weight.value().fill_(7.0);
  EXPECT_EQ(b.model.norm->weight.value().to_vector<float>(), std::vector<float>(16, 5.0f));
}

TEST(Module, LoadStateDictListsEveryProblemAndChangesNothing) {
  Generator gen(12);
  QwenForCausalLM model(config("qwen3", true), gen);
  std::map<std::string, Tensor> state = model.state_dict();
  const Tensor before = model.model.norm->weight.value().clone();
  state.erase("model.layers.1.mlp.up_proj.weight");
  state.erase("model.embed_tokens.weight");
  state["model.norm.weight"] = Tensor::ones({15});
  state["lm_head.weight"] = Tensor::zeros({40, 16});
  state["model.layers.2.mlp.up_proj.weight"] = Tensor::zeros({24, 16});
  EXPECT_EQ(testing::invalid_argument_message([&] { model.load_state_dict(state); }),
            "[load_state_dict] missing: model.embed_tokens.weight "
            "model.layers.1.mlp.up_proj.weight; wrong shape: model.norm.weight (expected [16], "
            "got [15]); unexpected: lm_head.weight model.layers.2.mlp.up_proj.weight");
  EXPECT_EQ(testing::max_abs_diff(model.model.norm->weight.value(), before), 0.0);
}

// mean and standard deviation of a tensor's elements, in f64.
std::pair<double, double> moments(const Tensor& t) {
  const std::vector<double> v = t.to_vector<double>();
  double s = 0, s2 = 0;
  for (double x : v) s += x;
  const double mean = s / static_cast<double>(v.size());
  for (double x : v) s2 += (x - mean) * (x - mean);
  return {mean, std::sqrt(s2 / static_cast<double>(v.size()))};
}

TEST(Module, InitialisesLikeTransformers) {
  QwenConfig c = QwenConfig::from_json({{"model_type", "qwen2"},
                                        {"vocab_size", 512},
                                        {"hidden_size", 128},
                                        {"intermediate_size", 256},
                                        {"num_hidden_layers", 1},
                                        {"num_attention_heads", 4},
                                        {"num_key_value_heads", 2},
                                        {"initializer_range", 0.05}});
  Generator gen(13);
  QwenForCausalLM model(c, gen);
  for (const auto& [name, p] : model.named_parameters()) {
    const std::vector<double> v = p.value().to_vector<double>();
    if (name.find("norm") != std::string::npos) {  // RMSNorm weights start at exactly 1
      EXPECT_EQ(v, std::vector<double>(v.size(), 1.0)) << name;
    } else if (name.ends_with(".bias")) {  // biases at exactly 0
      EXPECT_EQ(v, std::vector<double>(v.size(), 0.0)) << name;
    } else {  // Linear and Embedding weights ~ normal(0, initializer_range); >= 8192 samples each
      const auto [mean, std] = moments(p.value());
      EXPECT_NEAR(std, 0.05, 0.05 * 0.05) << name;
      EXPECT_NEAR(mean, 0.0, 4 * 0.05 / std::sqrt(static_cast<double>(v.size()))) << name;
    }
  }
}

TEST(Module, InitialisationIsSeeded) {
  Generator g1(21), g2(21), g3(22);
  QwenForCausalLM a(config("qwen3", false), g1), b(config("qwen3", false), g2),
      c(config("qwen3", false), g3);
  const auto sa = a.state_dict(), sb = b.state_dict(), sc = c.state_dict();
  for (const auto& [name, t] : sa) EXPECT_EQ(testing::max_abs_diff(t, sb.at(name)), 0.0) << name;
  EXPECT_GT(testing::max_abs_diff(sa.at("lm_head.weight"), sc.at("lm_head.weight")), 0.01);
  // Distinct draws per parameter: q_proj of layer 0 and layer 1 differ.
  EXPECT_GT(testing::max_abs_diff(sa.at("model.layers.0.self_attn.k_proj.weight"),
                                  sa.at("model.layers.1.self_attn.k_proj.weight")),
            0.01);
}

}  // namespace
}  // namespace sprig

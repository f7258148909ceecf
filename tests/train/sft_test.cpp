// Next-token training on folded rollouts: a folded batch (fold packing, prefix-tree attention
// through batch_input) gives the same loss and parameter gradients as the naive layout (every
// completion as its own causal prompt + completion sequence with the same supervised tokens), for
// the SFT loss with and without the first completion token supervised and for the policy-gradient
// loss (random advantages, with and without PPO clipping, token and sequence averages); a tiny
// model overfits a small batch under `train_sft`, and policy-gradient training raises the
// likelihood of the completions with positive advantages.
#include "train/sft.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "data/batch.h"
#include "data/prefix_tree.h"
#include "nn/qwen.h"
#include "tests/test_util.h"
#include "tests/train/train_test_util.h"
#include "train/batch_input.h"

namespace sprig {
namespace {

using testing::source_path;

QwenConfig tiny_qwen3() { return QwenConfig::load(source_path("train/configs/tiny_qwen3.json")); }

// Random rollout groups with the given prompt and completion lengths (ids in [1, 64)).
std::vector<data::RolloutGroup> random_groups(
    const std::vector<std::pair<int32_t, std::vector<int32_t>>>& shapes, uint64_t seed) {
  Generator gen(seed);
  const auto draw = [&](int32_t n) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t& id : ids) id = static_cast<int32_t>(gen.next_int(1, 64));
    return ids;
  };
  std::vector<data::RolloutGroup> groups;
  for (const auto& [prompt, completions] : shapes) {
    data::RolloutGroup g;
    g.prompt_ids = draw(prompt);
    for (int32_t c : completions) g.completions.push_back(draw(c));
    groups.push_back(std::move(g));
  }
  return groups;
}

// The folded groups packed into rows of `seq_len` tokens (fold packing), as one batch.
data::Batch folded_batch(const std::vector<data::RolloutGroup>& groups, int64_t seq_len) {
  data::Corpus corpus;
  corpus.folded = true;
  corpus.sources = {"mem"};
  for (const data::RolloutGroup& g : groups) corpus.docs.push_back(data::fold(g));
  const data::PackPlan plan = data::plan_rows(corpus, {data::Packing::fold, seq_len});
  std::vector<int64_t> rows(plan.rows.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  return data::collate(corpus, plan, rows, /*pad_id=*/0);
}

int64_t supervised(const Tensor& labels) {
  int64_t n = 0;
  for (int64_t l : labels.to_vector<int64_t>()) n += l != data::kIgnoreIndex;
  return n;
}

// Mean over supervised tokens of the folded batch's token losses; backpropagates it.
double folded_loss(const QwenForCausalLM& model, const data::Batch& batch) {
  const QwenInput in = batch_input(batch, model.config(), Device::cpu());
  const Var loss = sum_all(model.token_losses(model.hidden(in), batch.labels)) *
                   (1.0 / static_cast<double>(supervised(batch.labels)));
  loss.backward();
  return loss.value().item();
}

// The same groups laid out naively: each completion c as its own causal sequence prompt ++ c,
// labels -100 on the prompt and on c's last token, c[j + 1] at c's position j. Backpropagates the
// mean over all supervised tokens.
double naive_loss(const QwenForCausalLM& model, const std::vector<data::RolloutGroup>& groups) {
  std::vector<Var> sums;
  int64_t tokens = 0;
  for (const data::RolloutGroup& g : groups)
    for (const std::vector<int32_t>& c : g.completions) {
      std::vector<int64_t> ids(g.prompt_ids.begin(), g.prompt_ids.end());
      std::vector<int64_t> labels(ids.size(), data::kIgnoreIndex);
      for (size_t j = 0; j < c.size(); ++j) {
        ids.push_back(c[j]);
        labels.push_back(j + 1 < c.size() ? c[j + 1] : data::kIgnoreIndex);
      }
      const int64_t T = static_cast<int64_t>(ids.size());
      const Tensor label_tensor = Tensor::from_vector(labels, {1, T});
      const QwenInput in = causal_input(Tensor::from_vector(ids, {1, T}), model.config());
      sums.push_back(sum_all(model.token_losses(model.hidden(in), label_tensor)));
      tokens += supervised(label_tensor);
    }
  Var total = sums[0];
  for (size_t i = 1; i < sums.size(); ++i) total = total + sums[i];
  const Var loss = total * (1.0 / static_cast<double>(tokens));
  loss.backward();
  return loss.value().item();
}

TEST(SftFolded, LossAndEveryGradientEqualTheNaiveLayout) {
  // Several trees per row, a row with padding, an empty prompt, a one-token completion (nothing
  // supervised in it), and a completion longer than its prompt.
  const auto groups = random_groups({{5, {3, 4, 2}}, {0, {4, 3}}, {7, {1, 5}}, {2, {6}}}, 11);
  const data::Batch batch = folded_batch(groups, 24);
  ASSERT_GE(batch.rows(), 2);
  ASSERT_GT(batch.groups.size(), static_cast<size_t>(batch.rows()));  // rows share trees
  ASSERT_GT(batch.num_pad[0] + batch.num_pad[1], 0);

  Generator gen(5);
  QwenForCausalLM model(tiny_qwen3(), gen);
  const double folded = folded_loss(model, batch);
  std::map<std::string, Tensor> folded_grads;
  for (const auto& [name, p] : model.named_parameters()) folded_grads[name] = p.grad().clone();
  model.zero_grad();
  const double naive = naive_loss(model, groups);

  EXPECT_GT(folded, 3.0);  // about log(64) for a fresh model: a real loss, not a trivial one
  EXPECT_NEAR(folded, naive, 1e-5);
  double worst = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_TRUE(testing::all_close(folded_grads.at(name), p.grad(), 1e-5)) << name;
    worst = std::max(worst, testing::max_abs_diff(folded_grads.at(name), p.grad()));
  }
  std::cout << "folded vs naive: |loss difference| " << std::abs(folded - naive)
            << ", largest |gradient difference| " << worst << "\n";
}

// Random advantages (one per completion) and old log-probs in [-5, -3] (one per completion token):
// against a fresh model's log-probs near -log(64), ratios fall on both sides of a 0.2 clip.
void add_policy_values(std::vector<data::RolloutGroup>& groups, uint64_t seed) {
  Generator gen(seed);
  for (data::RolloutGroup& g : groups) {
    for (const std::vector<int32_t>& c : g.completions) {
      g.advantages.push_back(static_cast<float>(gen.next_uniform() * 4.0 - 2.0));
      g.old_logprobs.emplace_back();
      for (size_t t = 0; t < c.size(); ++t)
        g.old_logprobs.back().push_back(static_cast<float>(-3.0 - 2.0 * gen.next_uniform()));
    }
  }
}

// min(max(x, lo), hi) of each entry of x (n), by autograd's max over a stacked pair.
Var clamp_var(const Var& x, double lo, double hi) {
  const auto larger = [](const Var& a, const Var& b) {
    return max(concat({unsqueeze(a, 1), unsqueeze(b, 1)}, 1), 1);
  };
  const Var bound = Var(Tensor::full(x.shape(), lo, x.value().dtype()));
  const Var above = larger(x, bound);
  return neg(larger(neg(above), Var(Tensor::full(x.shape(), -hi, x.value().dtype()))));
}

// The naive computation: each completion alone as prompt ++ c, its tokens' log-probs from the full
// log-softmax (from the last prompt position on with `first_token`, else from c[0]), the loss of
// each token by the formula (-logp for sft; -A logp; PPO's max(-r A, -clip(r) A)), averaged per
// token or per completion. Backpropagates it.
double naive_next_token_loss(const QwenForCausalLM& model,
                             const std::vector<data::RolloutGroup>& groups, const LossConfig& loss,
                             bool first_token) {
  const int64_t V = model.config().vocab_size;
  Var total;
  double weight = 0;
  for (const data::RolloutGroup& g : groups)
    for (size_t j = 0; j < g.completions.size(); ++j) {
      const std::vector<int32_t>& c = g.completions[j];
      const int64_t P = static_cast<int64_t>(g.prompt_ids.size());
      std::vector<int64_t> ids(g.prompt_ids.begin(), g.prompt_ids.end());
      ids.insert(ids.end(), c.begin(), c.end());
      const int64_t T = static_cast<int64_t>(ids.size());
      const int64_t first = first_token && P > 0 ? 0 : 1;  // the first completion token scored
      const int64_t n = static_cast<int64_t>(c.size()) - first;
      if (n == 0) continue;
      std::vector<int64_t> rows, targets;
      std::vector<float> old;
      for (int64_t t = first; t < static_cast<int64_t>(c.size()); ++t) {
        rows.push_back(P + t - 1);
        targets.push_back(c[t]);
        if (!g.old_logprobs.empty()) old.push_back(g.old_logprobs[j][t]);
      }
      const Var logits = reshape(model.logits(model.hidden(causal_input(
                                     Tensor::from_vector(ids, {1, T}), model.config()))),
                                 {T, V});
      const Var logp =
          reshape(gather(index_select(log_softmax(logits, 1), 0, Tensor::from_vector(rows, {n})), 1,
                         Tensor::from_vector(targets, {n, 1})),
                  {n});
      Var per_token = neg(logp);
      if (loss.type == LossType::pg) {
        const Var a(Tensor::full({n}, g.advantages[j]));
        if (loss.clip_eps == 0) {
          per_token = neg(mul(a, logp));
        } else {
          const Var r = exp(sub(logp, Var(Tensor::from_vector(old, {n}))));
          const auto larger = [](const Var& x, const Var& y) {
            return max(concat({unsqueeze(x, 1), unsqueeze(y, 1)}, 1), 1);
          };
          per_token = larger(neg(mul(r, a)),
                             neg(mul(clamp_var(r, 1 - loss.clip_eps, 1 + loss.clip_eps), a)));
        }
      }
      const bool per_sequence = loss.type == LossType::pg && loss.average == LossAverage::sequence;
      Var sum = sum_all(per_token);
      if (per_sequence) sum = sum * (1.0 / static_cast<double>(n));
      total = total.defined() ? total + sum : sum;
      weight += per_sequence ? 1.0 : static_cast<double>(n);
    }
  const Var mean = total * (1.0 / weight);
  mean.backward();
  return mean.value().item();
}

struct LossCase {
  const char* name;
  LossConfig loss;
  bool first_token;
};

void PrintTo(const LossCase& c, std::ostream* os) { *os << c.name; }

class FoldedLoss : public ::testing::TestWithParam<LossCase> {};

TEST_P(FoldedLoss, LossAndEveryGradientEqualTheNaivePerCompletionComputation) {
  const LossCase& c = GetParam();
  // Several trees per row, an empty prompt, a one-token completion.
  auto groups = random_groups({{5, {3, 4, 2}}, {0, {4, 3}}, {7, {1, 5}}, {2, {6}}}, 21);
  add_policy_values(groups, 22);
  const data::Batch batch = folded_batch(groups, 24);
  ASSERT_GT(batch.groups.size(), static_cast<size_t>(batch.rows()));

  Generator gen(6);
  QwenForCausalLM model(tiny_qwen3(), gen);
  const MicroBatchLoss m = next_token_loss(model, batch, c.loss, c.first_token, Device::cpu());
  // 28 completion tokens in 8 completions; with first_token the first tokens of the 6 under a
  // prompt are scored too (the empty prompt's two are not).
  EXPECT_EQ(m.tokens, c.first_token ? 26 : 20);
  const Var folded = m.sum * (1.0 / m.weight);
  folded.backward();
  std::map<std::string, Tensor> folded_grads;
  for (const auto& [name, p] : model.named_parameters()) folded_grads[name] = p.grad().clone();
  model.zero_grad();
  const double naive = naive_next_token_loss(model, groups, c.loss, c.first_token);

  EXPECT_GT(std::abs(naive), 0.1);
  EXPECT_NEAR(folded.value().item(), naive, 1e-5);
  if (c.loss.clip_eps > 0) {  // both branches are exercised
    EXPECT_GT(m.sums.at("clipped_tokens"), 0);
    EXPECT_LT(m.sums.at("clipped_tokens"), m.sums.at("scored_tokens"));
  }
  for (const auto& [name, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_TRUE(testing::all_close(folded_grads.at(name), p.grad(), 1e-5)) << name;
  }
}

LossConfig pg(LossAverage average, double clip_eps) { return {LossType::pg, average, clip_eps}; }

INSTANTIATE_TEST_SUITE_P(
    , FoldedLoss,
    ::testing::Values(LossCase{"sft", {}, false}, LossCase{"sft_first_token", {}, true},
                      LossCase{"pg_token", pg(LossAverage::token, 0), false},
                      LossCase{"pg_token_first_token", pg(LossAverage::token, 0), true},
                      LossCase{"pg_sequence_first_token", pg(LossAverage::sequence, 0), true},
                      LossCase{"ppo_token", pg(LossAverage::token, 0.2), false},
                      LossCase{"ppo_sequence_first_token", pg(LossAverage::sequence, 0.2), true}),
    [](const ::testing::TestParamInfo<LossCase>& info) { return std::string(info.param.name); });

TEST(FoldedRolloutLoss, UnitAdvantagesGiveTheSftLoss) {
  auto groups = random_groups({{5, {3, 4}}, {3, {2, 5}}}, 23);
  for (data::RolloutGroup& g : groups) g.advantages.assign(g.completions.size(), 1.0f);
  const data::Batch batch = folded_batch(groups, 32);
  Generator gen(7);
  const QwenForCausalLM model(tiny_qwen3(), gen);
  for (bool first : {false, true}) {
    const MicroBatchLoss sft = next_token_loss(model, batch, {}, first, Device::cpu());
    const MicroBatchLoss pg =
        next_token_loss(model, batch, {LossType::pg, LossAverage::token, 0}, first, Device::cpu());
    EXPECT_NEAR(pg.sum.value().item(), sft.sum.value().item(), 1e-5);
    EXPECT_EQ(pg.weight, sft.weight);
  }
}

TEST(FoldedRolloutLoss, PolicyGradientNeedsAdvantagesAndClippingOldLogProbs) {
  auto groups = random_groups({{3, {2, 2}}}, 24);
  const data::Batch plain = folded_batch(groups, 8);
  Generator gen(8);
  const QwenForCausalLM model(tiny_qwen3(), gen);
  EXPECT_EQ(testing::invalid_argument_message([&] {
              next_token_loss(model, plain, pg(LossAverage::token, 0), false, Device::cpu());
            }),
            "[train] loss.type pg needs \"advantages\" (one per completion) in every rollout "
            "record");
  groups[0].advantages = {1.0f, -1.0f};
  const data::Batch with_advantages = folded_batch(groups, 8);
  EXPECT_EQ(testing::invalid_argument_message([&] {
              next_token_loss(model, with_advantages, pg(LossAverage::token, 0.2), false,
                              Device::cpu());
            }),
            "[train] loss.clip_eps 0.200000 needs \"old_logprobs\" (one per completion token) in "
            "every rollout record");
}

// The PPO loss of a folded batch (first tokens supervised, sequence average) against central
// differences of an f64 micro model, through every layer to three norm weights.
TEST(FoldedRolloutLoss, GradcheckF64OnAMicroModel) {
  auto groups = random_groups({{4, {3, 2}}, {3, {4}}}, 25);
  add_policy_values(groups, 26);
  const data::Batch batch = folded_batch(groups, 20);
  Generator gen(9);
  QwenForCausalLM model(tiny_qwen3(), gen);
  model.to(Device::cpu(), DType::f64);
  const LossConfig loss = pg(LossAverage::sequence, 0.2);
  const auto value = [&] {
    const MicroBatchLoss m = next_token_loss(model, batch, loss, true, Device::cpu());
    return m.sum * (1.0 / m.weight);
  };
  value().backward();
  std::map<std::string, Var> params;
  for (const auto& [name, p] : model.named_parameters()) params[name] = p;
  for (const char* name : {"model.norm.weight", "model.layers.0.self_attn.q_norm.weight",
                           "model.layers.1.input_layernorm.weight"}) {
    ASSERT_TRUE(params.count(name)) << name;
    const Var& p = params.at(name);
    const Tensor numeric = numeric_gradient([&] { return value().value().item(); }, p.value());
    EXPECT_TRUE(testing::all_close(p.grad(), numeric, 1e-6, 1e-4)) << name;
    EXPECT_GT(testing::max_abs_diff(numeric, Tensor::zeros(numeric.shape(), DType::f64)), 1e-6);
  }
}

// train/configs/tiny_rl.yaml: the rewarded completions' tokens grow likelier, the others' less.
TEST(PolicyGradientTraining, TinyRlRaisesTheLikelihoodOfTheRewardedCompletions) {
  testing::TempDir dir;
  const TrainConfig config =
      load_train_config(source_path("train/configs/tiny_rl.yaml"),
                        {"run_dir=" + (dir / "run"), "train.max_steps=30",
                         "model.config=" + source_path("train/configs/tiny_qwen3.json"),
                         "data.train=" + source_path("train/configs/tiny_rl.jsonl")});
  std::vector<double> losses;
  train_sft(config, false, [&](int64_t, double loss) { losses.push_back(loss); });
  std::ifstream in(dir / "run/metrics.jsonl");
  std::vector<nlohmann::json> logged;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("logprob_adv_pos")) logged.push_back(j);
  }
  ASSERT_GE(logged.size(), 3u);
  EXPECT_GT(logged.back()["logprob_adv_pos"].get<double>(),
            logged.front()["logprob_adv_pos"].get<double>() + 0.3);
  EXPECT_LT(logged.back()["logprob_adv_neg"].get<double>(),
            logged.front()["logprob_adv_neg"].get<double>() - 0.3);
  EXPECT_LT(losses.back(), losses.front() - 0.2);
}

TEST(SftFolded, TinyModelOverfitsASmallBatch) {
  testing::TempDir dir;
  // Two rollout groups (one row of the fold packing) seen at every step.
  std::string jsonl;
  for (const data::RolloutGroup& g : random_groups({{6, {5, 7, 4}}, {4, {6, 5}}}, 12)) {
    std::string line = "{\"prompt_ids\": [";
    for (size_t i = 0; i < g.prompt_ids.size(); ++i)
      line += (i ? ", " : "") + std::to_string(g.prompt_ids[i]);
    line += "], \"completions\": [";
    for (size_t c = 0; c < g.completions.size(); ++c) {
      line += c ? ", [" : "[";
      for (size_t i = 0; i < g.completions[c].size(); ++i)
        line += (i ? ", " : "") + std::to_string(g.completions[c][i]);
      line += "]";
    }
    jsonl += line + "]}\n";
  }
  testing::write_text(dir / "rollouts.jsonl", jsonl);
  TrainConfig config = testing::tiny_config(
      dir, {"data.train=" + (dir / "rollouts.jsonl"), "data.format=rollouts", "data.packing=fold",
            "data.micro_batch_size=1", "train.max_steps=40", "optimizer.lr=1e-2",
            "optimizer.weight_decay=0", "scheduler.warmup_steps=10", "scheduler.min_lr_ratio=1"});
  std::vector<double> losses;
  train_sft(config, false, [&](int64_t, double loss) { losses.push_back(loss); });
  ASSERT_EQ(losses.size(), 40u);
  EXPECT_GT(losses.front(), 3.5);
  EXPECT_LT(losses.back(), 0.05);
}

}  // namespace
}  // namespace sprig

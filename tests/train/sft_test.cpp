// SFT on folded rollouts: a folded batch (fold packing, prefix-tree attention through batch_input)
// gives the same loss and parameter gradients as the naive layout (every completion as its own
// causal prompt + completion sequence with the same supervised tokens), and a tiny model overfits
// a small batch under `train_sft`.
#include "train/sft.h"

#include <gtest/gtest.h>

#include <iostream>

#include "autograd/functions.h"
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

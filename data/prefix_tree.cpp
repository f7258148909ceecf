// Shared-prefix rollout folding (docs/semantics.md §1) and mock rollouts.
#include "data/prefix_tree.h"

#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "tensor/random.h"

namespace sprig::data {

namespace {

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("[fold] " + message);
}

void check_policy_values(const RolloutGroup& group) {
  const size_t n = group.completions.size();
  if (!group.advantages.empty() && group.advantages.size() != n)
    fail(std::to_string(group.advantages.size()) + " advantages for " + std::to_string(n) +
         " completions (give one per completion)");
  for (size_t i = 0; i < group.advantages.size(); ++i)
    if (!std::isfinite(group.advantages[i]))
      fail("advantage " + std::to_string(i) + " is not finite");
  if (group.old_logprobs.empty()) return;
  if (group.old_logprobs.size() != n)
    fail(std::to_string(group.old_logprobs.size()) + " old log-prob lists for " +
         std::to_string(n) + " completions (give one per completion)");
  for (size_t i = 0; i < n; ++i) {
    const std::vector<float>& lp = group.old_logprobs[i];
    if (lp.size() != group.completions[i].size())
      fail("completion " + std::to_string(i) + " has " +
           std::to_string(group.completions[i].size()) + " tokens but " +
           std::to_string(lp.size()) + " old log-probs");
    for (size_t t = 0; t < lp.size(); ++t)
      if (!std::isfinite(lp[t]) || lp[t] > 0)
        fail("old log-prob " + std::to_string(t) + " of completion " + std::to_string(i) + " = " +
             std::to_string(lp[t]) + " is not a log-probability (finite and <= 0)");
  }
}

}  // namespace

void check_first_tokens_predictable(const RolloutGroup& group) {
  if (group.prompt_ids.empty())
    fail(
        "a group without a prompt has no position to predict its completions' first tokens from: "
        "supervise_first_token cannot apply (give the prompt, or leave supervise_first_token off)");
}

Document fold(const RolloutGroup& group, int32_t ignore_index) {
  if (group.completions.empty()) fail("a rollout group needs at least one completion");
  size_t total = group.prompt_ids.size();
  for (size_t i = 0; i < group.completions.size(); ++i) {
    if (group.completions[i].empty()) fail("completion " + std::to_string(i) + " is empty");
    total += group.completions[i].size();
  }
  check_policy_values(group);
  Document doc;
  doc.input_ids.reserve(total);
  doc.labels.reserve(total);
  doc.node_lengths.reserve(group.completions.size() + 1);

  doc.input_ids.insert(doc.input_ids.end(), group.prompt_ids.begin(), group.prompt_ids.end());
  doc.labels.insert(doc.labels.end(), group.prompt_ids.size(), ignore_index);
  doc.node_lengths.push_back(static_cast<int32_t>(group.prompt_ids.size()));
  for (const std::vector<int32_t>& c : group.completions) {
    doc.input_ids.insert(doc.input_ids.end(), c.begin(), c.end());
    doc.labels.insert(doc.labels.end(), c.begin() + 1, c.end());
    doc.labels.push_back(ignore_index);
    doc.node_lengths.push_back(static_cast<int32_t>(c.size()));
  }
  const size_t prompt = group.prompt_ids.size();
  if (!group.advantages.empty()) {
    doc.advantages.assign(prompt, 0.0f);
    for (size_t i = 0; i < group.completions.size(); ++i)
      doc.advantages.insert(doc.advantages.end(), group.completions[i].size(), group.advantages[i]);
  }
  if (!group.old_logprobs.empty()) {
    doc.old_logprobs.assign(prompt, 0.0f);
    for (const std::vector<float>& lp : group.old_logprobs)
      doc.old_logprobs.insert(doc.old_logprobs.end(), lp.begin(), lp.end());
  }
  return doc;
}

void write_tree_positions(const std::vector<int32_t>& node_lengths, int64_t* out) {
  const int32_t prompt_len = node_lengths.at(0);
  std::iota(out, out + prompt_len, int64_t{0});
  out += prompt_len;
  for (size_t i = 1; i < node_lengths.size(); ++i) {
    std::iota(out, out + node_lengths[i], int64_t{prompt_len});
    out += node_lengths[i];
  }
}

std::vector<std::vector<int64_t>> tree_sample_paths(const std::vector<int32_t>& node_lengths) {
  const bool has_prompt = node_lengths.at(0) > 0;
  std::vector<std::vector<int64_t>> paths;
  paths.reserve(node_lengths.size() - 1);
  for (int64_t leaf = 1; leaf < static_cast<int64_t>(node_lengths.size()); ++leaf)
    paths.push_back(has_prompt ? std::vector<int64_t>{0, leaf} : std::vector<int64_t>{leaf});
  return paths;
}

std::vector<RolloutGroup> mock_rollouts(const MockRolloutOptions& options) {
  if (options.vocab_size <= 2)
    throw std::invalid_argument("[mock_rollouts] vocab_size must be above 2, got " +
                                std::to_string(options.vocab_size));
  Generator gen(options.seed);
  auto draw = [&](int64_t n) {
    std::vector<int32_t> tokens(n);
    for (int32_t& t : tokens) t = static_cast<int32_t>(gen.next_int(2, options.vocab_size));
    return tokens;
  };
  std::vector<RolloutGroup> groups(options.num_groups);
  for (RolloutGroup& g : groups) {
    g.prompt_ids = draw(options.prompt_len);
    for (int64_t c = 0; c < options.completions_per_group; ++c)
      g.completions.push_back(draw(options.completion_len));
  }
  return groups;
}

}  // namespace sprig::data

// Shared-prefix rollout folding (docs/semantics.md §1): one prompt and N sampled completions become
// one flat sequence [prompt | c_0 | c_1 | ...] with pre-shifted labels, per-token positions and a
// depth-2 prefix tree (node_lengths, sample_paths). Also the seeded mock rollout generator.
#pragma once

#include <cstdint>
#include <vector>

#include "data/document.h"

namespace sprig::data {

struct RolloutGroup {
  std::vector<int32_t> prompt_ids;                // may be empty
  std::vector<std::vector<int32_t>> completions;  // at least one, none empty
  // Policy-gradient training only (docs/semantics.md §1.7), each empty when not given: one
  // advantage per completion, and per completion token the log-prob the sampling policy gave it.
  std::vector<float> advantages = {};
  std::vector<std::vector<float>> old_logprobs = {};
};

// The folded group as a labels-form Document: input_ids = prompt ++ c_0 ++ c_1 ++ ...; labels are
// `ignore_index` on the whole prompt and c[1], ..., c[C-1], ignore_index for each completion c (a
// token predicts its successor inside its own completion); node_lengths = [P, C_0, ..., C_{N-1}].
// Advantages and old log-probs, when given, are spread over the tokens (Document). Throws
// std::invalid_argument when there is no completion, one is empty, or the advantages or old
// log-probs do not match the completions (or are not finite, or a log-prob is positive).
Document fold(const RolloutGroup& group, int32_t ignore_index = kIgnoreIndex);

// supervise_first_token scores each completion's first token from the group's last prompt
// position: a group without a prompt has none, so it throws std::invalid_argument for one.
void check_first_tokens_predictable(const RolloutGroup& group);

// Positions of a folded group's tokens into out[0 .. sum(node_lengths)): prompt 0..P-1, every
// completion restarts at P (so RoPE sees prompt ++ completion).
void write_tree_positions(const std::vector<int32_t>& node_lengths, int64_t* out);

// Root-to-leaf node paths: [[0,1], ..., [0,N]], or [[1], ..., [N]] when the prompt is empty.
std::vector<std::vector<int64_t>> tree_sample_paths(const std::vector<int32_t>& node_lengths);

// The reference's build_mock_rollout_dataset (docs/semantics.md §1.6), drawn with sprig's Philox
// generator: per group the prompt first, then each completion; every token uniform in [2,
// vocab_size - 1].
struct MockRolloutOptions {
  int64_t num_groups = 16;
  int64_t completions_per_group = 4;
  int64_t prompt_len = 32;
  int64_t completion_len = 16;
  int64_t vocab_size = 1024;
  uint64_t seed = 0;
};
std::vector<RolloutGroup> mock_rollouts(const MockRolloutOptions& options = {});

}  // namespace sprig::data

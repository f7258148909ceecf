// `sprig train sft`: next-token training of QwenForCausalLM, a recipe of the generic trainer
// (train/trainer.h), on packed documents (pre-shifted labels, document-causal attention) or on
// folded shared-prefix rollouts (prefix-tree attention; docs/semantics.md describes both), with
// the cross-entropy (loss.type sft) or, on rollouts with advantages, the policy-gradient loss
// (loss.type pg).
#pragma once

#include "data/batch.h"
#include "nn/qwen.h"
#include "train/config.h"
#include "train/trainer.h"

namespace sprig {

// The loss of one micro-batch of labels-form rows (data/batch.h scored_tokens with
// `supervise_first_token`): sft sums the scored tokens' cross-entropies, each weighing 1; pg sums
// their policy-gradient losses (nn/loss.h policy_gradient_losses), each weighing 1 or 1 / its
// completion's scored tokens (loss.average), and adds the sums of the logged logprob_adv_pos and
// logprob_adv_neg (the mean log-prob of the tokens with positive, negative advantages) and
// clip_fraction.
MicroBatchLoss next_token_loss(const QwenForCausalLM& model, const data::Batch& batch,
                               const LossConfig& loss, bool supervise_first_token, Device device);

// Runs (or, with resume, continues) the training described by `config`. `on_step` (optional) is
// called after every optimizer step with the step number and the loss. `comm`: the data-parallel
// ranks of the run.
TrainSummary train_sft(const TrainConfig& config, bool resume, const StepCallback& on_step = {},
                       Communicator& comm = single_process());

}  // namespace sprig

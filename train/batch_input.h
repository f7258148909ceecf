// The model input of a collated batch (data/batch.h): its token ids and positions on `device`,
// and per row the layout its packing made, packed documents or the prefix trees of folded
// rollouts with the row's trailing padding as a causal block of its own (nn/qwen_input.h).
#pragma once

#include "data/batch.h"
#include "nn/qwen_input.h"

namespace sprig {

QwenInput batch_input(const data::Batch& batch, const QwenConfig& config, Device device);

}  // namespace sprig

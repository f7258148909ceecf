// A collated batch (data/batch.h) as the models read it. batch_input: the token ids and positions
// on `device`, and per row the layout its packing made, packed documents or the prefix trees of
// folded rollouts with the row's trailing padding as a causal block of its own
// (nn/qwen_input.h). draft_rows: the rows of the draft trainers (speculative/blocks.h).
#pragma once

#include "data/batch.h"
#include "nn/qwen_input.h"
#include "speculative/blocks.h"

namespace sprig {

QwenInput batch_input(const data::Batch& batch, const QwenConfig& config, Device device);

// `packed`: rows of the dflash packer (documents isolated, per-document positions); otherwise
// rows of the padded packer, one sequence each.
speculative::DraftRows draft_rows(const data::Batch& batch, bool packed);

}  // namespace sprig

#include "train/batch_input.h"

#include <vector>

namespace sprig {

namespace {

// Per row, the lengths of its documents in row order (padding in the last one).
std::vector<std::vector<int64_t>> doc_lengths(const data::Batch& batch) {
  const std::vector<int64_t> lens = batch.seq_lens.to_vector<int64_t>();
  const int64_t docs = batch.seq_lens.size(1);
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(batch.rows()));
  for (int64_t b = 0; b < batch.rows(); ++b)
    for (int64_t j = 0; j < docs; ++j)
      if (lens[b * docs + j] > 0) out[static_cast<size_t>(b)].push_back(lens[b * docs + j]);
  return out;
}

}  // namespace

QwenInput batch_input(const data::Batch& batch, const QwenConfig& config, Device device) {
  const Tensor ids = batch.input_ids.to(device), positions = batch.position_ids.to(device);
  const auto rows = static_cast<size_t>(batch.rows());
  if (!batch.groups.empty()) {  // folded rollouts: one prefix tree per group, side by side
    std::vector<std::vector<PrefixTree>> trees(rows);
    for (const data::TreeGroup& g : batch.groups)
      trees[static_cast<size_t>(g.row)].push_back({g.node_lengths, g.sample_paths});
    return prefix_tree_input(ids, positions, trees, batch.num_pad, config);
  }
  // Packed documents (padding folded into the last one).
  return documents_input(ids, positions, doc_lengths(batch), config);
}

speculative::DraftRows draft_rows(const data::Batch& batch, bool packed) {
  speculative::DraftRows r;
  r.input_ids = batch.input_ids;
  r.loss_mask = batch.loss_mask;
  if (!packed) return r;
  r.position_ids = batch.position_ids;
  r.doc_remaining = batch.doc_remaining;
  r.doc_lens = doc_lengths(batch);
  return r;
}

}  // namespace sprig

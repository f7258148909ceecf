#include "train/batch_input.h"

#include <vector>

namespace sprig {

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
  const std::vector<int64_t> lens = batch.seq_lens.to_vector<int64_t>();
  const auto docs = static_cast<size_t>(batch.seq_lens.size(1));
  std::vector<std::vector<int64_t>> doc_lens(rows);
  for (size_t b = 0; b < rows; ++b)
    doc_lens[b].assign(lens.begin() + static_cast<std::ptrdiff_t>(b * docs),
                       lens.begin() + static_cast<std::ptrdiff_t>((b + 1) * docs));
  return documents_input(ids, positions, doc_lens, config);
}

}  // namespace sprig

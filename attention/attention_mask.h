// AttentionMask: a batch's mask compiled once for attention and shared by every layer and head.
// It holds the description (attention/mask.h) and its per-row key intervals, and compiles the
// block-sparse tile map of a tile shape the first time a kernel asks for it: the CPU kernels'
// shape when attention runs on the CPU, each CUDA pass's shape (uploaded once per device) when it
// runs on a GPU, and the ragged sequences of cuDNN's form when cuDNN runs it. Nothing is compiled
// for a device that never runs. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

#include "attention/cuda/device_tile_map.h"
#include "attention/cudnn/sdpa_plan.h"
#include "attention/mask.h"
#include "attention/tile_map.h"

namespace sprig {

class AttentionMask {
 public:
  explicit AttentionMask(BatchMask mask);
  AttentionMask(const AttentionMask&) = delete;
  AttentionMask& operator=(const AttentionMask&) = delete;

  const BatchMask& mask() const { return mask_; }
  const RowIntervals& intervals() const { return intervals_; }

  // The tile map of block_m x block_n tiles, compiled on first use.
  const TileMap& tile_map(int32_t block_m, int32_t block_n) const;
  // That map uploaded to `device`, on first use.
  const cuda::DeviceTileMap& device_tile_map(int32_t block_m, int32_t block_n, Device device) const;
  // The sequences of the mask's cuDNN form (attention/cudnn/sdpa_plan.h: its documents, or its
  // rows where a padding mask needs them) for a call of `batch` rows, heads and head dim, uploaded
  // to `device`, on first use.
  const cuda::cudnn::DeviceRagged& cudnn_ragged(const CudnnMaskForm& form, int64_t batch,
                                                int64_t heads_q, int64_t heads_kv, int64_t head_dim,
                                                Device device) const;

 private:
  BatchMask mask_;
  RowIntervals intervals_;
  mutable std::mutex mutex_;
  mutable std::map<std::pair<int32_t, int32_t>, TileMap> tile_maps_;
  mutable std::map<std::tuple<int, int32_t, int32_t>, cuda::DeviceTileMap> device_tile_maps_;
  mutable std::map<std::tuple<int, int64_t, int64_t, int64_t, int64_t>, cuda::cudnn::DeviceRagged>
      cudnn_ragged_;
};

// A mask ready to share between layers (and kept alive by the autograd graph until backward).
std::shared_ptr<const AttentionMask> compile_attention_mask(BatchMask mask);

}  // namespace sprig

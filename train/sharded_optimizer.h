// Optimizer-state sharding over data-parallel ranks (train.shard: optimizer or gradients, ZeRO
// stages 1 and 2; docs/semantics.md §10.16). Every gradient bucket (train/gradient_buckets.h)
// splits into W equal shards, rank r's being elements [r S, (r + 1) S) of the padded bucket; each
// rank keeps the AdamW moments (and, when the model computes in bf16, the fp32 masters) of its
// shards alone, so they cost 1/W of the whole per rank. A step updates this rank's shard of every
// bucket from its shard of the summed gradients, writes the updated weights into its shard of a
// whole bucket (the gradient buffer, or with sharded gradients a temporary one), gathers every
// rank's shards (all_gather_shards) and copies the bucket into the parameters. The update is
// AdamW's, element by element, so the weights are those of an unsharded run up to the rounding of
// the global gradient norm (a sum over shards, then over ranks) and, with sharded gradients, of
// the sums (each micro-batch's summed over the ranks, then accumulated).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "train/communicator.h"
#include "train/gradient_buckets.h"
#include "train/optimizer.h"

namespace sprig {

// The part of one parameter that falls in a rank's shard of its bucket: elements
// [param_offset, param_offset + numel) of the flattened parameter are elements
// [shard_offset, shard_offset + numel) of the shard.
struct ShardPiece {
  size_t param;  // index into the parameter list
  int64_t param_offset, shard_offset, numel;
  bool operator==(const ShardPiece&) const = default;
};

// The pieces of `bucket`'s parameters in shard `rank` of `shard_numel` elements, in bucket order.
std::vector<ShardPiece> shard_pieces(const BucketPlan::Bucket& bucket, int64_t shard_numel,
                                     int64_t rank);

// A checkpoint's moments in the other layout, so that a run resumes with the other sharding:
// rank `rank`'s shards (ShardedAdamW's "bucket_<b>.exp_avg", ...) from whole moments (AdamW's
// "<param>.exp_avg", ...), and whole moments from every rank's shards, in rank order. `buckets`
// is this run's (the same plan as the checkpoint's for the same parameters and ranks), `params`
// the parameters it was built from. Throws std::runtime_error naming a missing or misshapen
// tensor.
std::map<std::string, Tensor> shard_moments(const std::map<std::string, Tensor>& whole,
                                            const GradientBuckets& buckets,
                                            const std::vector<std::pair<std::string, Var>>& params,
                                            int64_t rank, int64_t world);
std::map<std::string, Tensor> whole_moments(
    const std::vector<std::map<std::string, Tensor>>& shards, const GradientBuckets& buckets,
    const std::vector<std::pair<std::string, Var>>& params);

class ShardedAdamW : public Optimizer {
 public:
  // `params` as AdamW's, in the order `buckets` was built from; `masters` (by name, f32, whole)
  // for every parameter that computes in a 16-bit dtype. `buckets` and `comm` must outlive this.
  ShardedAdamW(std::vector<std::pair<std::string, Var>> params, AdamWConfig config,
               const std::map<std::string, Tensor>& masters, GradientBuckets& buckets,
               Communicator& comm);

  // Updates this rank's shards and gathers the weights into every rank's parameters (collective).
  // The whole buckets then hold weights, not gradients: zero them (GradientBuckets::zero) before
  // the next backward.
  void step(double lr, double grad_scale = 1.0) override;
  double grad_norm() const override;              // collective
  std::string first_non_finite() const override;  // collective
  // Collective when the masters are kept apart from the parameters (bf16): gathered one bucket at
  // a time into rank 0's host memory; the other ranks get only the f32 parameters (their own
  // masters).
  std::map<std::string, Tensor> masters() const override;
  // This rank's shards: "bucket_<b>.exp_avg" / "bucket_<b>.exp_avg_sq", S elements each.
  std::map<std::string, Tensor> moments() const override;
  void load_state(const std::map<std::string, Tensor>& masters,
                  const std::map<std::string, Tensor>& moments, int64_t steps) override;

 private:
  struct Shard {
    Tensor grad;  // this rank's shard of the bucket's summed gradients
    // fp32 masters of the shard, undefined for a bucket of f32 parameters (their own masters)
    Tensor master;
    Tensor exp_avg, exp_avg_sq;  // fp32, S elements
    std::vector<ShardPiece> pieces;
  };
  // Element range `piece` of parameter p's flattened value.
  Tensor param_piece(const ShardPiece& piece) const;

  std::vector<std::pair<std::string, Var>> params_;
  std::vector<Shard> shards_;
  GradientBuckets& buckets_;
  Communicator& comm_;
};

}  // namespace sprig

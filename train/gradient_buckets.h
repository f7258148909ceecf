// Flat gradient buckets of data-parallel training (docs/architecture.md, data parallel). Every
// parameter's gradient is a view into one of a few preallocated flat buffers, so a step sums a few
// buffers over the ranks instead of one gradient per parameter, and zeroing is in place.
//
// Buckets take the parameters in reverse order (backward reaches the last layers first), one
// device and dtype per bucket, each up to `bucket_bytes` (a larger parameter gets a bucket of its
// own). When the communicator overlaps (NCCL), the backward of an accumulation window's last
// micro-batch starts each bucket's sum as soon as all its gradients are final; buckets start in
// index order on every rank, as collectives must. Otherwise (MPI on the CPU) sum() does it all
// after backward. Each bucket is padded with zeros to a multiple of the world size, so that it
// splits into equal shards, rank r's being the r-th (ShardedAdamW, train/sharded_optimizer.h).
//
// Sharded gradients (train.shard: gradients, docs/semantics.md §10.16) keep no whole buffers: the
// parameters' gradients are their own, and once a bucket's are final in a backward (every
// micro-batch's) they are copied into a temporary bucket, dropped, and reduce-scattered; this
// rank's shard of the sum is added to the bucket's shard, the only gradient memory kept.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "autograd/var.h"
#include "train/communicator.h"

namespace sprig {

// Which parameters go to which bucket; planned from shapes alone.
struct BucketPlan {
  struct Bucket {
    DType dtype;
    Device device;
    std::vector<size_t> params;    // indices into the parameter list, in bucket order
    std::vector<int64_t> offsets;  // each one's first element in the flat buffer
    int64_t numel = 0;
  };
  std::vector<Bucket> buckets;
};

struct ParamShape {
  int64_t numel;
  DType dtype;
  Device device;
};

BucketPlan plan_buckets(const std::vector<ParamShape>& params, int64_t bucket_bytes);

inline constexpr int64_t kDefaultBucketBytes = int64_t{25} << 20;  // as PyTorch DDP's 25 MiB

class GradientBuckets {
 public:
  // Gives every parameter a gradient view into its bucket (zeroed), or with `shard_gradients` a
  // zeroed shard per bucket, and a hook that counts it final. The parameters must outlive this
  // object, on the device they train on.
  GradientBuckets(const std::vector<Var>& params, Communicator& comm,
                  int64_t bucket_bytes = kDefaultBucketBytes, bool shard_gradients = false);
  ~GradientBuckets();  // removes the hooks (the gradients stay in their views)
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Call before each micro-batch's backward, `last` for the accumulation window's last: its final
  // gradients may start their buckets' sums during that backward (sharded gradients: every
  // backward's reduce-scatter).
  void arm(bool last);
  // Call after each micro-batch's backward: sharded gradients start the buckets that backward did
  // not reach.
  void backward_done();
  // Sums every bucket over the ranks (starting those not yet started) and waits for all of them.
  void sum();
  // Zeroes every bucket's gradients, padding included.
  void zero();

  const BucketPlan& plan() const { return plan_; }
  bool shards_gradients() const { return shard_gradients_; }
  int64_t padded_numel(size_t bucket) const;  // a multiple of the world size
  // This rank's shard of bucket `bucket`'s summed gradients (after sum()): a view into its whole
  // buffer, or the shard kept alone.
  Tensor shard(size_t bucket) const;
  // The whole buffers, in bucket order (none with sharded gradients).
  const std::vector<Tensor>& buffers() const { return buffers_; }
  // The bytes of gradients kept between steps.
  int64_t gradient_bytes() const;
  // The seconds spent in reduce-scatters (sharded gradients on a communicator that does not
  // overlap backward) since the last call.
  double take_reduce_seconds();

 private:
  void param_ready(size_t bucket);
  void start(size_t bucket);  // its sum, or its reduce-scatter into the shard

  Communicator& comm_;
  std::vector<Var> params_;
  BucketPlan plan_;
  bool shard_gradients_;
  std::vector<Tensor> buffers_;   // whole buffers, padded
  std::vector<Tensor> shards_;    // sharded gradients: this rank's shard of each bucket
  std::vector<int64_t> pending_;  // per bucket: parameters not final yet in the armed backward
  size_t next_ = 0;               // the next bucket to start
  bool armed_ = false;
  double reduce_seconds_ = 0;
};

}  // namespace sprig

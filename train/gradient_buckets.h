// Flat gradient buckets of data-parallel training (docs/architecture.md, data parallel). Every
// parameter's gradient is a view into one of a few preallocated flat buffers, so a step sums a few
// buffers over the ranks instead of one gradient per parameter, and zeroing is in place.
//
// Buckets take the parameters in reverse order (backward reaches the last layers first), one
// device and dtype per bucket, each up to `bucket_bytes` (a larger parameter gets a bucket of its
// own). When the communicator overlaps (NCCL), the backward of an accumulation window's last
// micro-batch starts each bucket's sum as soon as all its gradients are final; buckets start in
// index order on every rank, as collectives must. Otherwise (MPI on the CPU) sum() does it all
// after backward. Each buffer is padded with zeros to a multiple of the world size, so that it
// splits into equal shards (ShardedAdamW, train/sharded_optimizer.h).
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
  // Gives every parameter a gradient view into its bucket (zeroed) and a hook that counts it
  // final. The parameters must outlive this object, on the device they train on.
  GradientBuckets(const std::vector<Var>& params, Communicator& comm,
                  int64_t bucket_bytes = kDefaultBucketBytes);
  ~GradientBuckets();  // removes the hooks (the gradients stay in their views)
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Call before the backward that closes an accumulation window: its final gradients may start
  // their buckets' sums during that backward.
  void arm();
  // Sums every bucket over the ranks (starting those not yet started) and waits for all of them.
  void sum();

  const std::vector<Tensor>& buffers() const { return buffers_; }  // in bucket order, padded
  const BucketPlan& plan() const { return plan_; }
  // Zeroes every buffer, its padding included.
  void zero();

 private:
  void param_ready(size_t bucket);

  Communicator& comm_;
  std::vector<Var> params_;
  BucketPlan plan_;
  std::vector<Tensor> buffers_;
  std::vector<int64_t> pending_;  // per bucket: parameters not final yet in the armed backward
  size_t next_ = 0;               // the next bucket to start
  bool armed_ = false;
};

}  // namespace sprig

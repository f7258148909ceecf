#include "train/gradient_buckets.h"

#include <chrono>
#include <stdexcept>
#include <utility>

#include "tensor/ops.h"

namespace sprig {

BucketPlan plan_buckets(const std::vector<ParamShape>& params, int64_t bucket_bytes) {
  if (bucket_bytes <= 0)
    throw std::invalid_argument("[buckets] bucket_bytes must be positive, got " +
                                std::to_string(bucket_bytes));
  BucketPlan plan;
  for (size_t i = params.size(); i-- > 0;) {
    const ParamShape& p = params[i];
    BucketPlan::Bucket* last = plan.buckets.empty() ? nullptr : &plan.buckets.back();
    const int64_t bytes = p.numel * static_cast<int64_t>(dtype_size(p.dtype));
    const bool fits =
        last && last->dtype == p.dtype && last->device == p.device &&
        (last->numel * static_cast<int64_t>(dtype_size(p.dtype)) + bytes <= bucket_bytes);
    if (!fits) {
      plan.buckets.push_back({p.dtype, p.device, {}, {}, 0});
      last = &plan.buckets.back();
    }
    last->params.push_back(i);
    last->offsets.push_back(last->numel);
    last->numel += p.numel;
  }
  return plan;
}

GradientBuckets::GradientBuckets(const std::vector<Var>& params, Communicator& comm,
                                 int64_t bucket_bytes, bool shard_gradients)
    : comm_(comm), params_(params), shard_gradients_(shard_gradients) {
  std::vector<ParamShape> shapes;
  for (const Var& p : params) shapes.push_back({p.numel(), p.dtype(), p.device()});
  plan_ = plan_buckets(shapes, bucket_bytes);
  for (size_t b = 0; b < plan_.buckets.size(); ++b) {
    const BucketPlan::Bucket& bucket = plan_.buckets[b];
    pending_.push_back(static_cast<int64_t>(bucket.params.size()));
    if (shard_gradients_)
      shards_.push_back(
          Tensor::zeros({padded_numel(b) / comm.world_size()}, bucket.dtype, bucket.device));
    else
      buffers_.push_back(Tensor::zeros({padded_numel(b)}, bucket.dtype, bucket.device));
    for (size_t j = 0; j < bucket.params.size(); ++j) {
      Var p = params[bucket.params[j]];
      if (!shard_gradients_)
        p.set_grad_buffer(buffers_[b].narrow(0, bucket.offsets[j], p.numel()).view(p.shape()));
      p.set_grad_hook([this, b] { param_ready(b); });
    }
  }
}

GradientBuckets::~GradientBuckets() {
  for (Var& p : params_) p.set_grad_hook(nullptr);
}

int64_t GradientBuckets::padded_numel(size_t bucket) const {
  const int64_t world = comm_.world_size();
  return (plan_.buckets[bucket].numel + world - 1) / world * world;
}

Tensor GradientBuckets::shard(size_t bucket) const {
  return shard_gradients_ ? shards_[bucket] : comm_.shard(buffers_[bucket]);
}

int64_t GradientBuckets::gradient_bytes() const {
  int64_t bytes = 0;
  for (const Tensor& t : shard_gradients_ ? shards_ : buffers_)
    bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

double GradientBuckets::take_reduce_seconds() { return std::exchange(reduce_seconds_, 0.0); }

void GradientBuckets::zero() {
  for (const Tensor& t : shard_gradients_ ? shards_ : buffers_) t.zero_();
}

void GradientBuckets::arm(bool last) {
  armed_ = shard_gradients_ || (last && comm_.overlaps_backward());
  next_ = 0;
  for (size_t b = 0; b < pending_.size(); ++b)
    pending_[b] = static_cast<int64_t>(plan_.buckets[b].params.size());
}

void GradientBuckets::param_ready(size_t bucket) {
  if (!armed_) return;
  --pending_[bucket];
  while (next_ < plan_.buckets.size() && pending_[next_] == 0) start(next_++);
}

void GradientBuckets::start(size_t bucket) {
  if (!shard_gradients_) return comm_.start_sum(buffers_[bucket]);
  // The bucket's gradients (zero for a parameter this backward did not reach) into a temporary
  // whole bucket, each dropped once copied; the sum of this rank's shard added to the kept one.
  const BucketPlan::Bucket& b = plan_.buckets[bucket];
  const Tensor whole = Tensor::zeros({padded_numel(bucket)}, b.dtype, b.device);
  for (size_t j = 0; j < b.params.size(); ++j) {
    Var p = params_[b.params[j]];
    if (!p.grad().defined()) continue;
    whole.narrow(0, b.offsets[j], p.numel()).copy_(p.grad().contiguous().view({p.numel()}));
    p.zero_grad();
  }
  const auto begin = std::chrono::steady_clock::now();
  comm_.reduce_scatter(whole, Reduction::sum);
  if (!comm_.overlaps_backward())
    reduce_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  shards_[bucket].copy_(add(shards_[bucket], comm_.shard(whole)));
}

void GradientBuckets::backward_done() {
  if (!shard_gradients_) return;
  while (next_ < plan_.buckets.size()) start(next_++);
  armed_ = false;
}

void GradientBuckets::sum() {
  while (next_ < plan_.buckets.size()) start(next_++);
  comm_.finish_sums();
  armed_ = false;
  next_ = 0;
}

}  // namespace sprig

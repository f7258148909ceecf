#include "train/gradient_buckets.h"

#include <stdexcept>

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
                                 int64_t bucket_bytes)
    : comm_(comm), params_(params) {
  std::vector<ParamShape> shapes;
  for (const Var& p : params) shapes.push_back({p.numel(), p.dtype(), p.device()});
  plan_ = plan_buckets(shapes, bucket_bytes);
  for (size_t b = 0; b < plan_.buckets.size(); ++b) {
    const BucketPlan::Bucket& bucket = plan_.buckets[b];
    const int64_t world = comm.world_size();
    const int64_t padded = (bucket.numel + world - 1) / world * world;
    buffers_.push_back(Tensor::zeros({padded}, bucket.dtype, bucket.device));
    pending_.push_back(static_cast<int64_t>(bucket.params.size()));
    for (size_t j = 0; j < bucket.params.size(); ++j) {
      Var p = params[bucket.params[j]];
      p.set_grad_buffer(buffers_[b].narrow(0, bucket.offsets[j], p.numel()).view(p.shape()));
      p.set_grad_hook([this, b] { param_ready(b); });
    }
  }
}

GradientBuckets::~GradientBuckets() {
  for (Var& p : params_) p.set_grad_hook(nullptr);
}

void GradientBuckets::zero() {
  for (const Tensor& buffer : buffers_) buffer.zero_();
}

void GradientBuckets::arm() {
  armed_ = comm_.overlaps_backward();
  next_ = 0;
  for (size_t b = 0; b < pending_.size(); ++b)
    pending_[b] = static_cast<int64_t>(plan_.buckets[b].params.size());
}

void GradientBuckets::param_ready(size_t bucket) {
  if (!armed_) return;
  --pending_[bucket];
  while (next_ < buffers_.size() && pending_[next_] == 0) comm_.start_sum(buffers_[next_++]);
}

void GradientBuckets::sum() {
  while (next_ < buffers_.size()) comm_.start_sum(buffers_[next_++]);
  comm_.finish_sums();
  armed_ = false;
  next_ = 0;
}

}  // namespace sprig

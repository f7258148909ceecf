#include "train/sharded_optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sprig {

std::vector<ShardPiece> shard_pieces(const BucketPlan::Bucket& bucket, int64_t shard_numel,
                                     int64_t rank) {
  const int64_t lo = rank * shard_numel, hi = lo + shard_numel;
  std::vector<ShardPiece> pieces;
  for (size_t j = 0; j < bucket.params.size(); ++j) {
    const int64_t start = bucket.offsets[j];
    const int64_t end = j + 1 < bucket.offsets.size() ? bucket.offsets[j + 1] : bucket.numel;
    const int64_t first = std::max(start, lo), last = std::min(end, hi);
    if (first < last) pieces.push_back({bucket.params[j], first - start, first - lo, last - first});
  }
  return pieces;
}

namespace {

Tensor flat(const Tensor& t) { return t.contiguous().view({t.numel()}); }

const char* const kMoments[] = {"exp_avg", "exp_avg_sq"};

std::string bucket_key(size_t bucket, const std::string& moment) {
  return "bucket_" + std::to_string(bucket) + "." + moment;
}

// from[key], which must hold `numel` elements.
const Tensor& tensor_of(const std::map<std::string, Tensor>& from, const std::string& key,
                        int64_t numel, const std::string& where) {
  const auto it = from.find(key);
  if (it == from.end()) throw std::runtime_error(where + " has no \"" + key + "\"");
  if (it->second.numel() != numel)
    throw std::runtime_error(where + "'s \"" + key + "\" has " +
                             std::to_string(it->second.numel()) + " elements, this run's " +
                             std::to_string(numel));
  return it->second;
}

}  // namespace

std::map<std::string, Tensor> shard_moments(const std::map<std::string, Tensor>& whole,
                                            const GradientBuckets& buckets,
                                            const std::vector<std::pair<std::string, Var>>& params,
                                            int64_t rank, int64_t world) {
  std::map<std::string, Tensor> out;
  const BucketPlan& plan = buckets.plan();
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const int64_t n = buckets.padded_numel(b) / world;
    for (const std::string moment : kMoments) {
      const Tensor shard = Tensor::zeros({n}, DType::f32);
      for (const ShardPiece& piece : shard_pieces(plan.buckets[b], n, rank)) {
        const auto& [name, param] = params[piece.param];
        const Tensor& t = tensor_of(whole, name + "." + moment, param.numel(), "the checkpoint");
        shard.narrow(0, piece.shard_offset, piece.numel)
            .copy_(flat(t).narrow(0, piece.param_offset, piece.numel));
      }
      out[bucket_key(b, moment)] = shard;
    }
  }
  return out;
}

std::map<std::string, Tensor> whole_moments(
    const std::vector<std::map<std::string, Tensor>>& shards, const GradientBuckets& buckets,
    const std::vector<std::pair<std::string, Var>>& params) {
  std::map<std::string, Tensor> out;
  const BucketPlan& plan = buckets.plan();
  const auto world = static_cast<int64_t>(shards.size());
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const int64_t n = buckets.padded_numel(b) / world;
    for (const std::string moment : kMoments) {
      for (const size_t p : plan.buckets[b].params)
        out[params[p].first + "." + moment] = Tensor::zeros(params[p].second.shape(), DType::f32);
      for (int64_t r = 0; r < world; ++r) {
        const Tensor& shard = tensor_of(shards[static_cast<size_t>(r)], bucket_key(b, moment), n,
                                        "rank " + std::to_string(r) + "'s optimizer file");
        for (const ShardPiece& piece : shard_pieces(plan.buckets[b], n, r))
          flat(out.at(params[piece.param].first + "." + moment))
              .narrow(0, piece.param_offset, piece.numel)
              .copy_(shard.narrow(0, piece.shard_offset, piece.numel));
      }
    }
  }
  return out;
}

ShardedAdamW::ShardedAdamW(std::vector<std::pair<std::string, Var>> params, AdamWConfig config,
                           const std::map<std::string, Tensor>& masters, GradientBuckets& buckets,
                           Communicator& comm)
    : Optimizer(config), params_(std::move(params)), buckets_(buckets), comm_(comm) {
  for (const auto& [name, p] : params_)
    if (!p.value().is_contiguous())  // its pieces must be views, updated in place
      throw std::invalid_argument("[AdamW] parameter " + name + " is not contiguous");
  const BucketPlan& plan = buckets.plan();
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const BucketPlan::Bucket& bucket = plan.buckets[b];
    Shard s;
    s.grad = buckets.shard(b);
    const int64_t n = s.grad.numel();
    s.pieces = shard_pieces(bucket, n, comm.rank());
    s.exp_avg = Tensor::zeros({n}, DType::f32, bucket.device);
    s.exp_avg_sq = Tensor::zeros({n}, DType::f32, bucket.device);
    if (bucket.dtype != DType::f32) {
      s.master = Tensor::zeros({n}, DType::f32, bucket.device);
      for (const ShardPiece& piece : s.pieces) {
        const std::string& name = params_[piece.param].first;
        const auto it = masters.find(name);
        if (it == masters.end())
          throw std::invalid_argument("[AdamW] parameter " + name + " is " +
                                      dtype_name(bucket.dtype) + " and has no fp32 master");
        s.master.narrow(0, piece.shard_offset, piece.numel)
            .copy_(flat(it->second).narrow(0, piece.param_offset, piece.numel));
      }
    }
    shards_.push_back(std::move(s));
  }
}

Tensor ShardedAdamW::param_piece(const ShardPiece& piece) const {
  return flat(params_[piece.param].second.value()).narrow(0, piece.param_offset, piece.numel);
}

void ShardedAdamW::step(double lr, double grad_scale) {
  const AdamWParams hp = next_update(lr, grad_scale);
  const BucketPlan& plan = buckets_.plan();
  for (size_t b = 0; b < shards_.size(); ++b) {
    const Shard& s = shards_[b];
    const BucketPlan::Bucket& bucket = plan.buckets[b];
    // The whole bucket the weights are gathered in: its gradient buffer (this rank's shard of the
    // gradients is read before its weights are written over it), or with sharded gradients a
    // temporary one.
    const Tensor whole = buckets_.shards_gradients() ? Tensor::empty({buckets_.padded_numel(b)},
                                                                     bucket.dtype, bucket.device)
                                                     : buckets_.buffers()[b];
    const Tensor weights = comm_.shard(whole);
    if (s.master.defined()) {
      adamw_step(s.master, s.grad, s.exp_avg, s.exp_avg_sq, hp);
      weights.copy_(s.master);
    } else {
      for (const ShardPiece& piece : s.pieces) {
        const Tensor param = param_piece(piece);
        adamw_step(param, s.grad.narrow(0, piece.shard_offset, piece.numel),
                   s.exp_avg.narrow(0, piece.shard_offset, piece.numel),
                   s.exp_avg_sq.narrow(0, piece.shard_offset, piece.numel), hp);
        weights.narrow(0, piece.shard_offset, piece.numel).copy_(param);
      }
    }
    comm_.all_gather_shards(whole);
    for (size_t j = 0; j < bucket.params.size(); ++j) {
      const Var& param = params_[bucket.params[j]].second;
      param.value().copy_(whole.narrow(0, bucket.offsets[j], param.numel()).view(param.shape()));
    }
  }
}

double ShardedAdamW::grad_norm() const {
  std::vector<Tensor> grads;
  for (const Shard& s : shards_) grads.push_back(s.grad);
  const double norm = global_norm(grads);
  return std::sqrt(comm_.all_reduce(norm * norm, Reduction::sum));
}

std::string ShardedAdamW::first_non_finite() const {
  auto first = static_cast<double>(params_.size());
  for (const Shard& s : shards_)
    for (const ShardPiece& piece : s.pieces) {
      const Tensor master = s.master.defined() ? s.master.narrow(0, piece.shard_offset, piece.numel)
                                               : param_piece(piece);
      if (!all_finite(master)) first = std::min(first, static_cast<double>(piece.param));
    }
  first = comm_.all_reduce(first, Reduction::min);
  return first < static_cast<double>(params_.size()) ? params_[static_cast<size_t>(first)].first
                                                     : "";
}

std::map<std::string, Tensor> ShardedAdamW::masters() const {
  std::map<std::string, Tensor> out;
  const BucketPlan& plan = buckets_.plan();
  for (size_t b = 0; b < shards_.size(); ++b) {
    const Shard& s = shards_[b];
    const BucketPlan::Bucket& bucket = plan.buckets[b];
    if (!s.master.defined()) {
      for (const size_t p : bucket.params) out[params_[p].first] = params_[p].second.value();
      continue;
    }
    const Tensor whole = Tensor::zeros({buckets_.padded_numel(b)}, DType::f32, bucket.device);
    comm_.shard(whole).copy_(s.master);
    comm_.all_gather_shards(whole);
    if (comm_.rank() != 0) continue;  // rank 0 alone holds them in host memory
    const Tensor host = whole.to(Device::cpu());
    for (size_t j = 0; j < bucket.params.size(); ++j) {
      const Var& param = params_[bucket.params[j]].second;
      out[params_[bucket.params[j]].first] =
          host.narrow(0, bucket.offsets[j], param.numel()).view(param.shape());
    }
  }
  return out;
}

std::map<std::string, Tensor> ShardedAdamW::moments() const {
  std::map<std::string, Tensor> out;
  for (size_t b = 0; b < shards_.size(); ++b) {
    out[bucket_key(b, "exp_avg")] = shards_[b].exp_avg;
    out[bucket_key(b, "exp_avg_sq")] = shards_[b].exp_avg_sq;
  }
  return out;
}

void ShardedAdamW::load_state(const std::map<std::string, Tensor>& masters,
                              const std::map<std::string, Tensor>& moments, int64_t steps) {
  for (size_t b = 0; b < shards_.size(); ++b) {
    Shard& s = shards_[b];
    restore_tensor(moments, bucket_key(b, "exp_avg"), s.exp_avg);
    restore_tensor(moments, bucket_key(b, "exp_avg_sq"), s.exp_avg_sq);
    for (const size_t p : buckets_.plan().buckets[b].params)
      restore_tensor(masters, params_[p].first, params_[p].second.value());
    for (const ShardPiece& piece : s.pieces)
      if (s.master.defined())
        s.master.narrow(0, piece.shard_offset, piece.numel)
            .copy_(flat(masters.at(params_[piece.param].first))
                       .narrow(0, piece.param_offset, piece.numel));
  }
  steps_ = steps;
}

}  // namespace sprig

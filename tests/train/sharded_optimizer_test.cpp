// Optimizer-state sharding in one process: which part of each parameter falls in which rank's
// shard of a bucket, and ShardedAdamW on one rank (the whole bucket its shard) updating exactly as
// AdamW, for f32 parameters (their own masters) and bf16 ones with fp32 masters, the gradients in
// whole buckets or sharded, with its state round trip; moments converted between whole and each
// rank's shards. Two ranks: tests/train/data_parallel_mpi.cpp.
#include "train/sharded_optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/functions.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::rand_normal;

const AdamWConfig kConfig{/*lr=*/0.0, /*beta1=*/0.8, /*beta2=*/0.95, /*eps=*/1e-6,
                          /*weight_decay=*/0.1};

TEST(ShardPieces, SplitTheParametersAtTheShardBoundaries) {
  // Parameters 2, 1, 0 of 5, 3 and 4 elements at offsets 0, 5, 8: three shards of 4.
  const BucketPlan::Bucket bucket{DType::f32, Device::cpu(), {2, 1, 0}, {0, 5, 8}, 12};
  EXPECT_EQ(shard_pieces(bucket, 4, 0), (std::vector<ShardPiece>{{2, 0, 0, 4}}));
  EXPECT_EQ(shard_pieces(bucket, 4, 1), (std::vector<ShardPiece>{{2, 4, 0, 1}, {1, 0, 1, 3}}));
  EXPECT_EQ(shard_pieces(bucket, 4, 2), (std::vector<ShardPiece>{{0, 0, 0, 4}}));
  // Padded to 15 for three ranks: the last shard ends in two elements of padding.
  const BucketPlan::Bucket odd{DType::f32, Device::cpu(), {0, 1}, {0, 6}, 13};
  EXPECT_EQ(shard_pieces(odd, 5, 0), (std::vector<ShardPiece>{{0, 0, 0, 5}}));
  EXPECT_EQ(shard_pieces(odd, 5, 1), (std::vector<ShardPiece>{{0, 5, 0, 1}, {1, 0, 1, 4}}));
  EXPECT_EQ(shard_pieces(odd, 5, 2), (std::vector<ShardPiece>{{1, 4, 0, 3}}));
}

// Sets p's gradient to `g` (f32, p's shape) by backpropagating sum(cast(p, f32) * g).
void set_grad(Var& p, const Tensor& g) {
  p.zero_grad();
  sum_all(cast(p, DType::f32) * Var(g)).backward();
}

// Trains the same parameters with AdamW and with ShardedAdamW on one rank (buckets of 64 bytes,
// so several; the gradients in whole buckets or sharded) and expects the same weights, bit for
// bit, and the same gradient norms.
void expect_sharded_matches_whole(DType dtype, bool shard_gradients) {
  const std::vector<Shape> shapes = {{3, 5}, {7}, {2, 2, 3}};
  std::vector<std::pair<std::string, Var>> whole, sharded;
  std::map<std::string, Tensor> masters;
  std::vector<Var> sharded_vars;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string name = "p" + std::to_string(i);
    const Tensor start = rand_normal(shapes[i], 1 + i);
    masters[name] = start;
    whole.emplace_back(name, Var(start.to(dtype), true));
    sharded.emplace_back(name, Var(start.to(dtype), true));
    sharded_vars.push_back(sharded.back().second);
  }
  if (dtype == DType::f32) masters.clear();
  GradientBuckets buckets(sharded_vars, single_process(), 64, shard_gradients);
  ASSERT_GT(buckets.plan().buckets.size(), 1u);
  AdamW reference(whole, kConfig, masters);
  ShardedAdamW optimizer(sharded, kConfig, masters, buckets, single_process());
  for (int k = 0; k < 4; ++k) {
    buckets.arm(true);
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Tensor g = rand_normal(shapes[i], 10 * k + i).to(DType::bf16).to(DType::f32);
      set_grad(whole[i].second, g);
      set_grad(sharded[i].second, g);
    }
    buckets.backward_done();
    buckets.sum();
    EXPECT_NEAR(optimizer.grad_norm(), reference.grad_norm(), 1e-6 * reference.grad_norm());
    reference.step(1e-2, 0.5);
    optimizer.step(1e-2, 0.5);
    buckets.zero();  // the buckets held the gathered weights
    for (size_t i = 0; i < shapes.size(); ++i) {
      EXPECT_EQ(testing::max_abs_diff(sharded[i].second.value(), whole[i].second.value()), 0.0)
          << whole[i].first << " step " << k + 1;
      const Tensor& grad = sharded[i].second.grad();
      EXPECT_TRUE(shard_gradients
                      ? !grad.defined()
                      : testing::max_abs_diff(grad, Tensor::zeros(shapes[i], dtype)) == 0)
          << "the gradients are zeroed, or dropped when sharded";
    }
  }
  EXPECT_EQ(optimizer.steps_taken(), 4);
  for (const auto& [name, master] : reference.masters())
    EXPECT_EQ(testing::max_abs_diff(optimizer.masters().at(name), master), 0.0) << name;

  // The state round trip: a fresh optimizer loaded from this one's state takes the same step.
  std::vector<std::pair<std::string, Var>> resumed;
  std::vector<Var> resumed_vars;
  for (const auto& [name, p] : sharded) {
    resumed.emplace_back(name, Var(Tensor::zeros(p.shape(), dtype), true));
    resumed_vars.push_back(resumed.back().second);
  }
  GradientBuckets resumed_buckets(resumed_vars, single_process(), 64, shard_gradients);
  ShardedAdamW again(resumed, kConfig, masters, resumed_buckets, single_process());
  again.load_state(optimizer.masters(), optimizer.moments(), optimizer.steps_taken());
  buckets.arm(true);
  resumed_buckets.arm(true);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Tensor g = rand_normal(shapes[i], 100 + i);
    set_grad(sharded[i].second, g);
    set_grad(resumed[i].second, g);
  }
  buckets.backward_done();
  resumed_buckets.backward_done();
  optimizer.step(1e-2);
  again.step(1e-2);
  for (size_t i = 0; i < shapes.size(); ++i)
    EXPECT_EQ(testing::max_abs_diff(resumed[i].second.value(), sharded[i].second.value()), 0.0);
}

TEST(ShardedAdamW, OnOneRankUpdatesExactlyAsAdamW) {
  for (const bool shard_gradients : {false, true})
    expect_sharded_matches_whole(DType::f32, shard_gradients);
}

TEST(ShardedAdamW, Bf16ParametersFollowTheirShardedMasters) {
  for (const bool shard_gradients : {false, true})
    expect_sharded_matches_whole(DType::bf16, shard_gradients);
}

// A communicator of two ranks that is never called: buckets planned and padded for two ranks.
class TwoRanks : public Communicator {
 public:
  int64_t world_size() const override { return 2; }
};

// Whole moments split into each rank's shards and joined again are what they were; a missing or
// misshapen tensor is named.
TEST(ShardedAdamW, MomentsConvertBetweenWholeAndShards) {
  TwoRanks two;
  std::vector<std::pair<std::string, Var>> params = {{"a", Var(rand_normal({3, 5}, 1), true)},
                                                     {"b", Var(rand_normal({7}, 2), true)},
                                                     {"c", Var(rand_normal({2, 3}, 3), true)}};
  std::vector<Var> vars;
  for (const auto& [name, p] : params) vars.push_back(p);
  GradientBuckets buckets(vars, two, 64);
  std::map<std::string, Tensor> whole;
  for (const auto& [name, p] : params) {
    whole[name + ".exp_avg"] = rand_normal(p.shape(), 10 + whole.size());
    whole[name + ".exp_avg_sq"] = rand_normal(p.shape(), 10 + whole.size());
  }
  const std::vector<std::map<std::string, Tensor>> shards = {
      shard_moments(whole, buckets, params, 0, 2), shard_moments(whole, buckets, params, 1, 2)};
  EXPECT_EQ(shards[0].size(), 2 * buckets.plan().buckets.size());
  EXPECT_EQ(shards[1].at("bucket_0.exp_avg").numel(), buckets.padded_numel(0) / 2);
  const std::map<std::string, Tensor> joined = whole_moments(shards, buckets, params);
  ASSERT_EQ(joined.size(), whole.size());
  for (const auto& [name, t] : whole)
    EXPECT_EQ(testing::max_abs_diff(joined.at(name), t), 0.0) << name;

  std::map<std::string, Tensor> missing = whole;
  missing.erase("b.exp_avg_sq");
  EXPECT_THROW(
      try { shard_moments(missing, buckets, params, 0, 2); } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "the checkpoint has no \"b.exp_avg_sq\"");
        throw;
      },
      std::runtime_error);
  std::vector<std::map<std::string, Tensor>> short_shards = shards;
  short_shards[1]["bucket_0.exp_avg"] = Tensor::zeros({1});
  EXPECT_THROW(whole_moments(short_shards, buckets, params), std::runtime_error);
}

// A step skipped for a non-finite gradient leaves nothing behind once the buckets are zeroed (the
// next step's norm is its own), and a non-finite master is named the same way on every rank.
TEST(ShardedAdamW, NonFiniteGradientsAndMastersAreFoundAndCleared) {
  Var a(rand_normal({4}, 1), true), b(rand_normal({3}, 2), true);
  GradientBuckets buckets({a, b}, single_process(), 16, /*shard_gradients=*/true);
  ShardedAdamW optimizer({{"a", a}, {"b", b}}, kConfig, {}, buckets, single_process());
  const auto backward = [&](double value) {
    buckets.arm(true);
    set_grad(a, Tensor::full({4}, value));
    set_grad(b, Tensor::full({3}, value));
    buckets.backward_done();
    buckets.sum();
  };
  backward(std::nan(""));
  EXPECT_TRUE(std::isnan(optimizer.grad_norm()));
  buckets.zero();  // the skipped step's
  backward(1.0);
  EXPECT_DOUBLE_EQ(optimizer.grad_norm(), std::sqrt(7.0));

  EXPECT_EQ(optimizer.first_non_finite(), "");
  b.value().copy_(Tensor::full({3}, std::numeric_limits<double>::infinity()));
  EXPECT_EQ(optimizer.first_non_finite(), "b");
}

TEST(ShardedAdamW, MomentsAreNamedByBucket) {
  Var a(rand_normal({4}, 1), true), b(rand_normal({3}, 2), true);
  GradientBuckets buckets({a, b}, single_process(), 16);
  ShardedAdamW optimizer({{"a", a}, {"b", b}}, kConfig, {}, buckets, single_process());
  const auto moments = optimizer.moments();
  ASSERT_EQ(moments.size(), 4u);
  EXPECT_EQ(moments.at("bucket_0.exp_avg").numel(), 3);  // b first: buckets take them in reverse
  EXPECT_EQ(moments.at("bucket_1.exp_avg_sq").numel(), 4);
  EXPECT_THROW(optimizer.load_state(optimizer.masters(), {}, 1), std::runtime_error);
}

}  // namespace
}  // namespace sprig

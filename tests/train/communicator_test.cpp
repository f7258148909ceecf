// The device each rank of a CUDA run takes and the single process's sharded collectives
// (train/communicator.h), tested without a launcher; tests/train/communicator_ranks.cpp checks
// every collective on real ranks.
#include "train/communicator.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace sprig {
namespace {

TEST(Launch, EachRankTakesTheDeviceOfItsLocalRankAmongThoseItSees) {
  // Every rank sees all 8 devices of its host: local rank i takes device i.
  EXPECT_EQ(device_for_local_rank(0, 8), 0);
  EXPECT_EQ(device_for_local_rank(5, 8), 5);
  // Each rank sees only its own device (per-rank CUDA_VISIBLE_DEVICES): device 0 for all.
  EXPECT_EQ(device_for_local_rank(0, 1), 0);
  EXPECT_EQ(device_for_local_rank(3, 1), 0);
  // Two devices per rank: ranks share them round-robin rather than asking for one that is absent.
  EXPECT_EQ(device_for_local_rank(3, 2), 1);
  EXPECT_THROW(
      {
        try {
          device_for_local_rank(2, 0);
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(),
                       "[launch] local rank 2 of a CUDA run sees no CUDA device (check "
                       "CUDA_VISIBLE_DEVICES)");
          throw;
        }
      },
      std::runtime_error);
}

TEST(SingleProcess, ShardedCollectivesLeaveTheTensorWhole) {
  Communicator& one = single_process();
  const Tensor full = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  one.reduce_scatter(full, Reduction::sum);
  one.all_gather_shards(full);
  EXPECT_EQ(full.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(one.shard(full).shape(), Shape{4});
  EXPECT_EQ(one.shard(full).data_ptr(), full.data_ptr());
  try {
    one.reduce_scatter(full.transpose(0, 1), Reduction::sum);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "[reduce_scatter] needs a contiguous tensor of 1 equal shards, got [2, 2] (not "
                 "contiguous)");
  }
}

}  // namespace
}  // namespace sprig

// The learning-rate schedule against docs/semantics.md E16.
#include "train/schedule.h"

#include <gtest/gtest.h>

namespace sprig {
namespace {

TEST(Schedule, SpecE16WarmupTwoTotalTen) {
  const double expected[] = {0.5,  1.0,      1.0,      0.965746, 0.868198, 0.722208,
                             0.55, 0.377792, 0.231802, 0.134254, 0.1};
  for (int64_t step = 0; step <= 10; ++step)
    EXPECT_NEAR(lr_multiplier(step, 2, 10, 0.1), expected[step], 1e-6) << "step " << step;
}

TEST(Schedule, ClampsPastTheEnd) {
  EXPECT_NEAR(lr_multiplier(25, 2, 10, 0.1), 0.1, 1e-12);
  EXPECT_NEAR(lr_multiplier(3, 1, 1, 0.0), 0.0, 1e-12);  // total <= warmup: decay span 1
}

TEST(Schedule, WarmupFromRatio) {
  EXPECT_EQ(warmup_from_ratio(0.04, 10), 1);  // int(0.4) = 0, at least 1
  EXPECT_EQ(warmup_from_ratio(0.04, 100), 4);
  EXPECT_EQ(warmup_from_ratio(0.0, 100), 1);
  EXPECT_EQ(warmup_from_ratio(0.1, 55), 5);  // truncated, not rounded
}

}  // namespace
}  // namespace sprig

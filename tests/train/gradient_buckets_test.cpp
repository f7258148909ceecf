// Data-parallel pieces that run in one process: the bucket plan, gradients as views into the
// buckets (zeroed in place), bucket sums started during backward in index order when the
// communicator overlaps and after it otherwise, and a config that differs between ranks.
#include "train/gradient_buckets.h"

#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "tests/train/train_test_util.h"
#include "train/trainer.h"

namespace sprig {
namespace {

std::vector<std::vector<size_t>> params_of(const BucketPlan& plan) {
  std::vector<std::vector<size_t>> out;
  for (const BucketPlan::Bucket& b : plan.buckets) out.push_back(b.params);
  return out;
}

TEST(GradientBuckets, PlanTakesParametersInReverseByDtypeUpToTheCap) {
  const Device cpu = Device::cpu();
  // f32 parameters of 10, 20, 30, 40 elements (40 .. 160 bytes), then a bf16 one, then f32.
  const std::vector<ParamShape> params = {{10, DType::f32, cpu}, {20, DType::f32, cpu},
                                          {30, DType::f32, cpu}, {40, DType::f32, cpu},
                                          {8, DType::bf16, cpu}, {5, DType::f32, cpu}};
  const BucketPlan plan = plan_buckets(params, 200);
  EXPECT_EQ(params_of(plan), (std::vector<std::vector<size_t>>{{5}, {4}, {3}, {2, 1}, {0}}));
  EXPECT_EQ(plan.buckets[3].offsets, (std::vector<int64_t>{0, 30}));
  EXPECT_EQ(plan.buckets[3].numel, 50);
  EXPECT_EQ(plan.buckets[1].dtype, DType::bf16);
  // A parameter larger than the cap gets a bucket of its own.
  EXPECT_EQ(params_of(plan_buckets(params, 8)),
            (std::vector<std::vector<size_t>>{{5}, {4}, {3}, {2}, {1}, {0}}));
  EXPECT_EQ(params_of(plan_buckets(params, int64_t{1} << 20)),
            (std::vector<std::vector<size_t>>{{5}, {4}, {3, 2, 1, 0}}));
  EXPECT_THROW(plan_buckets(params, 0), std::invalid_argument);
}

// Two ranks with the same gradients: a sum doubles. Records when each bucket's sum started
// (the number of parameters whose gradient was final by then).
class TwinRanks : public Communicator {
 public:
  explicit TwinRanks(bool overlaps) : overlaps_(overlaps) {}
  int64_t world_size() const override { return 2; }
  void all_reduce(const Tensor& t, Reduction op) override {
    if (op == Reduction::sum) t.copy_(mul(t, 2.0));
  }
  bool overlaps_backward() const override { return overlaps_; }
  void start_sum(const Tensor& t) override {
    started.push_back(t.numel());
    all_reduce(t, Reduction::sum);
  }
  void finish_sums() override { ++finished; }
  std::vector<int64_t> started;  // the buckets' sizes, in the order their sums started
  int finished = 0;
  std::vector<std::string> gathered;  // what all_gather returns when set

  std::vector<std::string> all_gather(const std::string& text) override {
    return gathered.empty() ? std::vector<std::string>{text, text} : gathered;
  }

 private:
  bool overlaps_;
};

TEST(GradientBuckets, GradientsAreViewsSummedDuringOrAfterBackward) {
  for (const bool overlaps : {true, false}) {
    // y = sum(c * b) with c = sum(a * a): backward makes b's gradient final before a's.
    Var a(Tensor::from_vector<float>({1, 2}, {2}), true);
    Var b(Tensor::from_vector<float>({3, 4, 5}, {3}), true);
    TwinRanks comm(overlaps);
    GradientBuckets buckets({a, b}, comm, 3 * 4);  // one bucket each: b's, then a's
    ASSERT_EQ(buckets.buffers().size(), 2u);
    EXPECT_TRUE(b.grad().shares_storage(buckets.buffers()[0]));
    EXPECT_TRUE(a.grad().shares_storage(buckets.buffers()[1]));
    EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{0, 0}));

    const auto loss = [&] { return sum_all(sum_all(a * a) * b); };
    loss().backward();  // not armed: accumulates, sums nothing
    EXPECT_TRUE(comm.started.empty());
    buckets.arm(true);
    loss().backward();
    // Overlapping: both buckets started inside backward, b's (index 0) first; each buffer is
    // padded to a multiple of the two ranks (b's 3 elements to 4).
    EXPECT_EQ(comm.started, overlaps ? (std::vector<int64_t>{4, 2}) : std::vector<int64_t>{});
    buckets.sum();
    EXPECT_EQ(comm.started, (std::vector<int64_t>{4, 2}));
    EXPECT_EQ(comm.finished, 1);
    // Two backwards, then doubled: d/da = 2 * 12 * a, d/db = 5 per element.
    EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{96, 192}));
    EXPECT_EQ(b.grad().to_vector<float>(), (std::vector<float>{20, 20, 20}));
    a.zero_grad();
    EXPECT_TRUE(a.grad().shares_storage(buckets.buffers()[1]));
    EXPECT_EQ(buckets.buffers()[1].to_vector<float>(), (std::vector<float>{0, 0}));
  }
}

TEST(GradientBuckets, AParameterBackwardNeverReachesIsSummedAtTheEnd) {
  Var used(Tensor::from_vector<float>({1}, {1}), true), unused(Tensor::zeros({4}), true);
  TwinRanks comm(true);
  GradientBuckets buckets({used, unused}, comm, 4);
  buckets.arm(true);
  sum_all(used * used).backward();
  EXPECT_EQ(comm.started, (std::vector<int64_t>{}));  // bucket 0 (unused) never completes
  buckets.sum();
  EXPECT_EQ(comm.started, (std::vector<int64_t>{4, 2}));  // used's 1 element padded to 2
  EXPECT_EQ(used.grad().to_vector<float>(), (std::vector<float>{4}));
}

TEST(DataParallel, RanksWithDifferentConfigsAreRefusedAtStart) {
  testing::TempDir dir;
  const TrainConfig config = testing::tiny_config(dir);
  const TrainConfig other = testing::tiny_config(dir, {"optimizer.lr=0.5"});
  TwinRanks comm(false);
  comm.gathered = {config.resolved_yaml, other.resolved_yaml};
  try {
    Trainer trainer(config, false, comm);
    FAIL() << "a different config was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(testing::contains(e.what(),
                                  "[train] rank 1 was given a different config than "
                                  "rank 0: optimizer.lr 3.0e-3 on rank 0, 0.5 on rank 1"));
  }
}

}  // namespace
}  // namespace sprig

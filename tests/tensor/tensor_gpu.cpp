// Tensor core on a CUDA device: host <-> device round trips for every dtype, strided and
// converting copies on the device, fill, the caching allocator's current/peak byte counts, and
// the device guard of every op.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "tensor/ops.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;

const Device kGpu = Device::cuda(0);

TEST(TensorGpu, RoundTripsEveryDType) {
  SPRIG_REQUIRE_CUDA();
  const std::vector<double> v = {0, 1, -2, 3, 100, -7, 64, 5, 0.5, -0.25, 8, 9};
  const Tensor host = Tensor::from_vector(v, {3, 4});
  for (DType t :
       {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64, DType::boolean}) {
    const Tensor h = host.to(t);
    const Tensor d = h.to(kGpu);
    EXPECT_TRUE(d.device() == kGpu);
    EXPECT_EQ(d.dtype(), t);
    EXPECT_EQ(d.to(Device::cpu()).to_vector<double>(), h.to_vector<double>()) << dtype_name(t);
    // Converting on the device matches converting on the host.
    EXPECT_EQ(host.to(kGpu).to(t).to_vector<double>(), h.to_vector<double>()) << dtype_name(t);
  }
}

TEST(TensorGpu, StridedCopiesOnTheDevice) {
  SPRIG_REQUIRE_CUDA();
  const Tensor host = testing::rand_normal({5, 7, 3}, 1);
  const Tensor dev = host.to(kGpu);
  const Tensor views[] = {dev.permute({2, 0, 1}), dev.slice(1, 1, 7, 2), dev.select(2, 1).t(),
                          dev.narrow(0, 1, 3).transpose(0, 2)};
  const Tensor host_views[] = {host.permute({2, 0, 1}), host.slice(1, 1, 7, 2),
                               host.select(2, 1).t(), host.narrow(0, 1, 3).transpose(0, 2)};
  for (int i = 0; i < 4; ++i) {
    const Tensor c = views[i].contiguous();
    EXPECT_TRUE(c.is_contiguous());
    EXPECT_TRUE(c.device() == kGpu);
    EXPECT_TRUE(all_close(c, host_views[i], 0.0)) << "view " << i;
    EXPECT_TRUE(all_close(views[i].to(DType::bf16), host_views[i].to(DType::bf16), 0.0))
        << "view " << i;
  }
  // Broadcasting copy into a non-contiguous device destination.
  const Tensor dst = Tensor::zeros({4, 3}, DType::f32, kGpu);
  dst.t().copy_(Tensor::from_vector(std::vector<float>{1, 2, 3}, {3, 1}).to(kGpu));
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3}));
  // Host to a strided device view.
  dst.select(1, 0).copy_(Tensor::from_vector(std::vector<float>{9, 8, 7, 6}, {4}));
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{9, 2, 3, 8, 2, 3, 7, 2, 3, 6, 2, 3}));
}

TEST(TensorGpu, Fill) {
  SPRIG_REQUIRE_CUDA();
  for (DType t :
       {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64, DType::boolean}) {
    const Tensor d = Tensor::full({1000, 33}, 3.0, t, kGpu);
    EXPECT_EQ(d.to_vector<double>(), Tensor::full({1000, 33}, 3.0, t).to_vector<double>())
        << dtype_name(t);
  }
  const Tensor m = Tensor::zeros({3, 4}, DType::f32, kGpu);
  m.select(1, 1).fill_(-2.0);
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{0, -2, 0, 0, 0, -2, 0, 0, 0, -2, 0, 0}));
}

TEST(TensorGpu, AllocatorTracksCurrentAndPeakBytes) {
  SPRIG_REQUIRE_CUDA();
  cuda::synchronize(0);
  cuda::reset_memory_peak(0);
  const size_t before = cuda::memory_allocated(0);
  EXPECT_EQ(cuda::memory_peak(0), before);
  {
    const Tensor a = Tensor::empty({1 << 20}, DType::f32, kGpu);  // 4 MiB
    EXPECT_EQ(cuda::memory_allocated(0), before + (4u << 20));
    {
      const Tensor b = Tensor::empty({1 << 20}, DType::bf16, kGpu);  // 2 MiB
      EXPECT_EQ(cuda::memory_allocated(0), before + (6u << 20));
    }
    EXPECT_EQ(cuda::memory_allocated(0), before + (4u << 20));
    const Tensor view = a.slice(0, 0, 1024);  // views allocate nothing
    EXPECT_EQ(cuda::memory_allocated(0), before + (4u << 20));
  }
  EXPECT_EQ(cuda::memory_allocated(0), before);
  EXPECT_EQ(cuda::memory_peak(0), before + (6u << 20));
  cuda::reset_memory_peak(0);
  EXPECT_EQ(cuda::memory_peak(0), before);
}

int current_device() {
  int d = -1;
  EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
  return d;
}

// A guard makes its device current and restores the previous one; an op on a tensor of the last
// device (allocation included) leaves the thread's current device as it found it.
TEST(TensorGpu, DeviceGuardRestoresTheCurrentDevice) {
  SPRIG_REQUIRE_CUDA();
  const int last = cuda::device_count() - 1;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  {
    const cuda::DeviceGuard guard(last);
    EXPECT_EQ(current_device(), last);
  }
  EXPECT_EQ(current_device(), 0);
  const Tensor x = Tensor::ones({4, 8}).to(Device::cuda(last));
  const Tensor y = rms_norm(x, Tensor::ones({8}).to(Device::cuda(last)), 1e-6).first;
  EXPECT_EQ(current_device(), 0);
  EXPECT_TRUE(all_close(y.to(Device::cpu()), Tensor::ones({4, 8}), 1e-5, 1e-5));
}

}  // namespace
}  // namespace sprig

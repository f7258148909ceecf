// GPU parity of the GRU: gru_cell and its backward, the autograd gru (the tables of
// tests/parity/gru_cases.h); mixed-device errors.
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "tensor/ops.h"
#include "tests/parity/gru_cases.h"
#include "tests/tensor/op_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::throws_invalid;
using testing::to_cuda;

SPRIG_GPU_PARITY_TEST(GruGpu, CellMatchesCpu, parity::gru_cell_cases())
SPRIG_GPU_PARITY_TEST(GruGpu, AutogradForwardAndBackwardMatchCpu, parity::gru_autograd_cases())

TEST(GruGpu, RejectsMixedDevices) {
  SPRIG_REQUIRE_CUDA();
  const Tensor gi = Tensor::ones({2, 6}), h = Tensor::ones({2, 2});
  EXPECT_TRUE(throws_invalid([&] { gru_cell(gi, to_cuda(gi), h); },
                             "[gru_cell] tensors are on different devices"));
  const Var x(Tensor::ones({2, 3, 4})), w_ih(to_cuda(Tensor::ones({6, 4})));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru(x, w_ih, Var(Tensor::ones({6, 2})));
      },
      "[gru] x, w_ih and w_hh must be on one device, got cpu, "));
}

}  // namespace
}  // namespace sprig

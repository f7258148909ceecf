// GPU parity of the GRU: gru_cell and gru_cell_backward, CUDA against the CPU twin in f32 and bf16
// on awkward sizes (scalar and 16-byte vector paths) and non-contiguous inputs; the autograd gru
// forward and backward on both devices; mixed-device errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "tensor/ops.h"
#include "tests/tensor/op_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::non_contiguous;
using testing::rand_normal;
using testing::rand_uniform;
using testing::throws_invalid;
using testing::to_cuda;

// Largest |value| of a CPU tensor: the `scale` of a parity tolerance.
double max_abs(const Tensor& t) { return testing::max_abs_diff(t, Tensor::zeros(t.shape())); }

TEST(GruGpu, CellMatchesCpu) {
  SPRIG_REQUIRE_CUDA();
  uint64_t seed = 400;
  for (DType dt : {DType::f32, DType::bf16})
    for (const auto& [R, G] : {std::pair<int64_t, int64_t>{1, 1},
                               {17, 31},
                               {33, 17},
                               {97, 64},
                               {31, 1024},
                               {1025, 33}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " R=" + std::to_string(R) +
                   " G=" + std::to_string(G));
      const Tensor gi = mul(rand_normal({R, 3 * G}, ++seed, dt), 2.0);
      const Tensor gh = mul(rand_normal({R, 3 * G}, ++seed, dt), 2.0);
      const Tensor h_prev = rand_uniform({R, G}, -1, 1, ++seed, dt);
      const GruCell cpu = gru_cell(gi, gh, h_prev);
      const GruCell gpu = gru_cell(to_cuda(gi), to_cuda(gh), to_cuda(h_prev));
      EXPECT_PARITY(gpu.h, cpu.h);
      EXPECT_PARITY(gpu.gates, cpu.gates);
      // The backward from the same gates on both devices.
      const Tensor dh = rand_normal({R, G}, ++seed, dt);
      const GruCellGrads cg = gru_cell_backward(dh, h_prev, cpu.gates);
      const GruCellGrads gg = gru_cell_backward(to_cuda(dh), to_cuda(h_prev), to_cuda(cpu.gates));
      EXPECT_PARITY(gg.dgi, cg.dgi, 1, max_abs(cg.dgi));
      EXPECT_PARITY(gg.dgh, cg.dgh, 1, max_abs(cg.dgh));
      EXPECT_PARITY(gg.dh_prev, cg.dh_prev, 1, max_abs(cg.dh_prev));
    }
}

TEST(GruGpu, CellNonContiguousInputs) {
  SPRIG_REQUIRE_CUDA();
  const Tensor gi = rand_normal({33, 24}, 450), gh = rand_normal({33, 24}, 451);
  const Tensor h_prev = rand_normal({33, 8}, 452), dh = rand_normal({33, 8}, 453);
  const GruCell cpu = gru_cell(gi, gh, h_prev);
  const GruCell gpu = gru_cell(non_contiguous(to_cuda(gi)), non_contiguous(to_cuda(gh)),
                               non_contiguous(to_cuda(h_prev)));
  EXPECT_PARITY(gpu.h, cpu.h);
  EXPECT_PARITY(gpu.gates, cpu.gates);
  const GruCellGrads cg = gru_cell_backward(dh, h_prev, cpu.gates);
  const GruCellGrads gg = gru_cell_backward(non_contiguous(to_cuda(dh)),
                                            non_contiguous(to_cuda(h_prev)), to_cuda(cpu.gates));
  EXPECT_PARITY(gg.dgi, cg.dgi, 1, max_abs(cg.dgi));
  EXPECT_PARITY(gg.dh_prev, cg.dh_prev, 1, max_abs(cg.dh_prev));
}

// The output and the gradients of sum(out * dy) on `device`: {out, dx, dw_ih, dw_hh}.
std::vector<Tensor> gru_run(const Tensor& x, const Tensor& w_ih, const Tensor& w_hh,
                            const Tensor& dy, Device device) {
  const Var xv(x.to(device), true), wi(w_ih.to(device), true), wh(w_hh.to(device), true);
  const Var out = gru(xv, wi, wh);
  out.backward(dy.to(device));
  return {out.value(), xv.grad(), wi.grad(), wh.grad()};
}

TEST(GruGpu, AutogradForwardAndBackwardMatchCpu) {
  SPRIG_REQUIRE_CUDA();
  uint64_t seed = 500;
  struct Case {
    int64_t R, T, E, G;
  };
  for (DType dt : {DType::f32, DType::bf16})
    for (const Case& c : {Case{33, 5, 31, 17}, Case{97, 3, 64, 64}, Case{17, 1, 33, 128}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " R=" + std::to_string(c.R) + " T=" +
                   std::to_string(c.T) + " E=" + std::to_string(c.E) + " G=" + std::to_string(c.G));
      const double k = 1 / std::sqrt(static_cast<double>(c.G));
      const Tensor x = rand_normal({c.R, c.T, c.E}, ++seed, dt);
      const Tensor w_ih = rand_uniform({3 * c.G, c.E}, -k, k, ++seed, dt);
      const Tensor w_hh = rand_uniform({3 * c.G, c.G}, -k, k, ++seed, dt);
      const Tensor dy = rand_normal({c.R, c.T, c.G}, ++seed, dt);
      const std::vector<Tensor> cpu = gru_run(x, w_ih, w_hh, dy, Device::cpu());
      const std::vector<Tensor> gpu = gru_run(x, w_ih, w_hh, dy, Device::cuda());
      // Each value depends, through the recurrence, on the E + 3G products of every step's GEMMs;
      // the weight gradients also sum over the R * T rows.
      const int64_t chain = c.T * (c.E + 3 * c.G), rows = c.R * c.T;
      const int64_t terms[] = {chain, chain, chain + rows, chain + rows};
      for (size_t i = 0; i < cpu.size(); ++i)
        EXPECT_PARITY(gpu[i], cpu[i], terms[i], max_abs(cpu[i])) << "output " << i;
    }
}

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

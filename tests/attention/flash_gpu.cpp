// CUDA flash attention against the dense f64 reference on the host (the tables of
// tests/parity/attention_cases.h: every mask kind, FlashAttention's rule, exact zeros, the
// deterministic dQ reproducing itself bitwise), the attention op running the kernels on its
// mask's tile maps, and the device check.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "attention/attention.h"
#include "attention/cuda/flash.h"
#include "tests/attention/flash_reference.h"
#include "tests/parity/attention_cases.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using cuda::FlashPass;
using flash_test::Inputs;
using flash_test::make_mask;
using flash_test::Outputs;
using flash_test::Problem;
using testing::max_abs_diff;

const Device kGpu = Device::cuda(0);

// The kernels on the GPU; outputs start as NaN, so an element a kernel fails to write cannot pass.
Outputs flash(const Problem& p, const Inputs& host, bool deterministic) {
  const flash_test::PassMaps maps = flash_test::pass_maps(p, kGpu);
  const auto nan_like = [&](const Tensor& t) {
    return Tensor::full(t.shape(), NAN, t.dtype(), kGpu);
  };
  const Inputs dev{host.q.to(kGpu), host.k.to(kGpu), host.v.to(kGpu), host.dout.to(kGpu)};
  const cudaStream_t stream = cuda::current_stream(kGpu.index);
  const Tensor out = nan_like(dev.q), dq = nan_like(dev.q), dk = nan_like(dev.k),
               dv = nan_like(dev.k);
  const Tensor lse = Tensor::full({p.batch, p.q_heads, p.q_len()}, NAN, DType::f32, kGpu);
  cuda::flash_attention_forward(dev.q, dev.k, dev.v, maps.forward, p.scale(), out, lse, stream);
  cuda::flash_attention_backward(dev.q, dev.k, dev.v, out, lse, dev.dout, maps.backward, p.scale(),
                                 dq, dk, dv, stream, deterministic);
  return flash_test::host_outputs(out, lse, dq, dk, dv);
}

using flash_test::Kind;

SPRIG_GPU_PARITY_TEST(FlashGpu, Causal, parity::flash_cases(Kind::causal, {}, flash, true))
SPRIG_GPU_PARITY_TEST(FlashGpu, DocumentsWithAMaskPerBatchRow,
                      parity::flash_cases(Kind::documents, {}, flash, true))
SPRIG_GPU_PARITY_TEST(FlashGpu, PrefixTree, parity::flash_cases(Kind::prefix_tree, {}, flash, true))
SPRIG_GPU_PARITY_TEST(FlashGpu, DFlash, parity::flash_cases(Kind::dflash, {}, flash, true))
SPRIG_GPU_PARITY_TEST(FlashGpu, FullyMaskedRowsAndUnseenKeys,
                      parity::fully_masked_cases(flash, true))
SPRIG_GPU_PARITY_TEST(FlashGpu, Float16, parity::float16_cases(flash, true))

// The attention op on CUDA tensors runs the twin entry points on the mask's own device tile maps
// (compiled and uploaded on first use, then reused): the same results as the kernels on maps
// uploaded by hand, bitwise but for dQ's atomic summation order.
TEST(FlashGpu, TheAttentionOpRunsTheKernelsOnTheMasksTileMaps) {
  SPRIG_REQUIRE_CUDA();
  const Problem p{make_mask(Kind::documents, 97, 2), 2, 4, 2, 64};
  const Inputs host = flash_test::random_inputs(p, 1);
  const Inputs dev{host.q.to(kGpu), host.k.to(kGpu), host.v.to(kGpu), host.dout.to(kGpu)};
  const Outputs kernels = flash(p, host, false);
  const AttentionMask mask(p.mask);
  for (int pass = 0; pass < 2; ++pass) {  // the second pass reuses the uploaded maps
    const AttentionOutput f = attention_forward(dev.q, dev.k, dev.v, mask, p.scale());
    const AttentionGrads g =
        attention_backward(dev.q, dev.k, dev.v, f.out, f.lse, dev.dout, mask, p.scale());
    const Outputs op = flash_test::host_outputs(f.out, f.lse, g.dq, g.dk, g.dv);
    EXPECT_EQ(max_abs_diff(op.out, kernels.out), 0.0);
    EXPECT_EQ(max_abs_diff(op.lse, kernels.lse), 0.0);
    EXPECT_EQ(max_abs_diff(op.dk, kernels.dk), 0.0);
    EXPECT_EQ(max_abs_diff(op.dv, kernels.dv), 0.0);
    EXPECT_PARITY(g.dq, kernels.dq.to(p.dtype), p.k_len());
  }
}

TEST(FlashGpu, RejectsTensorsOnDifferentDevices) {
  SPRIG_REQUIRE_CUDA();
  const Tensor q = Tensor::zeros({1, 17, 2, 64}, DType::bf16, kGpu);
  const Tensor k = Tensor::zeros({1, 17, 1, 64}, DType::bf16);
  const Tensor lse = Tensor::zeros({1, 2, 17}, DType::f32, kGpu);
  const cuda::TileShape s = cuda::flash_tile_shape(FlashPass::forward, 64);
  const cuda::DeviceTileMap map = cuda::upload_tile_map(
      compile_tile_map(row_intervals(BatchMask(causal_mask(17))), s.block_m, s.block_n), kGpu);
  EXPECT_EQ(testing::invalid_argument_message([&] {
              cuda::flash_attention_forward(q, k, k, map, 0.125, q, lse, cuda::current_stream(0));
            }),
            "[flash_attention_forward] k is on cpu, q on cuda:0");
}

}  // namespace
}  // namespace sprig

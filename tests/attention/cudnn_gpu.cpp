// The cuDNN attention backend on the GPU (attention/cudnn/sdpa.h): the attention op with
// attention.backend cudnn against the dense f64 reference on the host under FlashAttention's rule
// (as flash_gpu.cpp checks sprig's kernels), and against sprig's kernels on the same inputs, on
// every mask form cuDNN runs: causal squares, packed documents (other documents per batch row),
// each with and without a sliding window; lengths 1..1025, head dims 64, 96 and 128 (96: cuDNN
// only), GQA 1:1, 2:1 and 8:1, bf16 and f16. Backend auto measures and stays right; on a prefix
// tree it runs sprig's kernels, and backend cudnn on it is an error naming the mask kind.
#include <gtest/gtest.h>

#include <string>

#include "attention/attention.h"
#include "attention/backend.h"
#include "attention/cudnn/sdpa.h"
#include "tests/attention/flash_reference.h"
#include "tests/parity/attention_cases.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using flash_test::Inputs;
using flash_test::Outputs;
using flash_test::Problem;

const Device kGpu = Device::cuda(0);

#define SPRIG_REQUIRE_CUDNN()                                        \
  do {                                                               \
    SPRIG_REQUIRE_CUDA();                                            \
    if (!cuda::cudnn::kBuilt) GTEST_SKIP() << "built without cuDNN"; \
  } while (0)

// The attention op on the GPU under `backend`; the outputs are fresh tensors.
Outputs run_op(AttentionBackend backend, const Problem& p, const Inputs& host) {
  set_attention_backend(backend);
  const AttentionMask mask{BatchMask(p.mask)};
  const Inputs dev{host.q.to(kGpu), host.k.to(kGpu), host.v.to(kGpu), host.dout.to(kGpu)};
  const AttentionOutput f = attention_forward(dev.q, dev.k, dev.v, mask, p.scale());
  const AttentionGrads g =
      attention_backward(dev.q, dev.k, dev.v, f.out, f.lse, dev.dout, mask, p.scale());
  set_attention_backend(AttentionBackend::automatic);
  return flash_test::host_outputs(f.out, f.lse, g.dq, g.dk, g.dv);
}

// The attention op under backend auto.
const flash_test::FlashRunner automatic = [](const Problem& p, const Inputs& host, bool) {
  return run_op(AttentionBackend::automatic, p, host);
};

// cuDNN against the reference (tests/parity/attention_cases.h), and against sprig's kernels on
// the same inputs where they run (head dims 64 and 128).
void check(const std::vector<Problem>& problems, const std::vector<uint64_t>& seeds) {
  const flash_test::FlashRunner cudnn = [](const Problem& p, const Inputs& host, bool) {
    return run_op(AttentionBackend::cudnn, p, host);
  };
  std::vector<parity::Case> cases;
  for (size_t i = 0; i < problems.size(); ++i)
    cases.push_back(parity::attention_case(problems[i], seeds[i], parity::kCuda, cudnn, false));
  parity::check(cases, parity::kCuda);
  for (size_t i = 0; i < problems.size(); ++i) {
    const Problem& p = problems[i];
    if (p.head_dim != 64 && p.head_dim != 128) continue;
    SCOPED_TRACE(cases[i].name);
    const Inputs host = flash_test::random_inputs(p, seeds[i]);
    const Outputs ours = run_op(AttentionBackend::cudnn, p, host),
                  sprig = run_op(AttentionBackend::sprig, p, host);
    // Two fp32-accumulating kernels on the same bf16/f16 inputs: close, not bitwise.
    EXPECT_LT(testing::max_abs_diff(ours.out, sprig.out), 2e-2);
    EXPECT_LT(testing::max_abs_diff(ours.lse, sprig.lse), 1e-3);
    EXPECT_LT(testing::max_abs_diff(ours.dq, sprig.dq), 5e-2);
  }
}

// Every row the same form: documents differ per row, the window (if any) is shared.
BatchMask documents(int64_t t, int64_t batch, int64_t window) {
  std::vector<Mask> rows = {document_mask({t - t / 3, t / 3}, t, window)};
  if (batch > 1) rows.push_back(document_mask({t / 4, t / 4, t - t / 2}, t, window));
  return BatchMask(rows);
}

void check_form(bool ragged, int64_t window) {
  std::vector<Problem> problems;
  std::vector<uint64_t> seeds;
  uint64_t seed = 500;
  for (int64_t t : {1, 17, 97, 1025})
    for (int64_t d : {64, 96, 128})
      for (int64_t group : {1, 2, 8}) {
        const int64_t batch = t <= 97 ? 2 : 1, kv_heads = t <= 97 ? 2 : 1;
        const BatchMask mask =
            ragged && t >= 4 ? documents(t, batch, window) : BatchMask(causal_mask(t, window));
        problems.push_back({mask, batch, group * kv_heads, kv_heads, d});
        seeds.push_back(seed += 10);
      }
  check(problems, seeds);
}

TEST(CudnnGpu, Causal) {
  SPRIG_REQUIRE_CUDNN();
  check_form(false, 0);
}

TEST(CudnnGpu, CausalWithASlidingWindow) {
  SPRIG_REQUIRE_CUDNN();
  check_form(false, 5);
}

TEST(CudnnGpu, PackedDocuments) {
  SPRIG_REQUIRE_CUDNN();
  check_form(true, 0);
}

TEST(CudnnGpu, PackedDocumentsWithASlidingWindow) {
  SPRIG_REQUIRE_CUDNN();
  check_form(true, 7);
}

TEST(CudnnGpu, HalfPrecision) {
  SPRIG_REQUIRE_CUDNN();
  Problem p{documents(97, 2, 0), 2, 4, 2, 128};
  p.dtype = DType::f16;
  check({p}, {900});
}

// The first call of a key measures both backends, later calls run the faster: right either way.
TEST(CudnnGpu, AutoMeasuresOncePerShapeAndStaysRight) {
  SPRIG_REQUIRE_CUDNN();
  std::vector<parity::Case> cases;
  for (const BatchMask& mask : {BatchMask(causal_mask(1025)), documents(1025, 1, 0)})
    for (int call = 0; call < 2; ++call)
      cases.push_back(parity::attention_case({mask, 1, 8, 2, 128}, 300 + call, parity::kCuda,
                                             automatic, false));
  parity::check(cases, parity::kCuda);
}

TEST(CudnnGpu, AutoRunsSprigsKernelsWhereCudnnCannotAndCudnnSaysWhy) {
  SPRIG_REQUIRE_CUDNN();
  const Problem p{flash_test::make_mask(flash_test::Kind::prefix_tree, 97, 1), 1, 4, 2, 64};
  parity::check({parity::attention_case(p, 77, parity::kCuda, automatic, false)}, parity::kCuda);
  const Inputs host = flash_test::random_inputs(p, 77);
  const std::string message =
      testing::invalid_argument_message([&] { run_op(AttentionBackend::cudnn, p, host); });
  set_attention_backend(AttentionBackend::automatic);
  EXPECT_NE(message.find("backend cudnn cannot express a prefix-tree or DFlash"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace sprig

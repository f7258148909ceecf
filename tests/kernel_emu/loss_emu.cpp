// tensor/cuda/loss.cu run on the emulated device against the CPU twins: cross-entropy and forward
// KL (the tables of tests/parity/loss_cases.h), ignored rows getting exactly 0 even with infinite
// logits, the kernels of Domino's corrected pair (the corrections given: the launcher's GEMMs need
// cuBLASLt; the backward in place as the launcher runs it), huge logits, and tied maxima across
// threads. Each backward kernel gets the CPU's lses (tests/parity/loss_cases.h says why).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tensor/cuda/loss.cu"  // compiled against tests/kernel_emu/device_emu.h
#include "tensor/ops.h"
#include "tests/kernel_emu/emu_test_util.h"
#include "tests/parity/loss_cases.h"
#include "tests/tensor/loss_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using parity::some_targets;
using parity::unset_indices;
using testing::quarter_steps;
using testing::rand_normal;
using testing::RowsVocab;

// V = 1001 takes the scalar path; the others the 16-byte vector path. Rows of 32000 run 512
// threads in f32 (256 in bf16), rows of 65536 1024 threads in both (row_threads).
const RowsVocab kCorrectedShapes[] = {{1, 1000}, {17, 32000}, {33, 1001}, {33, 1000}, {3, 65536}};

TEST(CrossEntropyEmu, ThreadsPerRowGrowWithTheVocabulary) {
  EXPECT_EQ(cuda::row_threads<float>(1000, 4), 256);
  EXPECT_EQ(cuda::row_threads<__nv_bfloat16>(32000, 8), 256);
  EXPECT_EQ(cuda::row_threads<float>(32000, 4), 512);
  EXPECT_EQ(cuda::row_threads<__nv_bfloat16>(32768, 8), 512);
  EXPECT_EQ(cuda::row_threads<__nv_bfloat16>(65535, 8), 512);
  EXPECT_EQ(cuda::row_threads<__nv_bfloat16>(65536, 8), 1024);
  EXPECT_EQ(cuda::row_threads<__nv_bfloat16>(151936, 8), 1024);
  EXPECT_EQ(cuda::row_threads<double>(151936, 2), 256);  // f64 stays at 256
}

std::string trace(DType dtype, const RowsVocab& s) {
  return std::string(dtype_name(dtype)) + " R=" + std::to_string(s.rows) +
         " V=" + std::to_string(s.vocab);
}

CrossEntropyResult emulated_cross_entropy(const Tensor& logits, const Tensor& targets,
                                          const CrossEntropyResult& cpu) {
  const CrossEntropyResult out{emu::nan_like(cpu.loss), emu::nan_like(cpu.lse),
                               unset_indices(cpu.argmax)};
  cuda::cross_entropy(logits, targets, out.loss, out.lse, out.argmax, -100, nullptr);
  return out;
}

Tensor emulated_cross_entropy_backward(const Tensor& dloss, const Tensor& logits,
                                       const Tensor& targets, const Tensor& lse) {
  const Tensor dlogits = emu::nan_like(logits);
  cuda::cross_entropy_backward(dloss, logits, targets, lse, dlogits, -100, nullptr);
  return dlogits;
}

KLResult emulated_kl_div(const Tensor& teacher, const Tensor& student, double temperature,
                         const Tensor& teacher_rows, const KLResult& cpu) {
  const KLResult out{emu::nan_like(cpu.kl), emu::nan_like(cpu.teacher_lse),
                     emu::nan_like(cpu.student_lse), unset_indices(cpu.student_argmax)};
  cuda::kl_div(teacher, student, teacher_rows, out.kl, out.teacher_lse, out.student_lse,
               out.student_argmax, temperature, nullptr);
  return out;
}

SPRIG_EMU_PARITY_TEST(CrossEntropyEmu, MatchesTheCpuTwinOnAwkwardShapes,
                      parity::cross_entropy_cases())

// Row 0 has a huge logit, row 1 two tied maxima (the first one wins), row 2 is ignored.
TEST(CrossEntropyEmu, HugeLogitsAndTies) {
  const Tensor logits = Tensor::from_vector<float>(
      {1e4f, 0, -1e4f, 0, 88, 89, 90, 90, 7, 90, 1, 2, 3, 4, 5, 6}, {4, 4});
  const Tensor t = Tensor::from_vector<int32_t>({1, 2, -100, 0}, {4});
  const CrossEntropyResult cpu = cross_entropy(logits, t, -100, true);
  const CrossEntropyResult emulated = emulated_cross_entropy(logits, t, cpu);
  EXPECT_EMU_PARITY(emulated.loss, cpu.loss);
  EXPECT_EQ(emulated.argmax.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 1, 3}));
}

// An ignored row's gradient is exactly 0 even where its logits or lse are not finite, as on the
// CPU.
TEST(CrossEntropyEmu, IgnoredRowsGetZeroGradientWhateverTheirLogits) {
  const Tensor logits = Tensor::from_vector<float>(
      {INFINITY, 0, 1, 2, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 0, 1, 2, 3}, {3, 4});
  const Tensor t = Tensor::from_vector<int64_t>({-100, -100, 2}, {3});
  const CrossEntropyResult cpu = cross_entropy(logits, t);
  const Tensor dloss = Tensor::ones({3});
  const Tensor got =
      emulated_cross_entropy_backward(dloss, logits, t, emulated_cross_entropy(logits, t, cpu).lse);
  const std::vector<float> g = got.to_vector<float>();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(g[i], 0.0f) << i;
  EXPECT_EMU_PARITY(got, cross_entropy_backward(dloss, logits, t, cpu.lse));
}

// The maximum 3 at columns 900, 300 and 40 (other threads and warps; 40 first), and a row whose
// only maximum is its last column, on the scalar (V = 1001) and vector (V = 1000) paths: the
// cross-entropy and the KL student argmax both give the first maximum.
TEST(CrossEntropyEmu, TiedMaximaAcrossThreadsGiveTheFirst) {
  for (int64_t V : {1001, 1000}) {
    SCOPED_TRACE("V=" + std::to_string(V));
    std::vector<float> v(2 * V, 0.f);
    for (int64_t k : {900, 300, 40}) v[k] = 3.f;
    v[2 * V - 1] = 3.f;
    const Tensor logits = Tensor::from_vector(v, {2, V});
    const std::vector<int64_t> expect = {40, V - 1};
    const Tensor t = Tensor::from_vector<int64_t>({0, 0}, {2});
    const CrossEntropyResult ce =
        emulated_cross_entropy(logits, t, cross_entropy(logits, t, -100, true));
    EXPECT_EQ(ce.argmax.to_vector<int64_t>(), expect);
    const KLResult kl =
        emulated_kl_div(logits, logits, 1.0, {}, kl_div(logits, logits, 1.0, {}, true));
    EXPECT_EQ(kl.student_argmax.to_vector<int64_t>(), expect);
  }
}

// Features and projection in quarter steps (E = 4): the corrections computed here on the CPU are
// exactly the launcher's GEMM result.
TEST(CorrectedCrossEntropyEmu, KernelsMatchTheCpuTwinOnAwkwardShapesAndInPlace) {
  uint64_t seed = 100;
  constexpr int64_t E = 4;
  for (DType dt : {DType::f32, DType::bf16})
    for (const RowsVocab& s : kCorrectedShapes) {
      SCOPED_TRACE(trace(dt, s));
      const Tensor b = rand_normal({s.rows, s.vocab}, ++seed, dt);
      const Tensor e = quarter_steps({s.rows, E}, ++seed, dt);
      const Tensor p = quarter_steps({s.vocab, E}, ++seed, dt);
      const Tensor t = some_targets(s.rows, s.vocab, ++seed);
      const Tensor delta = matmul(e, p, false, true);
      const CrossEntropyResult cpu = corrected_cross_entropy(b, e, p, t, -100, true);
      const CrossEntropyResult emulated{emu::nan_like(cpu.loss), emu::nan_like(cpu.lse),
                                        unset_indices(cpu.argmax)};
      cuda::launch_corrected_cross_entropy(b, delta, t, emulated.loss, emulated.lse,
                                           emulated.argmax, -100, nullptr);
      EXPECT_EMU_PARITY(emulated.loss, cpu.loss);
      EXPECT_EMU_PARITY(emulated.lse, cpu.lse);
      EXPECT_EQ(emulated.argmax.to_vector<int64_t>(), cpu.argmax.to_vector<int64_t>());

      const Tensor dloss = rand_normal({2, s.rows}, ++seed);
      Tensor gb = Tensor::empty(b.shape(), dt), ge = Tensor::empty(e.shape(), dt);
      Tensor gp = Tensor::empty(p.shape(), dt);
      corrected_cross_entropy_backward_into(dloss, b, e, p, t, cpu.lse, gb, ge, gp);
      // In place, as the launcher runs it: dbase over the logits, dc over the corrections.
      const Tensor db = b.clone(), dc = delta.clone();
      cuda::launch_corrected_cross_entropy_backward(dloss, db, dc, t, cpu.lse, db, dc, -100,
                                                    nullptr);
      const double scale = 1.0 / static_cast<double>(s.vocab);
      EXPECT_EMU_PARITY(db, gb, 1, scale);
      // dc is the cross-entropy gradient of the corrected logits c = b + delta (rounded to dt).
      EXPECT_EMU_PARITY(
          dc, cross_entropy_backward(dloss.select(0, 1), add(b, delta), t, cpu.lse.select(0, 1)), 1,
          scale);
    }
}

SPRIG_EMU_PARITY_TEST(KlDivEmu, MatchesTheCpuTwinOnAwkwardShapes, parity::kl_div_cases(false))
SPRIG_EMU_PARITY_TEST(KlDivEmu, TeacherRowsAndArgmaxMatchTheCpuTwin, parity::kl_div_cases(true))

TEST(KlDivEmu, ZeroProbabilityTermsAndSpecE14) {
  const Tensor teacher =
      Tensor::from_vector<float>({0, -INFINITY, 0, 0, std::log(2.0f), 0}, {2, 3});
  const Tensor student = Tensor::from_vector<float>({0, 5, 0, 0, 0, 0}, {2, 3});
  const std::vector<float> kl =
      emulated_kl_div(teacher, student, 1.0, {}, kl_div(teacher, student)).kl.to_vector<float>();
  EXPECT_NEAR(kl[0], 4.3202387, 1e-5);  // ln((2 + e^5) / 2)
  EXPECT_NEAR(kl[1], 0.0588915, 1e-6);  // 0.5 ln(1.125)
}

}  // namespace
}  // namespace sprig

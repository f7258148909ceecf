// The attention backend rule (attention/backend.h) and the host planning of the cuDNN backend
// (attention/cudnn/sdpa_plan.h): which masks cuDNN expresses and how they are named, the route
// per backend, ragged sequences and offsets from document lengths, the layouts cuDNN sees
// sprig's tensors in, and the plan-cache keys.
#include "attention/backend.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "attention/attention_mask.h"
#include "attention/cudnn/sdpa.h"
#include "attention/cudnn/sdpa_plan.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using cuda::cudnn::SdpaPass;
constexpr int kCudnn919 = 91900;

std::string error_of(AttentionBackend b, const BatchMask& m, int64_t batch, int64_t d, int v) {
  return testing::invalid_argument_message([&] { cudnn_route(b, m, batch, d, v); });
}

TEST(AttentionBackend, NamesParseAndTheSettingIsProcessWide) {
  for (auto b : {AttentionBackend::automatic, AttentionBackend::sprig, AttentionBackend::cudnn})
    EXPECT_EQ(parse_attention_backend(attention_backend_name(b)), b);
  EXPECT_STREQ(attention_backend_name(AttentionBackend::automatic), "auto");
  EXPECT_EQ(testing::invalid_argument_message([] { parse_attention_backend("flash"); }),
            "[attention.backend] must be auto, sprig or cudnn, got 'flash'");
  EXPECT_EQ(attention_backend(), AttentionBackend::automatic);
  set_attention_backend(AttentionBackend::cudnn);
  EXPECT_EQ(attention_backend(), AttentionBackend::cudnn);
  set_attention_backend(AttentionBackend::automatic);
}

TEST(AttentionBackend, CausalSquaresAreTheUnraggedForm) {
  const CudnnMaskClass c = classify_for_cudnn(BatchMask(causal_mask(100)), 3);
  ASSERT_TRUE(c.form);
  EXPECT_FALSE(c.form->ragged);
  EXPECT_EQ(c.form->window, 0);
  EXPECT_TRUE(c.form->seq_lens.empty());
  EXPECT_EQ(c.kind, "causal");
  // One document per row is a causal square too, and so is a one-node prefix tree.
  EXPECT_FALSE(classify_for_cudnn(BatchMask(document_mask({100})), 2).form->ragged);
  EXPECT_FALSE(classify_for_cudnn(BatchMask(prefix_tree_mask({9}, {{0}})), 1).form->ragged);
  const CudnnMaskClass w = classify_for_cudnn(BatchMask(causal_mask(100, 16)), 1);
  EXPECT_EQ(w.form->window, 16);
  EXPECT_EQ(w.kind, "causal with a sliding window of 16");
}

TEST(AttentionBackend, PackedDocumentsAreRaggedInBatchRowOrder) {
  // Row 0: documents 5 and 7 (the padding folds into the last one); row 1: 3, 3, 6.
  const BatchMask m(std::vector<Mask>{document_mask({5, 4}, 12), document_mask({3, 3, 6})});
  const CudnnMaskClass c = classify_for_cudnn(m, 2);
  ASSERT_TRUE(c.form);
  EXPECT_TRUE(c.form->ragged);
  EXPECT_EQ(c.form->seq_lens, (std::vector<int32_t>{5, 7, 3, 3, 6}));
  EXPECT_EQ(c.kind, "packed causal documents");
  // A shared mask repeats its documents for every row of the batch.
  EXPECT_EQ(classify_for_cudnn(BatchMask(document_mask({2, 3})), 3).form->seq_lens,
            (std::vector<int32_t>{2, 3, 2, 3, 2, 3}));
  const BatchMask windowed(
      std::vector<Mask>{document_mask({4, 8}, 12, 3), document_mask({6, 6}, 12, 3)});
  EXPECT_EQ(classify_for_cudnn(windowed, 2).form->window, 3);
}

TEST(AttentionBackend, MasksCudnnCannotExpressAreNamed) {
  const auto kind = [](const BatchMask& m, int64_t batch = 1) {
    const CudnnMaskClass c = classify_for_cudnn(m, batch);
    EXPECT_FALSE(c.form);
    return c.kind;
  };
  EXPECT_EQ(kind(BatchMask(prefix_tree_mask({4, 3, 3}, {{0, 1}, {0, 2}}))),
            "prefix-tree or DFlash (it has full rectangles)");
  DFlashMaskSpec d;
  d.ctx_len = 16, d.block_size = 4, d.anchors = {2, 7}, d.keep = {true, true};
  EXPECT_EQ(kind(BatchMask(dflash_mask(d))), "rectangular (queries 8 != keys 24)");
  // Windows differing between rows (or documents) cannot share one plan.
  EXPECT_EQ(
      kind(BatchMask(std::vector<Mask>{document_mask({6, 6}), document_mask({6, 6}, 12, 5)}), 2),
      "causal squares with different sliding windows");
  Mask gap{10, 10, {{0, 4, 0, 4, RectKind::causal}, {6, 10, 6, 10, RectKind::causal}}};
  EXPECT_EQ(kind(BatchMask(gap)), "rows with fully masked queries");
  Mask off{8, 8, {{0, 4, 0, 4, RectKind::causal}, {4, 8, 0, 4, RectKind::causal}}};
  EXPECT_EQ(kind(BatchMask(off)), "causal rectangles off the diagonal");
}

TEST(AttentionBackend, RouteFollowsTheBackendVersionAndHeadDim) {
  const BatchMask causal(causal_mask(64)), docs(document_mask({20, 44}));
  const BatchMask tree(prefix_tree_mask({4, 3, 3}, {{0, 1}, {0, 2}}));
  EXPECT_FALSE(cudnn_route(AttentionBackend::sprig, causal, 1, 128, kCudnn919));
  ASSERT_TRUE(cudnn_route(AttentionBackend::automatic, causal, 1, 128, kCudnn919));
  EXPECT_TRUE(cudnn_route(AttentionBackend::automatic, docs, 1, 64, kCudnn919)->ragged);
  // auto quietly keeps sprig's kernels where cuDNN cannot run the call ...
  EXPECT_FALSE(cudnn_route(AttentionBackend::automatic, tree, 1, 128, kCudnn919));
  EXPECT_FALSE(cudnn_route(AttentionBackend::automatic, causal, 1, 128, 0));
  EXPECT_FALSE(cudnn_route(AttentionBackend::automatic, causal, 1, 100, kCudnn919));
  EXPECT_FALSE(cudnn_route(AttentionBackend::automatic, docs, 1, 64, 90500));
  EXPECT_TRUE(cudnn_route(AttentionBackend::automatic, causal, 1, 64, 90500));
  // ... where backend cudnn says why.
  EXPECT_EQ(error_of(AttentionBackend::cudnn, tree, 1, 128, kCudnn919),
            "[attention] backend cudnn cannot express a prefix-tree or DFlash (it has full "
            "rectangles) mask; it runs causal and packed-document masks (use attention.backend: "
            "auto or sprig)");
  EXPECT_EQ(error_of(AttentionBackend::cudnn, causal, 1, 128, 0),
            "[attention] backend cudnn is not available: this build has no cuDNN (use "
            "attention.backend: auto or sprig)");
  EXPECT_EQ(error_of(AttentionBackend::cudnn, causal, 1, 264, kCudnn919),
            "[attention] backend cudnn runs head dims that are multiples of 8 up to 256, got 264");
  EXPECT_EQ(error_of(AttentionBackend::cudnn, docs, 1, 64, 90500),
            "[attention] backend cudnn needs cuDNN 9.6.0 for a packed causal documents mask, "
            "found 9.5.0");
}

TEST(CudnnPlan, RaggedSequencesAndOffsets) {
  CudnnMaskForm form{true, 0, {5, 7, 3, 3, 6}};
  const cuda::cudnn::RaggedSequences s = cuda::cudnn::ragged_sequences(form, 12);
  EXPECT_EQ(s.count, 5);
  EXPECT_EQ(s.token_offsets, (std::vector<int64_t>{0, 5, 12, 15, 18, 24}));
  EXPECT_EQ(s.max_len, 12);  // the bucket 64, capped at the row length
  EXPECT_EQ(cuda::cudnn::element_offsets(s, 4 * 8),
            (std::vector<int64_t>{0, 160, 384, 480, 576, 768}));
  // Buckets: powers of two from 64, at most the row.
  form.seq_lens = {65, 10};
  EXPECT_EQ(cuda::cudnn::ragged_sequences(form, 4096).max_len, 128);
  form.seq_lens = {64};
  EXPECT_EQ(cuda::cudnn::ragged_sequences(form, 4096).max_len, 64);
  form.seq_lens = {1000, 3000};
  EXPECT_EQ(cuda::cudnn::ragged_sequences(form, 4000).max_len, 4000);

  // The uploaded tensors (the host stands in for the device here).
  const cuda::cudnn::DeviceRagged r = cuda::cudnn::upload_ragged(
      cuda::cudnn::ragged_sequences({true, 0, {2, 3}}, 5), 4, 2, 8, Device::cpu());
  EXPECT_EQ(r.seq_lens.dtype(), DType::i32);
  EXPECT_EQ(r.seq_lens.shape(), (Shape{2, 1, 1, 1}));
  EXPECT_EQ(r.seq_lens.to_vector<int32_t>(), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(r.q_offsets.dtype(), DType::i64);
  EXPECT_EQ(r.q_offsets.to_vector<int64_t>(), (std::vector<int64_t>{0, 64, 160}));
  EXPECT_EQ(r.kv_offsets.to_vector<int64_t>(), (std::vector<int64_t>{0, 32, 80}));
  EXPECT_EQ(r.stats_offsets.to_vector<int64_t>(), (std::vector<int64_t>{0, 8, 20}));
}

TEST(CudnnPlan, TheMaskCachesItsRaggedSequencesPerCallShape) {
  const AttentionMask mask(BatchMask(document_mask({3, 5})));
  const CudnnMaskForm form = *classify_for_cudnn(mask.mask(), 2).form;
  const auto& a = mask.cudnn_ragged(form, 2, 4, 2, 8, Device::cpu());
  EXPECT_EQ(&a, &mask.cudnn_ragged(form, 2, 4, 2, 8, Device::cpu()));
  EXPECT_NE(&a, &mask.cudnn_ragged(form, 2, 4, 4, 8, Device::cpu()));
  EXPECT_EQ(a.seqs.seq_lens, (std::vector<int32_t>{3, 5, 3, 5}));
  EXPECT_EQ(a.q_offsets.to_vector<int64_t>(), (std::vector<int64_t>{0, 96, 256, 352, 512}));
}

// Element (b, h, s, d) of a layout sits at the address sprig stores it at.
int64_t at(const cuda::cudnn::TensorLayout& l, int64_t b, int64_t h, int64_t s, int64_t d) {
  return b * l.strides[0] + h * l.strides[1] + s * l.strides[2] + d * l.strides[3];
}

TEST(CudnnPlan, LayoutsAddressSprigsTensors) {
  const int64_t B = 2, T = 6, Hq = 4, Hkv = 2, D = 8;
  const CudnnMaskForm causal{false, 0, {}};
  const cuda::cudnn::SdpaShape s = cuda::cudnn::sdpa_shape(B, T, Hq, Hkv, D, causal, {});
  EXPECT_EQ(s.batch, B);
  EXPECT_EQ(s.seq_len, T);
  // q [B, T, Hq, D]: (b, t, h, d) at ((b * T + t) * Hq + h) * D + d.
  const auto q = cuda::cudnn::token_major_layout(s, Hq);
  EXPECT_EQ(q.dims, (std::array<int64_t, 4>{B, Hq, T, D}));
  EXPECT_EQ(at(q, 1, 3, 5, 7), ((1 * T + 5) * Hq + 3) * D + 7);
  const auto kt = cuda::cudnn::transposed(cuda::cudnn::token_major_layout(s, Hkv));
  EXPECT_EQ(kt.dims, (std::array<int64_t, 4>{B, Hkv, D, T}));
  EXPECT_EQ(at(kt, 1, 1, 7, 4), ((1 * T + 4) * Hkv + 1) * D + 7);  // K^T[d, t] = K[t, d]
  // lse [B, Hq, T] is the unragged statistics as it is.
  const auto st = cuda::cudnn::stats_layout(s);
  EXPECT_EQ(at(st, 1, 2, 3, 0), (1 * Hq + 2) * T + 3);

  // Ragged: offsets replace the batch stride; within a sequence, tokens are token-major.
  const CudnnMaskForm docs{true, 0, {2, 4, 6}};
  const auto seqs = cuda::cudnn::ragged_sequences(docs, T);
  const cuda::cudnn::SdpaShape r = cuda::cudnn::sdpa_shape(B, T, Hq, Hkv, D, docs, seqs);
  EXPECT_EQ(r.batch, 3);
  EXPECT_EQ(r.seq_len, 6);
  EXPECT_TRUE(r.ragged);
  const auto rq = cuda::cudnn::token_major_layout(r, Hq);
  const int64_t third = cuda::cudnn::element_offsets(seqs, Hq * D)[2];  // row 1, token 0
  EXPECT_EQ(third + at(rq, 0, 3, 5, 7), ((1 * T + 5) * Hq + 3) * D + 7);
  const auto rs = cuda::cudnn::stats_layout(r);  // [B*T, Hq]
  EXPECT_EQ(cuda::cudnn::element_offsets(seqs, Hq)[1] + at(rs, 0, 3, 1, 0), (2 + 1) * Hq + 3);
}

TEST(CudnnPlan, KeysSeparateWhatPlansDependOn) {
  const CudnnMaskForm docs_a{true, 0, {100, 28}}, docs_b{true, 0, {60, 68}};
  const auto shape = [](const CudnnMaskForm& f) {
    return cuda::cudnn::sdpa_shape(1, 128, 8, 2, 64, f, cuda::cudnn::ragged_sequences(f, 128));
  };
  const auto key = [&](const CudnnMaskForm& f, SdpaPass pass = SdpaPass::forward, int dev = 0) {
    return cuda::cudnn::sdpa_plan_key(dev, DType::bf16, pass, shape(f));
  };
  // Other lengths, same count and bucket: one plan.
  EXPECT_EQ(key(docs_a), key(docs_b));
  EXPECT_NE(key(docs_a), key(CudnnMaskForm{true, 0, {100, 20, 8}}));
  EXPECT_NE(key(docs_a), key(docs_a, SdpaPass::backward));
  EXPECT_NE(key(docs_a), key(docs_a, SdpaPass::forward, 1));
  // The window's width is data; having one is not.
  EXPECT_EQ(key(CudnnMaskForm{true, 8, {100, 28}}), key(CudnnMaskForm{true, 16, {60, 68}}));
  EXPECT_NE(key(docs_a), key(CudnnMaskForm{true, 8, {100, 28}}));
  EXPECT_NE(key(docs_a), key(CudnnMaskForm{false, 0, {}}));
}

TEST(CudnnPlan, MeasurementsAreKeptPerPlanKey) {
  const auto key = [](int64_t seq, SdpaPass pass) {
    return cuda::cudnn::sdpa_plan_key(0, DType::bf16, pass, {1, 8, 8, seq, 64, false, 0});
  };
  EXPECT_FALSE(cuda::cudnn::measured_cudnn_faster(key(4096, SdpaPass::forward)));
  cuda::cudnn::record_measurement(key(4096, SdpaPass::forward), 1e-3, 2e-3);
  cuda::cudnn::record_measurement(key(4096, SdpaPass::backward), 3e-3, 2e-3);
  EXPECT_EQ(cuda::cudnn::measured_cudnn_faster(key(4096, SdpaPass::forward)), true);
  EXPECT_EQ(cuda::cudnn::measured_cudnn_faster(key(4096, SdpaPass::backward)), false);
  EXPECT_FALSE(cuda::cudnn::measured_cudnn_faster(key(2048, SdpaPass::forward)));
}

TEST(CudnnBuild, VersionsAgreeWithTheBuild) {
  if (cuda::cudnn::kBuilt) {
    EXPECT_GE(cuda::cudnn::compiled_version(), kCudnnMinVersion);
    EXPECT_GE(cuda::cudnn::runtime_version(), kCudnnMinVersion);
  } else {
    EXPECT_EQ(cuda::cudnn::compiled_version(), 0);
    EXPECT_EQ(cuda::cudnn::runtime_version(), 0);
  }
}

// cuDNN accepts every tensor and operation descriptor of both graphs in each form (the operation
// graph and its plan need a GPU: CudnnGpu tests them).
TEST(CudnnGraph, EveryDescriptorFinalises) {
  if (!cuda::cudnn::kBuilt) GTEST_SKIP() << "built without cuDNN";
  const CudnnMaskForm causal{false, 0, {}}, windowed{false, 32, {}};
  const CudnnMaskForm docs{true, 0, {100, 28, 64, 64}}, docs_windowed{true, 16, {100, 28, 64, 64}};
  for (const CudnnMaskForm* form : {&causal, &windowed, &docs, &docs_windowed})
    for (int64_t kv_heads : {8, 2})
      for (DType dtype : {DType::bf16, DType::f16}) {
        const auto seqs = cuda::cudnn::ragged_sequences(*form, 128);
        const auto shape = cuda::cudnn::sdpa_shape(2, 128, 8, kv_heads, 64, *form, seqs);
        SCOPED_TRACE(std::string(form->ragged ? "ragged" : "causal") + " window " +
                     std::to_string(form->window) + " kv heads " + std::to_string(kv_heads));
        // Forward: QK^T, scale, [padding: 2 indices, 2 compares, and, select], causal (2 indices,
        // compare, select), [window: 2 indices, add, compare, select], max, sub, exp, sum, log,
        // add, div, PV.
        const int64_t masks = (form->ragged ? 6 : 0) + 4 + (form->window > 0 ? 5 : 0);
        EXPECT_EQ(cuda::cudnn::describe_graph(dtype, SdpaPass::forward, shape), 2 + masks + 8);
        // Backward: dO*O, sum, *1, QK^T, scale, masks, sub, exp, P^T reshape, dV (+ reduce),
        // dOV^T, sub, mul, scale, dS^T reshape, dK (+ reduce), K reshape, dS K, identity.
        const int64_t gqa = kv_heads != 8 ? 2 : 0;
        EXPECT_EQ(cuda::cudnn::describe_graph(dtype, SdpaPass::backward, shape),
                  3 + 2 + masks + 2 + 2 + 4 + 2 + 3 + gqa);
      }
}

}  // namespace
}  // namespace sprig

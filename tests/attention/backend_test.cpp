// The attention backend rule (attention/backend.h) and the host planning of the cuDNN backend
// (attention/cudnn/sdpa_plan.h): which masks cuDNN expresses and how they are named, the route
// per backend and cuDNN version, ragged sequences and offsets from document lengths, the layouts
// cuDNN sees sprig's tensors in, the plan-cache keys and the cache's bound, and backend auto's
// choice and fallback.
#include "attention/backend.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>
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

TEST(AttentionBackend, RouteAvoidsWhatCudnnRefuses) {
  // cuDNN 9.10.0 and 9.10.1 compute a wrong backward (cudnn-frontend refuses them).
  const BatchMask causal(causal_mask(64));
  EXPECT_FALSE(cudnn_route(AttentionBackend::automatic, causal, 1, 128, 91000));
  EXPECT_FALSE(cudnn_route(AttentionBackend::automatic, causal, 1, 128, 91001));
  EXPECT_TRUE(cudnn_route(AttentionBackend::automatic, causal, 1, 128, 91002));
  EXPECT_TRUE(cudnn_route(AttentionBackend::automatic, causal, 1, 128, 90900));
  EXPECT_EQ(error_of(AttentionBackend::cudnn, causal, 1, 128, 91001),
            "[attention] backend cudnn does not run on cuDNN 9.10.1, whose attention backward has "
            "known bugs (use 9.10.2 or newer)");
  // Rows of one token: the backward refuses s_q = s_kv = 1.
  const BatchMask one(causal_mask(1));
  EXPECT_FALSE(cudnn_route(AttentionBackend::automatic, one, 4, 128, kCudnn919));
  EXPECT_EQ(error_of(AttentionBackend::cudnn, one, 4, 128, kCudnn919),
            "[attention] backend cudnn cannot run rows of one token (cuDNN's backward refuses "
            "s_q = s_kv = 1)");
  // Documents of one token are fine: cuDNN sees the bucketed length.
  EXPECT_TRUE(cudnn_route(AttentionBackend::automatic, BatchMask(document_mask({1, 1, 62})), 1, 128,
                          kCudnn919));
}

TEST(CudnnPlan, VersionRules) {
  using cuda::cudnn::needs_padding_mask;
  const CudnnMaskForm causal{false, 0, {}}, docs{true, 0, {100, 28}};
  // Up to 9.15.0, the unragged backward needs a padding mask unless T is a multiple of 128.
  EXPECT_TRUE(needs_padding_mask(SdpaPass::backward, causal, 200, 91500));
  EXPECT_TRUE(needs_padding_mask(SdpaPass::backward, causal, 64, 90600));
  EXPECT_FALSE(needs_padding_mask(SdpaPass::backward, causal, 256, 91500));
  EXPECT_FALSE(needs_padding_mask(SdpaPass::backward, causal, 200, 91501));
  EXPECT_FALSE(needs_padding_mask(SdpaPass::forward, causal, 200, 91500));
  EXPECT_FALSE(needs_padding_mask(SdpaPass::backward, docs, 200, 91500));  // has one already
  // Masked scores: the lowest float before 9.10.0, -inf from it on.
  EXPECT_EQ(cuda::cudnn::masked_score(90900), std::numeric_limits<float>::lowest());
  EXPECT_EQ(cuda::cudnn::masked_score(91000), -std::numeric_limits<float>::infinity());
}

TEST(CudnnPlan, PaddedCausalRowsBindFullLengthSequences) {
  const CudnnMaskForm causal{false, 0, {}};
  const auto seqs = cuda::cudnn::ragged_sequences(causal, 3, 200);
  EXPECT_EQ(seqs.count, 3);
  EXPECT_EQ(seqs.seq_lens, (std::vector<int32_t>{200, 200, 200}));
  EXPECT_EQ(seqs.max_len, 200);
  const auto shape = cuda::cudnn::sdpa_shape(3, 200, 8, 2, 64, causal, seqs, true);
  EXPECT_EQ(shape.batch, 3);  // the batch and layouts of the unragged form
  EXPECT_EQ(shape.seq_len, 200);
  EXPECT_FALSE(shape.ragged);
  const auto key = [&](bool padded) {
    return cuda::cudnn::sdpa_plan_key(
        0, DType::bf16, SdpaPass::backward,
        cuda::cudnn::sdpa_shape(3, 200, 8, 2, 64, causal, seqs, padded));
  };
  EXPECT_NE(key(true), key(false));
  // The mask uploads them for the padded backward like a ragged form's.
  const AttentionMask mask(BatchMask(causal_mask(200)));
  EXPECT_EQ(mask.cudnn_ragged(causal, 3, 8, 2, 64, Device::cpu()).seq_lens.to_vector<int32_t>(),
            (std::vector<int32_t>{200, 200, 200}));
}

TEST(CudnnPlan, RaggedSequencesAndOffsets) {
  CudnnMaskForm form{true, 0, {5, 7, 3, 3, 6}};
  const cuda::cudnn::RaggedSequences s = cuda::cudnn::ragged_sequences(form, 2, 12);
  // Five documents, then three empty sequences up to the bucket of 8.
  EXPECT_EQ(s.count, 8);
  EXPECT_EQ(s.seq_lens, (std::vector<int32_t>{5, 7, 3, 3, 6, 0, 0, 0}));
  EXPECT_EQ(s.token_offsets, (std::vector<int64_t>{0, 5, 12, 15, 18, 24, 24, 24, 24}));
  EXPECT_EQ(s.max_len, 12);  // the bucket 64, capped at the row length
  EXPECT_EQ(cuda::cudnn::element_offsets(s, 4 * 8),
            (std::vector<int64_t>{0, 160, 384, 480, 576, 768, 768, 768, 768}));
  // Length buckets: powers of two from 64, at most the row.
  form.seq_lens = {65, 10};
  EXPECT_EQ(cuda::cudnn::ragged_sequences(form, 1, 4096).max_len, 128);
  form.seq_lens = {64};
  EXPECT_EQ(cuda::cudnn::ragged_sequences(form, 1, 4096).max_len, 64);
  form.seq_lens = {1000, 3000};
  EXPECT_EQ(cuda::cudnn::ragged_sequences(form, 1, 4000).max_len, 4000);

  // The uploaded tensors (the host stands in for the device here).
  const cuda::cudnn::DeviceRagged r = cuda::cudnn::upload_ragged(
      cuda::cudnn::ragged_sequences({true, 0, {2, 3}}, 1, 5), 4, 2, 8, Device::cpu());
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
  const auto seqs = cuda::cudnn::ragged_sequences(docs, B, T);
  const cuda::cudnn::SdpaShape r = cuda::cudnn::sdpa_shape(B, T, Hq, Hkv, D, docs, seqs);
  EXPECT_EQ(r.batch, 4);  // three documents and an empty sequence
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
    return cuda::cudnn::sdpa_shape(1, 128, 8, 2, 64, f, cuda::cudnn::ragged_sequences(f, 1, 128));
  };
  const auto key = [&](const CudnnMaskForm& f, SdpaPass pass = SdpaPass::forward, int dev = 0) {
    return cuda::cudnn::sdpa_plan_key(dev, DType::bf16, pass, shape(f));
  };
  // Other lengths, same count and bucket: one plan.
  EXPECT_EQ(key(docs_a), key(docs_b));
  // Document counts share a plan within a power of two: 3 and 4 documents, not 2 and 3.
  EXPECT_EQ(key(CudnnMaskForm{true, 0, {100, 20, 8}}), key(CudnnMaskForm{true, 0, {90, 30, 4, 4}}));
  EXPECT_NE(key(docs_a), key(CudnnMaskForm{true, 0, {100, 20, 8}}));
  EXPECT_NE(key(docs_a), key(docs_a, SdpaPass::backward));
  EXPECT_NE(key(docs_a), key(docs_a, SdpaPass::forward, 1));
  // The window's width is data; having one is not.
  EXPECT_EQ(key(CudnnMaskForm{true, 8, {100, 28}}), key(CudnnMaskForm{true, 16, {60, 68}}));
  EXPECT_NE(key(docs_a), key(CudnnMaskForm{true, 8, {100, 28}}));
  EXPECT_NE(key(docs_a), key(CudnnMaskForm{false, 0, {}}));
}

TEST(CudnnPlan, ARunOfChangingDocumentCountsBuildsAHandfulOfPlans) {
  // Rows of 4096 tokens holding 1 to 400 documents of 8 to 4096 tokens: the counts and lengths a
  // packed training run meets.
  std::set<cuda::cudnn::SdpaPlanKey> keys;
  for (int32_t docs = 1; docs <= 400; ++docs) {
    const int32_t len = 4096 / docs;
    CudnnMaskForm f{true, 0, std::vector<int32_t>(docs, len)};
    f.seq_lens.back() += 4096 - len * docs;
    keys.insert(cuda::cudnn::sdpa_plan_key(
        0, DType::bf16, SdpaPass::forward,
        cuda::cudnn::sdpa_shape(1, 4096, 8, 2, 128, f, cuda::cudnn::ragged_sequences(f, 1, 4096))));
  }
  // 400 document counts in 10 count buckets, each with the one to three length buckets its
  // documents reach: 23 plans per pass instead of 400.
  EXPECT_LE(keys.size(), 24u);
  EXPECT_EQ(cuda::cudnn::sequence_bucket(1), 1);
  EXPECT_EQ(cuda::cudnn::sequence_bucket(3), 4);
  EXPECT_EQ(cuda::cudnn::sequence_bucket(64), 64);
  EXPECT_EQ(cuda::cudnn::sequence_bucket(65), 128);
}

TEST(CudnnPlan, TheCacheForgetsTheLeastRecentlyUsedEntry) {
  cuda::cudnn::BoundedCache<int, std::string> cache(2);
  cache.put(1, "one");
  cache.put(2, "two");
  ASSERT_TRUE(cache.find(1));  // 1 is now more recent than 2
  cache.put(3, "three");
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(cache.find(2));
  EXPECT_EQ(*cache.find(1), "one");
  EXPECT_EQ(*cache.find(3), "three");
  cache.put(3, "drei");  // replacing keeps the size
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(*cache.find(3), "drei");
}

// Backend auto on a fake pair of backends: calls counted, seconds made up.
struct FakeBackends {
  int cudnn_calls = 0, flash_calls = 0;
  bool cudnn_fails = false;
  double cudnn_s = 1, flash_s = 2;
  void run(const cuda::cudnn::SdpaPlanKey& key) {
    cuda::cudnn::run_automatic(
        key,
        [&] {
          ++cudnn_calls;
          if (cudnn_fails) throw std::runtime_error("[cudnn] executing attention: bad param");
        },
        [&] { ++flash_calls; },
        [&](auto&& f) {
          const int before = cudnn_calls;
          f();
          return cudnn_calls > before ? cudnn_s : flash_s;
        });
  }
};

cuda::cudnn::SdpaPlanKey fake_key(int64_t seq) {
  return cuda::cudnn::sdpa_plan_key(0, DType::bf16, SdpaPass::backward,
                                    {2, 8, 8, seq, 128, false, 0});
}

TEST(CudnnPlan, AutoMeasuresOnceAndKeepsTheFaster) {
  FakeBackends b;
  b.run(fake_key(1000));  // builds, then times each once
  EXPECT_EQ(b.cudnn_calls, 2);
  EXPECT_EQ(b.flash_calls, 2);
  b.run(fake_key(1000));  // cuDNN was faster: it alone
  EXPECT_EQ(b.cudnn_calls, 3);
  EXPECT_EQ(b.flash_calls, 2);
  FakeBackends slow{0, 0, false, 3, 2};
  slow.run(fake_key(1001));
  slow.run(fake_key(1001));
  EXPECT_EQ(slow.cudnn_calls, 2);
  EXPECT_EQ(slow.flash_calls, 3);
}

TEST(CudnnPlan, AutoFallsBackOnAnyCudnnFailureOfAKeysFirstCall) {
  FakeBackends b;
  b.cudnn_fails = true;  // not Unsupported: a plan that fails to finalise or execute
  ::testing::internal::CaptureStderr();
  b.run(fake_key(1002));
  b.run(fake_key(1002));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(b.cudnn_calls, 1);  // never retried
  EXPECT_EQ(b.flash_calls, 2);
  EXPECT_EQ(err,
            "sprig: attention runs sprig's kernels for backward bf16 b=2 hq=8 hkv=8 s=1002 d=128 "
            "on cuda:0: cuDNN failed on it ([cudnn] executing attention: bad param)\n");
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
        const auto seqs = cuda::cudnn::ragged_sequences(*form, 2, 128);
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
  // The padded backward of causal rows (needs_padding_mask): the padding mask's 6 operations more.
  const auto rows = cuda::cudnn::ragged_sequences(causal, 2, 200);
  const auto plain = cuda::cudnn::sdpa_shape(2, 200, 8, 8, 64, causal, rows);
  const auto padded = cuda::cudnn::sdpa_shape(2, 200, 8, 8, 64, causal, rows, true);
  EXPECT_EQ(cuda::cudnn::describe_graph(DType::bf16, SdpaPass::backward, padded),
            cuda::cudnn::describe_graph(DType::bf16, SdpaPass::backward, plain) + 6);
}

}  // namespace
}  // namespace sprig

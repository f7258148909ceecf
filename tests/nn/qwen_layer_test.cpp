// The Qwen layers as drafts reuse them: attention with queries and keys/values from separate
// inputs at separate positions, and a decoder layer attending over a context placed before its own
// tokens, each against the ordinary self-attention over the concatenated sequence.
#include <gtest/gtest.h>

#include "nn/qwen.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

QwenConfig tiny_qwen3() {
  return QwenConfig::load(testing::source_dir() + "/train/configs/tiny_qwen3.json");
}

// Rows [q0, q1) of the causal mask over `length` tokens: queries at positions q0.., every key.
std::shared_ptr<const AttentionMask> causal_rows(int64_t q0, int64_t length) {
  Mask m{length - q0,
         length,
         {{0, length - q0, 0, q0, RectKind::full}, {0, length - q0, q0, length, RectKind::causal}}};
  return compile_attention_mask(BatchMask(m));
}

// (B, to - from) rows of positions from, ..., to - 1.
Tensor positions(int64_t B, int64_t from, int64_t to) {
  std::vector<int64_t> p;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = from; t < to; ++t) p.push_back(t);
  return Tensor::from_vector(p, {B, to - from});
}

TEST(QwenLayers, AttentionWithSeparateQueriesAndKeys) {
  Generator gen(3);
  const QwenConfig c = tiny_qwen3();
  QwenDecoderLayer layer(c, 0, gen);
  const int64_t B = 2, T = 9, S = 4;
  const Var x(testing::rand_normal({B, T, c.hidden_size}, 5));
  const Tensor pos = positions(B, 0, T);
  const Var full = layer.self_attn.forward(x, pos, x, pos, causal_rows(0, T));
  // The last T - S queries alone, over all T keys.
  const Var part = layer.self_attn.forward(narrow(x, 1, S, T - S), pos.narrow(1, S, T - S), x, pos,
                                           causal_rows(S, T));
  EXPECT_TRUE(testing::all_close(part.value(), full.value().narrow(1, S, T - S), 1e-6, 1e-5));
}

TEST(QwenLayers, DecoderLayerOverAContextEqualsSelfAttentionOverTheConcatenation) {
  Generator gen(4);
  const QwenConfig c = tiny_qwen3();
  QwenDecoderLayer layer(c, 1, gen);
  const int64_t B = 2, S = 5, Q = 3;
  const Var ctx_raw(testing::rand_normal({B, S, c.hidden_size}, 6));
  const Var x(testing::rand_normal({B, Q, c.hidden_size}, 7));
  const Tensor pos = positions(B, 0, S + Q);
  const Var whole =
      layer.forward(concat({ctx_raw, x}, 1), {pos, pos, causal_rows(0, S + Q), Var(), nullptr});
  // The context enters as given (no layer norm), so hand the layer the normed context.
  const Var with_context = layer.forward(x, {pos.narrow(1, S, Q), pos, causal_rows(S, S + Q),
                                             layer.input_layernorm.forward(ctx_raw), nullptr});
  EXPECT_EQ(with_context.shape(), x.shape());
  EXPECT_TRUE(testing::all_close(with_context.value(), whole.value().narrow(1, S, Q), 1e-6, 1e-5));
}

}  // namespace
}  // namespace sprig

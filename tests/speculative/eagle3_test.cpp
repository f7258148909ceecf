// The EAGLE-3 draft and its training-time test on a micro f64 target: the config's rules, the
// serving layout's parameter names and config.json, the loss's gradient against central
// differences, a packed row equal to its documents alone, a draft vocabulary equal to the full one
// restricted to it, decoding: the trained function, lossless, and a checkpoint in the layout the
// reference's recipe saves (module paths, the target's depth, no aux layers, ids by frequency).
#include "speculative/eagle3.h"

#include <gtest/gtest.h>

#include <cmath>

#include "nn/checkpoint.h"
#include "nn/generate.h"
#include "speculative/spec_decode.h"
#include "tensor/safetensors.h"
#include "tests/nn/checkpoint_fixtures.h"
#include "tests/speculative/draft_test_util.h"

namespace sprig::speculative {
namespace {

using namespace testing_rows;

struct Micro {
  std::unique_ptr<FrozenTarget> target;
  std::unique_ptr<Eagle3Draft> draft;
};

// The micro target and an EAGLE-3 draft reading both of its layers, in f64; with `vocab`, a
// draft vocabulary of those target ids.
Micro micro(const std::vector<int64_t>& vocab = {}) {
  Generator gen(7);
  Micro m;
  m.target = std::make_unique<FrozenTarget>(
      std::make_unique<QwenForCausalLM>(micro_target_config(), gen), Device::cpu(), DType::f64);
  Eagle3Options o;
  o.aux_layer_ids = {0, 1};
  o.draft_vocab_size = static_cast<int64_t>(vocab.size());
  m.draft = std::make_unique<Eagle3Draft>(eagle3_config_for(micro_target_config(), o), gen);
  // Weights large enough that the steps matter and argmaxes are far from ties.
  for (auto& [name, p] : m.draft->named_parameters())
    if (name.find("norm") == std::string::npos)
      p.value().copy_(normal(p.value().shape(), 0, 0.4, DType::f32, Device::cpu(), gen));
  if (!vocab.empty()) m.draft->set_vocabulary({24, vocab});
  m.draft->to(Device::cpu(), DType::f64);
  return m;
}

Eagle3Loss run(const Micro& m, const DraftRows& rows, int64_t steps, Tensor* logits = nullptr) {
  return eagle3_loss(*m.draft, rows, eagle3_teacher(*m.target, *m.draft, rows), {steps, 0.8, 0},
                     logits);
}

TEST(Eagle3, ConfigRules) {
  EXPECT_EQ(default_aux_layer_ids(28), (std::vector<int64_t>{1, 13, 24}));
  const auto message = [](std::vector<int64_t> aux, int64_t vocab) {
    return testing::invalid_argument_message([&] {
      eagle3_config_for(micro_target_config(), {std::move(aux), vocab});
    });
  };
  EXPECT_EQ(message({0, 2}, 0),
            "[eagle3] aux_layer_ids [0,2]: 2 is outside the target's layers [0, 2)");
  EXPECT_EQ(message({1, 1}, 0), "[eagle3] aux_layer_ids [1,1] repeats layer 1");
  EXPECT_EQ(message({0, 1}, 25),
            "[eagle3] draft_vocab_size must be in [1, 24] (the target's vocabulary), got 25");
  EXPECT_EQ(message({}, 0),
            "[eagle3] the default aux_layer_ids [1, L/2 - 1, L - 4] need a target of at least 8 "
            "layers, this one has 2: set aux_layer_ids");
  const Micro m = micro({1, 2, 3});
  const auto refusal = [&](DraftVocabulary v) {
    try {
      m.draft->set_vocabulary(std::move(v));
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(refusal({24, {1, 3, 3}}),
            "[draft vocab] the draft vocabulary: the target ids must be ascending and distinct: "
            "draft id 2 maps to 3 after 3");
  EXPECT_EQ(refusal({24, {1, 3, 24}}),
            "[draft vocab] the draft vocabulary: draft id 2 maps to 24, outside the target's "
            "vocabulary [0, 24)");
  EXPECT_EQ(refusal({24, {1, 3}}),
            "[eagle3] a draft vocabulary of 2 of 24 ids does not fit this draft's head of 3 rows "
            "over a target of 24");
  // A smaller head without its map is refused rather than read as the first ids.
  const Micro unmapped = micro({1, 2, 3});
  Generator gen(0);
  Eagle3Draft bare(unmapped.draft->config(), gen);
  EXPECT_EQ(testing::invalid_argument_message([&] {
              const DraftRows rows = micro_packed_row();
              eagle3_loss(bare, rows, eagle3_teacher(*unmapped.target, bare, rows), {});
            }),
            "[eagle3] a draft of draft_vocab_size 3 needs its vocabulary's map to target ids "
            "(draft.vocab)");
}

TEST(Eagle3, ParametersHaveTheServingLayoutsNamesAndShapes) {
  const Micro m = micro({0, 5, 7, 9});
  std::vector<std::string> names;
  for (const auto& [name, p] : m.draft->named_parameters())
    names.push_back(name + " " + shape_str(p.value().shape()));
  EXPECT_EQ(names, (std::vector<std::string>{
                       "fc.weight [8, 16]",
                       "midlayer.input_layernorm.weight [8]",
                       "midlayer.hidden_norm.weight [8]",
                       "midlayer.post_attention_layernorm.weight [8]",
                       "midlayer.self_attn.q_proj.weight [8, 16]",
                       "midlayer.self_attn.k_proj.weight [4, 16]",
                       "midlayer.self_attn.v_proj.weight [4, 16]",
                       "midlayer.self_attn.o_proj.weight [8, 8]",
                       "midlayer.mlp.gate_proj.weight [12, 8]",
                       "midlayer.mlp.up_proj.weight [12, 8]",
                       "midlayer.mlp.down_proj.weight [8, 12]",
                       "norm.weight [8]",
                       "lm_head.weight [4, 8]",
                   }));
}

// config.json as both engines read it: the aux layers' outputs for SGLang, their inputs for vLLM.
TEST(Eagle3, ConfigJsonIsTheServingLayoutAndReadsBack) {
  const Micro m = micro({0, 5, 7, 9});
  const nlohmann::json j = m.draft->config().to_json(DType::bf16);
  EXPECT_EQ(j["architectures"], nlohmann::json({"LlamaForCausalLMEagle3"}));
  EXPECT_EQ(j["model_type"], "llama");
  EXPECT_EQ(j["num_hidden_layers"], 1);
  EXPECT_EQ(j["vocab_size"], 24);
  EXPECT_EQ(j["draft_vocab_size"], 4);
  EXPECT_EQ(j["target_hidden_size"], 8);
  EXPECT_EQ(j["head_dim"], 4);
  EXPECT_EQ(j["tie_word_embeddings"], false);
  EXPECT_EQ(j["torch_dtype"], "bfloat16");
  EXPECT_EQ(j["eagle_config"]["eagle_aux_hidden_state_layer_ids"], nlohmann::json({0, 1}));
  EXPECT_EQ(j["eagle_aux_hidden_state_layer_ids"], nlohmann::json({1, 2}));
  const Eagle3Config back = Eagle3Config::from_json(j, "draft/config.json");
  EXPECT_EQ(back.aux_layer_ids, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(back.draft_vocab_size, 4);
  EXPECT_EQ(back.to_json(DType::bf16), j);
  // vLLM's key alone reads as well; two keys that disagree, or none, are refused.
  nlohmann::json vllm = j;
  vllm.erase("eagle_config");
  EXPECT_EQ(Eagle3Config::from_json(vllm, "c").aux_layer_ids, (std::vector<int64_t>{0, 1}));
  const auto refusal = [](nlohmann::json bad) {
    try {
      Eagle3Config::from_json(bad, "c");
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  nlohmann::json bad = j;
  bad["eagle_aux_hidden_state_layer_ids"] = {0, 1};
  EXPECT_EQ(refusal(bad),
            "c: eagle_aux_hidden_state_layer_ids [0,1] (the layers' inputs) and "
            "eagle_config.eagle_aux_hidden_state_layer_ids [0,1] (their outputs) name different "
            "layers: an engine would read other states");
  bad = vllm;
  bad.erase("eagle_aux_hidden_state_layer_ids");
  EXPECT_EQ(refusal(bad),
            "c: names no aux layers: set eagle_config.eagle_aux_hidden_state_layer_ids (the target "
            "layers whose outputs fc reads)");
  bad = j;
  bad["num_hidden_layers"] = 2;
  EXPECT_EQ(refusal(bad), "c: num_hidden_layers 2: sprig's EAGLE-3 drafts have one layer");
  bad = j;
  bad["architectures"] = {"Qwen3ForCausalLM"};
  EXPECT_EQ(refusal(bad),
            "c: architectures [\"Qwen3ForCausalLM\"] declare no EAGLE-3 draft "
            "(LlamaForCausalLMEagle3)");
}

// The gradient of the loss for every element of every trained parameter against central
// differences of the loss itself, over a packed row, with the full and a reduced vocabulary.
TEST(Eagle3, GradientsMatchCentralDifferences) {
  for (const std::vector<int64_t>& vocab :
       {std::vector<int64_t>{}, std::vector<int64_t>{0, 1, 3, 4, 5, 8, 9, 12, 17, 22}}) {
    const Micro m = micro(vocab);
    const DraftRows rows = micro_packed_row();
    const Eagle3Loss l = run(m, rows, 3);
    ASSERT_GT(l.step_valid[2], 0);
    l.loss.backward();
    for (const auto& [name, p] : m.draft->named_parameters()) {
      const Tensor numeric = numeric_gradient([&] { return run(m, rows, 3).value(); }, p.value());
      EXPECT_LE(testing::max_abs_diff(p.grad(), numeric), 1e-7) << vocab.size() << " " << name;
    }
  }
}

// A packed row's steps see only their own document: every step's sums, counts and logits equal
// those of its documents run alone as rows of their own.
TEST(Eagle3, PackedRowEqualsEachDocumentAlone) {
  const Micro m = micro();
  const DraftRows packed = micro_packed_row();
  Tensor packed_logits;
  const Eagle3Loss all = run(m, packed, 3, &packed_logits);
  const std::vector<int64_t> ids = packed.input_ids.to_vector<int64_t>();
  const std::vector<int64_t> mask = packed.loss_mask.to_vector<int64_t>();
  std::vector<double> sum(3), valid(3), correct(3);
  int64_t start = 0;
  for (const int64_t len : {6, 4}) {
    DraftRows alone = unpacked_row({ids.begin() + start, ids.begin() + start + len});
    alone.loss_mask =
        Tensor::from_vector<int64_t>({mask.begin() + start, mask.begin() + start + len}, {1, len});
    Tensor logits;
    const Eagle3Loss l = run(m, alone, 3, &logits);
    for (int64_t k = 0; k < 3; ++k) {
      sum[k] += l.step_loss_sum[k];
      valid[k] += l.step_valid[k];
      correct[k] += l.step_correct[k];
      // The positions whose token k + 1 ahead lies in the document (the others show another
      // document's token, or none, and learn nothing).
      EXPECT_LE(testing::max_abs_diff(logits.narrow(0, k * len, len - 1 - k),
                                      packed_logits.narrow(0, k * 10 + start, len - 1 - k)),
                1e-6)  // the logits dump is f32
          << "step " << k << " document at " << start;
    }
    start += len;
  }
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_NEAR(all.step_loss_sum[k], sum[k], 1e-12) << k;
    EXPECT_EQ(all.step_valid[k], valid[k]) << k;
    EXPECT_EQ(all.step_correct[k], correct[k]) << k;
  }
  EXPECT_EQ(all.step_valid, (std::vector<double>{7, 6, 4}));  // k < doc_remaining, loss-masked in
}

// A draft over 10 of the 24 ids is the full draft restricted to them: its head's rows are the
// full head's rows of those ids, and its loss is the soft cross-entropy of the full logits and the
// target's logits both restricted to those ids, over the positions whose target argmax is one.
TEST(Eagle3, DraftVocabularyIsTheFullVocabularyRestricted) {
  const std::vector<int64_t> vocab{0, 1, 3, 4, 5, 8, 9, 12, 17, 22};
  const Micro full = micro();
  const Micro reduced = micro(vocab);
  std::map<std::string, Tensor> state = full.draft->state_dict();
  state["lm_head.weight"] =
      index_select(state["lm_head.weight"], 0, Tensor::from_vector(vocab, {10}));
  reduced.draft->load_state_dict(state);
  const DraftRows rows = micro_packed_row();
  Tensor full_logits, reduced_logits;
  run(full, rows, 3, &full_logits);
  const Eagle3Loss l = run(reduced, rows, 3, &reduced_logits);
  const Tensor index = Tensor::from_vector(vocab, {10});
  EXPECT_EQ(testing::max_abs_diff(reduced_logits, index_select(full_logits, 1, index)), 0);

  // The loss from the restricted logits, by the rule.
  const Tensor teacher = eagle3_teacher(*full.target, *full.draft, rows).logits.reshape({10, 24});
  const std::vector<int64_t> top = argmax(teacher, 1).to_vector<int64_t>();
  const std::vector<double> p = softmax(index_select(teacher, 1, index), 1).to_vector<double>();
  const std::vector<double> q =
      log_softmax(index_select(full_logits, 1, index), 1).to_vector<double>();
  const std::vector<int64_t> mask = rows.loss_mask.to_vector<int64_t>();
  const std::vector<int64_t> remaining = rows.doc_remaining.to_vector<int64_t>();
  double loss = 0, weights = 0;
  for (int64_t k = 0; k < 3; ++k) {
    double sum = 0, n = 0;
    for (int64_t t = 0; t < 10; ++t) {
      const int64_t r = t + 1 + k;
      if (k >= remaining[t] || !mask[r] || std::count(vocab.begin(), vocab.end(), top[r]) == 0)
        continue;
      for (int64_t j = 0; j < 10; ++j) sum -= p[r * 10 + j] * q[(k * 10 + t) * 10 + j];
      ++n;
    }
    EXPECT_EQ(l.step_valid[k], n) << k;
    EXPECT_NEAR(l.step_loss_sum[k], sum, 1e-6) << k;  // the logits dump is f32
    loss += std::pow(0.8, k) * sum / std::max(n, 1.0);
    weights += std::pow(0.8, k);
  }
  EXPECT_NEAR(l.value(), loss / weights, 1e-6);
  EXPECT_LT(l.step_valid[0], 7);  // the vocabulary drops a position the loss mask keeps
}

// Decoding runs the function training trained: the committed positions enter the draft's cache as
// step 0 saw them, and each draft of the chain is the next step at the last one. Its logits equal
// the training-time test's at that position of the row that holds the drafts.
TEST(Eagle3, DecodingComputesWhatTheTrainingTimeTestTrained) {
  const Micro m = micro();
  const Eagle3Draft& d = *m.draft;
  const std::vector<int64_t> ids = {3, 9, 1, 17, 4, 22, 8, 0, 5, 12};
  const int64_t p = 5, k = 3;  // the chain starts at position p, whose next token is ids[p + 1]
  DraftRows row = unpacked_row(ids);
  const Eagle3Teacher teacher = eagle3_teacher(*m.target, d, row);
  Tensor trained;
  eagle3_loss(d, row, teacher, {k, 0.8, 0}, &trained);  // (k * 10, 24), step-major

  NoGradGuard no_grad;
  const auto embed = [&](const std::vector<int64_t>& tokens) {
    return Var(embedding(teacher.embedding,
                         Tensor::from_vector(tokens, {1, static_cast<int64_t>(tokens.size())})));
  };
  const auto positions = [](int64_t start, int64_t n) {
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + i;
    return Tensor::from_vector(v, {1, n});
  };
  KVCache cache;
  Var g = d.decode(embed({ids.begin() + 1, ids.begin() + p + 2}),
                   d.project(Var(teacher.aux.narrow(1, 0, p + 1))), positions(0, p + 1), cache);
  g = narrow(g, 1, p, 1);
  for (int64_t j = 0; j < k; ++j) {
    if (j > 0)
      g = d.decode(embed({ids[static_cast<size_t>(p + 1 + j)]}), g, positions(p + j, 1), cache);
    EXPECT_LE(testing::max_abs_diff(d.logits(g).value().reshape({1, 24}).to(DType::f32),
                                    trained.narrow(0, j * 10 + p, 1)),
              1e-5)
        << "step " << j;
  }
}

// Speculative decoding with an EAGLE-3 draft is the target's greedy decoding, with the whole and
// with a reduced vocabulary, whatever the draft proposes.
TEST(Eagle3, SpeculativeDecodingIsLossless) {
  for (const std::vector<int64_t>& vocab :
       {std::vector<int64_t>{}, std::vector<int64_t>{0, 1, 3, 4, 5, 8, 9, 12, 17, 22}}) {
    const Micro m = micro(vocab);
    const QwenForCausalLM& target = m.target->model();
    const std::vector<int64_t> prompt = {3, 9, 1, 17, 4};
    const std::vector<int64_t> greedy = generate_greedy(target, prompt, 30, -1);
    for (const int64_t k : {1, 3, 5}) {
      SpecDecodeOptions o;
      o.max_new_tokens = 30;
      o.draft_tokens = k;
      const SpecDecodeResult r = speculative_generate(target, *m.draft, prompt, o);
      EXPECT_EQ(r.output_ids, greedy) << vocab.size() << " " << k;
      int64_t committed = 0;
      for (size_t i = 0; i < r.accepted_per_step.size(); ++i) {
        EXPECT_GE(r.accepted_per_step[i], 1);
        EXPECT_LE(r.accepted_per_step[i], r.drafted_per_step[i] + 1);
        EXPECT_LE(r.drafted_per_step[i], k);
        committed += r.accepted_per_step[i];
      }
      EXPECT_EQ(committed, 29);  // the prefill commits the first token
    }
  }
}

TEST(Eagle3, NoValidPositionIsNamed) {
  const Micro m = micro();
  DraftRows rows = micro_packed_row();
  rows.loss_mask = Tensor::zeros({1, 10}, DType::i64);
  EXPECT_THROW(run(m, rows, 3), NoValidAnchors);
}

// A tree of drafts (the K best nodes per depth) verified in one target forward decodes the
// target's greedy output, every step committing at most its depth + 1; with one node per depth it
// is the chain, step for step. On the reference fixture's target and drafts (whose argmaxes often
// agree), and on the micro draft with a reduced vocabulary.
TEST(Eagle3, TreeDecodingIsLosslessAndItsTopOneIsTheChain) {
  const std::string dir = kGolden + "reference_eagle3/";
  const FrozenTarget fixture(load_qwen(dir + "target"), Device::cpu(), DType::f64);
  const Micro m = micro({0, 1, 3, 4, 5, 8, 9, 12, 17, 22});
  std::vector<std::pair<const QwenForCausalLM*, std::unique_ptr<Eagle3Draft>>> cases;
  for (const char* name : {"unpacked", "packed_reduced"}) {
    auto d = load_eagle3_draft(dir + name);
    d->to(Device::cpu(), DType::f64);
    cases.emplace_back(&fixture.model(), std::move(d));
  }
  for (auto& [target, draft] : cases) draft->train(false);
  std::map<int64_t, int64_t> forwards;  // target forwards over every case, by nodes per depth
  for (const auto& [target, draft] : cases) {
    for (uint64_t seed : {1, 2}) {
      const std::vector<int64_t> prompt = tokens(seed, 7);
      const std::vector<int64_t> greedy = generate_greedy(*target, prompt, 20, -1);
      for (const int64_t depth : {1, 3}) {
        SpecDecodeOptions o;
        o.max_new_tokens = 20;
        o.draft_tokens = depth;
        const SpecDecodeResult chain = speculative_generate(*target, *draft, prompt, o);
        for (const int64_t k : {1, 2, 4}) {
          o.tree_topk = k;
          const SpecDecodeResult tree = speculative_generate(*target, *draft, prompt, o);
          EXPECT_EQ(tree.output_ids, greedy) << seed << " " << depth << " " << k;
          for (size_t i = 0; i < tree.accepted_per_step.size(); ++i)
            EXPECT_LE(tree.accepted_per_step[i], tree.drafted_per_step[i] + 1);
          if (k == 1) EXPECT_EQ(tree.accepted_per_step, chain.accepted_per_step);
          forwards[k] += tree.target_forwards();
        }
      }
    }
  }
  // Wider trees accept more: the same outputs in fewer target forwards.
  std::cout << "target forwards by nodes per depth: 1: " << forwards[1] << ", 2: " << forwards[2]
            << ", 4: " << forwards[4] << "\n";
  EXPECT_LT(forwards[4], forwards[1]);
  // The micro draft, its reduced vocabulary mapped back.
  const std::vector<int64_t> prompt = {3, 9, 1, 17, 4};
  SpecDecodeOptions o;
  o.max_new_tokens = 16;
  o.tree_topk = 3;
  EXPECT_EQ(speculative_generate(m.target->model(), *m.draft, prompt, o).output_ids,
            generate_greedy(m.target->model(), prompt, 16, -1));
}

// The reference's recipe saves the draft under its module paths (model.fc, model.layers.0,
// model.norm) with a frozen copy of the target's embedding, in the target's config (its
// num_hidden_layers, no aux layers: its default [1, L/2 - 1, L - 4] applies), its draft ids ordered
// by frequency, as a consolidated export inside the checkpoint directory.
TEST(Eagle3, AReferenceCheckpointLoadsAsTheSameDraft) {
  QwenConfig target = micro_target_config();
  target.num_hidden_layers = 8;
  Generator gen(3);
  Eagle3Options o;
  o.draft_vocab_size = 5;
  Eagle3Draft draft(eagle3_config_for(target, o), gen);
  const std::vector<int64_t> ids = {2, 3, 11, 17, 20};
  draft.set_vocabulary({24, ids});
  const std::vector<int64_t> by_frequency = {3, 0, 4, 1, 2};  // rows as the reference stores them

  const testing::NamedTempDir tmp("eagle3_reference");
  const std::string files = tmp.path + "/model/consolidated";
  std::filesystem::create_directories(files);
  nlohmann::json j = target.to_json();
  j["architectures"] = {"LlamaEagle3DraftModel"};
  j["draft_vocab_size"] = 5;
  j["target_hidden_size"] = 8;
  j["tie_word_embeddings"] = false;
  j["fc_norm"] = j["norm_output"] = j["parallel_drafting"] = false;
  testing::write_text(files + "/config.json", j.dump(2));
  std::vector<SafetensorsEntry> entries;
  std::vector<int64_t> d2t;
  for (size_t i = 0; i < by_frequency.size(); ++i)
    d2t.push_back(ids[static_cast<size_t>(by_frequency[i])] - static_cast<int64_t>(i));
  for (const auto& [name, p] : draft.named_parameters()) {
    std::string stored = name;
    if (name.starts_with("midlayer.")) stored = "model.layers.0." + name.substr(9);
    if (name == "fc.weight" || name == "norm.weight") stored = "model." + name;
    Tensor value = p.value();
    if (name == "lm_head.weight")
      value = index_select(value, 0, Tensor::from_vector(by_frequency, {5}));
    entries.push_back({stored, value});
  }
  entries.push_back({"model.embed_tokens.weight", Tensor::zeros({24, 8}, DType::f32)});
  entries.push_back({"d2t", Tensor::from_vector(d2t, {5})});
  entries.push_back({"t2d", draft.vocabulary().t2d()});
  save_safetensors(files + "/model-00001-of-00001.safetensors", entries);
  nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", {}}};
  for (const SafetensorsEntry& e : entries)
    index["weight_map"][e.name] = "model-00001-of-00001.safetensors";
  testing::write_text(files + "/model.safetensors.index.json", index.dump());

  ASSERT_TRUE(is_eagle3_dir(tmp.path));
  const auto loaded = load_eagle3_draft(tmp.path);
  EXPECT_EQ(loaded->config().aux_layer_ids, (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(loaded->config().num_target_layers, 8);
  EXPECT_EQ(loaded->vocabulary().draft_to_target, ids);
  const auto mine = draft.state_dict(), theirs = loaded->state_dict();
  ASSERT_EQ(mine.size(), theirs.size());
  for (const auto& [name, t] : mine) EXPECT_TRUE(bit_identical(t, theirs.at(name))) << name;
}

}  // namespace
}  // namespace sprig::speculative

// End-to-end tests of the `sprig` executable (SPRIG_BIN) on the golden tiny Qwen3:
// `convert --from-hf` then `score` reproduces PyTorch's logits and loss; packed documents and
// folded rollouts score like their sequences alone (logits, and per-token log-probs); `generate`
// equals full-forward argmax decoding; positions past max_position_embeddings warn, or refuse
// under --strict-positions; bad records and bad checkpoints stop with one sentence (file:line for
// records) and exit code 1; tokenizer and generation files follow a model through training and
// export.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "nn/checkpoint.h"
#include "tests/cli_run.h"
#include "tests/nn/checkpoint_fixtures.h"
#include "tests/nn/reference_decoding.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::fs::exists;

using RunResult = testing::CliRun;
using testing::run_sprig;

// The last line of a stream's text (a progress line may come before an error).
std::string last_line(const std::string& text) {
  std::string t = text;
  if (!t.empty() && t.back() == '\n') t.pop_back();
  const size_t nl = t.find_last_of("\r\n");
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

std::string ids_json(const std::vector<int64_t>& ids) { return nlohmann::json(ids).dump(); }

// Every test starts from the golden Qwen3 converted by the CLI into `model`.
class SprigCli : public ::testing::Test {
 protected:
  SprigCli()
      : tmp_("cli_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    const RunResult r =
        run_sprig("convert --from-hf " + testing::kGoldenDir + "qwen3_tiny --out " + model, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "wrote " + model + " from " + testing::kGoldenDir +
                         "qwen3_tiny: float32 weights, no tokenizer or generation files\n");
  }

  // Scores the JSONL `text` into logits_path.
  RunResult score(const std::string& text) {
    testing::write_text(dir + "/records.jsonl", text);
    return run_sprig("score --device cpu --model " + model + " --input " + dir +
                         "/records.jsonl --out " + logits_path,
                     dir);
  }

  testing::NamedTempDir tmp_;
  const std::string& dir = tmp_.path;
  const std::string model = dir + "/model", logits_path = dir + "/logits.safetensors";
  const int64_t vocab = QwenConfig::load(testing::kGoldenDir + "qwen3_tiny/config.json").vocab_size;
};

TEST_F(SprigCli, ScoreReproducesGoldenLogitsAndLoss) {
  const SafetensorsFile expected(testing::kGoldenDir + "qwen3_tiny_expected.safetensors");
  const Tensor ids = expected.load("input_ids"), golden = expected.load("logits");  // (B, T, V)
  const int64_t B = golden.size(0), T = golden.size(1), V = golden.size(2);
  std::string text;
  for (int64_t b = 0; b < B; ++b)
    text += "{\"input_ids\": " + ids_json(ids.select(0, b).to_vector<int64_t>()) + "}\n";
  const RunResult r = score(text);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // stderr is a file here: the progress is whole lines (the first update, then at most one per
  // 10 s, and the last), no carriage returns.
  ASSERT_EQ(B, 2);
  EXPECT_EQ(r.err, "scored 1 records\nscored 2 records\n");

  const SafetensorsFile out(logits_path);
  ASSERT_EQ(out.tensors().size(), static_cast<size_t>(B));
  double nll = 0;
  int64_t count = 0;
  for (int64_t b = 0; b < B; ++b) {
    const Tensor logits = out.load("logits." + std::to_string(b));
    ASSERT_EQ(logits.shape(), (Shape{T, V}));
    EXPECT_EQ(logits.dtype(), DType::f32);
    const Tensor want = golden.select(0, b);
    const double scale = testing::max_abs_diff(want, Tensor::zeros({T, V}, DType::f64));
    EXPECT_LE(testing::max_abs_diff(logits.to(DType::f64), want) / scale, 1e-5);
    // Next-token NLL from the written logits, in f64.
    const std::vector<double> z = logits.to_vector<double>();
    const std::vector<int64_t> seq = ids.select(0, b).to_vector<int64_t>();
    for (int64_t t = 0; t + 1 < T; ++t, ++count) {
      double m = -INFINITY, s = 0;
      for (int64_t v = 0; v < V; ++v) m = std::max(m, z[t * V + v]);
      for (int64_t v = 0; v < V; ++v) s += std::exp(z[t * V + v] - m);
      nll += m + std::log(s) - z[t * V + seq[t + 1]];
    }
  }
  nll /= static_cast<double>(count);
  const double golden_loss = expected.load("loss").item();
  EXPECT_NEAR(nll, golden_loss, 1e-5 * golden_loss);

  const std::string marker = "mean next-token NLL: ";
  const size_t at = r.out.find(marker);
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NEAR(std::stod(r.out.substr(at + marker.size())), nll, 1e-5 * nll) << r.out;
  EXPECT_NE(r.out.find("records: " + std::to_string(B) +
                       "\nscored tokens: " + std::to_string(count) + "\n"),
            std::string::npos)
      << r.out;
}

TEST_F(SprigCli, PackedDocumentsScoreLikeEachDocumentAlone) {
  const std::vector<std::vector<int64_t>> docs = {
      {5, 17, 3, 88, 40}, {9, 9, 61, 2, 70, 33, 12, 95, 0}, {44, 7, 19}};
  std::string text = "{\"documents\": " + nlohmann::json(docs).dump() + "}\n";
  for (const auto& d : docs) text += "{\"input_ids\": " + ids_json(d) + "}\n";
  const RunResult r = score(text);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const SafetensorsFile out(logits_path);
  const Tensor packed = out.load("logits.0");
  ASSERT_EQ(packed.shape(), (Shape{17, vocab}));
  int64_t row = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    const int64_t n = static_cast<int64_t>(docs[i].size());
    EXPECT_TRUE(testing::all_close(packed.narrow(0, row, n),
                                   out.load("logits." + std::to_string(i + 1)), 1e-5, 1e-5))
        << "document " << i;
    row += n;
  }
}

// A rollout group and, after it, each of its completions as a sequence of its own: records 0
// (folded) and 1..3 (prompt ++ completion j).
const std::vector<int64_t> kPrompt = {11, 52, 7, 3, 90, 41};
const std::vector<std::vector<int64_t>> kCompletions = {
    {6, 6, 20, 1}, {73, 2, 2, 58, 31, 8, 95}, {14}};
std::string folded_then_alone() {
  std::string text = "{\"prompt_ids\": " + ids_json(kPrompt) +
                     ", \"completions\": " + nlohmann::json(kCompletions).dump() + "}\n";
  for (const auto& c : kCompletions) {
    std::vector<int64_t> seq = kPrompt;
    seq.insert(seq.end(), c.begin(), c.end());
    text += "{\"input_ids\": " + ids_json(seq) + "}\n";
  }
  return text;
}

TEST_F(SprigCli, FoldedRolloutsScoreLikeEachCompletionAlone) {
  const std::vector<int64_t>& prompt = kPrompt;
  const std::vector<std::vector<int64_t>>& completions = kCompletions;
  const std::string text = folded_then_alone();
  const RunResult r = score(text);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const SafetensorsFile out(logits_path);
  const Tensor folded = out.load("logits.0");  // [prompt | c0 | c1 | c2]
  const int64_t P = static_cast<int64_t>(prompt.size());
  ASSERT_EQ(folded.shape(), (Shape{P + 4 + 7 + 1, vocab}));
  int64_t row = P;
  for (size_t j = 0; j < completions.size(); ++j) {
    const Tensor alone = out.load("logits." + std::to_string(j + 1));
    const int64_t n = static_cast<int64_t>(completions[j].size());
    EXPECT_TRUE(testing::all_close(folded.narrow(0, 0, P), alone.narrow(0, 0, P), 1e-5, 1e-5))
        << "prompt rows against completion " << j;
    EXPECT_TRUE(testing::all_close(folded.narrow(0, row, n), alone.narrow(0, P, n), 1e-5, 1e-5))
        << "completion " << j;
    row += n;
  }
}

// A rollout without a prompt scores as training folds it, each completion as its own sequence;
// --supervise-first-token cannot apply to it (no position predicts a first token) and says so.
TEST_F(SprigCli, AnEmptyPromptScoresEachCompletionAloneAndCannotSuperviseItsFirstToken) {
  testing::write_text(dir + "/records.jsonl",
                      "{\"prompt_ids\": [], \"completions\": [[3, 4, 5], [6, 7]]}\n"
                      "{\"input_ids\": [3, 4, 5]}\n{\"input_ids\": [6, 7]}\n");
  const std::string command = "score --device cpu --model " + model + " --input " + dir +
                              "/records.jsonl --logprobs --overwrite --out " + logits_path;
  const RunResult r = run_sprig(command, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const SafetensorsFile out(logits_path);
  EXPECT_EQ(out.load("0.lengths").to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
  const Tensor folded = out.load("0.logprobs");
  EXPECT_TRUE(testing::all_close(folded.select(0, 0).narrow(0, 0, 2),
                                 out.load("1.logprobs").select(0, 0), 1e-5, 1e-5));
  EXPECT_TRUE(testing::all_close(folded.select(0, 1).narrow(0, 0, 1),
                                 out.load("2.logprobs").select(0, 0), 1e-5, 1e-5));
  const RunResult first = run_sprig(command + " --supervise-first-token", dir);
  EXPECT_EQ(first.exit_code, 1);
  EXPECT_EQ(first.err, "sprig: " + dir +
                           "/records.jsonl:1: [fold] a group without a prompt has no position to "
                           "predict its completions' first tokens from: supervise_first_token "
                           "cannot apply (give the prompt, or leave supervise_first_token off)\n");
}

// --supervise-first-token changes rollout records only: on a file without one, scoring warns (the
// scores are those without it); where a rollout is scored, it says nothing.
TEST_F(SprigCli, SuperviseFirstTokenWarnsWhenNoRecordIsARollout) {
  const std::string records = dir + "/records.jsonl";
  const std::string command = "score --device cpu --model " + model + " --input " + records +
                              " --logprobs --overwrite --out " + logits_path +
                              " --supervise-first-token";
  testing::write_text(records, "{\"input_ids\": [3, 4, 5]}\n{\"documents\": [[6, 7], [8, 9]]}\n");
  const RunResult r = run_sprig(command, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err,
            "scored 1 records\nscored 2 records\nsprig: [score] warning: --supervise-first-token "
            "applies to rollout records (prompt_ids with completions); " +
                records + " has none\n");
  EXPECT_TRUE(exists(logits_path));
  testing::write_text(records,
                      "{\"input_ids\": [3, 4, 5]}\n"
                      "{\"prompt_ids\": [3], \"completions\": [[4, 5]]}\n");
  const RunResult rollout = run_sprig(command, dir);
  ASSERT_EQ(rollout.exit_code, 0) << rollout.err;
  EXPECT_EQ(rollout.err, "scored 1 records\nscored 2 records\n");
}

// `score --logprobs`: one folded forward gives each completion token's log-prob (and entropy) as
// scoring prompt ++ completion alone does; lengths count C_j tokens with the first one supervised,
// C_j - 1 without.
TEST_F(SprigCli, LogprobsOfFoldedRolloutsEqualEachCompletionScoredAlone) {
  const std::vector<int64_t>& prompt = kPrompt;
  const std::vector<std::vector<int64_t>>& completions = kCompletions;
  const std::string text = folded_then_alone();
  testing::write_text(dir + "/records.jsonl", text);
  const int64_t P = static_cast<int64_t>(prompt.size());
  for (bool first : {true, false}) {
    const RunResult r = run_sprig("score --device cpu --model " + model + " --input " + dir +
                                      "/records.jsonl --logprobs --entropy --out " + logits_path +
                                      " --overwrite" + (first ? " --supervise-first-token" : ""),
                                  dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const SafetensorsFile out(logits_path);
    EXPECT_EQ(out.load("0.lengths").to_vector<int64_t>(),
              (first ? std::vector<int64_t>{4, 7, 1} : std::vector<int64_t>{3, 6, 0}));
    const Tensor folded = out.load("0.logprobs"), entropy = out.load("0.entropy");
    ASSERT_EQ(folded.shape(), (Shape{3, first ? 7 : 6}));
    EXPECT_EQ(out.tensors().size(), 12u);  // logprobs, lengths, entropy of 4 records
    for (size_t j = 0; j < completions.size(); ++j) {
      const std::string alone = std::to_string(j + 1);
      EXPECT_EQ(out.load(alone + ".lengths").to_vector<int64_t>(),
                std::vector<int64_t>{P + static_cast<int64_t>(completions[j].size()) - 1});
      // Entry t of the sequence alone predicts its token t + 1.
      const int64_t shift = first ? 1 : 0,
                    n = static_cast<int64_t>(completions[j].size()) - 1 + shift;
      const Tensor want = out.load(alone + ".logprobs").select(0, 0).narrow(0, P - shift, n);
      const Tensor got = folded.select(0, static_cast<int64_t>(j)).narrow(0, 0, n);
      EXPECT_TRUE(testing::all_close(got, want, 1e-5, 1e-5)) << "completion " << j;
      EXPECT_TRUE(testing::all_close(
          entropy.select(0, static_cast<int64_t>(j)).narrow(0, 0, n),
          out.load(alone + ".entropy").select(0, 0).narrow(0, P - shift, n), 1e-5, 1e-5));
      // Past its length, a completion's row holds zeros.
      const int64_t width = folded.size(1);
      if (n < width) {
        const Tensor tail = folded.select(0, static_cast<int64_t>(j)).narrow(0, n, width - n);
        EXPECT_EQ(testing::max_abs_diff(tail, Tensor::zeros({width - n})), 0.0);
      }
      if (n > 0) {
        EXPECT_LT(got.to_vector<float>()[0], 0.0f);
      }
    }
    EXPECT_NE(r.out.find("scored tokens: " + std::to_string((first ? 12 : 9) + 9 + 12 + 6)),
              std::string::npos)
        << r.out;
  }
  const RunResult usage = run_sprig("score --device cpu --model " + model + " --input " + dir +
                                        "/records.jsonl --entropy --out " + logits_path,
                                    dir);
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_NE(usage.err.find("--entropy requires --logprobs"), std::string::npos) << usage.err;
}

TEST_F(SprigCli, GenerateEqualsFullForwardArgmax) {
  const RunResult r = run_sprig(
      "generate --device cpu --model " + model + " --prompt-ids 3,14,15,9 --max-new-tokens 10",
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto reference = load_qwen(model);
  const std::vector<int64_t> want = testing::reference_greedy(*reference, {3, 14, 15, 9}, 10);
  std::string expected;
  for (size_t i = 0; i < want.size(); ++i) {
    if (i > 0) expected += ",";
    expected += std::to_string(want[i]);
  }
  EXPECT_EQ(r.out, expected + "\n");
}

// One rule past max_position_embeddings (128 here) for every command: computed, with one warning
// naming the first input that reaches there (transformers computes such positions too), or under
// --strict-positions refused before any output. Generation there equals full-forward argmax.
TEST_F(SprigCli, PositionsPastTheModelsRangeWarnOrWithStrictPositionsAreRefused) {
  std::vector<int64_t> long_ids(130);
  for (size_t i = 0; i < long_ids.size(); ++i) long_ids[i] = static_cast<int64_t>(i % 90);
  const std::string file = dir + "/records.jsonl";
  const std::string text = "{\"input_ids\": [1, 2]}\n{\"input_ids\": " + ids_json(long_ids) +
                           "}\n{\"input_ids\": " + ids_json(long_ids) + "}\n";
  RunResult r = score(text);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string warning = "sprig: [score] warning: " + file +
                              ":2 reaches position 129, past the model's "
                              "max_position_embeddings 128 (positions the model was not trained "
                              "on; computed as transformers computes them; --strict-positions "
                              "refuses; later inputs past it are not reported)\n";
  EXPECT_NE(r.err.find(warning), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(":3 reaches"), std::string::npos) << r.err;  // warned once
  EXPECT_EQ(SafetensorsFile(logits_path).load("logits.1").size(0), 130);

  testing::fs::remove(logits_path);
  r = run_sprig("score --strict-positions --device cpu --model " + model + " --input " + file +
                    " --out " + logits_path,
                dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(last_line(r.err), "sprig: [score] " + file +
                                  ":2 reaches position 129, past the model's "
                                  "max_position_embeddings 128 (--strict-positions)");
  EXPECT_FALSE(exists(logits_path));

  // A folded prefix tree of a 20-token prompt and three 60-token completions holds 200 tokens, but
  // its deepest position is 79: nothing to warn about, even under --strict-positions.
  const std::string completion = ids_json(std::vector<int64_t>(60, 5));
  testing::write_text(file, "{\"prompt_ids\": " + ids_json(std::vector<int64_t>(20, 7)) +
                                ", \"completions\": [" + completion + ", " + completion + ", " +
                                completion + "]}\n");
  r = run_sprig("score --strict-positions --device cpu --model " + model + " --input " + file +
                    " --out " + logits_path,
                dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("reaches position"), std::string::npos) << r.err;
  EXPECT_EQ(SafetensorsFile(logits_path).load("logits.0").size(0), 200);
  testing::fs::remove(logits_path);

  const std::string generate =
      "generate --device cpu --model " + model + " --prompt-ids 3,14,15,9 --max-new-tokens 130";
  r = run_sprig(generate, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(
      r.err.find("sprig: [generate] warning: decoding a 4-token prompt with --max-new-tokens 130 "
                 "reaches position 133, past the model's max_position_embeddings 128"),
      std::string::npos)
      << r.err;
  const std::vector<int64_t> want =
      testing::reference_greedy(*load_qwen(model), {3, 14, 15, 9}, 130);
  std::string expected;
  for (size_t i = 0; i < want.size(); ++i) expected += (i ? "," : "") + std::to_string(want[i]);
  EXPECT_EQ(r.out, expected + "\n");
  r = run_sprig(generate + " --strict-positions", dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(
      last_line(r.err),
      "sprig: [generate] decoding a 4-token prompt with --max-new-tokens 130 reaches position "
      "133, "
      "past the model's max_position_embeddings 128 (--strict-positions)");
}

TEST_F(SprigCli, BadRecordsStopAtFileAndLine) {
  const std::string good = "{\"input_ids\": [1, 2, 3]}\n";
  const std::string file = dir + "/records.jsonl";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good + "{\"input_ids\": [4, " + std::to_string(vocab) + "]}\n",
       file + ":2: token id " + std::to_string(vocab) + " in \"input_ids\" is outside the " +
           "vocabulary [0, " + std::to_string(vocab) + ")"},
      {good + "\n{\"documents\": [[1], [-1]]}\n",
       file + ":3: token id -1 in \"documents\" is outside the vocabulary [0, " +
           std::to_string(vocab) + ")"},
      // As written: read as int64, 2^64 - 1 would be -1.
      {good + "{\"input_ids\": [1, 18446744073709551615]}\n",
       file + ":2: token id 18446744073709551615 in \"input_ids\" is outside the vocabulary [0, " +
           std::to_string(vocab) + ")"},
      {good + "{\"input_ids\": []}\n",
       file + ":2: \"input_ids\" must be a non-empty list of token ids"},
      {good + "{\"input_ids\": [1, 2.5]}\n", file + ":2: \"input_ids\" holds a non-integer 2.5"},
      {good + "{}\n", file + ":2: a record needs \"input_ids\", \"documents\", or \"prompt_ids\" "
                             "and \"completions\""},
      {good + "[1, 2]\n", file + ":2: a record must be a JSON object"},
      {good + "{\"input_id\": [1, 2]}\n",
       file + ":2: unknown key \"input_id\" (did you mean \"input_ids\"?)"},
      {good + "{\"input_ids\": [1, 2,]}\n" + good,
       file + ":2: malformed JSON at column 21: unexpected ']'; expected '[', '{', or a literal"},
      {good + good + "{\"input_ids\": [1, 2", file + ":3: malformed JSON at column 20: "},
      {good + "{\"input_ids\": [1, 2], \"input_ids\": [3]}\n",
       file + ":2: key \"input_ids\" appears twice in one object"},
      {good + std::string("{\"input_ids\": [1, 2]}\0\n", 23) + good,
       file + ":2: a NUL byte at column 22 (JSON is text)"},
  };
  for (const auto& [text, message] : cases) {
    const RunResult r = score(text);
    EXPECT_EQ(r.exit_code, 1) << text;
    const std::string line = last_line(r.err);
    EXPECT_EQ(line.rfind("sprig: " + message, 0), 0u) << line;
    EXPECT_FALSE(exists(logits_path)) << text;
  }
  const RunResult truncated = score(good + "{\"input_ids\": [1, 2");
  EXPECT_NE(last_line(truncated.err).find("; the last line looks truncated"), std::string::npos)
      << truncated.err;
  const RunResult empty = score("\n\n");
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_EQ(empty.err, "sprig: " + file + ": no records\n");
  // One-token records predict nothing: no mean NLL of 0, and no output.
  const RunResult nothing = score("{\"input_ids\": [1]}\n{\"documents\": [[2], [3]]}\n");
  EXPECT_EQ(nothing.exit_code, 1);
  EXPECT_EQ(last_line(nothing.err), "sprig: " + file +
                                        ": nothing to score: none of the 2 records has a token "
                                        "with a next token to predict");
  EXPECT_EQ(nothing.out, "");
  EXPECT_FALSE(exists(logits_path));
}

TEST_F(SprigCli, BadCheckpointsFailWithOneSentence) {
  testing::write_text(dir + "/ok.jsonl", "{\"input_ids\": [1, 2, 3]}\n");
  for (const std::string& kind : testing::breakage_kinds()) {
    const testing::BrokenCheckpoint broken = testing::broken_checkpoint(kind, dir);
    for (const std::string& args :
         {"convert --from-hf " + broken.dir + " --out " + dir + "/out",
          "score --device cpu --model " + broken.dir + " --input " + dir + "/ok.jsonl --out " +
              logits_path,
          "generate --device cpu --model " + broken.dir + " --prompt-ids 1,2"}) {
      const RunResult r = run_sprig(args, dir);
      EXPECT_EQ(r.exit_code, 1) << args;  // an error exit, not a crash
      EXPECT_EQ(r.err.rfind("sprig: " + broken.message, 0), 0u) << args << "\n" << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      EXPECT_EQ(r.out, "") << args;
    }
    EXPECT_FALSE(exists(dir + "/out")) << kind;
    EXPECT_FALSE(exists(logits_path)) << kind;
  }
}

// A model's tokenizer and generation files travel with it: into the converted model, into every
// training checkpoint made from it, and into that checkpoint's export; the checkpoint's config
// says float32, the dtype of the masters it holds. `--dtype bf16` rounds and says so.
TEST_F(SprigCli, TokenizerAndGenerationFilesReachTheTrainedExport) {
  const std::string hf = dir + "/hf";
  testing::write_hf_checkpoint("qwen3_tiny", hf);
  testing::write_text(hf + "/tokenizer.json", "{\"model\": {}}\n");
  testing::write_text(hf + "/generation_config.json", "{\"temperature\": 0.6}\n");
  const RunResult in = run_sprig("convert --from-hf " + hf + " --out " + dir + "/base", dir);
  ASSERT_EQ(in.exit_code, 0) << in.err;
  EXPECT_EQ(in.out, "wrote " + dir + "/base from " + hf +
                        ": float32 weights; with tokenizer.json generation_config.json\n");

  const std::string config = dir + "/sft.yaml";
  testing::write_text(config, "run_dir: " + dir + "/run\ndevice: cpu\nmodel: {path: " + dir +
                                  "/base}\ndata:\n  train: " + testing::source_dir() +
                                  "/train/configs/tiny_docs.jsonl\n  seq_len: 32\n"
                                  "  packing: bfd\n  micro_batch_size: 2\n  max_packs: 2\n"
                                  "train: {max_steps: 1}\n");
  const RunResult trained = run_sprig("train sft -c " + config, dir);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const std::string ckpt = dir + "/run/checkpoints/step_00000001";
  EXPECT_EQ(testing::read_text(ckpt + "/tokenizer.json"), "{\"model\": {}}\n");
  EXPECT_EQ(testing::read_text(ckpt + "/generation_config.json"), "{\"temperature\": 0.6}\n");
  EXPECT_EQ(nlohmann::json::parse(testing::read_text(ckpt + "/config.json"))["torch_dtype"],
            "float32");

  const RunResult out =
      run_sprig("convert --to-hf " + ckpt + " --out " + dir + "/export --dtype bf16", dir);
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(out.out, "wrote " + dir + "/export from " + ckpt +
                         ": bfloat16 weights; with tokenizer.json generation_config.json\n");
  EXPECT_EQ(testing::read_text(dir + "/export/generation_config.json"), "{\"temperature\": 0.6}\n");
  EXPECT_EQ(nlohmann::json::parse(testing::read_text(dir + "/export/config.json"))["dtype"],
            "bfloat16");
  EXPECT_EQ(SafetensorsFile(dir + "/export/model.safetensors").info("lm_head.weight").dtype,
            StDType::BF16);
}

}  // namespace
}  // namespace sprig

// End-to-end tests of `sprig data tokenize` and `sprig generate --prompt` (the real executable)
// with the golden tokenizer of tests/golden/tokenizer: text and chat records become the ids and
// masks of the tokenizer library (and of HF, for the fixture's conversations); the output feeds
// `sprig train sft` and `sprig train dflash` as it is, the DataLoader keeping its loss_mask;
// `generate --prompt` prints the text of the ids `--prompt-ids` gives; bad records, templates and
// tokenizers stop with one sentence, exit code 1 and no output.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "data/chat.h"
#include "data/tokenizer.h"
#include "tests/data/cli_util.h"
#include "tests/test_util.h"

namespace sprig::data {
namespace {

using nlohmann::json;
using testing::CliRun;
using testing::DataCli;
using testing::read_text;
using Ids32 = std::vector<int32_t>;

const std::string kTokenizer = sprig::testing::source_dir() + "/tests/golden/tokenizer";

const Tokenizer& golden() {
  static const Tokenizer t = Tokenizer::load(kTokenizer);
  return t;
}

// The fixture's first Qwen2.5 conversation with the ids and mask HF gave it.
json fixture_conversation() {
  std::ifstream in(kTokenizer + "/chat_expected.jsonl");
  std::string line;
  std::getline(in, line);
  return json::parse(line);
}

std::string text_record(const std::string& text) { return json{{"text", text}}.dump() + "\n"; }

class TokenizeCli : public DataCli {
 protected:
  // Records: two texts, the fixture's conversation and a multi-turn one with a system message.
  std::string input() const {
    const json conversation = fixture_conversation();
    const json multi = {{"messages",
                         {{{"role", "system"}, {"content", "Be brief."}},
                          {{"role", "user"}, {"content", "1+1?"}},
                          {{"role", "assistant"}, {"content", "2"}},
                          {{"role", "user"}, {"content", "今天?"}},
                          {{"role", "assistant"}, {"content", "星期三 👍"}}}}};
    return write("in.jsonl", text_record("Hello world, it's 2026!") +
                                 json{{"messages", conversation["messages"]}}.dump() + "\n\n" +
                                 text_record("def f(x):\n    return x  # code\n") + multi.dump() +
                                 "\n");
  }

  CliRun tokenize(const std::string& input, const std::string& extra = "") const {
    return sprig_data("tokenize --tokenizer " + kTokenizer + " --input " + input + " --out " +
                      path("out.jsonl") + " " + extra);
  }
};

TEST_F(TokenizeCli, TextAndChatRecordsBecomeDocuments) {
  const CliRun r = tokenize(input(), "--threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> out = read_jsonl("out.jsonl");
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0], json({{"input_ids", golden().encode("Hello world, it's 2026!")}}));
  const json conversation = fixture_conversation();
  EXPECT_EQ(out[1], json({{"input_ids", conversation["input_ids"]},
                          {"loss_mask", conversation["loss_mask"]}}));
  EXPECT_EQ(out[2], json({{"input_ids", golden().encode("def f(x):\n    return x  # code\n")}}));
  const ChatTokens multi = tokenize_chat(
      golden(), ChatTemplate::load(kTokenizer),
      parse_messages(json::parse(
          read_text(path("in.jsonl"))
              .substr(read_text(path("in.jsonl")).rfind("{\"messages\"")))["messages"]));
  EXPECT_EQ(out[3], json({{"input_ids", multi.input_ids}, {"loss_mask", multi.loss_mask}}));
  // Two assistant turns: two runs of ones.
  int runs = 0;
  for (size_t t = 0; t < multi.loss_mask.size(); ++t)
    runs += multi.loss_mask[t] == 1 && (t == 0 || multi.loss_mask[t - 1] == 0);
  EXPECT_EQ(runs, 2);
  int64_t tokens = 0, supervised = 0;
  for (const json& o : out) {
    tokens += static_cast<int64_t>(o["input_ids"].size());
    for (int m : o.value("loss_mask", json(std::vector<int>(o["input_ids"].size(), 1))))
      supervised += m;
  }
  EXPECT_EQ(
      r.out.rfind("wrote " + path("out.jsonl") + ": 4 records (2 chat), " + std::to_string(tokens) +
                      " tokens, " + std::to_string(supervised) + " supervised; ",
                  0),
      0u)
      << r.out;
  // The progress line in a log (stderr is not a terminal): whole lines, no carriage return.
  EXPECT_NE(r.err.find("records/s"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.back(), '\n') << r.err;
}

// The tokenized file trains an SFT model and a DFlash draft as it is, and generate --prompt
// speaks text with the trained model.
TEST_F(TokenizeCli, OutputFeedsTheTrainersAndGenerateSpeaksText) {
  ASSERT_EQ(tokenize(input()).exit_code, 0);
  json model = json::parse(
      testing::read_text(sprig::testing::source_dir() + "/train/configs/tiny_qwen3.json"));
  model["vocab_size"] = 2432;  // the tokenizer's 2408 ids, rounded up to a multiple of 16
  write("model.json", model.dump());
  const std::string data = "data:\n  train: " + path("out.jsonl") +
                           "\n  format: documents\n  seq_len: 96\n  micro_batch_size: 2\n"
                           "  shuffle: false\n  vocab_size: 2432\n";
  const std::string sft =
      write("sft.yaml", "run_dir: " + path("sft") +
                            "\ndevice: cpu\nmodel:\n  config: " + path("model.json") + "\n" + data +
                            "  packing: bfd\ntrain:\n  max_steps: 2\nlog:\n  every_steps: 1\n"
                            "checkpoint:\n  every_steps: 2\n");
  const CliRun train_sft = sprig::testing::run_sprig("train sft -c " + sft, dir_.string());
  ASSERT_EQ(train_sft.exit_code, 0) << train_sft.err;
  const std::string dflash = write(
      "dflash.yaml",
      "run_dir: " + path("dflash") + "\ndevice: cpu\ntarget:\n  config: " + path("model.json") +
          "\ndraft:\n  mask_token_id: 2431\n  num_layers: 1\n"
          "  block_size: 4\n  num_anchors: 4\n" +
          data + "  packing: dflash\ntrain:\n  max_steps: 2\nlog:\n  every_steps: 1\n");
  const CliRun train_dflash = sprig::testing::run_sprig("train dflash -c " + dflash, dir_.string());
  ASSERT_EQ(train_dflash.exit_code, 0) << train_dflash.err;
  for (const std::string run : {"sft", "dflash"}) {
    std::ifstream metrics(path(run + "/metrics.jsonl"));
    int steps = 0;
    for (std::string line; std::getline(metrics, line);) {
      const json m = json::parse(line);
      if (!m.contains("loss")) continue;
      EXPECT_TRUE(std::isfinite(m["loss"].get<double>())) << line;
      ++steps;
    }
    EXPECT_EQ(steps, 2) << run;
  }
  // The DFlash loader's rows carry each record's loss_mask unchanged (in order, no shuffle).
  const CliRun dump = sprig_data("dump -c " + dflash + " --out " + path("dump.jsonl"));
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  const json batch = read_jsonl("dump.jsonl")[0];
  const std::vector<json> records = read_jsonl("out.jsonl");
  const std::vector<int64_t> row_mask = batch["loss_mask"][0].get<std::vector<int64_t>>();
  const std::vector<int64_t> row_ids = batch["input_ids"][0].get<std::vector<int64_t>>();
  const size_t first = records[0]["input_ids"].size(), second = records[1]["input_ids"].size();
  ASSERT_GE(row_ids.size(), first + second);
  EXPECT_EQ(std::vector<int64_t>(row_ids.begin() + first, row_ids.begin() + first + second),
            records[1]["input_ids"].get<std::vector<int64_t>>());
  EXPECT_EQ(std::vector<int64_t>(row_mask.begin() + first, row_mask.begin() + first + second),
            records[1]["loss_mask"].get<std::vector<int64_t>>());

  const std::string ckpt = path("sft/checkpoints/step_00000002");
  const std::string prompt = "Hello, 世界";
  const Ids32 prompt_ids = golden().encode(prompt);
  std::string csv;
  for (int32_t id : prompt_ids) {
    if (!csv.empty()) csv += ',';
    csv += std::to_string(id);
  }
  const CliRun ids = sprig::testing::run_sprig(
      "generate --device cpu --model " + ckpt + " --prompt-ids " + csv + " --max-new-tokens 8",
      dir_.string());
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  Ids32 generated;
  std::stringstream ss(ids.out);
  for (std::string tok; std::getline(ss, tok, ',');) generated.push_back(std::stoi(tok));
  ASSERT_EQ(generated.size(), 8u);
  const CliRun text =
      sprig::testing::run_sprig("generate --device cpu --model " + ckpt + " --tokenizer " +
                                    kTokenizer + " --prompt '" + prompt + "' --max-new-tokens 8",
                                dir_.string());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out, golden().decode(generated) + "\n");
  // Without --tokenizer the model's directory must hold one.
  const CliRun none = sprig::testing::run_sprig(
      "generate --device cpu --model " + ckpt + " --prompt hi", dir_.string());
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_EQ(none.err, "sprig: [tokenizer] cannot open " + ckpt + "/tokenizer.json\n");
}

TEST_F(TokenizeCli, BadRecordsStopWithFileLineAndReason) {
  const std::string chat = R"({"messages": [{"role": "user", "content": "x"}, )";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {text_record("ok") + "{\"text\": \n",
       "in.jsonl:2: malformed JSON at column 10: unexpected end of input; expected '[', "
       "'{', or a literal"},
      {text_record("ok") + "{\"text\": \"cut",
       "in.jsonl:2: truncated last line (no newline at "
       "the end, not valid JSON)"},
      {"[1, 2]\n", "in.jsonl:1: expected a JSON object, got array"},
      {"{\"text\": 5}\n", "in.jsonl:1: \"text\" must be a string, got 5"},
      {"{\"input_ids\": [1]}\n", "in.jsonl:1: a record needs \"text\" or \"messages\""},
      {chat + R"({"role": "bot", "content": "y"}]})" + "\n",
       "in.jsonl:1: \"messages\"[1]: unknown role 'bot' (supported: system, user, assistant)"},
      {R"({"messages": [{"role": "user", "content": "only"}]})"
       "\n",
       "in.jsonl:1: no assistant message: the conversation supervises nothing"},
  };
  for (const auto& [text, message] : cases) {
    const CliRun r = tokenize(write("in.jsonl", text));
    EXPECT_EQ(r.exit_code, 1) << text;
    // "in.jsonl" stands for its full path in the message.
    EXPECT_EQ(r.err.substr(r.err.rfind("sprig: ")),
              "sprig: " + path("in.jsonl") + message.substr(std::string("in.jsonl").size()) + "\n")
        << text;
    EXPECT_FALSE(std::filesystem::exists(path("out.jsonl"))) << text;
  }
  const CliRun forced =
      tokenize(write("in.jsonl", chat + R"({"role": "assistant", "content": "y"}]})"
                                        "\n"),
               "--format text");
  EXPECT_EQ(forced.exit_code, 1);
  EXPECT_NE(forced.err.find("in.jsonl:1: missing \"text\" (--format text)"), std::string::npos)
      << forced.err;
  const CliRun skipped =
      tokenize(write("in.jsonl", text_record("a") + "{\"text\": 1}\n" + text_record("b")),
               "--skip-bad-records");
  EXPECT_EQ(skipped.exit_code, 0) << skipped.err;
  EXPECT_EQ(read_jsonl("out.jsonl").size(), 2u);
  EXPECT_NE(skipped.out.find("skipped 1 bad record (" + path("in.jsonl") +
                             ":2: \"text\" must be a "
                             "string, got 1)"),
            std::string::npos)
      << skipped.out;
}

TEST_F(TokenizeCli, BadTokenizersTemplatesAndOptionsAreRefused) {
  const std::string records = input();
  // A tokenizer directory whose template is not ChatML: chat records need one.
  std::filesystem::create_directories(path("llama"));
  std::filesystem::copy(kTokenizer + "/tokenizer.json", path("llama/tokenizer.json"));
  write(
      "llama/tokenizer_config.json",
      json{{"chat_template", "{% for m in messages %}[INST] {{ m.content }}{% endfor %}"}}.dump());
  CliRun r = sprig_data("tokenize --tokenizer " + path("llama") + " --input " + records +
                        " --out " + path("out.jsonl"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sprig: [chat] " + path("llama/tokenizer_config.json") +
                       ": the chat_template is not ChatML (no <|im_start|>role ... <|im_end|> "
                       "turns); supported: the ChatML templates of Qwen2, Qwen2.5 and Qwen3\n");
  // Without tokenizer_config.json text records still tokenize; a chat record says what it lacks.
  std::filesystem::remove(path("llama/tokenizer_config.json"));
  r = sprig_data("tokenize --tokenizer " + path("llama") + " --input " + records + " --out " +
                 path("out.jsonl"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("in.jsonl:2: a chat record needs the tokenizer's chat template "
                       "(tokenizer_config.json)"),
            std::string::npos)
      << r.err;
  write("llama/tokenizer.json", "{\"version\": \"1.0\"}");
  r = sprig_data("tokenize --tokenizer " + path("llama") + " --input " + records + " --out " +
                 path("out.jsonl"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sprig: [tokenizer] " + path("llama/tokenizer.json") +
                       ": missing \"model\" (the BPE vocabulary and merges)\n");
  EXPECT_FALSE(std::filesystem::exists(path("out.jsonl")));
  // An existing output is kept unless --overwrite, and is checked before any work.
  write("out.jsonl", "not json\n");
  r = tokenize(records);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(read_text(path("out.jsonl")), "not json\n");
  write("out.jsonl", "{\"input_ids\": [1]}\n");
  EXPECT_EQ(tokenize(records, "--overwrite").exit_code, 0);
  EXPECT_EQ(read_jsonl("out.jsonl").size(), 4u);
  // Usage errors exit 2.
  EXPECT_EQ(sprig_data("tokenize --input " + records + " --out " + path("x.jsonl")).exit_code, 2);
  EXPECT_EQ(tokenize(records, "--format yaml").exit_code, 2);
}

}  // namespace
}  // namespace sprig::data

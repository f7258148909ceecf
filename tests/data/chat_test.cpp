// Chat formatting (data/chat.h) against transformers' apply_chat_template and the reference's
// assistant mask on the conversations of tests/golden/tokenizer/chat_expected.jsonl (Qwen2,
// Qwen2.5 and Qwen3 templates, written by tests/golden/make_tokenizer_golden.py), the templates'
// recognition, and the refusals of bad messages and unsupported templates.
#include "data/chat.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace sprig::data {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

const std::string kDir = testing::source_dir() + "/tests/golden/tokenizer/";

const Tokenizer& golden() {
  static const Tokenizer t = Tokenizer::load(kDir);
  return t;
}

TEST(Chat, MatchesApplyChatTemplateAndTheReferenceMaskOnEveryConversation) {
  std::ifstream in(kDir + "chat_expected.jsonl");
  int conversations = 0, matched = 0, rejected = 0;
  for (std::string line; std::getline(in, line);) {
    const json e = json::parse(line);
    const ChatTemplate tpl = ChatTemplate::load(kDir + e["template"].get<std::string>());
    const std::vector<ChatMessage> messages = parse_messages(e["messages"]);
    ++conversations;
    if (e.contains("error")) {  // the reference refuses it: so must we
      EXPECT_THROW(tokenize_chat(golden(), tpl, messages), std::invalid_argument) << line;
      ++rejected;
      continue;
    }
    const ChatTokens got = tokenize_chat(golden(), tpl, messages);
    EXPECT_EQ(got.input_ids, e["input_ids"].get<Ids>()) << line;
    EXPECT_EQ(got.loss_mask, e["loss_mask"].get<Ids>()) << line;
    matched +=
        got.input_ids == e["input_ids"].get<Ids>() && got.loss_mask == e["loss_mask"].get<Ids>();
  }
  EXPECT_EQ(conversations, 49);
  EXPECT_EQ(matched + rejected, conversations);
  EXPECT_EQ(rejected, 14);
}

TEST(Chat, RecognisesTheQwenTemplates) {
  const ChatTemplate qwen25 = ChatTemplate::load(kDir);
  EXPECT_EQ(qwen25.kind(), ChatTemplate::Kind::chatml);
  EXPECT_EQ(qwen25.default_system(),
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  const ChatTemplate qwen2 = ChatTemplate::load(kDir + "tokenizer_config_qwen2.json");
  EXPECT_EQ(qwen2.default_system(), "You are a helpful assistant.");
  const ChatTemplate qwen3 = ChatTemplate::load(kDir + "tokenizer_config_qwen3.json");
  EXPECT_EQ(qwen3.kind(), ChatTemplate::Kind::qwen3);
  EXPECT_EQ(qwen3.default_system(), std::nullopt);
  const std::vector<ChatMessage> messages = {{"user", "Hi", {}}, {"assistant", "Yo", {}}};
  EXPECT_EQ(qwen2.render(messages, 2),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi"
            "<|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n");
  EXPECT_EQ(qwen3.render(messages, 2),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nYo"
            "<|im_end|>\n");
}

// The mask covers the assistant turn from <|im_start|> to the newline after <|im_end|>.
TEST(Chat, MaskCoversTheAssistantTurnWithItsClosingTokens) {
  const ChatTemplate tpl = ChatTemplate::load(kDir);
  const ChatTokens got = tokenize_chat(
      golden(), tpl, {{"system", "S", {}}, {"user", "U", {}}, {"assistant", "A", {}}});
  const Ids prompt =
      golden().encode("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
  const Ids answer = golden().encode("<|im_start|>assistant\nA<|im_end|>\n");
  Ids ids = prompt;
  ids.insert(ids.end(), answer.begin(), answer.end());
  EXPECT_EQ(got.input_ids, ids);
  Ids mask(prompt.size(), 0);
  mask.resize(ids.size(), 1);
  EXPECT_EQ(got.loss_mask, mask);
}

std::string parse_error(const std::string& messages) {
  try {
    parse_messages(json::parse(messages));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

TEST(Chat, BadMessagesSayWhatIsWrong) {
  EXPECT_EQ(parse_error(R"([{"role": "bot", "content": "x"}])"),
            "\"messages\"[0]: unknown role 'bot' (supported: system, user, assistant)");
  EXPECT_EQ(parse_error(R"([{"role": "user", "content": "x"}, {"role": "tool", "content": "y"}])"),
            "\"messages\"[1]: tool messages are not supported (supported roles: system, user, "
            "assistant)");
  EXPECT_EQ(parse_error(R"([{"content": "x"}])"), "\"messages\"[0] needs a string \"role\"");
  EXPECT_EQ(parse_error(R"([{"role": "user", "content": 5}])"),
            "\"messages\"[0].content must be a string or a list of text parts, got 5");
  EXPECT_EQ(parse_error(R"([])"),
            "\"messages\" must be a non-empty list of {\"role\", \"content\"} objects, got []");
  EXPECT_EQ(parse_error(R"(["hi"])"),
            "\"messages\"[0] must be an object with \"role\" and \"content\", got \"hi\"");
  EXPECT_EQ(parse_error(R"([{"role": "assistant", "content": "", "tool_calls": []}])"),
            "\"messages\"[0]: tool calls are not supported");
  EXPECT_EQ(parse_error(R"([{"role": "assistant", "content": "", "reasoning_content": 1}])"),
            "\"messages\"[0].reasoning_content must be a string, got 1");
  // Text parts are joined by spaces, as the reference reads them; null content is empty.
  const std::vector<ChatMessage> m = parse_messages(json::parse(
      R"([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"},
          {"type": "text", "text": "b"}]}, {"role": "assistant", "content": null}])"));
  EXPECT_EQ(m[0].content, "a b");
  EXPECT_EQ(m[1].content, "");
}

std::string template_error(const json& config) {
  try {
    ChatTemplate::from_config(config.dump(), "cfg.json");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

TEST(Chat, RefusesTemplatesThatAreNotQwenChatMl) {
  EXPECT_EQ(template_error(json::object()),
            "[chat] cfg.json: no chat_template (conversations need the model's ChatML template)");
  EXPECT_EQ(
      template_error({{"chat_template",
                       "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"}}),
      "[chat] cfg.json: the chat_template is not ChatML (no <|im_start|>role ... <|im_end|> "
      "turns); supported: the ChatML templates of Qwen2, Qwen2.5 and Qwen3");
  EXPECT_EQ(template_error({{"chat_template",
                             "<|im_start|>{% generation %}{{ m }}{% endgeneration %}<|im_end|>"}}),
            "[chat] cfg.json: templates with {% generation %} blocks are not supported (supported: "
            "the ChatML templates of Qwen2, Qwen2.5 and Qwen3)");
  EXPECT_EQ(template_error({{"chat_template", 3}}),
            "[chat] cfg.json: chat_template must be a string");
  EXPECT_EQ(template_error(json::array()), "[chat] cfg.json: not a JSON object");
  EXPECT_THROW(ChatTemplate::load("/nonexistent"), std::invalid_argument);
}

TEST(Chat, RefusesConversationsTheReferenceCannotMask) {
  const ChatTemplate tpl = ChatTemplate::load(kDir);
  auto error = [&](const std::vector<ChatMessage>& m) -> std::string {
    try {
      tokenize_chat(golden(), tpl, m);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error({{"user", "x", {}}}),
            "no assistant message: the conversation supervises nothing");
  EXPECT_EQ(error({{"assistant", "x", {}}, {"user", "y", {}}}),
            "\"messages\"[0]: a conversation cannot start with the assistant");
  const ChatTemplate qwen3 = ChatTemplate::load(kDir + "tokenizer_config_qwen3.json");
  EXPECT_THROW(
      tokenize_chat(
          golden(), qwen3,
          {{"user", "q", {}}, {"assistant", "a", {}}, {"user", "r", {}}, {"assistant", "b", {}}}),
      std::invalid_argument);
}

}  // namespace
}  // namespace sprig::data

// Chat conversations to token ids with a loss mask (docs/tokenizer.md §2): Qwen's ChatML,
//   <|im_start|>{role}\n{content}<|im_end|>\n   per message,
// with the default system prompt its template declares when the conversation has none (Qwen2,
// Qwen2.5), or Qwen3's template (no default system prompt; a <think> block on the assistant turns
// after the last user message). The template is recognised from the chat_template text of
// tokenizer_config.json; any other template is refused, naming what is supported.
//
// The loss mask is the reference pipeline's for templates without {% generation %} blocks: an
// assistant message supervises every token from the end of the conversation rendered up to the
// message before it to the end of the conversation rendered up to it, i.e. its own
// "<|im_start|>assistant\n{content}<|im_end|>\n" tokens; every other token is 0. Rendering a
// prefix must reproduce the start of the full rendering, as there; a conversation where it does
// not (Qwen3 with assistant turns before the last user message) is refused.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace sprig::data {

struct ChatMessage {
  std::string role;  // system, user or assistant
  std::string content;
  std::optional<std::string> reasoning_content;  // assistant only; Qwen3's template renders it
};

// `messages` of a record: a list of {"role", "content"} objects (content a string, null, or a
// list of {"type": "text", "text"} parts joined by spaces, as the reference reads them). Throws
// std::invalid_argument naming the entry and the offending value.
std::vector<ChatMessage> parse_messages(const nlohmann::json& messages);

class ChatTemplate {
 public:
  enum class Kind { chatml, qwen3 };

  // From a tokenizer_config.json's text; `where` names it in messages.
  static ChatTemplate from_config(std::string_view text, const std::string& where);
  // DIR/tokenizer_config.json, or the file itself.
  static ChatTemplate load(const std::string& path);

  Kind kind() const { return kind_; }
  const std::optional<std::string>& default_system() const { return default_system_; }
  // The text of the first `count` messages as the template renders them without a generation
  // prompt (what apply_chat_template(messages[:count]) gives).
  std::string render(const std::vector<ChatMessage>& messages, size_t count) const;

 private:
  Kind kind_ = Kind::chatml;
  std::optional<std::string> default_system_;
};

struct ChatTokens {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> loss_mask;  // 1 on the assistant messages' tokens
};

// Throws std::invalid_argument when the conversation has no assistant message, starts with one, or
// its prefixes do not render as prefixes of it.
ChatTokens tokenize_chat(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                         const std::vector<ChatMessage>& messages);

}  // namespace sprig::data

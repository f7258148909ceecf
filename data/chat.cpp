// ChatML conversations to ids and loss masks (data/chat.h): reading messages, recognising the
// template of tokenizer_config.json, rendering conversation prefixes, placing each assistant
// message's span among the ids.
#include "data/chat.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <stdexcept>

#include "data/unicode_text.h"
#include "tensor/input_file.h"
#include "tensor/json_text.h"

namespace sprig::data {

namespace {

using nlohmann::json;

const std::string kStart = "<|im_start|>", kEnd = "<|im_end|>";

std::string entry(size_t i) { return "\"messages\"[" + std::to_string(i) + "]"; }

// A message's content as the reference reads it: a string, null (empty) or text parts.
std::string content_text(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return "";
  if (!content.is_array())
    throw std::invalid_argument(where + ".content must be a string or a list of text parts, got " +
                                content.dump());
  std::string text;
  bool first = true;
  for (const json& part : content) {
    if (!part.is_object() || !part.contains("text")) continue;
    if (!part["text"].is_string())
      throw std::invalid_argument(where + ".content: a part's \"text\" must be a string, got " +
                                  part["text"].dump());
    if (!first) text += ' ';
    text += part["text"].get<std::string>();
    first = false;
  }
  return text;
}

// The string of a Jinja literal's body: \n, \t, \\, \' and \" unescaped.
std::string unescape_literal(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
  }
  return out;
}

std::string strip_newlines_left(const std::string& s) {
  const size_t b = s.find_first_not_of('\n');
  return b == std::string::npos ? "" : s.substr(b);
}

std::string strip_newlines_right(const std::string& s) {
  const size_t e = s.find_last_not_of('\n');
  return e == std::string::npos ? "" : s.substr(0, e + 1);
}

std::string turn(const std::string& role, const std::string& content) {
  return kStart + role + "\n" + content + kEnd + "\n";
}

}  // namespace

std::vector<ChatMessage> parse_messages(const json& messages) {
  if (!messages.is_array() || messages.empty())
    throw std::invalid_argument(
        "\"messages\" must be a non-empty list of {\"role\", \"content\"} objects, got " +
        messages.dump().substr(0, 80));
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = entry(i);
    if (!m.is_object())
      throw std::invalid_argument(where + " must be an object with \"role\" and \"content\", got " +
                                  m.dump().substr(0, 80));
    if (!m.contains("role") || !m["role"].is_string())
      throw std::invalid_argument(where + " needs a string \"role\"");
    ChatMessage message;
    message.role = m["role"].get<std::string>();
    if (message.role == "tool")
      throw std::invalid_argument(where +
                                  ": tool messages are not supported (supported roles: "
                                  "system, user, assistant)");
    if (message.role != "system" && message.role != "user" && message.role != "assistant")
      throw std::invalid_argument(where + ": unknown role '" + message.role +
                                  "' (supported: system, user, assistant)");
    message.content = content_text(m.value("content", json()), where);
    if (m.contains("tool_calls"))
      throw std::invalid_argument(where + ": tool calls are not supported");
    if (message.role == "assistant" && m.contains("reasoning_content")) {
      const json& r = m["reasoning_content"];
      if (!r.is_string() && !r.is_null())
        throw std::invalid_argument(where + ".reasoning_content must be a string, got " + r.dump());
      message.reasoning_content = r.is_string() ? r.get<std::string>() : "";
    }
    out.push_back(std::move(message));
  }
  return out;
}

ChatTemplate ChatTemplate::from_config(std::string_view text, const std::string& where) {
  auto fail = [&](const std::string& what) -> std::invalid_argument {
    return std::invalid_argument("[chat] " + where + ": " + what);
  };
  json config;
  try {
    config = parse_json(text);
  } catch (const std::runtime_error& e) {
    throw fail(std::string("not valid JSON: ") + e.what());
  }
  if (!config.is_object()) throw fail("not a JSON object");
  if (!config.contains("chat_template"))
    throw fail("no chat_template (conversations need the model's ChatML template)");
  json source = config["chat_template"];
  if (source.is_array())  // [{"name": ..., "template": ...}, ...]: the default one
    for (const json& named : json(source))
      if (named.is_object() && named.value("name", "") == "default")
        source = named.value("template", json());
  if (!source.is_string()) throw fail("chat_template must be a string");
  const std::string tpl = source.get<std::string>();
  const std::string supported = "supported: the ChatML templates of Qwen2, Qwen2.5 and Qwen3";
  if (std::regex_search(tpl, std::regex(R"(\{%-?\s*generation\s*-?%\})")))
    throw fail("templates with {% generation %} blocks are not supported (" + supported + ")");
  if (tpl.find(kStart) == std::string::npos || tpl.find(kEnd) == std::string::npos)
    throw fail("the chat_template is not ChatML (no <|im_start|>role ... <|im_end|> turns); " +
               supported);
  ChatTemplate t;
  if (tpl.find("reasoning_content") != std::string::npos &&
      tpl.find("<think>") != std::string::npos) {
    t.kind_ = Kind::qwen3;
    return t;
  }
  // The default system prompt: a literal "<|im_start|>system\n...<|im_end|>" in the template.
  std::smatch m;
  if (std::regex_search(tpl, m, std::regex(R"(<\|im_start\|>system\\n([^'"]*?)<\|im_end\|>)")))
    t.default_system_ = unescape_literal(m[1].str());
  return t;
}

ChatTemplate ChatTemplate::load(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string file =
      fs::is_directory(path) ? (fs::path(path) / "tokenizer_config.json").string() : path;
  check_input_file(file, "tokenizer_config.json or its directory", "[chat] ");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::invalid_argument("[chat] cannot open " + file);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return from_config(text, file);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, size_t count) const {
  std::string out;
  const bool system_first = count > 0 && messages[0].role == "system";
  if (kind_ == Kind::chatml) {
    if (!system_first && default_system_) out += turn("system", *default_system_);
    for (size_t i = 0; i < count; ++i) out += turn(messages[i].role, messages[i].content);
    return out;
  }
  // Qwen3: think blocks on the assistant turns after the last user message (the last turn, and
  // those with reasoning).
  if (system_first) out += turn("system", messages[0].content);
  size_t last_query = count - 1;
  for (size_t i = count; i-- > 0;) {
    const std::string& c = messages[i].content;
    const bool tool_response = c.rfind("<tool_response>", 0) == 0 && c.size() >= 16 &&
                               c.compare(c.size() - 16, 16, "</tool_response>") == 0;
    if (messages[i].role == "user" && !tool_response) {
      last_query = i;
      break;
    }
  }
  for (size_t i = 0; i < count; ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      out += turn(m.role, m.content);
    } else if (m.role == "assistant") {
      std::string content = m.content, reasoning;
      if (m.reasoning_content) {
        reasoning = *m.reasoning_content;
      } else if (const size_t close = content.find("</think>"); close != std::string::npos) {
        reasoning = strip_newlines_right(content.substr(0, close));
        if (const size_t open = reasoning.rfind("<think>"); open != std::string::npos)
          reasoning = reasoning.substr(open + 7);
        reasoning = strip_newlines_left(reasoning);
        content = strip_newlines_left(content.substr(content.rfind("</think>") + 8));
      }
      const bool think = (count > 0 && i > last_query) && (i + 1 == count || !reasoning.empty());
      if (think)
        out += kStart + "assistant\n<think>\n" +
               strip_newlines_left(strip_newlines_right(reasoning)) + "\n</think>\n\n" +
               strip_newlines_left(content);
      else
        out += kStart + "assistant\n" + content;
      out += kEnd + "\n";
    }
  }
  return out;
}

ChatTokens tokenize_chat(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                         const std::vector<ChatMessage>& messages) {
  bool any_assistant = false;
  for (const ChatMessage& m : messages) {
    any_assistant = any_assistant || m.role == "assistant";
    if (!is_valid_utf8(m.content) || !is_valid_utf8(m.reasoning_content.value_or("")))
      throw std::invalid_argument("a message's text is not valid UTF-8");
  }
  if (!any_assistant)
    throw std::invalid_argument("no assistant message: the conversation supervises nothing");
  // The span of a first message starts after the rendering of no message at all, which the
  // reference's apply_chat_template refuses.
  if (messages[0].role == "assistant")
    throw std::invalid_argument(entry(0) + ": a conversation cannot start with the assistant");
  const size_t n = messages.size();
  const std::string full = chat_template.render(messages, n);
  ChatTokens out;
  std::vector<AddedMatch> added;
  tokenizer.encode_into(full, out.input_ids, &added);
  std::map<size_t, size_t> boundaries;  // messages rendered -> ids they end at
  auto boundary = [&](size_t k) {
    if (k == n) return out.input_ids.size();
    if (const auto it = boundaries.find(k); it != boundaries.end()) return it->second;
    const std::string prefix = chat_template.render(messages, k);
    if (full.compare(0, prefix.size(), prefix) != 0)
      throw std::invalid_argument(
          "rendering the first " + std::to_string(k) +
          " messages alone does not reproduce the start of the whole conversation (Qwen3's "
          "template renders assistant turns before the last user message differently), so the "
          "assistant tokens cannot be located");
    size_t index = out.input_ids.size();
    if (prefix.size() < full.size()) {
      const auto at = std::find_if(added.begin(), added.end(),
                                   [&](const AddedMatch& a) { return a.byte == prefix.size(); });
      if (at == added.end())
        throw std::invalid_argument("message " + std::to_string(k) +
                                    " does not start with an added token (<|im_start|>)");
      index = at->index;
    }
    boundaries[k] = index;
    return index;
  };
  out.loss_mask.assign(out.input_ids.size(), 0);
  for (size_t i = 0; i < n; ++i) {
    if (messages[i].role != "assistant") continue;
    const size_t begin = boundary(i), end = boundary(i + 1);
    std::fill(out.loss_mask.begin() + static_cast<std::ptrdiff_t>(begin),
              out.loss_mask.begin() + static_cast<std::ptrdiff_t>(std::max(begin, end)), 1);
  }
  return out;
}

}  // namespace sprig::data

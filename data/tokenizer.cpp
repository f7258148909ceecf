// Tokenizer encode and decode (data/tokenizer.h; loading is tokenizer_json.cpp): added-token
// matching, normalization, pre-tokenization, BPE by merge rank with a per-thread word cache, and
// byte-level decoding.
#include "data/tokenizer.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <queue>
#include <thread>

#include "data/tokenizer_impl.h"

namespace sprig::data {

void MergeTable::build(const std::vector<std::pair<uint64_t, Merge>>& merges) {
  size_t capacity = 16;
  shift_ = 60;
  while (capacity < 2 * merges.size()) {
    capacity *= 2;
    --shift_;
  }
  keys_.assign(capacity, ~uint64_t{0});  // ~0 packs ids -1, -1: never a real pair
  values_.assign(capacity, Merge{});
  for (const auto& [k, m] : merges) {
    size_t s = slot(k);
    while (keys_[s] != ~uint64_t{0} && keys_[s] != k) s = (s + 1) & (capacity - 1);
    if (keys_[s] == k) continue;  // a repeated merge keeps its first (lowest) rank, as HF does
    keys_[s] = k;
    values_[s] = m;
  }
}

MergeTable::Merge MergeTable::find(int32_t left, int32_t right) const {
  const uint64_t k = key(left, right);
  for (size_t s = slot(k);; s = (s + 1) & (keys_.size() - 1)) {
    if (keys_[s] == k) return values_[s];
    if (keys_[s] == ~uint64_t{0}) return {};
  }
}

void AddedMatcher::add(const AddedToken& token) {
  tokens_.push_back(token);
  auto& list = by_first_byte_[static_cast<unsigned char>(token.content[0])];
  list.push_back(tokens_.size() - 1);
  std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
    return tokens_[a].content.size() > tokens_[b].content.size();
  });
}

const AddedToken* AddedMatcher::match(std::string_view text, size_t i) const {
  for (size_t k : by_first_byte_[static_cast<unsigned char>(text[i])]) {
    const std::string& c = tokens_[k].content;
    if (text.size() - i >= c.size() && std::memcmp(text.data() + i, c.data(), c.size()) == 0)
      return &tokens_[k];
  }
  return nullptr;
}

namespace {

// Splits `text` around the added tokens of `matcher` as HF's AddedVocabulary does: matches
// leftmost-longest, an lstrip token taking the whitespace before it (not past the previous
// match), an rstrip token the whitespace after it. Calls on_text(piece) and on_token(token, byte).
template <class OnText, class OnToken>
void split_added(std::string_view text, const AddedMatcher& matcher, OnText on_text,
                 OnToken on_token) {
  if (matcher.empty()) {
    on_text(text);
    return;
  }
  size_t done = 0;  // end of the last match
  for (size_t i = 0; i < text.size();) {
    const AddedToken* token = matcher.match(text, i);
    if (token == nullptr) {
      ++i;
      continue;
    }
    size_t start = i, stop = i + token->content.size();
    if (token->lstrip) {
      size_t j = start;
      while (j > done) {
        size_t k = j;
        if (!is_unicode_whitespace(previous_code_point(text, k))) break;
        j = k;
      }
      start = j;
    }
    if (token->rstrip) {
      while (stop < text.size()) {
        size_t k = stop;
        if (!is_unicode_whitespace(next_code_point(text, k))) break;
        stop = k;
      }
    }
    if (start > done) on_text(text.substr(done, start - done));
    on_token(*token, start);
    done = i = stop;
  }
  if (done < text.size()) on_text(text.substr(done));
}

// Each thread's cache of words already encoded, for one tokenizer at a time.
struct WordCache {
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  static constexpr size_t kMaxWords = 1 << 16, kMaxWordBytes = 128;
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> words;
};

// BPE of one word: the lowest-ranked adjacent pair is merged first, the leftmost of equal ranks
// (HF's Word::merge_all), until no pair of the word is a merge.
void bpe(const Tokenizer::Impl& t, std::string_view word, std::vector<int32_t>& out) {
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // -1 at the ends
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (char ch : word) {
    const int32_t id = t.byte_ids[static_cast<unsigned char>(ch)];
    const int32_t at = static_cast<int32_t>(symbols.size());
    if (id >= 0) {
      symbols.push_back({id, at - 1, at + 1});
    } else if (t.unk_id) {  // a byte the vocabulary lacks: the unknown token, or nothing
      symbols.push_back({*t.unk_id, at - 1, at + 1});
    }
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;
  struct Candidate {
    int32_t rank, pos, merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    const MergeTable::Merge m = t.merges.find(symbols[pos].id, symbols[next].id);
    if (m.rank >= 0) queue.push({m.rank, pos, m.merged});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);
  std::vector<bool> removed(symbols.size(), false);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& s = symbols[c.pos];
    if (removed[c.pos] || s.next < 0) continue;
    if (t.merges.find(s.id, symbols[s.next].id).merged != c.merged) continue;  // stale
    const int32_t gone = s.next;
    s.id = c.merged;
    s.next = symbols[gone].next;
    if (s.next >= 0) symbols[s.next].prev = c.pos;
    removed[gone] = true;
    if (s.prev >= 0) consider(s.prev);
    consider(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

void encode_word(const Tokenizer::Impl& t, std::string_view word, std::vector<int32_t>& out) {
  if (word.size() == 1) {
    const int32_t id = t.byte_ids[static_cast<unsigned char>(word[0])];
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  thread_local WordCache cache;
  if (cache.owner != t.instance) {
    cache.words.clear();
    cache.owner = t.instance;
  }
  if (const auto it = cache.words.find(word); it != cache.words.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  const size_t start = out.size();
  const auto whole = t.ignore_merges ? t.vocab_bytes.find(std::string(word)) : t.vocab_bytes.end();
  if (whole != t.vocab_bytes.end())
    out.push_back(whole->second);
  else
    bpe(t, word, out);
  if (word.size() <= WordCache::kMaxWordBytes) {
    if (cache.words.size() >= WordCache::kMaxWords) cache.words.clear();
    cache.words.emplace(word, std::vector<int32_t>(out.begin() + start, out.end()));
  }
}

void pre_tokenize(const Tokenizer::Impl& t, size_t step, std::string_view piece,
                  std::vector<int32_t>& out) {
  if (step == t.steps.size()) {
    encode_word(t, piece, out);
    return;
  }
  t.steps[step].regex.split(piece,
                            [&](std::string_view sub) { pre_tokenize(t, step + 1, sub, out); });
}

// A piece between raw added tokens: normalized, split around the normalized added tokens, then
// pre-tokenized and encoded.
void encode_text(const Tokenizer::Impl& t, std::string_view piece, std::vector<int32_t>& out) {
  const std::string normalized = t.nfc ? nfc(piece) : std::string();
  split_added(
      t.nfc ? std::string_view(normalized) : piece, t.normalized_added,
      [&](std::string_view text) { pre_tokenize(t, 0, text, out); },
      [&](const AddedToken& token, size_t) { out.push_back(token.id); });
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

void Tokenizer::encode_into(std::string_view text, std::vector<int32_t>& ids,
                            std::vector<AddedMatch>* added) const {
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = repair_utf8(text);
    text = repaired;
  }
  split_added(
      text, impl_->raw_added, [&](std::string_view piece) { encode_text(*impl_, piece, ids); },
      [&](const AddedToken& token, size_t byte) {
        if (added) added->push_back({byte, ids.size()});
        ids.push_back(token.id);
      });
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  encode_into(text, ids);
  return ids;
}

std::vector<std::vector<int32_t>> Tokenizer::encode_batch(
    const std::vector<std::string_view>& texts, int threads) const {
  std::vector<std::vector<int32_t>> out(texts.size());
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), texts.size()));
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  auto work = [&] {
    try {
      for (size_t i; !failed && (i = next++) < texts.size();) encode_into(texts[i], out[i]);
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (std::thread& th : pool) th.join();
  if (error) std::rethrow_exception(error);
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || id >= impl_->vocab_size) continue;
    const uint8_t kind = impl_->id_kind[id];
    if (kind == 0 || (kind == 2 && skip_special_tokens)) continue;
    bytes += impl_->id_bytes[id];
  }
  return is_valid_utf8(bytes) ? bytes : repair_utf8(bytes);
}

int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  for (const AddedToken& a : impl_->added)
    if (a.content == token) return a.id;
  const auto it = impl_->vocab_tokens.find(std::string(token));
  if (it == impl_->vocab_tokens.end()) return std::nullopt;
  return it->second;
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }

}  // namespace sprig::data

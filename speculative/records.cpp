#include "speculative/records.h"

#include <limits>
#include <stdexcept>

#include "tensor/names.h"

namespace sprig::speculative {

namespace {

using json = nlohmann::json;

struct RecordParser {
  const std::string& where;

  [[noreturn]] void fail(const std::string& message) const {
    throw std::runtime_error(where + ": " + message);
  }

  // A misspelt key (say "lossmask") is refused rather than left unread.
  void check_keys(const json& j, const std::vector<std::string>& keys,
                  const std::string& what = "") const {
    for (const auto& entry : j.items())
      if (const std::string why = unknown_record_key(entry.key(), keys); !why.empty())
        fail(what + why);
  }

  std::vector<int64_t> integers(const json& j, const std::string& what) const {
    if (!j.is_array()) fail("\"" + what + "\" must be a list");
    std::vector<int64_t> out;
    for (const json& v : j) {
      if (!v.is_number_integer()) fail("\"" + what + "\" holds a non-integer " + v.dump());
      // Read as int64_t, JSON's unsigned integers past 2^63 would wrap to negative values.
      if (v.is_number_unsigned() && v.get<uint64_t>() > std::numeric_limits<int64_t>::max())
        fail("\"" + what + "\"[" + std::to_string(out.size()) + "] = " + v.dump() +
             " does not fit in 64 bits");
      out.push_back(v.get<int64_t>());
    }
    return out;
  }

  // One sequence's ids and loss mask, appended to the row.
  void sequence(const json& j, const std::string& what, int64_t vocab, std::vector<int64_t>& ids,
                std::vector<int64_t>& mask) const {
    if (!j.is_object() || !j.contains("input_ids")) fail(what + " needs \"input_ids\"");
    if (!what.empty())  // "documents[d]." names a document: "documents[d]: unknown key ..."
      check_keys(j, {"input_ids", "loss_mask"}, what.substr(0, what.size() - 1) + ": ");
    const std::vector<int64_t> seq = integers(j["input_ids"], what + "input_ids");
    if (seq.empty()) fail("\"" + what + "input_ids\" is empty");
    for (size_t t = 0; t < seq.size(); ++t)
      if (seq[t] < 0 || seq[t] >= vocab)
        fail("\"" + what + "input_ids\"[" + std::to_string(t) + "] = " + std::to_string(seq[t]) +
             " is not a token id in [0, " + std::to_string(vocab) + ")");
    std::vector<int64_t> lm(seq.size(), 1);
    if (j.contains("loss_mask")) {
      lm = integers(j["loss_mask"], what + "loss_mask");
      if (lm.size() != seq.size())
        fail("\"" + what + "loss_mask\" has " + std::to_string(lm.size()) + " entries for " +
             std::to_string(seq.size()) + " tokens");
      for (const int64_t m : lm)
        if (m != 0 && m != 1) fail("\"" + what + "loss_mask\" holds " + std::to_string(m));
    }
    ids.insert(ids.end(), seq.begin(), seq.end());
    mask.insert(mask.end(), lm.begin(), lm.end());
  }
};

Tensor row_tensor(const std::vector<int64_t>& values) {
  return Tensor::from_vector(values, {1, static_cast<int64_t>(values.size())});
}

}  // namespace

DraftRecord parse_draft_record(const json& rec, int64_t vocab, int64_t block_size,
                               const std::string& where) {
  const RecordParser p{where};
  if (!rec.is_object()) p.fail("a record must be a JSON object");
  p.check_keys(rec, {"input_ids", "loss_mask", "documents", "anchors", "keep", "prefix_lengths"});
  if (rec.contains("input_ids") == rec.contains("documents"))
    p.fail("a record needs exactly one of \"input_ids\" or \"documents\"");
  DraftRecord r;
  std::vector<int64_t> ids, mask;
  if (rec.contains("input_ids")) {
    p.sequence(rec, "", vocab, ids, mask);
  } else {
    const json& docs = rec["documents"];
    if (!docs.is_array() || docs.empty())
      p.fail("\"documents\" must be a non-empty list of {\"input_ids\", \"loss_mask\"}");
    std::vector<int64_t> pos, remaining, lens;
    for (size_t d = 0; d < docs.size(); ++d) {
      const size_t before = ids.size();
      p.sequence(docs[d], "documents[" + std::to_string(d) + "].", vocab, ids, mask);
      const auto n = static_cast<int64_t>(ids.size() - before);
      for (int64_t t = 0; t < n; ++t) {
        pos.push_back(t);
        remaining.push_back(n - 1 - t);
      }
      lens.push_back(n);
    }
    r.rows.position_ids = row_tensor(pos);
    r.rows.doc_remaining = row_tensor(remaining);
    r.rows.doc_lens = {lens};
  }
  r.rows.input_ids = row_tensor(ids);
  r.rows.loss_mask = row_tensor(mask);

  if (!rec.contains("anchors")) {
    if (rec.contains("keep") || rec.contains("prefix_lengths"))
      p.fail("\"keep\" and \"prefix_lengths\" describe given \"anchors\", and there are none");
    return r;
  }
  const std::vector<int64_t> anchors = p.integers(rec["anchors"], "anchors");
  if (anchors.empty()) p.fail("\"anchors\" is empty");
  const auto n = static_cast<int64_t>(anchors.size());
  std::vector<int64_t> keep(anchors.size(), 1);
  if (rec.contains("keep")) {
    const json& k = rec["keep"];
    if (!k.is_array() || k.size() != anchors.size())
      p.fail("\"keep\" must be a list of " + std::to_string(n) + " bools, one per anchor");
    for (size_t j = 0; j < k.size(); ++j) {
      if (!k[j].is_boolean()) p.fail("\"keep\" holds a non-bool " + k[j].dump());
      keep[j] = k[j].get<bool>() ? 1 : 0;
    }
  }
  r.anchors = Anchors{Tensor::from_vector(anchors, {1, n}),
                      Tensor::from_vector(keep, {1, n}, DType::boolean)};
  try {
    check_anchors(r.rows, *r.anchors, block_size);
  } catch (const std::invalid_argument& e) {
    p.fail(e.what());
  }
  if (rec.contains("prefix_lengths")) {
    const std::vector<int64_t> l = p.integers(rec["prefix_lengths"], "prefix_lengths");
    if (l.size() != anchors.size())
      p.fail("\"prefix_lengths\" has " + std::to_string(l.size()) + " entries for " +
             std::to_string(n) + " anchors");
    for (const int64_t v : l)
      if (v < 1 || v >= block_size)
        p.fail("prefix length " + std::to_string(v) + " is outside [1, " +
               std::to_string(block_size - 1) + "]");
    r.prefix_lengths = Tensor::from_vector(l, {1, n});
  }
  return r;
}

}  // namespace sprig::speculative

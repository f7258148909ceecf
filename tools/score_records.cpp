// The records of `sprig score` (tools/score_records.h).
#include "tools/score_records.h"

#include <stdexcept>

#include "data/prefix_tree.h"
#include "tensor/names.h"

namespace sprig::tools {

using json = nlohmann::json;

namespace {

// A list of token ids in [0, vocab), non-empty unless `may_be_empty`.
std::vector<int32_t> id_list(const json& j, const char* what, int64_t vocab,
                             const std::string& where, bool may_be_empty = false) {
  if (!j.is_array() || (j.empty() && !may_be_empty))
    throw std::runtime_error(where + ": \"" + what + "\" must be a " +
                             (may_be_empty ? "" : "non-empty ") + "list of token ids");
  std::vector<int32_t> ids;
  for (const json& v : j) {
    if (!v.is_number_integer())
      throw std::runtime_error(where + ": \"" + what + "\" holds a non-integer " + v.dump());
    // Read as uint64_t, a negative id wraps past any vocabulary (and 2^64 - 1 stays itself).
    if (v.get<uint64_t>() >= static_cast<uint64_t>(vocab))
      throw std::runtime_error(where + ": token id " + v.dump() + " in \"" + what +
                               "\" is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    ids.push_back(v.get<int32_t>());  // vocab fits 32 bits
  }
  return ids;
}

}  // namespace

data::Batch parse_score_record(const json& rec, int64_t vocab, const std::string& where,
                               bool supervise_first_token) {
  for (const auto& entry : rec.items())
    if (const std::string why = unknown_record_key(
            entry.key(), {"input_ids", "documents", "prompt_ids", "completions"});
        !why.empty())
      throw std::runtime_error(where + ": " + why);
  int layouts = 0;
  for (const char* key : {"input_ids", "documents", "prompt_ids"}) layouts += rec.contains(key);
  if (layouts > 1)
    throw std::runtime_error(where +
                             ": a record holds one layout: \"input_ids\", \"documents\", or "
                             "\"prompt_ids\" with \"completions\", not several");
  data::Corpus corpus;
  corpus.sources = {where};
  // A sequence with its next-token labels (the last token predicts nothing).
  const auto sequence = [](std::vector<int32_t> ids) {
    data::Document doc;
    doc.labels.assign(ids.begin() + 1, ids.end());
    doc.labels.push_back(data::kIgnoreIndex);
    doc.input_ids = std::move(ids);
    return doc;
  };
  if (rec.contains("input_ids")) {
    corpus.docs.push_back(sequence(id_list(rec["input_ids"], "input_ids", vocab, where)));
  } else if (rec.contains("documents")) {
    const json& docs = rec["documents"];
    if (!docs.is_array() || docs.empty())
      throw std::runtime_error(where + ": \"documents\" must be a non-empty list of id lists");
    for (const json& d : docs)
      corpus.docs.push_back(sequence(id_list(d, "documents", vocab, where)));
  } else if (rec.contains("prompt_ids") && rec.contains("completions")) {
    data::RolloutGroup group;
    // An empty prompt folds as training folds it: completions as independent sequences.
    group.prompt_ids = id_list(rec["prompt_ids"], "prompt_ids", vocab, where, true);
    if (!rec["completions"].is_array() || rec["completions"].empty())
      throw std::runtime_error(where + ": \"completions\" must be a non-empty list of id lists");
    for (const json& c : rec["completions"])
      group.completions.push_back(id_list(c, "completions", vocab, where));
    try {
      if (supervise_first_token) data::check_first_tokens_predictable(group);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(where + ": " + e.what());
    }
    corpus.docs.push_back(data::fold(group));
    corpus.folded = true;
  } else {
    throw std::runtime_error(where +
                             ": a record needs \"input_ids\", \"documents\", or "
                             "\"prompt_ids\" and \"completions\"");
  }
  data::PackPlan plan;
  plan.rows.emplace_back();
  for (size_t i = 0; i < corpus.docs.size(); ++i) {
    plan.rows[0].push_back({static_cast<int64_t>(i), corpus.docs[i].size()});
    plan.seq_len += corpus.docs[i].size();
  }
  return data::collate(corpus, plan, {0}, /*pad_id=*/0);
}

}  // namespace sprig::tools

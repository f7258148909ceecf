// Documents: the unit the packers place into rows. A document is token ids plus what supervises
// them, in one of two forms (docs/semantics.md §3.1), and, for a folded rollout group, its prefix
// tree. A Corpus is every document of a split held in memory, with where each one came from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sprig::data {

inline constexpr int32_t kIgnoreIndex = -100;  // label of an unsupervised position

// How a document says which positions are trained on.
enum class TargetForm {
  loss_mask,  // unshifted: loss_mask[t] = 1 iff token t is supervised (DFlash, docs/semantics.md
              // §4.5)
  labels,     // pre-shifted: labels[t] is the token position t predicts, or kIgnoreIndex (SFT)
};

struct Document {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> labels;     // labels form: one per input id
  std::vector<int32_t> loss_mask;  // loss_mask form: one per input id, or empty = all ones
  // Folded rollout group only (docs/semantics.md §1): node lengths [P, C_0, ..., C_{N-1}]; empty
  // otherwise.
  std::vector<int32_t> node_lengths;
  // Policy-gradient rollouts only, one per input id (empty otherwise): the advantage of the
  // completion holding the token (0 on the prompt), and the sampling policy's log-prob of the token
  // (0 on the prompt).
  std::vector<float> advantages;
  std::vector<float> old_logprobs;
  int32_t source = 0;  // index into Corpus::sources
  int64_t record = 0;  // 1-based line of a JSONL file, or 0-based document index of a shard

  int64_t size() const { return static_cast<int64_t>(input_ids.size()); }
};

struct Corpus {
  TargetForm form = TargetForm::labels;
  std::vector<Document> docs;
  std::vector<std::string> sources;  // file names
  bool folded = false;               // documents are folded rollout groups
  bool line_numbered = true;         // records are JSONL lines (else shard documents)

  // "docs.jsonl:17" or "train.bin document 17", for error messages.
  std::string where(const Document& doc) const {
    return sources.at(doc.source) + (line_numbered ? ":" : " document ") +
           std::to_string(doc.record);
  }
};

}  // namespace sprig::data

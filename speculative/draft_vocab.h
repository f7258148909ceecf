// Draft vocabularies (docs/semantics.md §9.10): a draft whose head covers the `size` target ids
// supervised most often in its training data instead of the whole vocabulary, its draft ids mapped
// back to target ids by `draft_to_target` (ascending). `sprig data draft-vocab` writes the file
// the recipes read (draft.vocab):
//   {"format": "sprig-draft-vocab", "vocab_size": V, "draft_to_target": [ascending target ids],
//    "coverage": the fraction of the counted tokens they hold}
// and a draft's checkpoint holds the map as the serving engines read it, d2t and t2d.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace sprig::speculative {

struct DraftVocabulary {
  int64_t vocab_size = 0;                // the target's
  std::vector<int64_t> draft_to_target;  // ascending target ids, one per draft id
  double coverage = 1;                   // of the counted tokens, where it was counted

  // The target's whole vocabulary, draft id i standing for target id i.
  static DraftVocabulary whole(int64_t vocab_size);
  int64_t size() const { return static_cast<int64_t>(draft_to_target.size()); }
  bool reduced() const { return size() < vocab_size; }
  // Throws "[draft vocab] <label>: ..." unless the ids are ascending, distinct, in
  // [0, vocab_size) and at least one.
  void check(const std::string& label) const;
  // The engines' tensors: d2t (size) i64, draft id i is target id i + d2t[i] (vLLM, SGLang);
  // t2d (vocab_size) bool, true on the draft's ids.
  Tensor d2t() const;
  Tensor t2d() const;
  // What a draft's checkpoint and export hold beside its weights: d2t and t2d of a reduced
  // vocabulary, nothing for the whole one (the engines then map draft id i to target id i).
  std::map<std::string, Tensor> tensors() const;
  // draft_to_target as a tensor (size) i64 on the CPU, to gather a head's rows or logits' columns.
  Tensor target_ids() const;
  // The draft id of each target id in `ids`, -1 for an id outside the vocabulary.
  std::vector<int64_t> draft_ids(const std::vector<int64_t>& ids) const;
  nlohmann::json to_json() const;
  // The ids as a checkpoint's trainer state records them, for a resume to compare: null for the
  // whole vocabulary.
  nlohmann::json recorded_ids() const;
};

// The `size` ids with the highest counts (`counts`: one per target id; ties to the lower id), the
// lowest ids never counted topping them up when fewer ids were counted, in ascending order.
DraftVocabulary most_frequent(const std::vector<int64_t>& counts, int64_t size);

// The file at `path`; throws "[draft vocab] <path>: ..." for another format, bad ids or a
// vocab_size other than `vocab_size` (the target's).
DraftVocabulary read_draft_vocabulary(const std::string& path, int64_t vocab_size);

// The map of a checkpoint's d2t (and t2d, when given: it must agree); `label` names it in errors.
DraftVocabulary draft_vocabulary_of(const Tensor& d2t, const Tensor& t2d, int64_t vocab_size,
                                    const std::string& label);

}  // namespace sprig::speculative

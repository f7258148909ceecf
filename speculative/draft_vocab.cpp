#include "speculative/draft_vocab.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "tensor/json_text.h"

namespace sprig::speculative {

namespace {

constexpr const char* kFormat = "sprig-draft-vocab";

[[noreturn]] void fail(const std::string& label, const std::string& message) {
  throw std::runtime_error("[draft vocab] " + label + ": " + message);
}

}  // namespace

DraftVocabulary DraftVocabulary::whole(int64_t vocab_size) {
  DraftVocabulary v;
  v.vocab_size = vocab_size;
  v.draft_to_target.resize(static_cast<size_t>(vocab_size));
  std::iota(v.draft_to_target.begin(), v.draft_to_target.end(), 0);
  return v;
}

void DraftVocabulary::check(const std::string& label) const {
  if (draft_to_target.empty()) fail(label, "the draft vocabulary is empty");
  for (size_t i = 0; i < draft_to_target.size(); ++i) {
    const int64_t id = draft_to_target[i];
    if (id < 0 || id >= vocab_size)
      fail(label, "draft id " + std::to_string(i) + " maps to " + std::to_string(id) +
                      ", outside the target's vocabulary [0, " + std::to_string(vocab_size) + ")");
    if (i > 0 && id <= draft_to_target[i - 1])
      fail(label, "the target ids must be ascending and distinct: draft id " + std::to_string(i) +
                      " maps to " + std::to_string(id) + " after " +
                      std::to_string(draft_to_target[i - 1]));
  }
}

Tensor DraftVocabulary::d2t() const {
  std::vector<int64_t> offsets(draft_to_target);
  for (size_t i = 0; i < offsets.size(); ++i) offsets[i] -= static_cast<int64_t>(i);
  return Tensor::from_vector(offsets, {size()});
}

Tensor DraftVocabulary::t2d() const {
  Tensor t = Tensor::zeros({vocab_size}, DType::boolean);
  bool* p = t.data<bool>();
  for (int64_t id : draft_to_target) p[id] = true;
  return t;
}

std::map<std::string, Tensor> DraftVocabulary::tensors() const {
  if (!reduced()) return {};
  return {{"d2t", d2t()}, {"t2d", t2d()}};
}

Tensor DraftVocabulary::target_ids() const {
  return Tensor::from_vector(draft_to_target, {size()});
}

std::vector<int64_t> DraftVocabulary::draft_ids(const std::vector<int64_t>& ids) const {
  if (!reduced()) return ids;
  std::vector<int64_t> out(ids.size(), -1);
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto it = std::lower_bound(draft_to_target.begin(), draft_to_target.end(), ids[i]);
    if (it != draft_to_target.end() && *it == ids[i]) out[i] = it - draft_to_target.begin();
  }
  return out;
}

nlohmann::json DraftVocabulary::to_json() const {
  return {{"format", kFormat},
          {"vocab_size", vocab_size},
          {"draft_vocab_size", size()},
          {"coverage", coverage},
          {"draft_to_target", draft_to_target}};
}

nlohmann::json DraftVocabulary::recorded_ids() const {
  return reduced() ? nlohmann::json(draft_to_target) : nlohmann::json();
}

DraftVocabulary most_frequent(const std::vector<int64_t>& counts, int64_t size) {
  const auto V = static_cast<int64_t>(counts.size());
  if (size < 1 || size > V)
    throw std::invalid_argument("[draft vocab] the draft vocabulary size must be in [1, " +
                                std::to_string(V) + "] (the target's vocabulary), got " +
                                std::to_string(size));
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  // Counted ids by descending count (stable: ties keep the lower id first), then the rest by id.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return counts[static_cast<size_t>(a)] > counts[static_cast<size_t>(b)];
  });
  DraftVocabulary v;
  v.vocab_size = V;
  v.draft_to_target.assign(order.begin(), order.begin() + size);
  std::sort(v.draft_to_target.begin(), v.draft_to_target.end());
  double kept = 0, total = 0;
  for (int64_t c : counts) total += static_cast<double>(c);
  for (int64_t id : v.draft_to_target) kept += static_cast<double>(counts[static_cast<size_t>(id)]);
  v.coverage = total > 0 ? kept / total : 1;
  return v;
}

DraftVocabulary read_draft_vocabulary(const std::string& path, int64_t vocab_size) {
  const nlohmann::json j = read_json_file(path);
  if (!j.is_object() || j.value("format", "") != kFormat)
    fail(path, "is not a draft vocabulary (a JSON object with \"format\": \"" +
                   std::string(kFormat) + "\", as sprig data draft-vocab writes)");
  DraftVocabulary v;
  try {
    v.vocab_size = j.at("vocab_size").get<int64_t>();
    v.draft_to_target = j.at("draft_to_target").get<std::vector<int64_t>>();
    v.coverage = j.value("coverage", 1.0);
  } catch (const nlohmann::json::exception& e) {
    fail(path, json_error_text(e));
  }
  if (v.vocab_size != vocab_size)
    fail(path, "it maps a vocabulary of " + std::to_string(v.vocab_size) + " ids, the target has " +
                   std::to_string(vocab_size));
  v.check(path);
  return v;
}

DraftVocabulary draft_vocabulary_of(const Tensor& d2t, const Tensor& t2d, int64_t vocab_size,
                                    const std::string& label) {
  if (d2t.dim() != 1)
    fail(label, "d2t must be a list of offsets, got shape " + shape_str(d2t.shape()));
  DraftVocabulary v;
  v.vocab_size = vocab_size;
  v.draft_to_target = d2t.to(Device::cpu(), DType::i64).contiguous().to_vector<int64_t>();
  for (size_t i = 0; i < v.draft_to_target.size(); ++i)
    v.draft_to_target[i] += static_cast<int64_t>(i);
  v.check(label);
  if (t2d.defined()) {
    const Tensor mine = v.t2d();
    if (t2d.shape() != mine.shape() ||
        t2d.to(Device::cpu(), DType::boolean).contiguous().to_vector<int32_t>() !=
            mine.to_vector<int32_t>())
      fail(label, "t2d does not mark the target ids d2t maps to");
  }
  return v;
}

}  // namespace sprig::speculative

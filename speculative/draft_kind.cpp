#include "speculative/draft_kind.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace sprig::speculative {

const std::vector<const DraftKind*>& draft_kinds() {
  static const std::vector<const DraftKind*> kinds = {&dflash_kind(), &domino_kind(),
                                                      &jetspec_kind()};
  return kinds;
}

const DraftKind* find_draft_kind(std::string_view name) {
  for (const DraftKind* kind : draft_kinds())
    if (kind->name() == name) return kind;
  return nullptr;
}

std::string draft_kind_names() {
  std::string names;
  for (const DraftKind* kind : draft_kinds())
    names += (names.empty() ? "" : ", ") + std::string(kind->name());
  return names;
}

const DraftKind& DraftConfig::kind() const {
  for (const DraftKind* kind : draft_kinds())
    if (kind->is_kind_of(*this)) return *kind;
  throw std::logic_error("[draft] a draft config of no kind");  // check() refuses such configs
}

void check_draft_kind(const DraftConfig& draft, const DraftKind& kind, const std::string& label) {
  if (kind.is_kind_of(draft)) return;
  throw std::invalid_argument("[draft] " + label + " is a " + std::string(draft.kind().name()) +
                              " draft: " + std::string(kind.requirement()));
}

std::vector<DraftVariant> DraftKind::variants(int64_t /*hidden_size*/) const {
  return {{std::string(name()), "", {}}};
}

std::vector<int64_t> DraftKind::drafts(const DFlashDraft& draft, const Tensor& /*hidden*/,
                                       const Tensor& base_logits, int64_t /*anchor*/,
                                       const TokenEmbedding& /*embed*/,
                                       bool /*correction_head*/) const {
  const int64_t bs = base_logits.size(0), first = bs - drafts_per_block(draft.config(), bs);
  std::vector<int64_t> ids =
      argmax(base_logits.narrow(0, first, bs - first), 1).to(Device::cpu()).to_vector<int64_t>();
  for (int64_t& id : ids) id = draft.vocabulary().draft_to_target[static_cast<size_t>(id)];
  return ids;
}

DraftConfig DraftKind::exported(const DraftConfig& draft, const ServingExport& how) const {
  if (how.drop_correction_head) {
    std::string with_heads;  // the kinds whose drafts have a head
    for (const DraftKind* kind : draft_kinds())
      if (!kind->projector_type().empty())
        with_heads += (with_heads.empty() ? "" : " or ") + std::string(kind->title());
    throw std::invalid_argument("[serve] --drop-correction-head: this is a " + std::string(name()) +
                                " draft; only a " + with_heads + " draft has a correction head");
  }
  return draft;
}

std::string DraftSetting::refusal(double value) const {
  if (!std::isfinite(value)) return "must be a finite number";
  if ((min_excluded ? value > min : value >= min) && value <= max) return "";
  const auto number = [this](double v) {
    std::ostringstream out;
    if (type == Type::number)
      out << v;
    else
      out << static_cast<int64_t>(v);
    return out.str();
  };
  return (max == std::numeric_limits<double>::infinity()
              ? (min_excluded ? "must be > " : "must be >= ") + number(min)
              : "must be in " + std::string(min_excluded ? "(" : "[") + number(min) + ", " +
                    number(max) + "]") +
         note;
}

DraftSetting number_setting(std::string key, double fallback, double min, double max,
                            std::string note) {
  DraftSetting s;
  s.key = std::move(key);
  s.fallback = fallback;
  s.min = min;
  s.max = max;
  s.note = std::move(note);
  return s;
}

DraftSetting integer_setting(std::string key, int64_t fallback, int64_t min, std::string note) {
  DraftSetting s =
      number_setting(std::move(key), static_cast<double>(fallback), static_cast<double>(min),
                     std::numeric_limits<double>::infinity(), std::move(note));
  s.type = DraftSetting::Type::integer;
  return s;
}

DraftSetting flag_setting(std::string key, bool fallback) {
  DraftSetting s = number_setting(std::move(key), fallback ? 1 : 0, 0, 1);
  s.type = DraftSetting::Type::flag;
  return s;
}

DraftSetting gamma_setting() {
  DraftSetting s = number_setting("loss_decay_gamma", 7.0, -std::numeric_limits<double>::infinity(),
                                  std::numeric_limits<double>::infinity());
  s.null_is_zero = true;
  return s;
}

DraftSetting prefix_weight_base_setting() {
  DraftSetting s = number_setting("prefix_weight_base", 0.9, 0, 100);
  s.min_excluded = true;
  return s;
}

DraftOption gamma_option() {
  return number_option("--gamma", gamma_setting(),
                       "Decay of the slot weights, exp(-d/gamma); <= 0: none");
}

double DraftSettings::number(const std::string& key, double fallback) const {
  const auto it = numbers.find(key);
  return it == numbers.end() ? fallback : it->second;
}

int64_t DraftSettings::integer(const std::string& key, int64_t fallback) const {
  const auto it = integers.find(key);
  return it == integers.end() ? fallback : it->second;
}

std::string DraftSettings::word(const std::string& key, const std::string& fallback) const {
  const auto it = words.find(key);
  return it == words.end() ? fallback : it->second;
}

std::string DraftSettings::named(const std::string& key) const {
  if (!command_line) return "draft." + key;
  std::string option = "--" + key;
  std::replace(option.begin(), option.end(), '_', '-');
  return option;
}

void DraftObjective::complete(const DraftConfig& /*draft*/, DraftBatch& batch,
                              Generator& /*gen*/) const {
  if (batch.prefix_lengths.defined())
    throw std::invalid_argument(
        "\"prefix_lengths\" apply to the variable-prefix loss of dflash drafts");
}

}  // namespace sprig::speculative

// Draft kinds as plug-ins (docs/architecture.md, "Adding a draft kind"). A kind is what tells one
// draft of the DFlash family from another: which draft configs are its own, its objective (one
// micro-batch's loss and metrics, the draws it needs beyond the anchors, its per-step schedule),
// the metrics it reports beside the common ones, its evaluation options, how it decodes and what
// the serving engines do with it. Each kind lives in its own file (speculative/dflash.cpp,
// domino.cpp, jetspec.cpp) and is listed once in the registry (draft_kinds()); the commands reach
// a kind only through it.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "speculative/blocks.h"
#include "speculative/draft.h"
#include "speculative/objective.h"
#include "speculative/serving.h"
#include "speculative/target.h"

namespace sprig::speculative {

// The settings of a kind's objective by name, as `sprig train <kind>` reads them from draft: and
// `sprig eval <kind>` from its options; a kind reads its own and takes its default for any other.
struct DraftSettings {
  std::map<std::string, double> numbers;     // e.g. loss_decay_gamma, kd_temperature
  std::map<std::string, int64_t> integers;   // e.g. emb_dim; a flag (shift_label) is 0 or 1
  std::map<std::string, std::string> words;  // e.g. loss_type
  bool command_line = false;                 // given as --options (else as draft: keys)

  double number(const std::string& key, double fallback) const;
  int64_t integer(const std::string& key, int64_t fallback) const;
  std::string word(const std::string& key, const std::string& fallback) const;
  // How the user wrote `key`: "--loss-type" on the command line, else "draft.loss_type".
  std::string named(const std::string& key) const;
};

// One micro-batch: rows, the blocks' anchors and, for the objectives that draw them, prefix
// lengths (B, N).
struct DraftBatch {
  DraftRows rows;
  Anchors anchors;
  Tensor prefix_lengths;
};

// A kind's objective with its settings, for one run or one evaluation.
class DraftObjective {
 public:
  virtual ~DraftObjective() = default;
  // The schedule: called before each optimizer step with the steps taken and their total.
  virtual void begin_step(int64_t /*step*/, int64_t /*total_steps*/) {}
  // Draws from `gen` what the loss of a `draft` needs beyond the anchors (none by default); throws
  // std::invalid_argument for given draws the objective does not use.
  virtual void complete(const DraftConfig& draft, DraftBatch& batch, Generator& gen) const;
  // The loss and metrics of `draft` on `batch`; with `logits`, every slot's logits (B * Q, V) f32
  // on the CPU. Throws NoValidAnchors when no slot is supervised.
  virtual DraftLoss loss(const FrozenTarget& target, const DFlashDraft& draft,
                         const DraftBatch& batch, Tensor* logits = nullptr) const = 0;
  // Whether the loss runs the whole target for its logits (JetSpec's teacher), for FLOP counts.
  virtual bool reads_teacher_logits() const { return false; }
};

// A metric reported beside the common ones (accuracy, accept_len): the ratio of two sums of
// DraftMetrics (DraftMetrics::sum).
struct DraftRatio {
  std::string name, numerator, denominator;
};

// A setting of a kind's objective or of its draft, declared once: `sprig train <kind>` reads it
// from draft: (train/config.cpp: an absent one as its default, which the resolved config
// records), `sprig eval <kind>` from an option; both check it here and hand it to the kind by name
// (DraftSettings::numbers, or integers).
struct DraftSetting {
  enum class Type { number, integer, flag };
  std::string key;
  Type type = Type::number;
  double fallback = 0;
  double min = -std::numeric_limits<double>::infinity();  // the valid range, both ends included
  double max = std::numeric_limits<double>::infinity();   // unless min_excluded
  bool min_excluded = false;
  std::string note;           // what the range means, said with a refusal: " (0: automatic)"
  bool null_is_zero = false;  // YAML's null reads as 0 (loss_decay_gamma: no decay)

  // "" when `value` is valid, else what it must be: "must be >= 1", "must be in [0, 1] (...)",
  // "must be a finite number".
  std::string refusal(double value) const;
};
DraftSetting number_setting(std::string key, double fallback, double min, double max,
                            std::string note = "");
DraftSetting integer_setting(std::string key, int64_t fallback, int64_t min, std::string note = "");
DraftSetting flag_setting(std::string key, bool fallback);
// The slot weights' decay (DFlash and Domino): draft.loss_decay_gamma, null for none.
DraftSetting gamma_setting();
// The variable-prefix loss's prefix-length weights, base^l: draft.prefix_weight_base, in (0, 100].
DraftSetting prefix_weight_base_setting();

// An option of `sprig eval <kind>`: a number setting, or a word with its choices.
struct DraftOption {
  std::string flag, help;            // "--gamma", "Decay of the slot weights ..."
  DraftSetting setting;              // its key, default and range (a word option's key alone)
  std::vector<std::string> choices;  // a word option's values, the first its default
};

inline DraftOption number_option(std::string flag, DraftSetting setting, std::string help) {
  return {std::move(flag), std::move(help), std::move(setting), {}};
}
inline DraftOption word_option(std::string flag, std::string key, std::string help,
                               std::vector<std::string> choices) {
  DraftSetting setting;
  setting.key = std::move(key);
  return {std::move(flag), std::move(help), std::move(setting), std::move(choices)};
}
// The slot weights' decay (DFlash and Domino): --gamma, loss_decay_gamma.
DraftOption gamma_option();

// A draft of a kind sized for a small target (the demo's, `sprig bench draft`'s): its name, what
// sets it apart, and its settings where the defaults are sized for a real target.
struct DraftVariant {
  std::string name, note;
  DraftSettings settings;
};

// A token's embedding (1, H) through the target's embedding table.
using TokenEmbedding = std::function<Tensor(int64_t id)>;

class DraftKind {
 public:
  virtual ~DraftKind() = default;
  virtual std::string_view name() const = 0;   // `sprig train <name>`, `sprig eval <name>`
  virtual std::string_view title() const = 0;  // as prose names it: "DFlash"
  // One sentence each for `sprig train <name> --help` and `sprig eval <name> --help`.
  virtual std::string_view train_help() const = 0;
  virtual std::string_view eval_help() const = 0;
  // Whether `config` is a draft of this kind, and what a draft of this kind has (for refusals).
  virtual bool is_kind_of(const DraftConfig& config) const = 0;
  virtual std::string_view requirement() const = 0;
  // A kind whose drafts have a head (DraftHead): the dflash_config.projector_type that names it
  // ("" for none), the head read from a config.json of that type, and the `architectures` its
  // published configs declare beside the engines' DFlashDraftModel.
  virtual std::string_view projector_type() const { return {}; }
  virtual std::shared_ptr<const DraftHead> read_head(const DraftJsonReader& /*config*/) const {
    return nullptr;
  }
  virtual std::vector<std::string_view> architectures() const { return {}; }
  // What a micro-batch's mean divides its loss sum by (DraftLoss::denominator).
  virtual double mean_denominator(double loss_weight) const = 0;
  virtual std::vector<DraftRatio> extra_ratios() const { return {}; }
  virtual std::unique_ptr<DraftObjective> objective(const DraftSettings& settings) const = 0;
  // Training: the kind's own settings of draft:, in the order the resolved config lists them; the
  // loss types of draft.loss_type it trains with (the first the default); the options of a fresh
  // draft the settings give (its head, in-block causality); and the settings a loaded draft of
  // this kind fixes (its head's shape), which a run from it records.
  virtual std::vector<DraftSetting> train_settings() const { return {}; }
  virtual std::vector<std::string> loss_types() const { return {"dflash"}; }
  virtual void shape(DraftOptions& /*options*/, const DraftSettings& /*settings*/) const {}
  virtual DraftSettings settings_of(const DraftConfig& /*config*/) const { return {}; }
  // Drafts of this kind for a target of hidden size `hidden_size`: the first the kind's own (the
  // demo trains it), any other one worth timing beside it (Domino without shift_label). By
  // default one, with the defaults.
  virtual std::vector<DraftVariant> variants(int64_t hidden_size) const;
  // The options of `sprig eval <kind>`, in the order --help lists them, and the check of those
  // given together (`given` holds only them): std::invalid_argument for a pair that does not
  // apply.
  virtual std::vector<DraftOption> eval_options() const { return {}; }
  virtual void check_options(const DraftSettings& /*given*/) const {}

  // The blocks' labels: slot k is labelled with the token at anchor + k + label_shift, and with a
  // shift the labels stop at the anchor's document end. 0 by default; Domino's shift_label is 1.
  virtual int64_t label_shift(const DraftConfig& /*config*/) const { return 0; }
  // Decoding (docs/semantics.md §13.2): how many drafts a block of `block_size` slots proposes
  // (the slots whose labels lie past the anchor), and those greedy drafts from the slots' final
  // states `hidden` (bs, H) and their logits through the draft's head `base_logits` (bs, Vd: the
  // target's head, or its rows of the draft vocabulary); `embed` gives a token's embedding (1, H).
  // By default each such slot drafts its argmax; a kind with a correction head applies it unless
  // `correction_head` is false. The drafts are target ids.
  int64_t drafts_per_block(const DraftConfig& config, int64_t block_size) const {
    return block_size - 1 + label_shift(config);
  }
  virtual std::vector<int64_t> drafts(const DFlashDraft& draft, const Tensor& hidden,
                                      const Tensor& base_logits, int64_t anchor,
                                      const TokenEmbedding& embed, bool correction_head) const;
  virtual bool has_correction_head(const DraftConfig& /*config*/) const { return false; }

  // Serving (docs/serving.md). The config an export of `draft` for `how.engine` writes: `draft`
  // itself by default, or (dropping a correction head) another kind's; throws
  // std::invalid_argument "[serve] ..." with the sentence an engine's refusal needs.
  virtual DraftConfig exported(const DraftConfig& draft, const ServingExport& how) const;
  // What the engines will do with the export of `original` (of this kind) as `exported`.
  virtual std::vector<std::string> serving_notes(const DraftConfig& /*original*/,
                                                 const DraftConfig& /*exported*/,
                                                 ServingEngine /*engine*/) const {
    return {};
  }
  // Whether vLLM's dflash method and SGLang's DFLASH algorithm serve an export of this kind.
  virtual bool vllm_serves(const DraftConfig& /*exported*/) const { return true; }
  virtual bool sglang_serves(const DraftConfig& /*exported*/) const { return true; }
};

// The kinds, each defined in its own file.
const DraftKind& dflash_kind();   // speculative/dflash.cpp
const DraftKind& domino_kind();   // speculative/domino.cpp
const DraftKind& jetspec_kind();  // speculative/jetspec.cpp

// Every kind, in the order the commands list them.
const std::vector<const DraftKind*>& draft_kinds();
// The kind named `name`, or nullptr.
const DraftKind* find_draft_kind(std::string_view name);
// The kinds' names joined with ", " (for usage lines).
std::string draft_kind_names();

// Throws "[draft] <label> is a <kind> draft: <requirement>" unless `draft` is of `kind`.
void check_draft_kind(const DraftConfig& draft, const DraftKind& kind, const std::string& label);

}  // namespace sprig::speculative

// SpecEvaluator (speculative/spec_eval.h): each prompt decoded by the target alone and with the
// draft, the draft's teacher-forced metrics on the same text, and the sums the aggregate is made
// of.
#include "speculative/spec_eval.h"

#include <chrono>
#include <optional>
#include <string>

#include "nn/generate.h"

namespace sprig::speculative {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

json optional_number(bool present, double value) { return present ? json(value) : json(nullptr); }

// Prompt ++ output as one row, the output supervised.
DraftRows supervised_output(const std::vector<int64_t>& prompt,
                            const std::vector<int64_t>& output) {
  std::vector<int64_t> ids = prompt, mask(prompt.size(), 0);
  ids.insert(ids.end(), output.begin(), output.end());
  mask.resize(ids.size(), 1);
  DraftRows rows;
  const auto S = static_cast<int64_t>(ids.size());
  rows.input_ids = Tensor::from_vector(ids, {1, S});
  rows.loss_mask = Tensor::from_vector(mask, {1, S});
  return rows;
}

}  // namespace

SpecEvaluator::SpecEvaluator(const FrozenTarget& target, const DFlashDraft& draft,
                             SpecEvalSettings settings)
    : target_(target),
      dflash_(&draft),
      settings_(settings),
      block_size_(settings.block_size ? settings.block_size : draft.config().block_size) {
  sampled_.emplace(target, draft, DraftSettings{}, settings.num_anchors, settings.seed);
  at_decoding_.emplace(target, draft, DraftSettings{}, settings.num_anchors, settings.seed);
}

SpecEvaluator::SpecEvaluator(const FrozenTarget& target, const Eagle3Draft& draft,
                             SpecEvalSettings settings)
    : target_(target),
      eagle3_(&draft),
      settings_(settings),
      block_size_(settings.draft_tokens + 1) {}

SpecDecodeResult SpecEvaluator::decode(const std::vector<int64_t>& prompt,
                                       bool correction_head) const {
  const SpecEvalSettings& o = settings_;
  SpecDecodeOptions options{o.max_new_tokens, o.block_size,   o.stop_id,
                            correction_head,  o.draft_tokens, o.tree_topk};
  return dflash_ ? speculative_generate(target_.model(), *dflash_, prompt, options)
                 : speculative_generate(target_.model(), *eagle3_, prompt, options);
}

json SpecEvaluator::evaluate(const std::vector<int64_t>& prompt, std::FILE* table) {
  const QwenForCausalLM& model = target_.model();
  const SpecEvalSettings& o = settings_;
  Totals& t = totals_;
  // The target alone: its greedy decoding, timed, and its decoding steps after the prefill.
  auto start = Clock::now();
  Clock::time_point first_token;
  const std::vector<int64_t> greedy =
      generate_greedy(model, prompt, o.max_new_tokens, o.stop_id, [&](int64_t) {
        if (first_token == Clock::time_point()) first_token = Clock::now();
      });
  const double greedy_seconds = seconds_since(start);
  t.decode_seconds += seconds_since(first_token);
  t.decode_steps += static_cast<double>(greedy.size()) - 1;

  start = Clock::now();
  const SpecDecodeResult r = decode(prompt);
  const double spec_seconds = seconds_since(start);
  std::optional<SpecDecodeResult> base;
  std::optional<DraftMetrics> forced, here;
  if (dflash_) {
    const DraftConfig& dc = dflash_->config();
    // A draft with a correction head decodes once more from its base logits alone: what the head
    // adds.
    if (dc.kind().has_correction_head(dc)) {
      base = decode(prompt, false);
      t.base_steps += base->target_forwards();
      for (int64_t committed : base->accepted_per_step) t.base_committed += committed;
    }
    const DraftRows text = supervised_output(prompt, r.output_ids);
    forced = sampled_->metrics({text, {}, {}});
    // At the decoding's own anchors (whole blocks of the draft's size) teacher forcing accepts
    // what decoding did: the gap to `forced` comes from where the anchors fall.
    if (block_size_ == dc.block_size) {
      std::vector<int64_t> at;
      for (const WholeBlockStep& step :
           whole_block_steps(r, static_cast<int64_t>(prompt.size()), dc, block_size_)) {
        at.push_back(step.anchor);
        ++t.whole_steps;
        t.whole_committed += step.committed;
      }
      const auto n = static_cast<int64_t>(at.size());
      if (n > 0)
        here = at_decoding_->metrics(
            {text, {Tensor::from_vector(at, {1, n}), Tensor::ones({1, n}, DType::boolean)}, {}});
    }
  }

  if (eagle3_) eagle3_forced(prompt, r, forced, here);

  const bool lossless = r.output_ids == greedy;
  const double spec_rate = ratio(static_cast<double>(r.output_ids.size()), spec_seconds);
  const double greedy_rate = ratio(static_cast<double>(greedy.size()), greedy_seconds);
  json line = {{"prompt", t.prompts},
               {"output_ids", r.output_ids},
               {"tau", r.tau()},
               {"target_forwards", r.target_forwards()},
               {"accepted_per_step", r.accepted_per_step},
               {"lossless", lossless},
               {"teacher_forced_accept_len",
                optional_number(forced.has_value(), forced ? forced->accept_len() : 0)},
               {"teacher_forced_at_decoding_anchors",
                optional_number(here.has_value(), here ? here->accept_len() : 0)},
               {"tokens_per_second", spec_rate},
               {"greedy_tokens_per_second", greedy_rate},
               {"speedup", ratio(spec_rate, greedy_rate)}};
  if (base) line["tau_without_head"] = base->tau();
  if (table)
    std::fprintf(table, "%6lld %6zu %6lld %8.3f %8s %10.1f %10.1f %7.2fx %8s\n",
                 static_cast<long long>(t.prompts), r.output_ids.size(),
                 static_cast<long long>(r.target_forwards()), r.tau(),
                 forced ? std::to_string(forced->accept_len()).substr(0, 5).c_str() : "-",
                 spec_rate, greedy_rate, ratio(spec_rate, greedy_rate), lossless ? "yes" : "NO");

  ++t.prompts;
  t.lossless += lossless;
  t.tokens += static_cast<int64_t>(r.output_ids.size());
  t.tau_sum += r.tau();
  t.spec_seconds += spec_seconds;
  t.greedy_seconds += greedy_seconds;
  t.draft_seconds += r.draft_seconds;
  t.verify_seconds += r.verify_seconds;
  if (forced) t.forced.add(*forced);
  if (here) t.forced_here.add(*here);
  for (size_t i = 0; i < r.accepted_per_step.size(); ++i) {
    const auto drafted = static_cast<size_t>(r.drafted_per_step[i]);
    const int64_t committed = r.accepted_per_step[i];
    if (t.verified_by_slot.size() < drafted) {
      t.verified_by_slot.resize(drafted, 0);
      t.accepted_by_slot.resize(drafted, 0);
    }
    for (size_t k = 0; k < drafted; ++k) {
      ++t.verified_by_slot[k];
      t.accepted_by_slot[k] += static_cast<int64_t>(k) < committed - 1;
    }
    if (static_cast<int64_t>(t.histogram.size()) < committed)
      t.histogram.resize(static_cast<size_t>(committed), 0);
    ++t.histogram[static_cast<size_t>(committed - 1)];
    ++t.steps;
    t.committed += committed;
  }
  return line;
}

void SpecEvaluator::eagle3_forced(const std::vector<int64_t>& prompt, const SpecDecodeResult& r,
                                  std::optional<DraftMetrics>& forced,
                                  std::optional<DraftMetrics>& here) {
  const DraftRows text = supervised_output(prompt, r.output_ids);
  Eagle3Loss l;
  try {
    NoGradGuard no_grad;
    l = eagle3_loss(*eagle3_, text, eagle3_teacher(target_, *eagle3_, text),
                    {settings_.draft_tokens, 0.8, 0});
  } catch (const NoValidAnchors&) {  // no output token to learn
    return;
  }
  forced.emplace();
  forced->accept_len_sum = l.accept_len_sum;
  forced->valid_blocks = l.valid_positions;
  // A step anchored at s drafted from position s - 1; its chain lies inside the text when all
  // of its drafts were verified and the text holds the tokens they stand for.
  const auto S = static_cast<int64_t>(prompt.size() + r.output_ids.size());
  const int64_t k = settings_.draft_tokens;
  int64_t s = static_cast<int64_t>(prompt.size());  // the anchor: the prefill's token
  if (settings_.tree_topk > 0) return;  // a tree commits more than its top-1 chain would
  here.emplace();
  const size_t steps = r.accepted_per_step.size();
  // A step that committed the stop id committed no bonus after it: not a whole chain.
  for (size_t i = 0; i < steps; ++i) {
    if (r.drafted_per_step[i] == k && s + k <= S && !(r.stopped && i + 1 == steps)) {
      here->accept_len_sum += static_cast<double>(l.chain_lengths[static_cast<size_t>(s - 1)] + 1);
      here->valid_blocks += 1;
      ++totals_.whole_steps;
      totals_.whole_committed += r.accepted_per_step[i];
    }
    s += r.accepted_per_step[i];
  }
  if (here->valid_blocks == 0) here.reset();
}

json SpecEvaluator::aggregate() const {
  const Totals& t = totals_;
  const auto steps = static_cast<double>(t.steps);
  const double decode_step = ratio(t.decode_seconds, t.decode_steps);
  std::vector<double> by_slot;
  for (size_t k = 0; k < t.verified_by_slot.size(); ++k)
    by_slot.push_back(ratio(static_cast<double>(t.accepted_by_slot[k]),
                            static_cast<double>(t.verified_by_slot[k])));
  const double spec_rate = ratio(static_cast<double>(t.tokens), t.spec_seconds);
  const double greedy_rate = ratio(static_cast<double>(t.tokens), t.greedy_seconds);
  return {{"prompts", t.prompts},
          {"lossless_prompts", t.lossless},
          {"new_tokens", t.tokens},
          {"target_forwards", t.steps},
          {"tau", ratio(static_cast<double>(t.committed), steps)},  // pooled over steps
          {"tau_per_prompt_mean", ratio(t.tau_sum, static_cast<double>(t.prompts))},
          {"tau_without_head",  // Domino: decoding from the base logits alone, pooled
           optional_number(t.base_steps > 0, ratio(static_cast<double>(t.base_committed),
                                                   static_cast<double>(t.base_steps)))},
          {"tau_whole_blocks",
           ratio(static_cast<double>(t.whole_committed), static_cast<double>(t.whole_steps))},
          {"teacher_forced_accept_len",
           optional_number(t.forced.valid_blocks > 0, t.forced.accept_len())},
          {"teacher_forced_at_decoding_anchors",
           optional_number(t.forced_here.valid_blocks > 0, t.forced_here.accept_len())},
          {"acceptance_by_slot", by_slot},
          {"committed_per_step_histogram", t.histogram},
          {"tokens_per_second", spec_rate},
          {"greedy_tokens_per_second", greedy_rate},
          {"speedup", ratio(spec_rate, greedy_rate)},
          {"verify_step_vs_decode_step", ratio(ratio(t.verify_seconds, steps), decode_step)},
          {"draft_step_vs_decode_step", ratio(ratio(t.draft_seconds, steps), decode_step)}};
}

void SpecEvaluator::print_header(std::FILE* out) const {
  if (dflash_)
    std::fprintf(out,
                 "spec-eval: %s draft, block %lld (%lld drafts per step), up to %lld new tokens "
                 "per prompt, %s\n",
                 std::string(dflash_->config().kind().name()).c_str(),
                 static_cast<long long>(block_size_),
                 static_cast<long long>(drafts_per_block(dflash_->config(), block_size_)),
                 static_cast<long long>(settings_.max_new_tokens), target_.device().str().c_str());
  else
    std::fprintf(
        out,
        "spec-eval: eagle3 draft, %s of %lld drafts per step, up to %lld new tokens "
        "per prompt, %s\n",
        settings_.tree_topk > 0
            ? ("a tree of the " + std::to_string(settings_.tree_topk) + " best per depth").c_str()
            : "a chain",
        static_cast<long long>(settings_.tree_topk > 0
                                   ? settings_.tree_topk * settings_.draft_tokens
                                   : settings_.draft_tokens),
        static_cast<long long>(settings_.max_new_tokens), target_.device().str().c_str());
  std::fprintf(out, "%6s %6s %6s %8s %8s %10s %10s %8s %8s\n", "prompt", "tokens", "steps", "tau",
               "forced", "tok/s", "greedy/s", "speedup", "lossless");
}

void SpecEvaluator::print_summary(std::FILE* out) const {
  const json a = aggregate();
  const Totals& t = totals_;
  std::fprintf(out, "pooled: tau %.3f over %lld target forwards (per-prompt mean %.3f)",
               a["tau"].get<double>(), static_cast<long long>(t.steps),
               a["tau_per_prompt_mean"].get<double>());
  if (t.forced.valid_blocks > 0)
    std::fprintf(out, ", teacher-forced accept_len %.3f", t.forced.accept_len());
  if (t.base_steps > 0)
    std::fprintf(out, "\n  without the correction head (base logits alone): tau %.3f",
                 a["tau_without_head"].get<double>());
  if (t.forced_here.valid_blocks > 0)
    std::fprintf(out,
                 "\n  at the decoding's own anchors: teacher-forced %.3f, decoding %.3f over the "
                 "same %lld whole-%s steps",
                 t.forced_here.accept_len(), a["tau_whole_blocks"].get<double>(),
                 static_cast<long long>(t.whole_steps), dflash_ ? "block" : "chain");
  std::fprintf(out, "\nacceptance by draft slot:");
  for (const json& v : a["acceptance_by_slot"]) std::fprintf(out, " %.2f", v.get<double>());
  std::fprintf(out,
               "\n%.1f tokens/s with the draft, %.1f without: speed-up %.2fx; a verify step costs "
               "%.2fx a decoding step of the target, a draft step %.2fx\n",
               a["tokens_per_second"].get<double>(), a["greedy_tokens_per_second"].get<double>(),
               a["speedup"].get<double>(), a["verify_step_vs_decode_step"].get<double>(),
               a["draft_step_vs_decode_step"].get<double>());
  if (t.lossless != t.prompts)
    std::fprintf(out,
                 "warning: %lld of %lld outputs differ from the target's greedy decoding (argmax "
                 "ties broken differently by the block and the one-token kernels)\n",
                 static_cast<long long>(t.prompts - t.lossless), static_cast<long long>(t.prompts));
}

}  // namespace sprig::speculative

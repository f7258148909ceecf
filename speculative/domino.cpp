#include "speculative/domino.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/functions.h"
#include "nn/loss.h"
#include "speculative/draft_kind.h"

namespace sprig::speculative {

namespace {

// The head's shape as settings, declared once: `sprig train domino` reads them from draft:, and
// a head read from a config.json is checked by the same rules.
std::vector<DraftSetting> head_settings() {
  const DominoHeadConfig d;
  return {integer_setting("emb_dim", d.emb_dim, 1),
          integer_setting("gru_hidden_dim", d.gru_hidden_dim, 1),
          integer_setting("pure_draft_prefix_len", d.pure_draft_prefix_len, 0),
          flag_setting("shift_label", d.shift_label)};
}

DraftSettings head_settings_of(const DominoHeadConfig& h) {
  DraftSettings s;
  s.integers = {{"emb_dim", h.emb_dim},
                {"gru_hidden_dim", h.gru_hidden_dim},
                {"pure_draft_prefix_len", h.pure_draft_prefix_len},
                {"shift_label", h.shift_label ? 1 : 0}};
  return s;
}

class DominoHead final : public DraftHead {
 public:
  explicit DominoHead(const DominoHeadConfig& config) : config(config) {}
  const DraftKind& kind() const override { return domino_kind(); }

  void check(const DraftConfig& draft) const override {
    const auto fail = [](const std::string& message) {
      throw std::invalid_argument("[draft] " + message);
    };
    if (draft.causal) fail("a Domino draft's blocks are bidirectional: causal must be false");
    const DraftSettings shape = head_settings_of(config);
    for (const DraftSetting& setting : head_settings()) {
      const int64_t value = shape.integer(setting.key, 0);
      const std::string refusal = setting.refusal(static_cast<double>(value));
      if (!refusal.empty()) fail(setting.key + " " + refusal + ", got " + std::to_string(value));
    }
    if (config.first_corrected_slot() >= draft.block_size)
      fail("pure_draft_prefix_len " + std::to_string(config.pure_draft_prefix_len) +
           " leaves no slot of a block of " + std::to_string(draft.block_size) + " to correct" +
           (config.shift_label ? "" : " (without shift_label slot 0 is the anchor)"));
  }

  void write(nlohmann::json& j) const override {
    nlohmann::json& d = j["dflash_config"];
    d["projector_type"] = kind().projector_type();
    d["emb_dim"] = config.emb_dim;
    d["gru_hidden_dim"] = config.gru_hidden_dim;
    d["pure_draft_prefix_len"] = config.pure_draft_prefix_len;
    d["shift_label"] = config.shift_label;
    j["emb_dim"] = config.emb_dim;  // Domino's published configs repeat it at the top level
  }

  std::vector<ParameterPart> parameter_parts(const DraftConfig& draft) const override {
    const auto key = [](const char* name, int64_t v) {
      return std::string(name) + " " + std::to_string(v);
    };
    const auto d = [](int64_t v) { return static_cast<double>(v); };
    const int64_t H = draft.layers.hidden_size, V = draft.vocab_rows(), G = config.gru_hidden_dim,
                  E = config.emb_dim;
    return {
        {3 * d(G) * d(H + G), "prefix_gru: 3 x " + key("gru_hidden_dim", G) + " x (" +
                                  key("hidden_size", H) + " + " + key("gru_hidden_dim", G) + ")"},
        {d(E) * d(H + G + V),
         "embed_proj: " + key("emb_dim", E) + " x (" + key("hidden_size", H) + " + " +
             key("gru_hidden_dim", G) + " + " +
             key(draft.reduced_vocab() ? "draft_vocab_size" : "vocab_size", V) + ")"}};
  }

  std::unique_ptr<Module> build(const DraftConfig& draft, Generator& gen) const override {
    return std::make_unique<DominoHeadModule>(draft, config, gen);
  }

  const DominoHeadConfig config;
};

}  // namespace

std::shared_ptr<const DraftHead> domino_head(const DominoHeadConfig& config) {
  return std::make_shared<const DominoHead>(config);
}

const DominoHeadConfig& domino_head_config(const DraftConfig& draft) {
  const auto* head = dynamic_cast<const DominoHead*>(draft.head.get());
  if (!head)
    throw std::logic_error("[draft] the Domino head of a " + std::string(draft.kind().name()) +
                           " draft");
  return head->config;
}

DominoHeadModule::DominoHeadModule(const DraftConfig& draft, const DominoHeadConfig& head,
                                   Generator& gen)
    : prefix_gru(register_module(
          "prefix_gru", std::make_unique<GRU>(draft.layers.hidden_size, head.gru_hidden_dim, gen))),
      embed_proj_in(register_module(
          "embed_proj.0",
          std::make_unique<Linear>(draft.layers.hidden_size + head.gru_hidden_dim, head.emb_dim,
                                   false, draft.layers.initializer_range, gen))),
      embed_proj_out(register_module(
          "embed_proj.2", std::make_unique<Linear>(head.emb_dim, draft.vocab_rows(), false,
                                                   draft.layers.initializer_range, gen))) {}

Var DominoHeadModule::features(const Var& hidden, const Var& state) const {
  return silu(embed_proj_in.forward(concat({hidden, state}, 1)));
}

const DominoHeadModule& domino_head_module(const DFlashDraft& draft) {
  const auto* head = dynamic_cast<const DominoHeadModule*>(draft.head());
  if (!head)
    throw std::logic_error("[draft] the Domino head of a " +
                           std::string(draft.config().kind().name()) + " draft");
  return *head;
}

double domino_lambda_base(int64_t step, int64_t total, double start, double decay_ratio) {
  const auto decay_steps =
      std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(total) * decay_ratio));
  const double progress =
      std::min(static_cast<double>(step) / static_cast<double>(decay_steps), 1.0);
  return std::clamp(start * (1.0 - progress), 0.0, 1.0);
}

double domino_slot_weight(int64_t slot, bool shift_label, double gamma) {
  const int64_t distance = std::max<int64_t>(slot - (shift_label ? 0 : 1), 0);
  return gamma > 0 ? std::exp(-static_cast<double>(distance) / gamma) : 1.0;
}

Var domino_head_loss(const Var& hidden, const Var& head, const Var& features, const Var& proj,
                     const Tensor& targets, Tensor* base_argmax, Tensor* final_argmax,
                     int64_t chunk_rows) {
  const int64_t N = hidden.dim() == 2 ? hidden.size(0) : -1;
  if (N < 0 || head.dim() != 2 || head.size(1) != hidden.size(1) || features.dim() != 2 ||
      features.size(0) != N || proj.dim() != 2 || proj.size(1) != features.size(1) ||
      proj.size(0) != head.size(0) || targets.shape() != Shape{N})
    throw std::invalid_argument("[domino_head_loss] hidden " + shape_str(hidden.shape()) +
                                ", head " + shape_str(head.shape()) + ", features " +
                                shape_str(features.shape()) + ", proj " + shape_str(proj.shape()) +
                                " and targets " + shape_str(targets.shape()) +
                                " must be (N, H), (V, H), (N, E), (V, E) and (N)");
  const Tensor h = hidden.value(), w = head.value(), e = features.value(), p = proj.value();
  check_target_range("domino_head_loss", targets, w.size(0), -100);  // once, not per chunk
  const int64_t chunk = head_chunk_rows(chunk_rows, w.size(0));
  const DType stat = h.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor out = Tensor::empty({2, N}, stat, h.device());
  Tensor lse = Tensor::empty({2, N}, stat, h.device());
  Tensor argmax = Tensor::empty({2, N}, DType::i64, h.device());
  // Rows [r0, r0 + n): their base logits. The corrections e @ P^T are added inside the loss.
  const auto base_logits = [h, w](int64_t r0, int64_t n) {
    return matmul(h.narrow(0, r0, n), w, false, true);
  };
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t n = std::min(chunk, N - r0);
    const CrossEntropyResult ce =
        corrected_cross_entropy(base_logits(r0, n), e.narrow(0, r0, n), p, targets.narrow(0, r0, n),
                                -100, true, IndexCheck::done);
    out.narrow(1, r0, n).copy_(ce.loss);
    lse.narrow(1, r0, n).copy_(ce.lse);
    argmax.narrow(1, r0, n).copy_(ce.argmax);
  }
  if (base_argmax) *base_argmax = argmax.select(0, 0).contiguous();
  if (final_argmax) *final_argmax = argmax.select(0, 1).contiguous();
  const bool head_grad = head.requires_grad(), proj_grad = proj.requires_grad();
  return record(
      "domino_head_loss", out, {hidden, head, features, proj},
      [h, w, e, p, targets, lse, chunk, base_logits, head_grad,
       proj_grad](const Tensor& dout) -> Grads {
        const int64_t rows = h.size(0);
        Tensor dh = Tensor::empty(h.shape(), h.dtype(), h.device());
        Tensor de = Tensor::empty(e.shape(), e.dtype(), e.device());
        Tensor dw = head_grad ? Tensor::empty(w.shape(), w.dtype(), w.device()) : Tensor();
        Tensor dp = proj_grad ? Tensor::zeros(p.shape(), p.dtype(), p.device()) : Tensor();
        for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
          const int64_t n = std::min(chunk, rows - r0);
          // The base logits' gradients replace the logits in their own buffer.
          const Tensor dbase = base_logits(r0, n);
          corrected_cross_entropy_backward_into(dout.narrow(1, r0, n), dbase, e.narrow(0, r0, n), p,
                                                targets.narrow(0, r0, n), lse.narrow(1, r0, n),
                                                dbase, de.narrow(0, r0, n), dp, true);
          matmul_into(dbase, w, dh.narrow(0, r0, n), false, false, false);
          if (head_grad) matmul_into(dbase, h.narrow(0, r0, n), dw, true, false, r0 > 0);
        }
        if (head_grad && rows == 0) dw.zero_();
        return {dh, dw, de, dp};
      });
}

DraftLoss domino_loss(const FrozenTarget& target, const DFlashDraft& draft, const DraftRows& rows,
                      const Anchors& anchors, const DominoOptions& o, Tensor* logits) {
  const DraftConfig& c = draft.config();
  check_draft_kind(c, domino_kind(), "the draft");
  const DominoHeadConfig& head_config = domino_head_config(c);
  const DominoHeadModule& correction = domino_head_module(draft);
  const bool shift = head_config.shift_label;
  const BlockForward f =
      block_forward(target, draft, rows, make_blocks(rows, anchors, block_options(c)));
  const Var& hidden = f.hidden;
  const int64_t B = hidden.size(0), Q = hidden.size(1), H = hidden.size(2), bs = c.block_size;
  const int64_t N = Q / bs, S = rows.seq_len();
  // Supervised slots: all with shift_label (slot 0 predicts anchor + 1), else k >= 1.
  const int64_t first = shift ? 0 : 1, K = bs - first;
  const int64_t corrected_from = head_config.first_corrected_slot();
  const Device device = hidden.device();
  const DType dtype = hidden.dtype();

  // The GRU reads the tokens at anchor + k, k in [0, K): its state after anchor..anchor+k serves
  // the slot predicting the token after them (slot k shifted, slot k + 1 unshifted).
  const std::vector<int64_t> ids = rows.input_ids.to_vector<int64_t>();
  const std::vector<int64_t> at = anchors.anchors.to_vector<int64_t>();
  std::vector<int64_t> prev(static_cast<size_t>(B * N * K));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k)
        prev[(b * N + j) * K + k] = ids[b * S + std::min(at[b * N + j] + k, S - 1)];
  const Var embedded(target.embed(Tensor::from_vector(prev, {B * N, K})).value().to(device, dtype));
  const Var states = correction.prefix_gru.forward(embedded);  // (B * N, K, G)

  const int64_t R = B * N * K;
  const Var slots =
      reshape(contiguous(narrow(reshape(hidden, {B, N, bs, H}), 2, first, K)), {R, H});
  std::vector<double> corrected(static_cast<size_t>(R)), weights(static_cast<size_t>(R));
  std::vector<int64_t> targets(static_cast<size_t>(R)), truth(static_cast<size_t>(R));
  std::vector<bool> valid(static_cast<size_t>(R));
  const std::vector<int64_t> labels = f.labels.to_vector<int64_t>();
  const std::vector<float> block_mask = f.blocks.block_mask.to_vector<float>();
  for (int64_t bj = 0; bj < B * N; ++bj)
    for (int64_t k = first; k < bs; ++k) {
      const size_t i = static_cast<size_t>(bj * K + k - first),
                   src = static_cast<size_t>(bj * bs + k);
      valid[i] = block_mask[src] > 0.5f;
      truth[i] = labels[src];
      const bool scored = valid[i] && truth[i] >= 0;  // else outside the draft vocabulary
      targets[i] = scored ? truth[i] : -100;
      weights[i] = scored ? domino_slot_weight(k, shift, o.gamma) : 0.0;
      corrected[i] = k >= corrected_from;
    }
  // Slots before the first corrected one keep their base logits: their features are zeroed.
  const Var features = correction.features(slots, reshape(states, {R, states.size(2)})) *
                       Var(Tensor::from_vector(corrected, {R, 1}).to(dtype).to(device));
  Tensor base_pred, final_pred;
  const Var ce =
      domino_head_loss(slots, f.head, features, correction.embed_proj_out.weight,
                       Tensor::from_vector(targets, {R}).to(device), &base_pred, &final_pred);
  // sum = (1 - lambda) * sum(w * CE(final)) + lambda * sum(w * CE(base)).
  std::vector<double> mix(static_cast<size_t>(2 * R));
  for (size_t i = 0; i < static_cast<size_t>(R); ++i) {
    mix[i] = o.lambda_base * weights[i];
    mix[R + i] = (1.0 - o.lambda_base) * weights[i];
  }
  DraftLoss out;
  out.sum = sum_all(ce * Var(Tensor::from_vector(mix, {2, R}).to(ce.dtype()).to(device)));

  DraftMetrics& m = out.metrics;
  const std::vector<double> losses = ce.value().to(Device::cpu(), DType::f64).to_vector<double>();
  const std::vector<int64_t> base = base_pred.to_vector<int64_t>();
  const std::vector<int64_t> final = final_pred.to_vector<int64_t>();
  double base_loss_sum = 0, final_loss_sum = 0, base_correct_tokens = 0;
  for (size_t i = 0; i < static_cast<size_t>(R); ++i) {
    m.loss_weight += weights[i];
    base_loss_sum += weights[i] * losses[i];
    final_loss_sum += weights[i] * losses[R + i];
    m.valid_tokens += valid[i];
    m.correct_tokens += valid[i] && final[i] == truth[i];
    base_correct_tokens += valid[i] && base[i] == truth[i];
  }
  const Acceptance accepted = acceptance(final, truth, valid, K);
  m.accept_len_sum = accepted.accept_len_sum;
  m.valid_blocks = accepted.valid_blocks;
  m.micro_batches = 1;
  m.extra = {{"final_loss_sum", final_loss_sum},
             {"base_loss_sum", base_loss_sum},
             {"base_correct_tokens", base_correct_tokens},
             {"base_accept_len_sum", acceptance(base, truth, valid, K).accept_len_sum},
             {"lambda_base_sum", o.lambda_base}};
  out.denominator = weighted_mean_denominator(m.loss_weight);

  if (logits) {
    NoGradGuard no_grad;
    const int64_t V = f.head.size(0);
    const Tensor all = slot_logits(hidden, f.head);
    const Tensor delta = matmul(features, correction.embed_proj_out.weight, false, true)
                             .value()
                             .reshape({B, N, K, V});
    Tensor tail = all.view({B, N, bs, V}).narrow(2, first, K);
    tail.copy_(add(tail, delta));
    *logits = all.to(Device::cpu(), DType::f32);
  }
  return out;
}

namespace {

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("[serve] " + message);
}

// Domino's objective: gamma-decayed slot weights, and the mix of the corrected and base losses at
// lambda_base (fixed, or from the curriculum of lambda_base_start and lambda_base_decay_ratio
// once a run steps).
class DominoObjective : public DraftObjective {
 public:
  explicit DominoObjective(const DraftSettings& s)
      : gamma_(s.number("loss_decay_gamma", 7.0)),
        lambda_base_(s.number("lambda_base", 0.0)),
        start_(s.number("lambda_base_start", 1.0)),
        decay_ratio_(s.number("lambda_base_decay_ratio", 0.5)) {}

  void begin_step(int64_t step, int64_t total_steps) override {
    lambda_base_ = domino_lambda_base(step, total_steps, start_, decay_ratio_);
  }
  DraftLoss loss(const FrozenTarget& target, const DFlashDraft& draft, const DraftBatch& batch,
                 Tensor* logits) const override {
    return domino_loss(target, draft, batch.rows, batch.anchors, {gamma_, lambda_base_}, logits);
  }

 private:
  double gamma_, lambda_base_, start_, decay_ratio_;
};

class Domino : public DraftKind {
 public:
  std::string_view name() const override { return "domino"; }
  std::string_view title() const override { return "Domino"; }
  std::string_view train_help() const override {
    return "Train a Domino draft: the DFlash backbone plus a GRU correction head, the loss mixing "
           "corrected and base logits by a decaying lambda_base (same sections as dflash, with "
           "draft.emb_dim, gru_hidden_dim, shift_label, lambda_base_start, ...)";
  }
  std::string_view eval_help() const override {
    return "Teacher-forced Domino draft evaluation: DFlash's metrics on the corrected logits, "
           "plus final_loss, base_loss and the base logits' accuracy and acceptance length "
           "(i.logits are the corrected logits)";
  }
  bool is_kind_of(const DraftConfig& c) const override { return c.head && &c.head->kind() == this; }
  std::string_view requirement() const override {
    return "a Domino recipe needs dflash_config.projector_type domino (prefix_gru and embed_proj)";
  }
  double mean_denominator(double loss_weight) const override {
    return weighted_mean_denominator(loss_weight);
  }
  std::vector<DraftRatio> extra_ratios() const override {
    return {{"final_loss", "final_loss_sum", "loss_weight"},
            {"base_loss", "base_loss_sum", "loss_weight"},
            {"base_accuracy", "base_correct_tokens", "valid_tokens"},
            {"base_accept_len", "base_accept_len_sum", "valid_blocks"},
            {"lambda_base", "lambda_base_sum", "micro_batches"}};
  }
  std::unique_ptr<DraftObjective> objective(const DraftSettings& s) const override {
    return std::make_unique<DominoObjective>(s);
  }
  std::string_view projector_type() const override { return "domino"; }
  std::shared_ptr<const DraftHead> read_head(const DraftJsonReader& r) const override {
    DominoHeadConfig h;
    h.emb_dim = r.nested_or_top("emb_dim");
    h.gru_hidden_dim = r.nested_integer("gru_hidden_dim");
    // Absent keys read as the reference loader reads them: no pure prefix, unshifted labels.
    h.pure_draft_prefix_len = r.nested().contains("pure_draft_prefix_len")
                                  ? r.nested_integer("pure_draft_prefix_len")
                                  : 0;
    h.shift_label = r.flag("shift_label", true).value_or(false);
    return domino_head(h);
  }
  std::vector<std::string_view> architectures() const override { return {"DominoDraftModel"}; }
  std::vector<DraftSetting> train_settings() const override {
    std::vector<DraftSetting> settings = {gamma_setting()};
    for (DraftSetting& s : head_settings()) settings.push_back(std::move(s));
    settings.push_back(
        number_setting("lambda_base_start", 1.0, 0, 1, " (the base loss's share at step 0)"));
    settings.push_back(number_setting("lambda_base_decay_ratio", 0.5, 0, 1,
                                      " (the share of the steps over which lambda_base decays)"));
    return settings;
  }
  void shape(DraftOptions& options, const DraftSettings& s) const override {
    const DominoHeadConfig d;
    DominoHeadConfig h;
    h.emb_dim = s.integer("emb_dim", d.emb_dim);
    h.gru_hidden_dim = s.integer("gru_hidden_dim", d.gru_hidden_dim);
    h.pure_draft_prefix_len = s.integer("pure_draft_prefix_len", d.pure_draft_prefix_len);
    h.shift_label = s.integer("shift_label", d.shift_label) != 0;
    options.head = domino_head(h);
  }
  DraftSettings settings_of(const DraftConfig& c) const override {
    return head_settings_of(domino_head_config(c));
  }
  // The head in the reference's proportions (E = H / 16, G = H / 4), at least 32 and 64 wide;
  // without shift_label it supervises DFlash's slots, which times the head's own cost.
  std::vector<DraftVariant> variants(int64_t hidden_size) const override {
    const int64_t E = std::max<int64_t>(hidden_size / 16, 32),
                  G = std::max<int64_t>(hidden_size / 4, 64);
    DraftSettings s;
    s.integers = {{"emb_dim", E}, {"gru_hidden_dim", G}};
    DraftSettings unshifted = s;
    unshifted.integers["shift_label"] = 0;
    const std::string head = "GRU " + std::to_string(G) + ", projection " + std::to_string(E);
    return {{"domino", head + ", shift_label", s},
            {"domino-u", head + ", unshifted: the head's own cost (target <= 1.10x)", unshifted}};
  }
  std::vector<DraftOption> eval_options() const override {
    return {gamma_option(),
            number_option("--lambda-base", number_setting("lambda_base", 0.0, 0, 1),
                          "Weight of the base logits' loss in loss = (1 - l) final + l base")};
  }
  int64_t label_shift(const DraftConfig& c) const override {
    return domino_head_config(c).shift_label ? 1 : 0;
  }
  bool has_correction_head(const DraftConfig& /*c*/) const override { return true; }

  DraftConfig exported(const DraftConfig& draft, const ServingExport& how) const override {
    const bool shift_label = domino_head_config(draft).shift_label;
    if (how.drop_correction_head) {
      if (shift_label)
        fail(
            "--drop-correction-head: this Domino draft was trained with shift_label (slot k "
            "predicts the token at anchor + 1 + k, one further than a DFlash draft's slot), so an "
            "engine's dflash method would read every draft one position off; only a draft trained "
            "without shift_label can drop its head");
      DraftConfig out = draft;
      out.head.reset();
      return out.kind().exported(out, {how.engine, false});
    }
    // The way out of a refusal for a head an engine cannot serve: dropping it, where the draft's
    // slots are a DFlash draft's.
    const auto drop_head_or = [&](const std::string& otherwise) {
      return shift_label
                 ? "; its head cannot be dropped (trained with shift_label, every slot would be "
                   "read one position off): " +
                       otherwise
                 : "; add --drop-correction-head to write the DFlash part alone (decoding then "
                   "uses the base logits; `sprig spec-eval` shows tau with and without the head), "
                   "or " +
                       otherwise;
    };
    if (how.engine == ServingEngine::vllm)
      fail(
          "vLLM has no Domino runtime: its DFlash loader rejects the correction head's tensors "
          "(prefix_gru, embed_proj)" +
          drop_head_or(sglang_serves(draft) ? "export with --serve sglang"
                                            : "export with --serve reference"));
    if (how.engine == ServingEngine::sglang && !sglang_serves(draft))
      fail("SGLang serves a Domino head only with pure_draft_prefix_len 1; this draft has " +
           std::to_string(domino_head_config(draft).pure_draft_prefix_len) +
           drop_head_or("export with --serve reference"));
    return draft;
  }
  std::vector<std::string> serving_notes(const DraftConfig& /*original*/,
                                         const DraftConfig& exported,
                                         ServingEngine engine) const override {
    if (!exported.head)
      return {
          "the Domino correction head is not exported: decoding uses the backbone's base logits "
          "(`sprig spec-eval` shows tau with and without the head)"};
    const bool portable = engine == ServingEngine::portable;
    std::vector<std::string> notes;
    if (portable)
      notes.push_back(std::string("vLLM cannot serve this export (no Domino runtime)") +
                      (domino_head_config(exported).shift_label
                           ? ""
                           : "; `--serve vllm --drop-correction-head` writes the DFlash part "
                             "alone"));
    if (engine != ServingEngine::reference && sglang_serves(exported))
      notes.push_back(
          "SGLang applies the correction head in its DFlash V2 worker (CUDA, bf16, greedy); an "
          "SGLang without Domino support ignores the head and decodes with the base logits");
    if (portable && !sglang_serves(exported))
      notes.push_back(
          "SGLang cannot serve this export: its Domino worker needs "
          "pure_draft_prefix_len 1, this draft has " +
          std::to_string(domino_head_config(exported).pure_draft_prefix_len));
    return notes;
  }
  bool vllm_serves(const DraftConfig& /*exported*/) const override { return false; }
  // SGLang's Domino worker corrects from slot 1 only (dflash_utils.py's
  // parse_dflash_draft_config).
  bool sglang_serves(const DraftConfig& exported) const override {
    return domino_head_config(exported).pure_draft_prefix_len == 1;
  }
  // The GRU reads [anchor, draft 1, ...] one token at a time; its state after j tokens corrects
  // the slot proposing draft j (docs/semantics.md §13.2).
  std::vector<int64_t> drafts(const DFlashDraft& draft, const Tensor& hidden,
                              const Tensor& base_logits, int64_t anchor,
                              const TokenEmbedding& embed, bool correction_head) const override {
    if (!correction_head)
      return DraftKind::drafts(draft, hidden, base_logits, anchor, embed, correction_head);
    const DominoHeadConfig& head = domino_head_config(draft.config());
    const DominoHeadModule& correction = domino_head_module(draft);
    const int64_t bs = base_logits.size(0), first = head.shift_label ? 0 : 1;
    const GRU& gru = correction.prefix_gru;
    Tensor state = gru.step(embed(anchor),
                            Tensor::zeros({1, gru.hidden_size}, hidden.dtype(), hidden.device()));
    std::vector<int64_t> out;
    for (int64_t slot = first; slot < bs; ++slot) {
      Tensor logits = base_logits.narrow(0, slot, 1);
      if (slot >= head.first_corrected_slot()) {
        const Var z(hidden.narrow(0, slot, 1));
        logits = add(logits,
                     correction.embed_proj_out.forward(correction.features(z, Var(state))).value());
      }
      const auto id = static_cast<size_t>(argmax(logits.reshape({-1}), 0).item());
      out.push_back(draft.vocabulary().draft_to_target[id]);
      if (slot + 1 < bs) state = gru.step(embed(out.back()), state);
    }
    return out;
  }
};

}  // namespace

const DraftKind& domino_kind() {
  static const Domino kind;
  return kind;
}

}  // namespace sprig::speculative

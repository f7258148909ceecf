// `sprig bench draft`: the DFlash draft training step (frozen target capture, draft forward and
// backward, the loss through the target's head), measured three ways in one run:
//   packing     the same documents as padded rows (one per row, ~60% padding) and as
//               dflash-packed rows, with the same anchors per document: the time over all of
//               them and its ratio (target: packed >= 1.3x faster);
//   anchors     one micro-batch at 16..256 anchors per row: the step time's linear fit and the
//               share of its fixed cost at 256 anchors (target: <= 25%);
//   objectives  one micro-batch as a step of each draft kind and its variants
//               (DraftKind::variants): each one's time over DFlash's. Domino (head G = H/4,
//               E = H/16, the reference's proportions) runs with shift_label (its default: bs
//               slots supervised, one more than DFlash's bs - 1) and without, where it
//               supervises DFlash's slots and the ratio is the head's own cost (target <= 1.10x);
//               JetSpec's target is <= 1.15x.
//   eagle3      the EAGLE-3 training step (target capture with its logits, --ttt-steps steps, the
//               soft cross-entropy): the packing documents as padded and as packed rows (target:
//               packed >= 1.3x faster);
//   vocab       on a target with Qwen3's vocabulary (151936 ids), the EAGLE-3 and the DFlash
//               training steps over a draft vocabulary of --draft-vocab ids against the whole
//               head (target >= 2x).
// On CUDA it also prints the model FLOP utilisation against the device's bf16 peak.
//
// Defaults: CPU, the "tiny" target of tools/bench/models.h (f32), rows of 1024 tokens; CUDA,
// qwen3-0.6b (bf16), rows of 4096 tokens. The draft: 1 layer, blocks of 16.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.h"
#include "nn/loss.h"
#include "speculative/dflash.h"
#include "speculative/draft_kind.h"
#include "speculative/eagle3.h"
#include "tensor/cuda/kernels.h"
#include "tools/bench/memory_check.h"
#include "tools/bench/models.h"
#include "tools/bench/reference.h"
#include "tools/commands.h"
#include "tools/options.h"
#include "train/batch_input.h"
#include "train/memory.h"
#include "train/progress.h"

namespace sprig::tools {

namespace {

using namespace speculative;

struct DraftBenchOptions {
  std::string device = "auto", target;
  int64_t draft_layers = 1, block_size = 16, seq = 0, rows = 2, anchors_per_doc = 16;
  int64_t ttt_steps = 7, draft_vocab = 32000;
  int reps = 3;
  bool quick = false;
  std::string section = "all";  // packing, anchors, objectives, eagle3, vocab or all
};

// The target's name: --target, else tiny on the CPU and qwen3-0.6b on CUDA.
std::string target_name(const DraftBenchOptions& o, Device device) {
  return o.target.empty() ? (device.is_cuda() ? "qwen3-0.6b" : "tiny") : o.target;
}

// A draft for `target`: --draft-layers and --block-size, the last token id as the mask token.
DraftOptions bench_draft_options(const DraftBenchOptions& o, const QwenConfig& target) {
  DraftOptions d;
  d.num_layers = o.draft_layers;
  d.block_size = o.block_size;
  d.mask_token_id = target.vocab_size - 1;
  return d;
}
DraftConfig bench_draft_config(const DraftBenchOptions& o, const QwenConfig& target) {
  return draft_config_for(target, bench_draft_options(o, target));
}

// The target, a fresh draft for it and a timed training step.
class DraftStep {
 public:
  DraftStep(const DraftBenchOptions& o, Device device)
      : device_(device),
        dtype_(device.is_cuda() ? DType::bf16 : DType::f32),
        target_(make_target(o, device, dtype_)),
        draft_(make_draft(o, target_.config())) {
    draft_->to(device, dtype_);
    peak_flops_ = device.is_cuda() ? peak_bf16_flops(cuda::device_name(device.index)) : 0;
  }

  const FrozenTarget& target() const { return target_; }
  const DFlashDraft& draft() const { return *draft_; }
  DFlashDraft& draft() { return *draft_; }
  std::string dtype_name() const { return sprig::dtype_name(dtype_); }

  // Median seconds of the step on `rows` with `anchors` (one untimed step first), and its loss.
  double seconds(const DraftRows& rows, const Anchors& anchors, int reps, double* loss = nullptr) {
    const auto step = [&] {
      draft_->zero_grad();
      const DraftLoss l = dflash_loss(target_, *draft_, rows, anchors, {});
      (l.sum * (1.0 / (l.metrics.loss_weight + 1e-6))).backward();
      return l.value();
    };
    const double first = step();
    if (loss) *loss = first;
    return bench::median_seconds(device_, 0, reps, [&] { step(); });
  }
  double flops(const DraftRows& rows, const Anchors& anchors) const {
    return dflash_flops(target_, *draft_, rows.rows(), rows.seq_len(), anchors.blocks());
  }
  // " | 41.2% MFU" on CUDA, nothing on the CPU.
  std::string mfu(double flops, double seconds) const {
    if (peak_flops_ <= 0) return "";
    char text[32];
    std::snprintf(text, sizeof text, " | %.1f%% MFU", 100.0 * flops / seconds / peak_flops_);
    return text;
  }

 private:
  static FrozenTarget make_target(const DraftBenchOptions& o, Device device, DType dtype) {
    Generator gen(0);
    return FrozenTarget(
        std::make_unique<QwenForCausalLM>(bench::model_config(target_name(o, device)), gen), device,
        dtype);
  }
  static std::unique_ptr<DFlashDraft> make_draft(const DraftBenchOptions& o,
                                                 const QwenConfig& target) {
    Generator gen(1);
    return std::make_unique<DFlashDraft>(bench_draft_config(o, target), gen);
  }

  Device device_;
  DType dtype_;
  FrozenTarget target_;
  std::unique_ptr<DFlashDraft> draft_;
  double peak_flops_ = 0;
};

// Documents of 10% to 70% of a row (random ids below the mask token, all supervised): one per
// row leaves about 60% of a padded row empty.
data::Corpus bench_documents(int64_t count, int64_t seq, int64_t vocab, Generator& gen) {
  data::Corpus corpus;
  corpus.form = data::TargetForm::loss_mask;
  corpus.sources = {"bench"};
  for (int64_t i = 0; i < count; ++i) {
    data::Document doc;
    const int64_t n = gen.next_int(seq / 10, 7 * seq / 10 + 1);
    for (int64_t t = 0; t < n; ++t)
      doc.input_ids.push_back(static_cast<int32_t>(gen.next_int(0, vocab - 1)));
    doc.record = i + 1;
    corpus.docs.push_back(std::move(doc));
  }
  return corpus;
}

struct LayoutTime {
  int64_t rows = 0, anchors = 0;
  double seconds = 0, flops = 0, padding = 0;
};

// Every micro-batch of `packing`'s rows over the corpus, each with anchors_per_doc anchors per
// document it holds (drawn once, outside the timing).
LayoutTime time_layout(DraftStep& step, const data::Corpus& corpus, data::Packing packing,
                       const DraftBenchOptions& o, int64_t seq) {
  const data::PackPlan plan = data::plan_rows(corpus, {.mode = packing, .seq_len = seq});
  LayoutTime t;
  t.rows = static_cast<int64_t>(plan.rows.size());
  t.padding = plan.padding_fraction();
  Generator gen(2);
  for (int64_t first = 0; first < t.rows; first += o.rows) {
    std::vector<int64_t> ids;
    int64_t docs = 0;
    for (int64_t r = first; r < std::min(first + o.rows, t.rows); ++r) {
      ids.push_back(r);
      docs += static_cast<int64_t>(plan.rows[static_cast<size_t>(r)].size());
    }
    const data::Batch batch = data::collate(corpus, plan, ids, 0);
    const DraftRows rows = draft_rows(batch, packing == data::Packing::dflash);
    const int64_t per_row = (o.anchors_per_doc * docs + batch.rows() - 1) / batch.rows();
    const Anchors anchors = sample_anchors(rows, o.block_size, per_row, gen);
    t.anchors += anchors.blocks() * batch.rows();
    t.seconds += step.seconds(rows, anchors, o.reps);
    t.flops += step.flops(rows, anchors);
  }
  return t;
}

void packing_bench(DraftStep& step, const DraftBenchOptions& o, int64_t seq) {
  Generator gen(3);
  const int64_t vocab = step.target().config().vocab_size;
  const data::Corpus corpus = bench_documents(o.quick ? 8 : 24, seq, vocab, gen);
  int64_t useful = 0;
  for (const data::Document& d : corpus.docs) useful += d.size();
  std::printf(
      "\npacking: %zu documents, %lld useful tokens, %lld anchors per document, rows of %lld\n",
      corpus.docs.size(), static_cast<long long>(useful), static_cast<long long>(o.anchors_per_doc),
      static_cast<long long>(seq));
  const LayoutTime padded = time_layout(step, corpus, data::Packing::padded, o, seq);
  const LayoutTime packed = time_layout(step, corpus, data::Packing::dflash, o, seq);
  std::printf("%-8s %6s %9s %9s %10s %16s\n", "layout", "rows", "padding", "anchors", "time (s)",
              "useful tokens/s");
  for (const auto& [name, t] : {std::pair{"padded", &padded}, std::pair{"packed", &packed}})
    std::printf("%-8s %6lld %8.1f%% %9lld %10.3f %16.0f%s\n", name, static_cast<long long>(t->rows),
                100.0 * t->padding, static_cast<long long>(t->anchors), t->seconds,
                static_cast<double>(useful) / t->seconds, step.mfu(t->flops, t->seconds).c_str());
  std::printf("packed vs padded: %.2fx faster on the same documents (target >= 1.3x)\n",
              padded.seconds / packed.seconds);
}

void anchors_bench(DraftStep& step, const DraftBenchOptions& o, int64_t seq) {
  Generator gen(4);
  DraftRows rows;
  std::vector<int64_t> ids(static_cast<size_t>(o.rows * seq));
  for (int64_t& id : ids) id = gen.next_int(0, step.target().config().vocab_size - 1);
  rows.input_ids = Tensor::from_vector(ids, {o.rows, seq});
  rows.loss_mask = Tensor::ones({o.rows, seq}, DType::i64);
  const std::vector<int64_t> counts =
      o.quick ? std::vector<int64_t>{16, 64} : std::vector<int64_t>{16, 32, 64, 128, 256};
  std::printf("\nanchors: %lld rows of %lld tokens, blocks of %lld\n%8s %10s %10s\n",
              static_cast<long long>(o.rows), static_cast<long long>(seq),
              static_cast<long long>(o.block_size), "anchors", "step (ms)", "fit (ms)");
  std::vector<double> times;
  for (const int64_t n : counts) {
    const Anchors anchors = sample_anchors(rows, o.block_size, n, gen);
    times.push_back(step.seconds(rows, anchors, o.reps));
  }
  // Least-squares line t = fixed + slope * n.
  const auto k = static_cast<double>(counts.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const auto x = static_cast<double>(counts[i]);
    sx += x, sy += times[i], sxx += x * x, sxy += x * times[i];
  }
  const double slope = (k * sxy - sx * sy) / (k * sxx - sx * sx), fixed = (sy - slope * sx) / k;
  double worst = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double fit = fixed + slope * static_cast<double>(counts[i]);
    worst = std::max(worst, std::abs(times[i] - fit) / times[i]);
    std::printf("%8lld %10.1f %10.1f\n", static_cast<long long>(counts[i]), times[i] * 1e3,
                fit * 1e3);
  }
  const double at_256 = fixed + slope * 256.0;
  std::printf(
      "linear fit: %.3f ms per anchor + %.1f ms fixed (largest deviation %.1f%%); fixed cost "
      "%.1f%% of the step at 256 anchors (target <= 25%%)\n",
      slope * 1e3, fixed * 1e3, 100.0 * worst, 100.0 * fixed / at_256);
}

// One micro-batch trained as a draft of each kind and variant (DraftKind::variants), same
// backbone shape and anchors, each through its kind's objective.
void objectives_bench(DraftStep& step, const DraftBenchOptions& o, int64_t seq, Device device) {
  const FrozenTarget& target = step.target();
  Generator gen(5);
  DraftRows rows;
  std::vector<int64_t> ids(static_cast<size_t>(o.rows * seq));
  for (int64_t& id : ids) id = gen.next_int(0, target.config().vocab_size - 1);
  rows.input_ids = Tensor::from_vector(ids, {o.rows, seq});
  rows.loss_mask = Tensor::ones({o.rows, seq}, DType::i64);
  const DraftBatch batch{rows, sample_anchors(rows, o.block_size, o.quick ? 32 : 128, gen), {}};
  const int64_t H = target.config().hidden_size;
  const DType dtype = step.draft().fc.weight.dtype();
  struct Timed {
    DraftVariant variant;
    std::unique_ptr<DFlashDraft> draft;
    std::unique_ptr<DraftObjective> objective;
  };
  std::vector<Timed> drafts;
  for (const DraftKind* kind : draft_kinds())
    for (DraftVariant& variant : kind->variants(H)) {
      DraftOptions options = bench_draft_options(o, target.config());
      kind->shape(options, variant.settings);
      auto draft = std::make_unique<DFlashDraft>(draft_config_for(target.config(), options), gen);
      draft->to(device, dtype);
      auto objective = kind->objective(variant.settings);
      drafts.push_back({std::move(variant), std::move(draft), std::move(objective)});
    }
  // One training step of each draft in turn, round after round, after one untimed round. Each
  // ratio is the median over rounds of the round's own ratio: a machine whose speed drifts
  // between rounds then slows both sides of every ratio alike.
  std::vector<std::vector<double>> samples(drafts.size()), ratios(drafts.size());
  const int rounds = std::max(o.reps, o.quick ? 3 : 9);
  for (int round = -1; round < rounds; ++round)
    for (size_t i = 0; i < drafts.size(); ++i) {
      const double t = bench::median_seconds(device, 0, 1, [&] {
        drafts[i].draft->zero_grad();
        const DraftLoss l = drafts[i].objective->loss(target, *drafts[i].draft, batch);
        l.mean().backward();
      });
      if (round < 0) continue;
      samples[i].push_back(t);
      ratios[i].push_back(t / samples[0].back());
    }
  std::printf(
      "\nobjectives: %lld rows of %lld tokens, %lld anchors per row, blocks of %lld; %d "
      "rounds; each ratio over %s's\n",
      static_cast<long long>(o.rows), static_cast<long long>(seq),
      static_cast<long long>(batch.anchors.blocks()), static_cast<long long>(o.block_size), rounds,
      drafts[0].variant.name.c_str());
  // Noise on a shared machine only ever adds time, so the fastest steps' ratio is the steadier
  // estimate; the median of the rounds' ratios and their range show the spread.
  std::printf("%-8s %10s %10s %8s %15s %11s %s\n", "draft", "step (ms)", "best (ms)", "ratio",
              "ratio range", "best ratio", "");
  const auto best = [&](size_t i) {
    return *std::min_element(samples[i].begin(), samples[i].end());
  };
  for (size_t i = 0; i < drafts.size(); ++i) {
    const DraftConfig& config = drafts[i].draft->config();
    const int64_t supervised = config.kind().drafts_per_block(config, o.block_size);
    const std::string& note = drafts[i].variant.note;
    const auto [lo, hi] = std::minmax_element(ratios[i].begin(), ratios[i].end());
    std::printf("%-8s %10.1f %10.1f %7.2fx %7.2f-%.2fx %10.2fx  %lld slots supervised%s%s\n",
                drafts[i].variant.name.c_str(), bench::median(samples[i]) * 1e3, best(i) * 1e3,
                bench::median(ratios[i]), *lo, *hi, best(i) / best(0),
                static_cast<long long>(supervised), note.empty() ? "" : "; ", note.c_str());
  }

  // The objectives alone on the same slot rows, forward and backward through the frozen head:
  // DFlash's cross-entropy against JetSpec's KL to given teacher logits.
  const int64_t R = batch.anchors.blocks() * o.rows * (o.block_size - 1),
                V = target.config().vocab_size;
  const DType dt = dtype;
  const Var head(target.head().value().to(device, dt));
  const Tensor h0 = normal({R, H}, 0, 1, dt, device, gen);
  const Tensor teacher = normal({R, V}, 0, 1, dt, device, gen);
  std::vector<int64_t> ids_r(static_cast<size_t>(R));
  for (int64_t& id : ids_r) id = gen.next_int(0, V);
  const Tensor targets = Tensor::from_vector(ids_r, {R}).to(device);
  const std::vector<std::function<Var(const Var&)>> losses = {
      [&](const Var& h) { return linear_cross_entropy(h, head, targets); },
      [&](const Var& h) { return linear_kl_div(h, head, teacher); }};
  std::vector<std::vector<double>> loss_samples(losses.size());
  for (int round = -1; round < std::max(o.reps, 5); ++round)
    for (size_t i = 0; i < losses.size(); ++i) {
      const double t = bench::median_seconds(device, 0, 1, [&] {
        const Var h(h0, true);
        sum_all(losses[i](h)).backward();
      });
      if (round >= 0) loss_samples[i].push_back(t);
    }
  const double ce = bench::median(loss_samples[0]), kl = bench::median(loss_samples[1]);
  const auto fastest = [&](size_t i) {
    return *std::min_element(loss_samples[i].begin(), loss_samples[i].end());
  };
  std::printf(
      "losses alone on %lld slot rows (vocabulary %lld): cross-entropy %.1f ms, KL %.1f "
      "ms, %.2fx; fastest %.2fx (target <= 1.15x)\n",
      static_cast<long long>(R), static_cast<long long>(V), ce * 1e3, kl * 1e3, kl / ce,
      fastest(1) / fastest(0));
}

// The draft vocabulary of `size` ids spread over `vocab_size`: the cost is the head's size, not
// which ids it holds.
DraftVocabulary spread_vocabulary(int64_t vocab_size, int64_t size) {
  DraftVocabulary v;
  v.vocab_size = vocab_size;
  for (int64_t i = 0; i < size; ++i) v.draft_to_target.push_back(i * vocab_size / size);
  return v;
}

// An EAGLE-3 draft for `target`: low, middle and high layers (the reference's default from eight
// layers on), and a draft vocabulary of `draft_vocab` ids (0: the whole one).
std::unique_ptr<Eagle3Draft> bench_eagle3(const QwenConfig& target, int64_t draft_vocab,
                                          Device device, DType dtype) {
  const int64_t L = target.num_hidden_layers;
  Eagle3Options options;
  if (L < 8) options.aux_layer_ids = {0, L / 2, L - 1};
  options.draft_vocab_size = draft_vocab;
  Generator gen(6);
  auto draft = std::make_unique<Eagle3Draft>(eagle3_config_for(target, options), gen);
  if (draft_vocab > 0) draft->set_vocabulary(spread_vocabulary(target.vocab_size, draft_vocab));
  draft->to(device, dtype);
  return draft;
}

// Median seconds of an EAGLE-3 training step on `rows` (one untimed step first).
double eagle3_seconds(const FrozenTarget& target, Eagle3Draft& draft, const DraftRows& rows,
                      const DraftBenchOptions& o, Device device) {
  const auto step = [&] {
    draft.zero_grad();
    eagle3_loss(draft, rows, eagle3_teacher(target, draft, rows), {o.ttt_steps, 0.8, 0})
        .loss.backward();
  };
  step();
  return bench::median_seconds(device, 0, o.reps, step);
}

void eagle3_bench(DraftStep& step, const DraftBenchOptions& o, int64_t seq, Device device) {
  const FrozenTarget& target = step.target();
  const DType dtype = step.draft().fc.weight.dtype();
  Generator gen(3);  // the packing section's documents
  const data::Corpus corpus =
      bench_documents(o.quick ? 8 : 24, seq, target.config().vocab_size, gen);
  auto draft = bench_eagle3(target.config(), 0, device, dtype);
  std::printf("\neagle3: %lld steps, target layers", static_cast<long long>(o.ttt_steps));
  for (int64_t id : draft->config().aux_layer_ids) std::printf(" %lld", static_cast<long long>(id));
  std::printf(", %zu documents in rows of %lld\n%-8s %6s %9s %10s\n", corpus.docs.size(),
              static_cast<long long>(seq), "layout", "rows", "padding", "time (s)");
  double seconds[2] = {0, 0};
  int i = 0;
  for (const data::Packing packing : {data::Packing::padded, data::Packing::dflash}) {
    const data::PackPlan plan = data::plan_rows(corpus, {.mode = packing, .seq_len = seq});
    const auto n = static_cast<int64_t>(plan.rows.size());
    for (int64_t first = 0; first < n; first += o.rows) {
      std::vector<int64_t> ids;
      for (int64_t r = first; r < std::min(first + o.rows, n); ++r) ids.push_back(r);
      const data::Batch batch = data::collate(corpus, plan, ids, 0);
      seconds[i] += eagle3_seconds(target, *draft,
                                   draft_rows(batch, packing == data::Packing::dflash), o, device);
    }
    std::printf("%-8s %6lld %8.1f%% %10.3f\n", i == 0 ? "padded" : "packed",
                static_cast<long long>(n), 100.0 * plan.padding_fraction(), seconds[i]);
    ++i;
  }
  std::printf("packed vs padded: %.2fx faster on the same documents (target >= 1.3x)\n",
              seconds[0] / seconds[1]);
}

// Draft vocabularies on a target with Qwen3's: the step target's layers, its head and embedding
// at 151936 ids; one row of a quarter of --seq. EAGLE-3's head is its own, DFlash's the target's
// rows of the ids.
void vocab_bench(DraftStep& step, const DraftBenchOptions& o, int64_t seq, Device device) {
  const DType dtype = step.draft().fc.weight.dtype();
  QwenConfig big = step.target().config();
  big.vocab_size = 151936;
  Generator gen(7);
  const FrozenTarget target(std::make_unique<QwenForCausalLM>(big, gen), device, dtype);
  const int64_t S = std::max<int64_t>(64, seq / 4);
  DraftRows rows;
  std::vector<int64_t> ids(static_cast<size_t>(S));
  for (int64_t& id : ids) id = gen.next_int(0, big.vocab_size);
  rows.input_ids = Tensor::from_vector(ids, {1, S});
  rows.loss_mask = Tensor::ones({1, S}, DType::i64);
  const Anchors anchors = sample_anchors(rows, o.block_size, o.quick ? 16 : 64, gen);
  std::printf("\nvocab: %lld of %lld ids against the whole vocabulary, one row of %lld tokens\n",
              static_cast<long long>(o.draft_vocab), static_cast<long long>(big.vocab_size),
              static_cast<long long>(S));
  double eagle3[2], dflash[2];
  for (const int64_t vd : {int64_t{0}, o.draft_vocab}) {
    auto e = bench_eagle3(big, vd, device, dtype);
    eagle3[vd == 0 ? 0 : 1] = eagle3_seconds(target, *e, rows, o, device);
    DraftOptions options = bench_draft_options(o, big);
    options.draft_vocab_size = vd;
    Generator draft_gen(1);
    DFlashDraft d(draft_config_for(big, options), draft_gen);
    if (vd > 0) {
      DraftVocabulary v = spread_vocabulary(big.vocab_size, vd);
      const Tensor& head = target.head().value();
      Tensor head_rows = index_select(head, 0, v.target_ids().to(head.device()));
      d.set_vocabulary(std::move(v), std::move(head_rows));
    }
    d.to(device, dtype);
    const auto train_step = [&] {
      d.zero_grad();
      dflash_loss(target, d, rows, anchors, {}).mean().backward();
    };
    train_step();
    dflash[vd == 0 ? 0 : 1] = bench::median_seconds(device, 0, o.reps, train_step);
  }
  std::printf("%-8s %12s %12s %8s\n", "draft", "whole (s)", "reduced (s)", "faster");
  std::printf("%-8s %12.3f %12.3f %7.2fx (target >= 2x)\n", "eagle3", eagle3[0], eagle3[1],
              eagle3[0] / eagle3[1]);
  std::printf("%-8s %12.3f %12.3f %7.2fx (target >= 2x; %lld blocks of %lld)\n", "dflash",
              dflash[0], dflash[1], dflash[0] / dflash[1], static_cast<long long>(anchors.blocks()),
              static_cast<long long>(o.block_size));
}

// Refuses a run that cannot fit: the draft's training step as train/memory.h estimates it, on the
// largest micro-batch (--rows rows of `seq` tokens with the most anchors a section samples), and
// the objectives section's teacher logits.
void check_draft_fits(const DraftBenchOptions& o, int64_t seq, Device device) {
  const QwenConfig target = bench::model_config(target_name(o, device));
  const DraftConfig draft = bench_draft_config(o, target);
  const DType dtype = device.is_cuda() ? DType::bf16 : DType::f32;
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  // Anchors per row: the anchors section's largest count, or the packing section's per document
  // (documents of at least 10% of a row: at most 10 per row); at most one per position.
  const double positions = d(seq - o.block_size + 1),
               anchors =
                   std::min(positions, std::max(o.quick ? 64.0 : 256.0, 10 * d(o.anchors_per_doc)));
  const double context = d(o.rows) * d(seq);
  StepShapes shapes;
  shapes.layers = draft.layers;
  shapes.tokens = bench::shape_count(d(o.rows) * anchors * d(o.block_size));
  shapes.context_tokens = bench::shape_count(context);
  shapes.frozen_parameters = bench::parameter_count(target.parameter_parts());
  shapes.kept_elements = bench::shape_count(context * d(draft.context_width()));
  shapes.batch_tokens = shapes.context_tokens;
  std::vector<ParameterPart> parts = draft.layers.parameter_parts(false);
  parts.push_back({d(draft.context_width()) * d(draft.layers.hidden_size), "fc"});
  double bytes = estimate_step_memory(shapes, bench::parameter_count(parts), dtype).total();
  if (o.section == "all" || o.section == "objectives")
    bytes += d(o.rows) * std::min(positions, o.quick ? 32.0 : 128.0) * d(o.block_size - 1) *
             d(target.vocab_size) * static_cast<double>(dtype_size(dtype));
  // The vocab section's target with Qwen3's vocabulary: its embedding and head, and a quarter
  // row's logits, the teacher's copy and a chunk of the head's gradient each.
  if (o.section == "all" || o.section == "vocab")
    bytes += (2 * d(target.hidden_size) + 3 * std::max(64.0, d(seq) / 4)) * 151936.0 *
             static_cast<double>(dtype_size(dtype));
  bench::check_fits("bench draft",
                    "--target " + target_name(o, device) + " --rows " + std::to_string(o.rows) +
                        " --seq " + std::to_string(seq) + " --anchors-per-doc " +
                        std::to_string(o.anchors_per_doc) + " --draft-layers " +
                        std::to_string(o.draft_layers) + " --block-size " +
                        std::to_string(o.block_size),
                    bytes, device);
}

void run_draft_bench(const DraftBenchOptions& o) {
  const Device device = resolve_device(o.device);
  const int64_t seq = o.seq > 0 ? o.seq : (device.is_cuda() ? 4096 : (o.quick ? 512 : 1024));
  check_draft_fits(o, seq, device);
  DraftStep step(o, device);
  const QwenConfig& t = step.target().config();
  std::printf(
      "bench draft on %s (%s): target %lld layers, hidden %lld, vocabulary %lld; DFlash draft of "
      "%lld layer(s), %.2fM parameters, blocks of %lld, target layers",
      device.str().c_str(), step.dtype_name().c_str(), static_cast<long long>(t.num_hidden_layers),
      static_cast<long long>(t.hidden_size), static_cast<long long>(t.vocab_size),
      static_cast<long long>(o.draft_layers),
      static_cast<double>(step.draft().num_parameters()) / 1e6,
      static_cast<long long>(o.block_size));
  for (const int64_t id : step.draft().config().target_layer_ids)
    std::printf(" %lld", static_cast<long long>(id));
  std::printf("; median of %d steps (target capture, draft forward and backward)\n", o.reps);
  const auto wanted = [&](const char* name) { return o.section == "all" || o.section == name; };
  if (wanted("packing")) packing_bench(step, o, seq);
  if (wanted("anchors")) anchors_bench(step, o, seq);
  if (wanted("objectives")) objectives_bench(step, o, seq, device);
  if (wanted("eagle3")) eagle3_bench(step, o, seq, device);
  if (wanted("vocab")) vocab_bench(step, o, seq, device);
}

}  // namespace

void add_bench_draft_command(CLI::App& bench) {
  auto o = std::make_shared<DraftBenchOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "draft",
      "Draft training steps: DFlash's on packed vs padded rows of the same documents and against "
      "the number of anchors, each draft kind's against DFlash's, EAGLE-3's packed vs padded, and "
      "EAGLE-3's and DFlash's with a draft vocabulary");
  add_device_option(cmd, o->device);
  cmd->add_option(
      "--target", o->target,
      "tiny, wide, qwen3-0.6b or a config.json (default: tiny on CPU, qwen3-0.6b on CUDA)");
  add_int_option(cmd, "--draft-layers", o->draft_layers, "Layers of the draft")
      ->check(kPositive)
      ->capture_default_str();
  add_int_option(cmd, "--block-size", o->block_size, "Slots per block")
      ->check(CLI::Range(int64_t{2}, int64_t{64}))
      ->capture_default_str();
  add_int_option(cmd, "--seq", o->seq, "Tokens per row (default: 1024 CPU, 4096 CUDA)")
      ->check(CLI::Range(int64_t{64}, int64_t{1} << 17));
  add_int_option(cmd, "--rows", o->rows, "Rows per micro-batch")
      ->check(kPositive)
      ->capture_default_str();
  add_int_option(cmd, "--anchors-per-doc", o->anchors_per_doc, "Anchors per document (packing)")
      ->check(kPositive)
      ->capture_default_str();
  add_int_option(cmd, "--reps", o->reps, "Timed steps per measurement")
      ->check(kPositive)
      ->capture_default_str();
  add_int_option(cmd, "--ttt-steps", o->ttt_steps, "EAGLE-3's steps (eagle3)")
      ->check(kPositive)
      ->capture_default_str();
  add_int_option(cmd, "--draft-vocab", o->draft_vocab,
                 "A draft vocabulary against Qwen3's 151936 ids (vocab)")
      ->check(CLI::Range(int64_t{1}, int64_t{151936}))
      ->capture_default_str();
  cmd->add_flag("--quick", o->quick, "fewer documents and anchor counts (a smoke run)");
  cmd->add_option("--section", o->section, "Run one section only")
      ->check(CLI::IsMember({"packing", "anchors", "objectives", "eagle3", "vocab", "all"}))
      ->capture_default_str();
  cmd->callback([o, cmd] {
    if (cmd->count("--anchors-per-doc") && o->section != "all" && o->section != "packing")
      throw CLI::ValidationError("--anchors-per-doc " + std::to_string(o->anchors_per_doc) +
                                 " applies to the packing section, not --section " + o->section);
    run_draft_bench(*o);
  });
}

}  // namespace sprig::tools

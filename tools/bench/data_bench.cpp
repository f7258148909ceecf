// `sprig bench data`: packing and folding throughput on one thread (plan rows, then collate every
// row into batch tensors), beside memcpy's bandwidth measured in the same run, and the padding
// fraction of each packer on long-tailed document lengths. Times are the thread's CPU time.
// Targets: >= 50 M tokens/s for every packer and for folding; bfd padding <= 2% at S = 4096.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/packing.h"
#include "data/prefix_tree.h"
#include "tensor/random.h"
#include "tools/bench/memory_check.h"
#include "tools/commands.h"
#include "tools/options.h"

namespace sprig::tools {

namespace {

using namespace sprig::data;

constexpr double kTargetTokensPerSecond = 50e6;
constexpr double kTargetBfdPadding = 0.02;

// This thread's CPU seconds: other work on a shared machine does not count against the packers.
double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Mean CPU seconds per call of fn, over calls lasting at least min_seconds in all.
template <class F> double seconds_per_call(F&& fn, double min_seconds) {
  int64_t calls = 0;
  const double start = thread_seconds();
  double elapsed = 0;
  do {
    fn();
    ++calls;
    elapsed = thread_seconds() - start;
  } while (elapsed < min_seconds);
  return elapsed / static_cast<double>(calls);
}

// About `tokens` tokens of documents with log-normal lengths (median 400, sigma 1), redrawn until
// they lie in [1, seq_len]. In the loss_mask form the first fifth of each document is unsupervised.
Corpus synthetic_documents(int64_t tokens, int64_t seq_len, TargetForm form) {
  Generator gen(0);
  Corpus corpus;
  corpus.form = form;
  corpus.sources = {"synthetic"};
  for (int64_t total = 0; total < tokens;) {
    int64_t len;
    do len = std::llround(400.0 * std::exp(gen.next_normal()));
    while (len < 1 || len > seq_len);
    Document& doc = corpus.docs.emplace_back();
    doc.input_ids.resize(len);
    for (int64_t i = 0; i < len; ++i)
      doc.input_ids[i] = static_cast<int32_t>((total + i) * 2654435761u % 32000);
    if (form == TargetForm::labels) {
      doc.labels.assign(doc.input_ids.begin() + 1, doc.input_ids.end());
      doc.labels.push_back(kIgnoreIndex);
    } else {
      doc.loss_mask.assign(len, 1);
      std::fill_n(doc.loss_mask.begin(), len / 5, 0);
    }
    total += len;
  }
  return corpus;
}

// Plans the corpus and collates every row, batch_rows rows at a time.
PackPlan pack_all(const Corpus& corpus, const PackOptions& options, int64_t batch_rows) {
  PackPlan plan = plan_rows(corpus, options);
  const int64_t rows = static_cast<int64_t>(plan.rows.size());
  std::vector<int64_t> ids;
  for (int64_t first = 0; first < rows; first += batch_rows) {
    ids.resize(std::min(batch_rows, rows - first));
    std::iota(ids.begin(), ids.end(), first);
    collate(corpus, plan, ids, /*pad_id=*/0);
  }
  return plan;
}

constexpr int64_t kQuickTokens = 1 << 20;

struct BenchOptions {
  int64_t tokens = 8 << 20;
  int64_t seq_len = 4096;
  int64_t batch_rows = 8;
  bool quick = false;
};

// The bytes the run holds at once: 28 per token (the two corpora's ids and labels or masks, 8
// each; the rollout groups' ids, 4, and their folded documents' ids and labels, 8), and for a
// batch of B x S tokens memcpy's source (at least 64 MiB) and destination, 8 bytes per token
// each, and the collated batch, 6 int64 tensors.
double data_bench_bytes(int64_t tokens, const BenchOptions& o) {
  const double batch = static_cast<double>(o.batch_rows) * static_cast<double>(o.seq_len);
  return 28 * static_cast<double>(tokens) + std::max(64.0 * (1 << 20), 8 * batch) + 8 * batch +
         48 * batch;
}

void run_data_bench(const BenchOptions& o, std::ostream& os) {
  const int64_t tokens = o.quick ? kQuickTokens : o.tokens;
  const std::string size = o.quick ? "--quick (" + std::to_string(tokens) + " tokens)"
                                   : "--tokens " + std::to_string(tokens);
  bench::check_fits(
      "bench data",
      size + " --seq-len " + std::to_string(o.seq_len) + " --batch " + std::to_string(o.batch_rows),
      data_bench_bytes(tokens, o), Device::cpu());
  omp_set_num_threads(1);  // one core, as the target says
  const double min_seconds = o.quick ? 0.05 : 0.5;

  // The floor: memcpy of the bytes a packer must at least read per token (an int32 id and an
  // int32 label or mask), from a large source into a reused batch-sized destination.
  const size_t chunk = static_cast<size_t>(o.batch_rows * o.seq_len) * 2 * sizeof(int32_t);
  std::vector<char> src(std::max<size_t>(64 << 20, chunk), 1), dst(chunk, 0);
  const size_t copied = src.size() / chunk * chunk;
  const double memcpy_s = seconds_per_call(
      [&] {
        for (size_t at = 0; at < copied; at += chunk)
          std::memcpy(dst.data(), src.data() + at, chunk);
      },
      min_seconds);
  const double memcpy_tok_s = static_cast<double>(copied) / (2 * sizeof(int32_t)) / memcpy_s;

  char line[160];
  os << "sprig bench data: one thread, S = " << o.seq_len << ", " << o.batch_rows
     << " rows per batch, about " << tokens << " tokens per packer\n";
  std::snprintf(line, sizeof line, "memcpy of 8 bytes per token: %.1f Mtok/s (%.1f GB/s)\n\n",
                memcpy_tok_s / 1e6, memcpy_tok_s * 8 / 1e9);
  os << line;
  std::snprintf(line, sizeof line, "%-8s %10s %11s %9s\n", "packer", "Mtok/s", "of memcpy",
                "padding");
  os << line;
  bool all_met = true;
  double bfd_padding = 1;
  auto report = [&](const char* name, const PackPlan& plan, double seconds) {
    const double tok_s = static_cast<double>(plan.tokens) / seconds;
    std::snprintf(line, sizeof line, "%-8s %10.1f %10.0f%% %8.2f%%\n", name, tok_s / 1e6,
                  100 * tok_s / memcpy_tok_s, 100 * plan.padding_fraction());
    os << line;
    all_met = all_met && tok_s >= kTargetTokensPerSecond;
  };

  const Corpus unshifted = synthetic_documents(tokens, o.seq_len, TargetForm::loss_mask);
  const Corpus shifted = synthetic_documents(tokens, o.seq_len, TargetForm::labels);
  for (Packing mode : {Packing::dflash, Packing::sft, Packing::bfd}) {
    const Corpus& corpus = mode == Packing::dflash ? unshifted : shifted;
    const PackOptions options{mode, o.seq_len};
    PackPlan plan;
    const double s =
        seconds_per_call([&] { plan = pack_all(corpus, options, o.batch_rows); }, min_seconds);
    report(packing_name(mode), plan, s);
    if (mode == Packing::bfd) bfd_padding = plan.padding_fraction();
  }

  // Folding: groups of a 384-token prompt and 8 completions of 208 (2048 tokens, two per row).
  MockRolloutOptions mock;
  mock.prompt_len = 384;
  mock.completions_per_group = 8;
  mock.completion_len = 208;
  mock.vocab_size = 32000;
  mock.num_groups = std::max<int64_t>(1, tokens / 2048);
  const std::vector<RolloutGroup> groups = mock_rollouts(mock);
  PackPlan plan;
  const double s = seconds_per_call(
      [&] {
        Corpus corpus;
        corpus.folded = true;
        corpus.docs.reserve(groups.size());
        for (const RolloutGroup& g : groups) corpus.docs.push_back(fold(g));
        plan = pack_all(corpus, {Packing::fold, o.seq_len}, o.batch_rows);
      },
      min_seconds);
  report("fold", plan, s);

  std::snprintf(line, sizeof line,
                "\ntarget >= %.0f Mtok/s for every packer and folding: %s\n"
                "target bfd padding <= %.0f%%: %s (%.2f%%)\n",
                kTargetTokensPerSecond / 1e6, all_met ? "met" : "NOT MET", 100 * kTargetBfdPadding,
                bfd_padding <= kTargetBfdPadding ? "met" : "NOT MET", 100 * bfd_padding);
  os << line;
}

}  // namespace

void add_bench_data_command(CLI::App& bench) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "data", "Packing and folding throughput on one thread beside memcpy, and padding fractions");
  add_int_option(cmd, "--tokens", o->tokens, "tokens of synthetic documents per packer")
      ->check(kPositive)
      ->capture_default_str();
  add_int_option(cmd, "--seq-len", o->seq_len, "row length S")
      ->check(kPositive)
      ->capture_default_str();
  add_int_option(cmd, "--batch", o->batch_rows, "rows per collated batch")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_flag("--quick", o->quick,
                "1M tokens per packer and short timings (a smoke run; --tokens sizes full runs)");
  cmd->callback([o, cmd] {
    if (o->quick && cmd->count("--tokens"))
      throw CLI::ValidationError("--tokens " + std::to_string(o->tokens) +
                                 " applies without --quick, whose smoke run packs " +
                                 std::to_string(kQuickTokens) + " tokens per packer");
    run_data_bench(*o, std::cout);
  });
}

}  // namespace sprig::tools

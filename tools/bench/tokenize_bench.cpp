// `sprig bench tokenize --tokenizer DIR --input FILE`: encode throughput of the tokenizer
// (data/tokenizer.h) on the non-empty lines of a text file, one line per text, on one thread
// (this thread's CPU time) and on several (wall time). Every pass starts from a freshly loaded
// tokenizer, so its word cache starts empty. tools/bench/tokenize_vs_hf.py runs Hugging Face
// `tokenizers` the same way on the same lines and prints the ratio (target: >= 1 on one thread).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "data/tokenizer.h"
#include "tools/commands.h"
#include "tools/options.h"

namespace sprig::tools {

namespace {

double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct TokenizeBenchOptions {
  std::string tokenizer, input;
  int64_t threads = 0;
  double min_seconds = 2.0;
};

void run_tokenize_bench(const TokenizeBenchOptions& o, std::ostream& os) {
  std::ifstream in(o.input, std::ios::binary);
  if (!in) throw std::runtime_error("[bench] cannot open " + o.input);
  std::vector<std::string> lines;
  size_t bytes = 0;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) {
      bytes += line.size();
      lines.push_back(std::move(line));
    }
  if (lines.empty()) throw std::runtime_error("[bench] " + o.input + " has no non-empty line");
  const std::vector<std::string_view> views(lines.begin(), lines.end());

  // Mean seconds of one pass over every line, each pass with a fresh tokenizer (cold word cache);
  // `clock` is the thread's CPU time or the wall clock.
  int64_t tokens = 0;
  auto measure = [&](double (*clock)(), const auto& encode_all) {
    int64_t passes = 0;
    double total = 0;
    while (total < o.min_seconds || passes < 2) {
      const data::Tokenizer tokenizer = data::Tokenizer::load(o.tokenizer);
      const double start = clock();
      tokens = encode_all(tokenizer);
      total += clock() - start;
      ++passes;
    }
    return total / static_cast<double>(passes);
  };
  const double one = measure(thread_seconds, [&](const data::Tokenizer& t) {
    int64_t n = 0;
    for (std::string_view line : views) n += static_cast<int64_t>(t.encode(line).size());
    return n;
  });
  const int threads = o.threads > 0
                          ? static_cast<int>(o.threads)
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const double many = measure(wall_seconds, [&](const data::Tokenizer& t) {
    int64_t n = 0;
    for (const auto& ids : t.encode_batch(views, threads)) n += static_cast<int64_t>(ids.size());
    return n;
  });

  const data::Tokenizer tokenizer = data::Tokenizer::load(o.tokenizer);
  char line[200];
  std::snprintf(line, sizeof line,
                "sprig bench tokenize: %s, %zu lines, %.2f MB, %lld tokens; vocabulary %lld\n",
                o.input.c_str(), lines.size(), static_cast<double>(bytes) / 1e6,
                static_cast<long long>(tokens), static_cast<long long>(tokenizer.vocab_size()));
  os << line;
  auto row = [&](const std::string& what, double seconds) {
    std::snprintf(line, sizeof line, "%-12s %8.2f MB/s %8.3f Mtok/s %9.4f s per pass\n",
                  what.c_str(), static_cast<double>(bytes) / seconds / 1e6,
                  static_cast<double>(tokens) / seconds / 1e6, seconds);
    os << line;
  };
  row("one thread", one);
  row(std::to_string(threads) + " threads", many);
}

}  // namespace

void add_bench_tokenize_command(CLI::App& bench) {
  auto o = std::make_shared<TokenizeBenchOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "tokenize",
      "Tokenizer encode throughput on the lines of a text file, one thread and several");
  cmd->add_option("--tokenizer", o->tokenizer, "directory with tokenizer.json")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--input", o->input, "text file; each non-empty line is one text")
      ->required()
      ->check(CLI::ExistingFile);
  add_int_option(cmd, "--threads", o->threads, "threads of the batch run (0: one per core)")
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_option("--min-seconds", o->min_seconds, "time each measurement for at least this long")
      ->check(kPositive)
      ->capture_default_str();
  cmd->callback([o] { run_tokenize_bench(*o, std::cout); });
}

}  // namespace sprig::tools

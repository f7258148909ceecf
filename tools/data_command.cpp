// `sprig data pack|fold|dump|tokenize|draft-vocab`: what packing and folding make of a file, the
// first batches a training config will see, text or chat records tokenized into documents
// (docs/tokenizer.md §3), and a draft vocabulary counted from documents (docs/semantics.md §9.10).
// Each but draft-vocab writes JSON Lines (one object per row, group, batch or record) with the
// reference's field names (docs/semantics.md §4.9).
#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include "data/batch.h"
#include "data/config.h"
#include "data/loader.h"
#include "data/prefix_tree.h"
#include "data/readers.h"
#include "data/tokenize_jsonl.h"
#include "speculative/draft_vocab.h"
#include "tensor/json_text.h"
#include "tensor/storage.h"
#include "tools/commands.h"
#include "tools/jsonl.h"
#include "tools/options.h"
#include "tools/progress_line.h"

namespace sprig::tools {

namespace {

using nlohmann::ordered_json;
using namespace sprig::data;

// A JSONL output written through its temporary name (tensor/output.h): write(), then commit().
class JsonlOutput {
 public:
  JsonlOutput(const std::string& path, bool overwrite, std::vector<InputPath> inputs)
      : out_(path, kJsonlOutput, overwrite, "--out", std::move(inputs)), file_(out_.temp()) {
    if (!file_) throw std::runtime_error("[data] cannot write " + out_.temp());
  }
  void write(const ordered_json& j) { write_line(j.dump()); }
  void write_line(const std::string& line) { file_ << line << '\n'; }
  void commit() {
    file_.close();
    if (!file_) throw std::runtime_error("[data] writing " + out_.path() + " failed");
    out_.commit();
  }

 private:
  Output out_;
  std::ofstream file_;
};

template <class T = int64_t> std::vector<T> row_values(const Tensor& t, int64_t r) {
  return t.select(0, r).contiguous().to_vector<T>();
}

// Row r of a batch as the reference's pack output (docs/semantics.md §4.9): dflash (§4.5)
// input_ids, loss_mask, attention_mask, position_ids, doc_remaining, seq_lens (padding folded in);
// sft and bfd (§2.3) input_ids, labels, position_ids, seq_lens (the documents' own lengths),
// seq_lens_padded.
ordered_json packed_row_json(const Batch& b, int64_t r) {
  std::vector<int64_t> seq_lens = row_values(b.seq_lens, r);
  while (seq_lens.back() == 0) seq_lens.pop_back();  // zero-fill of shorter rows
  ordered_json j;
  j["input_ids"] = row_values(b.input_ids, r);
  if (b.loss_mask.defined()) {
    j["loss_mask"] = row_values(b.loss_mask, r);
    j["attention_mask"] = row_values(b.attention_mask, r);
    j["position_ids"] = row_values(b.position_ids, r);
    j["doc_remaining"] = row_values(b.doc_remaining, r);
    j["seq_lens"] = seq_lens;
  } else {
    j["labels"] = row_values(b.labels, r);
    j["position_ids"] = row_values(b.position_ids, r);
    std::vector<int64_t> unpadded = seq_lens;
    unpadded.back() -= b.num_pad[r];
    j["seq_lens"] = unpadded;
    j["seq_lens_padded"] = seq_lens;
  }
  return j;
}

// A whole batch, every field as the model receives it ((B, S) lists of lists).
ordered_json batch_json(const Batch& b) {
  auto rows = [&](const Tensor& t) {
    ordered_json out = ordered_json::array();
    for (int64_t r = 0; r < t.size(0); ++r)
      out.push_back(t.dtype() == DType::f32 ? ordered_json(row_values<float>(t, r))
                                            : ordered_json(row_values(t, r)));
    return out;
  };
  ordered_json j;
  j["input_ids"] = rows(b.input_ids);
  if (b.labels.defined()) j["labels"] = rows(b.labels);
  if (b.loss_mask.defined()) j["loss_mask"] = rows(b.loss_mask);
  if (b.attention_mask.defined()) j["attention_mask"] = rows(b.attention_mask);
  j["position_ids"] = rows(b.position_ids);
  if (b.doc_remaining.defined()) j["doc_remaining"] = rows(b.doc_remaining);
  if (b.advantages.defined()) j["advantages"] = rows(b.advantages);
  if (b.old_logprobs.defined()) j["old_logprobs"] = rows(b.old_logprobs);
  j["seq_lens"] = rows(b.seq_lens);
  j["num_pad"] = b.num_pad;
  if (!b.groups.empty()) {
    ordered_json groups = ordered_json::array();
    for (const TreeGroup& g : b.groups)
      groups.push_back({{"row", g.row},
                        {"offset", g.offset},
                        {"node_lengths", g.node_lengths},
                        {"sample_paths", g.sample_paths}});
    j["prefix_trees"] = groups;
  }
  return j;
}

struct PackArgs {
  std::string input, out, mode, format = "documents";
  int64_t seq_len = 0, pad_id = 0, vocab_size = 0, eot_id = -1, max_packs = 0;
  bool skip_bad_records = false, drop_long_samples = true, overwrite = false;
};

void run_pack(const PackArgs& a) {
  if (a.vocab_size > 0 && a.pad_id >= a.vocab_size)
    throw std::invalid_argument("[data] --pad-id " + std::to_string(a.pad_id) +
                                " is not a token id in [0, " + std::to_string(a.vocab_size) + ")");
  // A row is collated as six int64 [1, S] tensors and written as text about as large: refuse a
  // seq_len whose rows cannot fit before reading anything (in long double, which no S overflows).
  const long double row_bytes = 6.0L * sizeof(int64_t) * a.seq_len;
  const size_t available = cpu_memory_available();
  if (row_bytes > available / 4)
    throw std::runtime_error("[data] --seq-len " + std::to_string(a.seq_len) + " needs about " +
                             std::to_string(static_cast<uint64_t>(row_bytes / (1 << 20))) +
                             " MiB per row, over a quarter of the " +
                             std::to_string(available >> 20) + " MiB of memory available");
  const PackOptions pack{packing_from_name(a.mode), a.seq_len, a.drop_long_samples, a.max_packs};
  JsonlOutput out(a.out, a.overwrite, {{"--input", a.input}});
  BadRecords bad;
  const Corpus corpus = load_corpus({a.input}, format_from_name(a.format), pack.mode,
                                    {a.vocab_size, a.eot_id, a.skip_bad_records}, bad);
  const PackPlan plan = plan_rows(corpus, pack);
  for (int64_t r = 0; r < static_cast<int64_t>(plan.rows.size()); ++r)
    out.write(packed_row_json(collate(corpus, plan, {r}, a.pad_id), 0));
  out.commit();
  std::cout << "wrote " << a.out << ": " << plan.summary() << "\n";
  if (bad.count) std::cout << bad.summary() << "\n";
}

struct FoldArgs {
  std::string input, out;
  int64_t vocab_size = 0;
  bool skip_bad_records = false, overwrite = false;
};

void run_fold(const FoldArgs& a) {
  JsonlOutput out(a.out, a.overwrite, {{"--input", a.input}});
  BadRecords bad;
  int64_t groups = 0;
  read_rollouts(a.input, {a.vocab_size, -1, a.skip_bad_records}, bad, [&](Document&& doc) {
    std::vector<int64_t> positions(doc.input_ids.size());
    write_tree_positions(doc.node_lengths, positions.data());
    ordered_json j;
    j["input_ids"] = doc.input_ids;
    j["labels"] = doc.labels;
    j["position_ids"] = positions;
    j["node_lengths"] = doc.node_lengths;
    j["sample_paths"] = tree_sample_paths(doc.node_lengths);
    if (!doc.advantages.empty()) j["advantages"] = doc.advantages;
    if (!doc.old_logprobs.empty()) j["old_logprobs"] = doc.old_logprobs;
    out.write(j);
    ++groups;
  });
  out.commit();
  std::cout << "wrote " << a.out << ": " << groups << " folded rollout groups\n";
  if (bad.count) std::cout << bad.summary() << "\n";
}

struct DumpArgs {
  std::string config, out, split = "train";
  int64_t batches = 1, rank = 0, world = 1;
  bool overwrite = false;
};

void run_dump(const DumpArgs& a) {
  if (a.rank >= a.world)
    throw CLI::ValidationError("--rank", "rank " + std::to_string(a.rank) + " is not in [0, " +
                                             std::to_string(a.world) + ") for --world " +
                                             std::to_string(a.world));
  const DataConfig config = load_data_config(a.config);
  // The config and every data file it names are inputs.
  std::vector<InputPath> inputs = {{"--config", a.config}};
  for (const std::vector<std::string>* files : {&config.train, &config.val})
    for (const std::string& file : *files) inputs.push_back({"the config's data file", file});
  JsonlOutput out(a.out, a.overwrite, std::move(inputs));
  DataLoader loader(config, a.split == "val" ? Split::val : Split::train, a.rank, a.world);
  for (int64_t i = 0; i < a.batches; ++i) {
    const LoaderState at = loader.state();
    ordered_json j{{"epoch", at.epoch}, {"batch", at.batch}};
    j.update(batch_json(loader.next()));
    out.write(j);
  }
  out.commit();
  std::cout << "wrote " << a.out << ": " << a.batches << " batches; " << loader.summary() << "\n";
}

struct TokenizeArgs {
  std::string tokenizer, input, out, format = "auto";
  int threads = 0;
  bool skip_bad_records = false, overwrite = false;
};

void run_tokenize(const TokenizeArgs& a) {
  JsonlOutput out(a.out, a.overwrite, {{"--tokenizer", a.tokenizer, true}, {"--input", a.input}});
  const Tokenizer tokenizer = Tokenizer::load(a.tokenizer);
  const RecordFormat format = record_format_from_name(a.format);
  // The chat template is needed for chat records; --format auto loads it when it is there.
  std::optional<ChatTemplate> chat;
  const std::string config =
      (std::filesystem::path(a.tokenizer) / "tokenizer_config.json").string();
  if (format == RecordFormat::chat ||
      (format == RecordFormat::any && std::filesystem::exists(config)))
    chat = ChatTemplate::load(a.tokenizer);
  BadRecords bad;
  const auto start = std::chrono::steady_clock::now();
  auto rate = [&](const TokenizeCounts& c) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::to_string(
               static_cast<int64_t>(static_cast<double>(c.records) / std::max(s, 1e-9))) +
           " records/s";
  };
  ProgressLine progress;
  const TokenizeJob job{&tokenizer, chat ? &*chat : nullptr, format, a.threads, a.skip_bad_records};
  const TokenizeCounts counts = tokenize_jsonl(
      a.input, job, bad, [&](const std::string& line) { out.write_line(line); },
      [&](const TokenizeCounts& c) {
        progress.show("tokenized " + std::to_string(c.records) + " records, " + rate(c));
      });
  progress.finish();
  out.commit();
  std::cout << "wrote " << a.out << ": " << counts.records << " records (" << counts.chats
            << " chat), " << counts.tokens << " tokens, " << counts.supervised << " supervised; "
            << rate(counts) << "\n";
  if (bad.count) std::cout << bad.summary() << "\n";
}

struct DraftVocabArgs {
  std::vector<std::string> inputs;
  std::string out, format = "documents";
  int64_t size = 0, vocab_size = 0, eot_id = -1;
  bool skip_bad_records = false, overwrite = false;
};

// A draft vocabulary file is recognised by its format key.
std::string refuses_draft_vocab(const std::filesystem::path& existing, const OutputKind& kind) {
  try {
    if (read_json_file(existing.string()).value("format", "") == "sprig-draft-vocab") return "";
  } catch (const std::exception&) {
  }
  return "is not a " + std::string(kind.name) + " that sprig wrote";
}
const OutputKind kDraftVocabOutput{"draft vocabulary", nullptr, false, refuses_draft_vocab};

// Counts every supervised token (a label: unshifted records' loss-masked tokens after the first)
// of the inputs and keeps the most frequent.
void run_draft_vocab(const DraftVocabArgs& a) {
  if (a.size > a.vocab_size)
    throw CLI::ValidationError("--size", "the draft vocabulary of " + std::to_string(a.size) +
                                             " ids is larger than the target's --vocab-size " +
                                             std::to_string(a.vocab_size));
  std::vector<InputPath> inputs;
  for (const std::string& in : a.inputs) inputs.push_back({"--input", in});
  Output out(a.out, kDraftVocabOutput, a.overwrite, "--out", inputs);
  std::vector<int64_t> counts(static_cast<size_t>(a.vocab_size), 0);
  BadRecords bad;
  int64_t documents = 0, tokens = 0;
  ProgressLine progress;
  const ReadOptions options{a.vocab_size, a.eot_id, a.skip_bad_records};
  const auto count = [&](Document&& doc) {
    for (int32_t label : doc.labels)
      if (label != kIgnoreIndex) {
        ++counts[static_cast<size_t>(label)];
        ++tokens;
      }
    if (++documents % 10000 == 0)
      progress.show("counted " + std::to_string(documents) + " documents, " +
                    std::to_string(tokens) + " supervised tokens");
  };
  for (const std::string& in : a.inputs) {
    if (a.format == "shards")
      read_shard(in, TargetForm::labels, options, bad, count);
    else
      read_documents(in, TargetForm::labels, options, bad, count);
  }
  progress.finish();
  if (tokens == 0) throw std::runtime_error("[data] the inputs hold no supervised token to count");
  const speculative::DraftVocabulary vocab = speculative::most_frequent(counts, a.size);
  {
    std::ofstream file(out.temp());
    file << vocab.to_json().dump() << "\n";
    if (!file) throw std::runtime_error("[data] writing " + out.path() + " failed");
  }
  out.commit();
  std::cout << "wrote " << a.out << ": " << a.size << " of " << a.vocab_size << " ids, covering "
            << 100 * vocab.coverage << "% of " << tokens << " supervised tokens in " << documents
            << " documents\n";
  if (bad.count) std::cout << bad.summary() << "\n";
}

}  // namespace

void add_data_command(CLI::App& app) {
  CLI::App* data = app.add_subcommand(
      "data", "Pack, fold, inspect and tokenize training data, and count a draft vocabulary");
  data->require_subcommand(1);

  auto pack_args = std::make_shared<PackArgs>();
  CLI::App* pack = data->add_subcommand(
      "pack",
      "Pack documents into rows of --seq-len tokens, one JSON object per row, and print "
      "the padding fraction");
  pack->add_option(
          "--input", pack_args->input,
          "documents JSONL ({\"input_ids\", \"loss_mask\"} unshifted or "
          "{\"input_ids\", \"labels\"} pre-shifted), or a token shard with --format shards")
      ->required()
      ->check(CLI::ExistingFile);
  add_int_option(pack, "--seq-len", pack_args->seq_len, "row length S")
      ->required()
      ->check(kPositive);
  pack->add_option("--mode", pack_args->mode,
                   "dflash: in order, pad folded into the last document (docs/semantics.md "
                   "§4.5); padded: one document per row, as dflash lays it out; sft: in order, "
                   "labels (docs/semantics.md §4.3); bfd: best-fit decreasing, labels")
      ->required()
      ->check(CLI::IsMember({"dflash", "padded", "sft", "bfd"}));
  pack->add_option("--out", pack_args->out, "output JSONL, one packed row per line")->required();
  add_int_option(pack, "--pad-id", pack_args->pad_id, "token id of padding")
      ->check(CLI::Range(0, std::numeric_limits<int32_t>::max()))
      ->capture_default_str();
  pack->add_option("--format", pack_args->format, "documents or shards")
      ->check(CLI::IsMember({"documents", "shards"}))
      ->capture_default_str();
  add_int_option(pack, "--eot-id", pack_args->eot_id, "end-of-text id between shard documents");
  add_int_option(pack, "--vocab-size", pack_args->vocab_size,
                 "reject ids outside [0, V) (0: no check)")
      ->check(kNonNegative)
      ->capture_default_str();
  add_int_option(pack, "--max-packs", pack_args->max_packs, "keep only the first N rows (0: all)")
      ->check(kNonNegative)
      ->capture_default_str();
  pack->add_option("--drop-long-samples", pack_args->drop_long_samples,
                   "sft, bfd: drop documents longer than S (false: stop with an error)")
      ->capture_default_str();
  pack->add_flag("--skip-bad-records", pack_args->skip_bad_records,
                 "skip bad records (counted and reported) instead of stopping at the first");
  add_overwrite_flag(pack, pack_args->overwrite);
  pack->callback([pack, pack_args] {
    const PackArgs& a = *pack_args;
    if (pack->count("--eot-id") && a.format != "shards")
      throw CLI::ValidationError("--eot-id applies to --format shards, not --format " + a.format);
    // dflash and padded truncate a long document instead.
    if (pack->count("--drop-long-samples") &&
        target_form(packing_from_name(a.mode)) == TargetForm::loss_mask)
      throw CLI::ValidationError("--drop-long-samples applies to --mode sft and bfd, not --mode " +
                                 a.mode + ", which truncates documents longer than --seq-len");
    run_pack(a);
  });

  auto fold_args = std::make_shared<FoldArgs>();
  CLI::App* fold = data->add_subcommand(
      "fold",
      "Fold each rollout group (one prompt, several completions) into one prefix-tree "
      "sequence (docs/semantics.md §1), one JSON object per group");
  fold->add_option("--input", fold_args->input,
                   "rollouts JSONL: {\"prompt_ids\": [...], \"completions\": [[...], ...]}")
      ->required()
      ->check(CLI::ExistingFile);
  fold->add_option("--out", fold_args->out, "output JSONL, one folded group per line")->required();
  add_int_option(fold, "--vocab-size", fold_args->vocab_size,
                 "reject ids outside [0, V) (0: no check)")
      ->check(kNonNegative)
      ->capture_default_str();
  fold->add_flag("--skip-bad-records", fold_args->skip_bad_records,
                 "skip bad records (counted and reported) instead of stopping at the first");
  add_overwrite_flag(fold, fold_args->overwrite);
  fold->callback([fold_args] { run_fold(*fold_args); });

  auto dump_args = std::make_shared<DumpArgs>();
  CLI::App* dump = data->add_subcommand(
      "dump",
      "Write the first batches a training config's data: section produces, exactly as "
      "the run sees them, one JSON object per batch");
  dump->add_option("-c,--config", dump_args->config, "training config YAML (reads seed and data:)")
      ->required()
      ->check(CLI::ExistingFile);
  add_int_option(dump, "--batches", dump_args->batches, "number of batches")
      ->check(kPositive)
      ->capture_default_str();
  dump->add_option("--out", dump_args->out, "output JSONL, one batch per line")->required();
  dump->add_option("--split", dump_args->split, "train or val (val is never shuffled)")
      ->check(CLI::IsMember({"train", "val"}))
      ->capture_default_str();
  add_int_option(dump, "--rank", dump_args->rank, "data-parallel rank, in [0, world)")
      ->check(kNonNegative)
      ->capture_default_str();
  add_int_option(dump, "--world", dump_args->world, "data-parallel world size")
      ->check(kPositive)
      ->capture_default_str();
  add_overwrite_flag(dump, dump_args->overwrite);
  dump->callback([dump_args] { run_dump(*dump_args); });

  auto tokenize_args = std::make_shared<TokenizeArgs>();
  CLI::App* tokenize = data->add_subcommand(
      "tokenize",
      "Tokenize text records ({\"text\"} -> {\"input_ids\"}) and chat records ({\"messages\"} -> "
      "{\"input_ids\", \"loss_mask\"}, the assistant's tokens supervised) with a Hugging Face "
      "tokenizer; the output is documents JSONL the training configs read");
  tokenize
      ->add_option("--tokenizer", tokenize_args->tokenizer,
                   "directory with tokenizer.json (and tokenizer_config.json for chat records)")
      ->required()
      ->check(CLI::ExistingDirectory);
  tokenize->add_option("--input", tokenize_args->input, "JSONL of {\"text\"} or {\"messages\"}")
      ->required()
      ->check(CLI::ExistingFile);
  tokenize->add_option("--out", tokenize_args->out, "output JSONL, one record per input record")
      ->required();
  tokenize
      ->add_option("--format", tokenize_args->format,
                   "auto: each record by its key; text or chat: every record must be of that kind")
      ->check(CLI::IsMember({"auto", "text", "chat"}))
      ->capture_default_str();
  add_int_option(tokenize, "--threads", tokenize_args->threads,
                 "encoding threads (0: one per core)")
      ->check(kNonNegative)
      ->capture_default_str();
  tokenize->add_flag("--skip-bad-records", tokenize_args->skip_bad_records,
                     "skip bad records (counted and reported) instead of stopping at the first");
  add_overwrite_flag(tokenize, tokenize_args->overwrite);
  tokenize->callback([tokenize_args] { run_tokenize(*tokenize_args); });

  auto vocab_args = std::make_shared<DraftVocabArgs>();
  CLI::App* vocab = data->add_subcommand(
      "draft-vocab",
      "Count the supervised tokens of training documents and write the draft vocabulary of the "
      "--size most frequent (ties to the lower id; the lowest unseen ids fill it up), which "
      "draft.vocab of sprig train eagle3 reads; the draft's head then covers only those ids");
  vocab
      ->add_option("--input", vocab_args->inputs,
                   "documents JSONL (or token shards with --format shards); repeatable")
      ->required()
      ->check(CLI::ExistingFile);
  add_int_option(vocab, "--size", vocab_args->size, "draft vocabulary size (e.g. 32000)")
      ->required()
      ->check(kPositive);
  add_int_option(vocab, "--vocab-size", vocab_args->vocab_size,
                 "the target's vocabulary size (its config.json vocab_size); ids outside are bad "
                 "records")
      ->required()
      ->check(kPositive);
  vocab->add_option("--out", vocab_args->out, "output JSON file")->required();
  vocab->add_option("--format", vocab_args->format, "documents or shards")
      ->check(CLI::IsMember({"documents", "shards"}))
      ->capture_default_str();
  add_int_option(vocab, "--eot-id", vocab_args->eot_id, "end-of-text id between shard documents");
  vocab->add_flag("--skip-bad-records", vocab_args->skip_bad_records,
                  "skip bad records (counted and reported) instead of stopping at the first");
  add_overwrite_flag(vocab, vocab_args->overwrite);
  vocab->callback([vocab, vocab_args] {
    if (vocab->count("--eot-id") && vocab_args->format != "shards")
      throw CLI::ValidationError("--eot-id applies to --format shards, not --format " +
                                 vocab_args->format);
    run_draft_vocab(*vocab_args);
  });
}

}  // namespace sprig::tools

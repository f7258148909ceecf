#include "tools/demo.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "nn/checkpoint.h"
#include "nn/generate.h"
#include "speculative/eagle3.h"
#include "speculative/evaluation.h"
#include "speculative/spec_eval.h"
#include "tensor/random.h"
#include "tools/viz/plot.h"
#include "train/config.h"
#include "train/draft.h"
#include "train/eagle3.h"
#include "train/sft.h"

namespace sprig::tools {

namespace {

namespace fs = std::filesystem;

// ---- the synthetic language -------------------------------------------------------------------
// Tokens: pad, <bos>, <eos>, <sep>, the four modes, then the numbers 0..63.
constexpr int64_t kBos = 1, kEos = 2, kSep = 3, kFirstMode = 4, kFirstNumber = 8, kNumbers = 64;
constexpr int64_t kVocab = kFirstNumber + kNumbers;
constexpr int kModes = 4;
const char* const kModeNames[kModes] = {"up", "down", "double", "repeat"};
constexpr int64_t kPromptNumbers = 4, kCompletionNumbers = 8;
constexpr int64_t kHidden = 64;  // the tiny model's hidden size

int64_t number_token(int64_t n) { return kFirstNumber + ((n % kNumbers) + kNumbers) % kNumbers; }

// "<bos> a a+d a+2d a+3d <sep>"
std::vector<int64_t> prompt_tokens(int64_t a, int64_t d) {
  std::vector<int64_t> ids = {kBos};
  for (int64_t j = 0; j < kPromptNumbers; ++j) ids.push_back(number_token(a + j * d));
  ids.push_back(kSep);
  return ids;
}

// What `mode` continues the prompt with: its numbers, then <eos>.
std::vector<int64_t> continuation_tokens(int mode, int64_t a, int64_t d) {
  const int64_t last = a + (kPromptNumbers - 1) * d;
  std::vector<int64_t> ids;
  for (int64_t j = 1; j <= kCompletionNumbers; ++j) {
    const int64_t values[kModes] = {last + j * d, last - j * d, last + 2 * j * d,
                                    a + ((j - 1) % kPromptNumbers) * d};
    ids.push_back(number_token(values[mode]));
  }
  ids.push_back(kEos);
  return ids;
}

std::string token_text(int64_t id) {
  if (id >= kFirstNumber) return std::to_string(id - kFirstNumber);
  if (id >= kFirstMode) return kModeNames[id - kFirstMode];
  const char* names[] = {"<pad>", "<bos>", "<eos>", "<sep>"};
  return names[id];
}

std::string tokens_text(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) {
    if (!s.empty()) s += ' ';
    s += token_text(id);
  }
  return s;
}

// A progression's start and step.
std::pair<int64_t, int64_t> draw_progression(Generator& gen) {
  return {gen.next_int(0, kNumbers), gen.next_int(1, 8)};
}

// Documents: "<bos> a a+d ... <eos>" of 12 to 40 numbers.
void write_documents(const fs::path& path, int64_t count, Generator& gen) {
  std::ofstream out(path);
  for (int64_t i = 0; i < count; ++i) {
    const auto [a, d] = draw_progression(gen);
    std::vector<int64_t> ids = {kBos};
    for (int64_t j = 0, n = gen.next_int(12, 41); j < n; ++j)
      ids.push_back(number_token(a + j * d));
    ids.push_back(kEos);
    out << nlohmann::json{{"input_ids", ids}}.dump() << "\n";
  }
}

// Rollout groups: one prompt, a completion per mode (in a random order), each "<mode> ... <eos>".
void write_rollouts(const fs::path& path, int64_t count, Generator& gen) {
  std::ofstream out(path);
  for (int64_t i = 0; i < count; ++i) {
    const auto [a, d] = draw_progression(gen);
    int order[kModes] = {0, 1, 2, 3};
    for (int k = kModes - 1; k > 0; --k) std::swap(order[k], order[gen.next_int(0, k + 1)]);
    nlohmann::json completions = nlohmann::json::array();
    for (int mode : order) {
      std::vector<int64_t> c = {kFirstMode + mode};
      for (int64_t id : continuation_tokens(mode, a, d)) c.push_back(id);
      completions.push_back(c);
    }
    out << nlohmann::json{{"prompt_ids", prompt_tokens(a, d)}, {"completions", completions}}.dump()
        << "\n";
  }
}

// ---- the runs ---------------------------------------------------------------------------------

// A tiny Qwen3 (about 0.2M parameters) over the synthetic vocabulary; head_dim 64, which the CUDA
// attention kernels support.
void write_model_config(const fs::path& path) {
  const nlohmann::json config = {{"model_type", "qwen3"},
                                 {"architectures", {"Qwen3ForCausalLM"}},
                                 {"vocab_size", kVocab},
                                 {"hidden_size", kHidden},
                                 {"intermediate_size", 256},
                                 {"num_hidden_layers", 3},
                                 {"num_attention_heads", 2},
                                 {"num_key_value_heads", 1},
                                 {"head_dim", 64},
                                 {"rms_norm_eps", 1e-6},
                                 {"rope_theta", 10000.0},
                                 {"tie_word_embeddings", true},
                                 {"initializer_range", 0.02},
                                 {"max_position_embeddings", 1024},
                                 {"torch_dtype", "float32"}};
  std::ofstream(path) << config.dump(2) << "\n";
}

struct Stage {
  std::string name, model_key, model_value, format, packing;
  int64_t micro_batch_size, max_steps, warmup_steps;
  double lr;
};

// The YAML config of one stage (a file users can rerun with `sprig train sft -c`).
std::string stage_yaml(const fs::path& dir, const Stage& s, const std::string& device) {
  const auto path = [&](const std::string& name) { return (dir / name).string(); };
  std::ostringstream y;
  y << "# Written by `sprig demo`. Train again with: sprig train sft -c " << path(s.name + ".yaml")
    << " --run_dir=ANOTHER_DIR\n";
  y << "run_dir: " << path(s.name) << "\nseed: 0\ndevice: " << device << "\n";
  y << "model:\n  " << s.model_key << ": " << s.model_value << "\n";
  y << "data:\n  train: " << path("data/" + s.name + "_train.jsonl") << "\n";
  y << "  val: " << path("data/" + s.name + "_val.jsonl") << "\n";
  y << "  format: " << s.format << "\n  packing: " << s.packing << "\n  seq_len: 256\n";
  y << "  micro_batch_size: " << s.micro_batch_size << "\n";
  y << "train:\n  max_steps: " << s.max_steps << "\n  max_grad_norm: 1.0\n";
  y << "optimizer:\n  lr: " << s.lr << "\n  betas: [0.9, 0.95]\n  weight_decay: 0.01\n";
  y << "scheduler:\n  warmup_steps: " << s.warmup_steps << "\n  min_lr_ratio: 0.1\n";
  y << "log:\n  every_steps: " << std::max<int64_t>(1, s.max_steps / 15) << "\n";
  y << "val:\n  every_steps: " << std::max<int64_t>(1, s.max_steps / 5) << "\n";
  y << "checkpoint:\n  keep_last: 1\n";
  return y.str();
}

TrainSummary run_stage(const fs::path& dir, const Stage& stage, const std::string& device) {
  const fs::path config_path = dir / (stage.name + ".yaml");
  std::ofstream(config_path) << stage_yaml(dir, stage, device);
  const TrainSummary summary = train_sft(load_train_config(config_path.string(), {}), false);
  plot_run(summary.run_dir, summary.run_dir + "/curves.png");
  return summary;
}

// How many greedy continuations of `prompts` x modes are exactly what the mode asks for; prints
// the first prompt's continuations.
int64_t exact_continuations(const std::string& checkpoint,
                            const std::vector<std::pair<int64_t, int64_t>>& prompts,
                            const std::string& label) {
  const std::unique_ptr<QwenForCausalLM> model = load_qwen(checkpoint);
  int64_t exact = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto [a, d] = prompts[p];
    for (int mode = 0; mode < kModes; ++mode) {
      std::vector<int64_t> ids = prompt_tokens(a, d);
      ids.push_back(kFirstMode + mode);
      const std::vector<int64_t> expected = continuation_tokens(mode, a, d);
      const std::vector<int64_t> got =
          generate_greedy(*model, ids, static_cast<int64_t>(expected.size()), kEos);
      exact += got == expected;
      if (p == 0)
        std::cout << "  " << label << " | " << tokens_text(ids) << " -> " << tokens_text(got)
                  << (got == expected ? "" : "   (expected " + tokens_text(expected) + ")") << "\n";
    }
  }
  return exact;
}

// ---- the draft stage ---------------------------------------------------------------------------
// The token no document holds: every draft slot but the anchor shows it (as a real target's first
// unused id, its embedding row was never trained).
constexpr int64_t kMaskToken = 0;

// The run directory and config name of a draft kind's stage: "draft" for the first kind (DFlash),
// else the kind's name.
std::string stage_name(const speculative::DraftKind& kind) {
  return &kind == speculative::draft_kinds().front() ? "draft" : std::string(kind.name());
}

// The settings of a kind's draft for the demo's target, as lines of draft: (a flag as a boolean).
std::string settings_yaml(const speculative::DraftKind& kind, const speculative::DraftSettings& s) {
  std::ostringstream y;
  for (const speculative::DraftSetting& setting : kind.train_settings()) {
    if (const auto it = s.integers.find(setting.key); it != s.integers.end())
      y << "  " << setting.key << ": "
        << (setting.type == speculative::DraftSetting::Type::flag
                ? (it->second != 0 ? "true" : "false")
                : std::to_string(it->second))
        << "\n";
    if (const auto it = s.numbers.find(setting.key); it != s.numbers.end())
      y << "  " << setting.key << ": " << it->second << "\n";
  }
  return y.str();
}

// What every draft stage trains on and how: the pre-training documents packed without crossing
// documents, `steps` steps.
std::string draft_training_yaml(const fs::path& dir, int64_t steps) {
  std::ostringstream y;
  y << "data:\n  train: " << (dir / "data/pretrain_train.jsonl").string() << "\n";
  y << "  format: documents\n  packing: dflash\n  seq_len: 256\n  micro_batch_size: 4\n";
  y << "train:\n  max_steps: " << steps << "\n";
  y << "optimizer:\n  lr: 1.0e-2\n";
  y << "scheduler:\n  warmup_steps: " << std::max<int64_t>(1, steps / 20) << "\n";
  y << "log:\n  every_steps: " << std::max<int64_t>(1, steps / 15) << "\n";
  y << "checkpoint:\n  keep_last: 1\n";
  return y.str();
}

// A draft stage's config: a two-layer draft of `kind` (its own settings sized for this target: a
// Domino head of 32 and 64) with blocks of 8 on the pre-trained target's first two layers (the
// default choice for this depth), trained on the pre-training documents packed without crossing
// documents.
std::string draft_yaml(const fs::path& dir, const std::string& target, int64_t steps,
                       const std::string& device, const speculative::DraftKind& kind) {
  const auto path = [&](const std::string& name) { return (dir / name).string(); };
  const std::string name = stage_name(kind);
  std::ostringstream y;
  y << "# Written by `sprig demo`. Train again with: sprig train " << kind.name() << " -c "
    << path(name + ".yaml") << " --run_dir=ANOTHER_DIR\n";
  y << "run_dir: " << path(name) << "\nseed: 0\ndevice: " << device << "\n";
  y << "target:\n  path: " << target << "\n";
  y << "draft:\n  mask_token_id: " << kMaskToken
    << "\n  num_layers: 2\n  block_size: 8\n  num_anchors: 32\n";
  y << settings_yaml(kind, kind.variants(kHidden).front().settings);
  y << draft_training_yaml(dir, steps);
  return y.str();
}

// The teacher-forced acceptance length of `draft` on the held-out documents (each its own row,
// the same seeded anchors for every draft evaluated).
double draft_accept_len(const speculative::FrozenTarget& target,
                        const speculative::DFlashDraft& draft, const fs::path& documents) {
  using namespace speculative;
  TeacherForced evaluator(target, draft, {}, 8, 1);
  std::ifstream in(documents);
  for (std::string line; std::getline(in, line);) {
    const std::vector<int64_t> ids = nlohmann::json::parse(line).at("input_ids");
    DraftRows rows;
    rows.input_ids = Tensor::from_vector(ids, {1, static_cast<int64_t>(ids.size())});
    rows.loss_mask = Tensor::ones(rows.input_ids.shape(), DType::i64);
    evaluator.metrics({rows, {}, {}});
  }
  return evaluator.sums().accept_len();
}

// A trained draft: its title ("DFlash") and stage name, its acceptance length on the held-out
// documents before and after training, the most a decoding step commits with it, its checkpoint.
struct DraftStage {
  std::string title, stage;
  double accept_before, accept_after;
  int64_t most;
  std::string checkpoint;
};

// Trains the draft, measuring its acceptance length before and after.
DraftStage run_draft_stage(const fs::path& dir, const std::string& target_dir, int64_t steps,
                           const std::string& device, const speculative::DraftKind& kind) {
  const fs::path config_path = dir / (stage_name(kind) + ".yaml");
  std::ofstream(config_path) << draft_yaml(dir, target_dir, steps, device, kind);
  const TrainConfig config = load_train_config(config_path.string(), {}, &kind);
  const speculative::FrozenTarget target(load_qwen(target_dir), Device::cpu(), DType::f32);
  Generator init_gen(config.seed);  // the trainer's own initialisation of a fresh draft
  const speculative::DFlashDraft initial(
      speculative::draft_config_for(target.config(), config.dflash.draft), init_gen);
  const fs::path val = dir / "data/pretrain_val.jsonl";
  const double before = draft_accept_len(target, initial, val);
  const TrainSummary summary = train_draft(config, false);
  plot_run(summary.run_dir, summary.run_dir + "/curves.png");
  const auto trained = speculative::load_draft(summary.checkpoint);
  const speculative::DraftConfig& c = trained->config();
  return {std::string(kind.title()),
          stage_name(kind),
          before,
          draft_accept_len(target, *trained, val),
          1 + kind.drafts_per_block(c, c.block_size),
          summary.checkpoint};
}

// The EAGLE-3 stage: one layer over the target's three layers (the default [1, L/2 - 1, L - 4]
// needs eight), unrolled over 4 steps, trained like the other drafts.
constexpr int64_t kEagle3Steps = 4;

std::string eagle3_yaml(const fs::path& dir, const std::string& target, int64_t steps,
                        const std::string& device) {
  const auto path = [&](const std::string& name) { return (dir / name).string(); };
  std::ostringstream y;
  y << "# Written by `sprig demo`. Train again with: sprig train eagle3 -c " << path("eagle3.yaml")
    << " --run_dir=ANOTHER_DIR\n";
  y << "run_dir: " << path("eagle3") << "\nseed: 0\ndevice: " << device << "\n";
  y << "target:\n  path: " << target << "\n";
  y << "draft:\n  aux_layer_ids: [0, 1, 2]\n  ttt_steps: " << kEagle3Steps << "\n";
  y << draft_training_yaml(dir, steps);
  return y.str();
}

// The simulated acceptance length of an EAGLE-3 draft on the held-out documents (each its own
// row): over its training-time test's steps, bonus token included.
double eagle3_accept_len(const speculative::FrozenTarget& target,
                         const speculative::Eagle3Draft& draft, const fs::path& documents) {
  using namespace speculative;
  NoGradGuard no_grad;
  double sum = 0, positions = 0;
  std::ifstream in(documents);
  for (std::string line; std::getline(in, line);) {
    const std::vector<int64_t> ids = nlohmann::json::parse(line).at("input_ids");
    DraftRows rows;
    rows.input_ids = Tensor::from_vector(ids, {1, static_cast<int64_t>(ids.size())});
    rows.loss_mask = Tensor::ones(rows.input_ids.shape(), DType::i64);
    const Eagle3Loss l =
        eagle3_loss(draft, rows, eagle3_teacher(target, draft, rows), {kEagle3Steps, 0.8, 0});
    sum += l.accept_len_sum;
    positions += l.valid_positions;
  }
  return sum / std::max(positions, 1.0);
}

DraftStage run_eagle3_stage(const fs::path& dir, const std::string& target_dir, int64_t steps,
                            const std::string& device) {
  const fs::path config_path = dir / "eagle3.yaml";
  std::ofstream(config_path) << eagle3_yaml(dir, target_dir, steps, device);
  const TrainConfig config = load_eagle3_train_config(config_path.string(), {});
  const speculative::FrozenTarget target(load_qwen(target_dir), Device::cpu(), DType::f32);
  Generator init_gen(config.seed);  // the trainer's own initialisation of a fresh draft
  const speculative::Eagle3Draft initial(
      speculative::eagle3_config_for(target.config(), config.eagle3_draft.draft), init_gen);
  const fs::path val = dir / "data/pretrain_val.jsonl";
  const double before = eagle3_accept_len(target, initial, val);
  const TrainSummary summary = train_eagle3(config, false);
  plot_run(summary.run_dir, summary.run_dir + "/curves.png");
  const auto trained = speculative::load_eagle3_draft(summary.checkpoint);
  return {"EAGLE-3",        "eagle3",          before, eagle3_accept_len(target, *trained, val),
          kEagle3Steps + 1, summary.checkpoint};
}

// Speculative decoding with the draft at `draft_dir` on the first four tokens of each held-out
// document (up to 48 new tokens, stopping at <eos>): one line of its pooled results.
void spec_eval_line(const std::string& name, const std::string& target_dir,
                    const std::string& draft_dir, const fs::path& documents) {
  const speculative::FrozenTarget target(load_qwen(target_dir), Device::cpu(), DType::f32);
  const speculative::SpecEvalSettings settings{
      .max_new_tokens = 48, .stop_id = kEos, .draft_tokens = kEagle3Steps};
  std::unique_ptr<Module> draft;
  std::unique_ptr<speculative::SpecEvaluator> evaluator;
  if (speculative::is_eagle3_dir(draft_dir)) {
    auto d = speculative::load_eagle3_draft(draft_dir);
    evaluator = std::make_unique<speculative::SpecEvaluator>(target, *d, settings);
    draft = std::move(d);
  } else {
    auto d = speculative::load_draft(draft_dir);
    evaluator = std::make_unique<speculative::SpecEvaluator>(target, *d, settings);
    draft = std::move(d);
  }
  draft->train(false);
  std::ifstream in(documents);
  for (std::string line; std::getline(in, line);) {
    const std::vector<int64_t> ids = nlohmann::json::parse(line).at("input_ids");
    evaluator->evaluate(std::vector<int64_t>(ids.begin(), ids.begin() + 4));
  }
  const nlohmann::json a = evaluator->aggregate();
  std::cout << "  " << name << ": tau " << a["tau"].get<double>() << " tokens per target forward";
  if (!a["teacher_forced_accept_len"].is_null())
    std::cout << " (teacher-forced accept_len on the same text "
              << a["teacher_forced_accept_len"].get<double>() << ")";
  std::cout << ", " << a["lossless_prompts"] << "/" << a["prompts"]
            << " outputs equal to greedy decoding, " << a["speedup"].get<double>()
            << "x the target's own tokens/s\n";
}

// What a demo writes at the top of its directory: the marker, the data, the model config and
// each stage's config and run directory.
std::set<std::string> demo_entries() {
  std::set<std::string> entries = {".sprig-demo",   "data",     "model.json",   "pretrain",
                                   "pretrain.yaml", "rollouts", "rollouts.yaml"};
  for (const speculative::DraftKind* kind : speculative::draft_kinds()) {
    entries.insert(stage_name(*kind));
    entries.insert(stage_name(*kind) + ".yaml");
  }
  entries.insert({"eagle3", "eagle3.yaml"});
  return entries;
}

// Creates `dir`, replacing an earlier demo's files there. A directory that is not an earlier
// demo's, or that holds anything a demo does not write, is refused and left as it is.
void prepare_run_dir(const fs::path& dir) {
  const fs::path marker = dir / ".sprig-demo";
  if (fs::exists(dir) && !(fs::is_directory(dir) && fs::is_empty(dir))) {
    if (!fs::exists(marker))
      throw std::runtime_error("[demo] " + dir.string() +
                               " already exists and was not made by sprig demo: choose another "
                               "--run-dir");
    const std::set<std::string> entries = demo_entries();
    std::vector<std::string> foreign;
    for (const auto& e : fs::directory_iterator(dir))
      if (!entries.count(e.path().filename().string()))
        foreign.push_back(e.path().filename().string());
    std::sort(foreign.begin(), foreign.end());
    if (!foreign.empty()) {
      std::string names;
      for (const std::string& name : foreign) names += (names.empty() ? "" : ", ") + name;
      throw std::runtime_error("[demo] " + dir.string() +
                               " holds an earlier demo and files sprig demo did not write (" +
                               names + "): move them away, or choose another --run-dir");
    }
    for (const std::string& name : entries) fs::remove_all(dir / name);
  }
  fs::create_directories(dir);
  std::ofstream(marker) << "made by sprig demo\n";
}

std::string elapsed_text(std::chrono::steady_clock::time_point since) {
  const auto s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - since)
          .count();
  return std::to_string(s / 60) + "m" + (s % 60 < 10 ? "0" : "") + std::to_string(s % 60) + "s";
}

}  // namespace

void run_demo(const DemoOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const fs::path dir = fs::absolute(options.run_dir);  // the stage configs name absolute paths
  prepare_run_dir(dir);
  fs::create_directories(dir / "data");
  Generator gen(2024);
  write_documents(dir / "data/pretrain_train.jsonl", 3000, gen);
  write_documents(dir / "data/pretrain_val.jsonl", 100, gen);
  write_rollouts(dir / "data/rollouts_train.jsonl", 1000, gen);
  write_rollouts(dir / "data/rollouts_val.jsonl", 50, gen);
  write_model_config(dir / "model.json");
  std::cout << "sprig demo: synthetic data and a tiny Qwen3 config written to " << dir.string()
            << "\n\n== stage 1: pre-training on packed documents (arithmetic progressions) ==\n";

  // About 0.3M tokens per stage (8 rows of 256 documents' tokens; 4 rows of 256 folded tokens).
  const int64_t pretrain_steps = options.quick ? 80 : 150,
                rollout_steps = options.quick ? 120 : 300;
  const Stage pretrain_stage = {.name = "pretrain",
                                .model_key = "config",
                                .model_value = (dir / "model.json").string(),
                                .format = "documents",
                                .packing = "bfd",
                                .micro_batch_size = 8,
                                .max_steps = pretrain_steps,
                                .warmup_steps = pretrain_steps / 20,
                                .lr = 3e-3};
  const TrainSummary pretrain = run_stage(dir, pretrain_stage, options.device);

  std::cout << "\n== stage 2: fine-tuning on shared-prefix rollouts (prefix-tree attention) ==\n";
  const Stage rollout_stage = {.name = "rollouts",
                               .model_key = "path",
                               .model_value = pretrain.checkpoint,
                               .format = "rollouts",
                               .packing = "fold",
                               .micro_batch_size = 4,
                               .max_steps = rollout_steps,
                               .warmup_steps = rollout_steps / 20,
                               .lr = 3e-3};
  const TrainSummary rollouts = run_stage(dir, rollout_stage, options.device);

  std::cout << "\n== greedy continuations of new prompts, per mode ==\n";
  Generator eval_gen(7);
  std::vector<std::pair<int64_t, int64_t>> prompts;
  for (int i = 0; i < 16; ++i) prompts.push_back(draw_progression(eval_gen));
  const int64_t total = static_cast<int64_t>(prompts.size()) * kModes;
  const int64_t before = exact_continuations(pretrain.checkpoint, prompts, "pre-trained");
  const int64_t after = exact_continuations(rollouts.checkpoint, prompts, "fine-tuned ");
  std::cout << "  exactly right: pre-trained " << before << "/" << total << ", fine-tuned " << after
            << "/" << total << "\n";

  // Stage 3 trains the first draft kind (DFlash), stage 4 every other kind, on the same target.
  const std::vector<const speculative::DraftKind*>& kinds = speculative::draft_kinds();
  const int64_t draft_steps = options.quick ? 80 : 300;
  std::cout << "\n== stage 3: a " << kinds.front()->title()
            << " speculative-decoding draft for the pre-trained model ==\n";
  std::vector<DraftStage> drafts = {
      run_draft_stage(dir, pretrain.checkpoint, draft_steps, options.device, *kinds.front())};
  std::cout << "  acceptance length on held-out documents (blocks of 8, bonus token included): "
            << std::setprecision(3) << drafts[0].accept_before << " before training, "
            << drafts[0].accept_after << " after\n";

  std::string others;
  for (size_t i = 1; i < kinds.size(); ++i) others += std::string(kinds[i]->title()) + ", ";
  std::cout << "\n== stage 4: the other draft kinds (" << others << "EAGLE-3), same target ==\n";
  for (size_t i = 1; i < kinds.size(); ++i)
    drafts.push_back(
        run_draft_stage(dir, pretrain.checkpoint, draft_steps, options.device, *kinds[i]));
  drafts.push_back(run_eagle3_stage(dir, pretrain.checkpoint, draft_steps, options.device));
  for (size_t i = 1; i < drafts.size(); ++i)
    std::cout << "  " << drafts[i].title << ": acceptance length " << drafts[i].accept_before
              << " before training, " << drafts[i].accept_after << " after\n";
  std::ostringstream lengths, most;  // each draft's acceptance length, the most a step accepts
  lengths << std::setprecision(3);
  for (const DraftStage& d : drafts) {
    const char* comma = &d == &drafts.front() ? "" : ", ";
    lengths << comma << d.title << " " << d.accept_after;
    most << comma << d.title << " " << d.most;
  }
  std::cout << "  acceptance length on the same held-out documents: " << lengths.str()
            << " (a step accepts its drafts and a bonus token: at most " << most.str() << ")\n";

  std::cout << "\n== stage 5: speculative decoding with each draft on the held-out prompts (the "
               "target verifies every block) ==\n";
  const fs::path held_out = dir / "data/pretrain_val.jsonl";
  for (const DraftStage& d : drafts)
    spec_eval_line(d.title, pretrain.checkpoint, d.checkpoint, held_out);
  std::cout << "  (tau falls below the teacher-forced length because decoding anchors each block "
               "where the last one failed, often a hard spot; on two CPU cores a tiny target "
               "gains little or nothing from it: `sprig spec-eval` prints the details)\n";

  std::string configs, stages, checkpoints;
  for (const DraftStage& d : drafts) {
    const std::string& stage = d.stage;
    configs += ", " + (dir / (stage + ".yaml")).string();
    stages += (stages.empty() ? "" : ",") + stage;
    checkpoints += (checkpoints.empty() ? "" : ", ") + d.checkpoint;
  }
  std::cout << "\ndemo finished in " << elapsed_text(start) << "\n"
            << "  run directory " << dir.string() << "\n"
            << "  configs       " << (dir / "pretrain.yaml").string() << ", "
            << (dir / "rollouts.yaml").string() << configs << "\n"
            << "  metrics       " << pretrain.run_dir << "/metrics.jsonl, " << rollouts.run_dir
            << "/metrics.jsonl, " << dir.string() << "/{" << stages << "}/metrics.jsonl\n"
            << "  curves        " << pretrain.run_dir << "/curves.png, " << rollouts.run_dir
            << "/curves.png, " << dir.string() << "/{" << stages << "}/curves.png\n"
            << "  model         " << rollouts.checkpoint << "\n"
            << "  drafts        " << checkpoints
            << " (serving layout: sprig convert --to-hf CHECKPOINT --out DIR)\n";
}

}  // namespace sprig::tools

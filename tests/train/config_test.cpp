// Training configs: parsing with defaults, `a.b=value` overrides, closest-key errors in every
// section, bad values, and the resolved YAML a run records.
#include "train/config.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"
#include "tests/train/train_test_util.h"

namespace sprig {
namespace {

using testing::contains;
using testing::invalid_argument_message;
using testing::TempDir;
using testing::write_text;
namespace fs = std::filesystem;

const char* kMinimal =
    "run_dir: runs/x\n"
    "model: {config: m.json}\n"
    "data: {train: d.jsonl, packing: sft, seq_len: 32}\n";

// The message of loading `yaml` (written to a file) with `overrides`; "" when it loads.
// The directory of the configs these tests write (one, so that their paths resolve alike).
const TempDir& config_dir() {
  static const TempDir dir;
  return dir;
}

std::string load_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  write_text(config_dir() / "c.yaml", yaml);
  return invalid_argument_message([&] { load_train_config(config_dir() / "c.yaml", overrides); });
}

TrainConfig load(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  write_text(config_dir() / "c.yaml", yaml);
  return load_train_config(config_dir() / "c.yaml", overrides);
}

TEST(TrainConfig, FullConfigParses) {
  const TrainConfig c = load(
      "run_dir: runs/full\n"
      "seed: 7\n"
      "device: cpu\n"
      "model: {path: ckpt/step_1, dtype: f32}\n"
      "data:\n"
      "  train: [a.jsonl, b.jsonl]\n"
      "  val: v.jsonl\n"
      "  format: rollouts\n"
      "  packing: fold\n"
      "  seq_len: 256\n"
      "  micro_batch_size: 3\n"
      "train: {max_steps: 40, num_epochs: 2, grad_accumulation_steps: 4, max_grad_norm: 0.5,\n"
      "        loss_normalization: tokens, max_consecutive_skips: 2}\n"
      "optimizer: {lr: 2.0e-4, betas: [0.8, 0.95], weight_decay: 0.01, eps: 1.0e-6}\n"
      "scheduler: {warmup_steps: 5, warmup_ratio: 0.1, min_lr_ratio: 0.2}\n"
      "log: {every_steps: 3}\n"
      "checkpoint: {every_steps: 20, keep_last: 5}\n"
      "val: {every_steps: 10}\n");
  // Paths are relative to the config file's directory.
  const TempDir& dir = config_dir();
  EXPECT_EQ(c.run_dir, dir / "runs/full");
  EXPECT_EQ(c.seed, 7u);
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.model_path, dir / "ckpt/step_1");
  EXPECT_EQ(c.model_config, "");
  EXPECT_EQ(c.model_dtype, "f32");
  EXPECT_EQ(c.data.train, (std::vector<std::string>{dir / "a.jsonl", dir / "b.jsonl"}));
  EXPECT_EQ(c.data.val, std::vector<std::string>{dir / "v.jsonl"});
  EXPECT_EQ(c.data.format, data::DataFormat::rollouts);
  EXPECT_EQ(c.data.packing, data::Packing::fold);
  EXPECT_EQ(c.data.seq_len, 256);
  EXPECT_EQ(c.data.micro_batch_size, 3);
  EXPECT_EQ(c.data.seed, 7u);
  EXPECT_EQ(c.max_steps, 40);
  EXPECT_EQ(c.num_epochs, 2);
  EXPECT_EQ(c.grad_accumulation_steps, 4);
  EXPECT_EQ(c.max_grad_norm, 0.5);
  EXPECT_EQ(c.loss_normalization, LossNormalization::tokens);
  EXPECT_EQ(c.max_consecutive_skips, 2);
  EXPECT_EQ(c.optimizer.lr, 2e-4);
  EXPECT_EQ(c.optimizer.beta1, 0.8);
  EXPECT_EQ(c.optimizer.beta2, 0.95);
  EXPECT_EQ(c.optimizer.weight_decay, 0.01);
  EXPECT_EQ(c.optimizer.eps, 1e-6);
  EXPECT_EQ(c.warmup_steps, 5);
  EXPECT_EQ(c.warmup_ratio, 0.1);
  EXPECT_EQ(c.min_lr_ratio, 0.2);
  EXPECT_EQ(c.log_every_steps, 3);
  EXPECT_EQ(c.checkpoint_every_steps, 20);
  EXPECT_EQ(c.keep_last, 5);
  EXPECT_EQ(c.val_every_steps, 10);
}

TEST(TrainConfig, DefaultsFillEveryAbsentKey) {
  const TrainConfig c = load(kMinimal);
  EXPECT_EQ(c.seed, 0u);
  EXPECT_EQ(c.device, "auto");
  EXPECT_EQ(c.model_config, config_dir() / "m.json");
  EXPECT_EQ(c.model_dtype, "auto");
  EXPECT_EQ(c.data.micro_batch_size, 1);
  EXPECT_EQ(c.max_steps, 0);
  EXPECT_EQ(c.num_epochs, 1);
  EXPECT_EQ(c.grad_accumulation_steps, 1);
  EXPECT_EQ(c.max_grad_norm, 1.0);
  EXPECT_EQ(c.loss_normalization, LossNormalization::tokens);  // SFT's; the drafts' is mean
  EXPECT_EQ(c.max_consecutive_skips, 10);
  EXPECT_EQ(c.shard, Sharding::none);
  EXPECT_EQ(c.optimizer.lr, 1e-4);
  EXPECT_EQ(c.optimizer.beta1, 0.9);
  EXPECT_EQ(c.optimizer.beta2, 0.999);
  EXPECT_EQ(c.optimizer.weight_decay, 0.0);
  EXPECT_EQ(c.optimizer.eps, 1e-8);
  EXPECT_EQ(c.warmup_steps, -1);
  EXPECT_EQ(c.warmup_ratio, 0.0);
  EXPECT_EQ(c.min_lr_ratio, 0.1);
  EXPECT_EQ(c.log_every_steps, 10);
  EXPECT_EQ(c.checkpoint_every_steps, 0);
  EXPECT_EQ(c.keep_last, 3);
  EXPECT_EQ(c.val_every_steps, 0);
}

TEST(TrainConfig, ShardReadsNoneOptimizerOrGradients) {
  EXPECT_EQ(load(kMinimal, {"train.shard=optimizer"}).shard, Sharding::optimizer);
  EXPECT_EQ(load(kMinimal, {"train.shard=gradients"}).shard, Sharding::gradients);
  for (const char* bad : {"all", "zero2", "2", "Optimizer"})
    EXPECT_TRUE(contains(
        load_error(kMinimal, {std::string("train.shard=") + bad}),
        std::string("train.shard must be none, optimizer or gradients, got '") + bad + "'"))
        << bad;
}

// A setting another one overrules is said, once, not dropped silently.
TEST(TrainConfig, SettingsAnotherOverrulesAreListedAsUnused) {
  EXPECT_TRUE(load(kMinimal, {"train.max_steps=5"}).unused.empty());
  EXPECT_EQ(load(kMinimal, {"train.max_steps=5", "train.num_epochs=3", "scheduler.warmup_steps=2",
                            "scheduler.warmup_ratio=0.2"})
                .unused,
            (std::vector<std::string>{
                "train.num_epochs 3 is not used: train.max_steps 5 sets the run's length",
                "scheduler.warmup_ratio 0.2 is not used: scheduler.warmup_steps 2 sets the "
                "warmup"}));
}

TEST(TrainConfig, OverridesReplaceAddAndTakeLists) {
  const TrainConfig c =
      load(kMinimal, {"train.max_steps=7", "val.every_steps=5", "data.val=v.jsonl",
                      "optimizer.betas=[0.8,0.9]", "data.seq_len=64", "run_dir=elsewhere",
                      "checkpoint.keep_last=1"});
  EXPECT_EQ(c.max_steps, 7);
  EXPECT_EQ(c.val_every_steps, 5);  // a section the file does not have
  EXPECT_EQ(c.optimizer.beta1, 0.8);
  EXPECT_EQ(c.optimizer.beta2, 0.9);
  EXPECT_EQ(c.data.seq_len, 64);
  EXPECT_EQ(c.run_dir, (fs::current_path() / "elsewhere").string());  // a command line's: here
  EXPECT_EQ(c.keep_last, 1);
  // Later overrides win; a value that is a mapping replaces the node.
  EXPECT_EQ(load(kMinimal, {"train.max_steps=7", "train.max_steps=9"}).max_steps, 9);
  EXPECT_EQ(load(kMinimal, {"log={every_steps: 4}"}).log_every_steps, 4);
}

TEST(TrainConfig, UnknownKeysSuggestTheClosestInEverySection) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"seeed=1", "unknown key seeed (did you mean seed?)"},
      {"model.pth=x", "unknown key model.pth (did you mean model.path?)"},
      {"data.seq_length=8", "unknown key data.seq_length (did you mean data.seq_len?)"},
      {"train.max_step=8", "unknown key train.max_step (did you mean train.max_steps?)"},
      {"optimizer.lrr=1", "unknown key optimizer.lrr (did you mean optimizer.lr?)"},
      {"scheduler.min_lr=0", "unknown key scheduler.min_lr (did you mean scheduler.min_lr_ratio?)"},
      {"log.every=3", "unknown key log.every (did you mean log.every_steps?)"},
      {"checkpoint.keep=3", "unknown key checkpoint.keep (did you mean checkpoint.keep_last?)"},
      {"val.every_step=3", "unknown key val.every_step (did you mean val.every_steps?)"},
  };
  for (const auto& [override_text, message] : cases)
    EXPECT_TRUE(contains(load_error(kMinimal, {override_text}), "[config] " + message))
        << override_text;
  // The same check applies to keys written in the file, and the file is named.
  const std::string in_file = load_error(std::string(kMinimal) + "optimizer: {lrr: 1}\n");
  EXPECT_TRUE(contains(in_file, "unknown key optimizer.lrr (did you mean optimizer.lr?)"));
  EXPECT_TRUE(contains(in_file, "c.yaml)"));
}

TEST(TrainConfig, BadValuesNameTheKey) {
  EXPECT_TRUE(contains(load_error(kMinimal, {"train.max_steps=abc"}),
                       "train.max_steps must be an integer in [-9223372036854775808, "
                       "9223372036854775807], got abc"));
  // Seeds span [0, 2^64): -1 and 2^64 are out of it, said with the range.
  for (const char* seed : {"-1", "18446744073709551616", "1.5"})
    EXPECT_TRUE(contains(load_error(kMinimal, {std::string("seed=") + seed}),
                         std::string("[config] seed must be an integer in [0, "
                                     "18446744073709551615], got ") +
                             seed + " (from the command line: --seed=" + seed + ")"))
        << seed;
  EXPECT_EQ(load(kMinimal, {"seed=18446744073709551615"}).seed, UINT64_MAX);
  // An override's error is the command line's: a usage error of its own type.
  EXPECT_THROW(load(kMinimal, {"seed=-1"}), OverrideError);
  EXPECT_TRUE(contains(load_error(kMinimal, {"optimizer.betas=[0.9]"}),
                       "optimizer.betas must be a list of two numbers"));
  EXPECT_TRUE(contains(load_error(kMinimal, {"optimizer.lr=0"}), "optimizer.lr must be positive"));
  EXPECT_TRUE(contains(load_error(kMinimal, {"device=gpu"}),
                       "device must be auto, cpu or cuda, got 'gpu'"));
  EXPECT_TRUE(
      contains(load_error(kMinimal, {"model.path=ckpt"}), "give exactly one of model.path"));
  EXPECT_TRUE(contains(load_error(kMinimal, {"model.dtype=f16"}),
                       "model.dtype must be auto, bf16 or f32, got 'f16'"));
  EXPECT_TRUE(contains(load_error(kMinimal, {"train.loss_normalization=sum"}),
                       "train.loss_normalization must be mean or tokens, got 'sum'"));
  EXPECT_TRUE(contains(load_error(kMinimal, {"scheduler.min_lr_ratio=1.5"}),
                       "scheduler.min_lr_ratio must be in [0, 1]"));
  EXPECT_TRUE(contains(load_error(kMinimal, {"run_dir="}), "run_dir is required"));
  EXPECT_TRUE(contains(load_error(kMinimal, {"max_steps"}),
                       "override 'max_steps' must look like section.key=value"));
  EXPECT_TRUE(contains(load_error(kMinimal, {"optimizer.betas=[0.9"}),
                       "override 'optimizer.betas=[0.9' has an unparsable value"));
  EXPECT_TRUE(
      contains(load_error("run_dir: x\nmodel: {config: m.json}\n"), "missing the data: section"));
  EXPECT_TRUE(contains(load_error("run_dir: x\nmodel: [1, 2\n"),
                       "c.yaml:3: end of sequence flow not found"));
  EXPECT_TRUE(
      contains(invalid_argument_message([] { load_train_config("/nonexistent/c.yaml", {}); }),
               "[config] cannot open /nonexistent/c.yaml"));
  // A key twice, in a section or at the top: YAML readers keep one silently.
  EXPECT_EQ(load_error(std::string(kMinimal) + "train:\n  max_steps: 3\n  max_steps: 5\n"),
            "[config] " + (config_dir() / "c.yaml") +
                ":6: train.max_steps appears twice (also on line 5)");
  EXPECT_TRUE(contains(load_error(std::string(kMinimal) + "seed: 1\nseed: 2\n"),
                       "seed appears twice (also on line"));
}

// Every number is finite and in its range, checked where the config is read; nothing is clamped.
TEST(TrainConfig, NonFiniteAndOutOfRangeNumbersAreRefusedWithTheKeyAndValue) {
  for (const auto& [override_text, message] : std::vector<std::pair<std::string, std::string>>{
           {"optimizer.lr=.nan", "optimizer.lr must be a finite number, got .nan"},
           {"train.max_grad_norm=.inf", "train.max_grad_norm must be a finite number, got .inf"},
           {"optimizer.betas=[0.9, .nan]",
            "optimizer.betas must be a finite number, got [0.9, .nan]"},
           {"optimizer.eps=0", "optimizer.eps must be in (0, 1), got 0"},
           {"optimizer.eps=1e300", "optimizer.eps must be in (0, 1), got 1e300"},
           {"train.max_consecutive_skips=-1", "train.max_consecutive_skips must be >= 0, got -1"},
           {"scheduler.warmup_ratio=-0.5", "scheduler.warmup_ratio must be in [0, 1], got -0.5"},
           {"scheduler.warmup_steps=-2", "scheduler.warmup_steps must be >= 0"},
           {"optimizer.lr=-1", "optimizer.lr must be positive, got -1"}})
    EXPECT_TRUE(contains(load_error(kMinimal, {override_text}), "[config] " + message))
        << override_text << ": " << load_error(kMinimal, {override_text});
}

TEST(TrainConfig, AttentionBackendIsReadOnlyWhenGivenAndNeverAltersTheRun) {
  const TrainConfig plain = load(kMinimal);
  EXPECT_EQ(plain.attention_backend, AttentionBackend::automatic);
  EXPECT_FALSE(contains(plain.resolved_yaml, "attention"));  // runs before it resume unchanged
  const TrainConfig cudnn = load(kMinimal, {"attention.backend=cudnn"});
  EXPECT_EQ(cudnn.attention_backend, AttentionBackend::cudnn);
  EXPECT_EQ(load(kMinimal, {"attention.backend=sprig"}).attention_backend, AttentionBackend::sprig);
  EXPECT_TRUE(contains(load_error(kMinimal, {"attention.backend=flash"}),
                       "attention.backend must be auto, sprig or cudnn, got 'flash'"));
  EXPECT_TRUE(contains(load_error(kMinimal, {"attention.kernels=cudnn"}), "attention.backend"));
  const std::vector<ConfigChange> changes =
      config_changes(plain.resolved_yaml, cudnn.resolved_yaml);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].key, "attention.backend");
  EXPECT_FALSE(changes[0].alters_run);
}

TEST(TrainConfig, LossSectionAndFirstTokenSupervision) {
  const std::string rollouts =
      "run_dir: runs/x\n"
      "model: {config: m.json}\n"
      "data: {train: r.jsonl, format: rollouts, seq_len: 32}\n";
  const TrainConfig sft = load(rollouts);
  EXPECT_EQ(sft.loss.type, LossType::sft);
  // An absent loss: stays absent in the resolved config, as in runs made before the section.
  EXPECT_FALSE(testing::contains(sft.resolved_yaml, "\nloss:"));
  EXPECT_FALSE(sft.data.supervise_first_token);
  const TrainConfig pg =
      load(rollouts, {"loss.type=pg", "loss.average=sequence", "loss.clip_eps=0.2",
                      "data.rollouts.supervise_first_token=true"});
  EXPECT_EQ(pg.loss.type, LossType::pg);
  EXPECT_EQ(pg.loss.average, LossAverage::sequence);
  EXPECT_EQ(pg.loss.clip_eps, 0.2);
  EXPECT_TRUE(pg.data.supervise_first_token);
  EXPECT_EQ(load(rollouts, {"loss.type=pg"}).loss.average, LossAverage::token);

  EXPECT_TRUE(
      contains(load_error(rollouts, {"loss.type=ppo"}), "loss.type must be sft or pg, got 'ppo'"));
  EXPECT_TRUE(contains(load_error(rollouts, {"loss.clip_eps=0.2"}),
                       "loss.clip_eps applies to loss.type pg"));
  EXPECT_TRUE(contains(load_error(rollouts, {"loss.type=pg", "loss.average=mean"}),
                       "loss.average must be token or sequence, got 'mean'"));
  EXPECT_TRUE(contains(load_error(rollouts, {"loss.type=pg", "loss.clip_eps=1.5"}),
                       "loss.clip_eps must be in [0, 1) (0: no clipping), got 1.5"));
  EXPECT_TRUE(contains(load_error(rollouts, {"loss.typ=pg"}),
                       "unknown key loss.typ (did you mean loss.type?)"));
  EXPECT_TRUE(contains(load_error(kMinimal, {"loss.type=pg"}),
                       "loss.type pg trains on rollouts: set data.format rollouts"));
  EXPECT_TRUE(contains(load_error(kMinimal, {"data.rollouts.supervise_first_token=true"}),
                       "data.rollouts applies to format rollouts, not documents"));
  EXPECT_TRUE(contains(load_error(rollouts, {"data.rollouts.supervise_first=true"}),
                       "unknown key data.rollouts.supervise_first (did you mean "
                       "data.rollouts.supervise_first_token?)"));
  EXPECT_TRUE(contains(load_error(rollouts, {"data.rollouts.supervise_first_token=2"}),
                       "data.rollouts.supervise_first_token must be true or false"));
}

TEST(TrainConfig, OutOfRangeValuesNameTheKeyAndTheValue) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"optimizer.betas=[0.9, 1.0]", "optimizer.betas must both be in [0, 1), got [0.9, 1.0]"},
      {"optimizer.betas=[-0.1, 0.95]", "optimizer.betas must both be in [0, 1), got [-0.1, 0.95]"},
      {"optimizer.weight_decay=-0.01", "optimizer.weight_decay must be >= 0, got -0.01"},
      {"optimizer.weight_decay=1e6",
       "optimizer.weight_decay 1e6 with optimizer.lr 0.0001 would scale the weights by 1 - lr * "
       "weight_decay <= 0 at every step: their product must be below 1"},
      {"train.max_grad_norm=-1", "train.max_grad_norm must be >= 0 (0: no clipping), got -1"},
      {"checkpoint.every_steps=-5",
       "checkpoint.every_steps must be >= 0 (0: only the final checkpoint), got -5"},
      {"checkpoint.keep_last=0", "checkpoint.keep_last must be >= 1, got 0"},
      {"log.every_steps=0", "log.every_steps must be >= 1, got 0"},
      {"train.num_epochs=0", "train.num_epochs must be >= 1, got 0"},
      {"train.max_steps=-3", "train.max_steps must be >= 0 (0: train.num_epochs), got -3"},
      {"train.grad_accumulation_steps=0", "train.grad_accumulation_steps must be >= 1, got 0"},
      {"val.every_steps=-2", "val.every_steps must be >= 0 (0: only after the last step), got -2"},
      {"val.every_steps=3",
       "val.every_steps 3 applies when data.val names the validation data; there is none"},
  };
  for (const auto& [override_text, message] : cases) {
    const std::string error = load_error(kMinimal, {override_text});
    EXPECT_TRUE(contains(error, "[config] " + message)) << override_text;
    // The value came from an override: the command line is named, not the file.
    EXPECT_TRUE(contains(error, "(from the command line: --" + override_text + ")"))
        << override_text;
  }
  // Several overrides: the one of the key the message is about, not the first given.
  EXPECT_TRUE(contains(load_error(kMinimal, {"train.max_steps=1", "train.num_epochs=0"}),
                       "train.num_epochs must be >= 1, got 0 (from the command line: "
                       "--train.num_epochs=0)"));
  const std::string in_file = load_error(std::string(kMinimal) + "log: {every_steps: 0}\n");
  EXPECT_TRUE(contains(
      in_file, "log.every_steps must be >= 1, got 0 (in " + (config_dir() / "c.yaml") + ")"))
      << in_file;
  // The limits themselves are valid.
  const TrainConfig edge = load(kMinimal, {"optimizer.betas=[0.0, 0.999]", "train.max_grad_norm=0",
                                           "optimizer.weight_decay=0", "checkpoint.keep_last=1",
                                           "log.every_steps=1", "checkpoint.every_steps=0"});
  EXPECT_EQ(edge.optimizer.beta1, 0.0);
  EXPECT_EQ(edge.max_grad_norm, 0.0);
  EXPECT_EQ(edge.keep_last, 1);
  EXPECT_EQ(edge.log_every_steps, 1);
}

TEST(TrainConfig, ChangesListEveryDifferingKeyAndWhetherItAltersTheRun) {
  const TrainConfig before = load(kMinimal);
  const TrainConfig after = load(kMinimal, {"data.seq_len=64", "train.max_steps=9",
                                            "optimizer.betas=[0.8, 0.9]", "log.every_steps=1"});
  const std::vector<ConfigChange> changes =
      config_changes(before.resolved_yaml, after.resolved_yaml);
  std::vector<std::string> shown;
  for (const ConfigChange& c : changes)
    shown.push_back(c.key + " " + c.before + " -> " + c.after + (c.alters_run ? " alters" : ""));
  EXPECT_EQ(shown,
            (std::vector<std::string>{"data.seq_len 32 -> 64 alters", "log.every_steps 10 -> 1",
                                      "optimizer.betas [0.9, 0.999] -> [0.8, 0.9] alters",
                                      "train.max_steps 0 -> 9"}));
  EXPECT_TRUE(config_changes(before.resolved_yaml, load(kMinimal).resolved_yaml).empty());
  // Numbers compare by value: the defaults written out (as a resolved config of an older run
  // holds them, digit for digit), in another notation, are no change.
  EXPECT_TRUE(config_changes("optimizer: {betas: [0.90000000000000002, 0.999], lr: 1.0e-4}\n",
                             "optimizer: {betas: [0.9, 0.999], lr: 0.0001}\n")
                  .empty());
  EXPECT_TRUE(contains(before.resolved_yaml, "betas: [0.9, 0.999]")) << before.resolved_yaml;
  // A key only one side has.
  const std::vector<ConfigChange> added =
      config_changes("a: 1\n", "a: 1\nval: {every_steps: 5}\nseed: 2\n");
  ASSERT_EQ(added.size(), 2u);
  EXPECT_EQ(added[0].key, "seed");
  EXPECT_EQ(added[0].before, "(absent)");
  EXPECT_EQ(added[0].after, "2");
  EXPECT_TRUE(added[0].alters_run);
  EXPECT_EQ(added[1].key, "val.every_steps");
  EXPECT_FALSE(added[1].alters_run);
}

TEST(TrainConfig, ResolvedYamlRecordsOverridesAndDefaultsAndLoadsBack) {
  const TrainConfig c = load(kMinimal, {"train.max_steps=7", "optimizer.betas=[0.8,0.9]"});
  for (const char* text : {"max_steps: 7", "0.8", "num_epochs: 1", "lr: 0.0001",
                           "min_lr_ratio: 0.1", "keep_last: 3", "device: auto"})
    EXPECT_TRUE(contains(c.resolved_yaml, text));
  // Loading the resolved YAML gives the same configuration (and the same YAML again).
  const TrainConfig again = load(c.resolved_yaml);
  EXPECT_EQ(again.resolved_yaml, c.resolved_yaml);
  EXPECT_EQ(again.max_steps, 7);
  EXPECT_EQ(again.optimizer.beta1, 0.8);
  EXPECT_EQ(again.data.seq_len, 32);
}

TEST(TrainConfig, ExampleConfigsLoad) {
  int64_t count = 0;
  for (const auto& e : fs::directory_iterator(testing::source_path("train/configs"))) {
    if (e.path().extension() != ".yaml") continue;
    // tiny_<recipe>.yaml: the draft recipes' configs are named after them.
    const std::string name = e.path().filename().string();
    const speculative::DraftKind* kind = nullptr;
    for (const speculative::DraftKind* k : speculative::draft_kinds())
      if (name.find(k->name()) != std::string::npos) kind = k;
    if (name.find("eagle3") != std::string::npos)
      EXPECT_NO_THROW(load_eagle3_train_config(e.path().string(), {})) << e.path();
    else
      EXPECT_NO_THROW(load_train_config(e.path().string(), {}, kind)) << e.path();
    ++count;
  }
  EXPECT_GE(count, 3);
  const TrainConfig rollouts =
      load_train_config(testing::source_path("train/configs/tiny_rollouts.yaml"), {});
  EXPECT_EQ(rollouts.data.packing, data::Packing::fold);
  const TrainConfig big =
      load_train_config(testing::source_path("train/configs/qwen3_0.6b_sft.yaml"), {});
  EXPECT_EQ(big.model_path, testing::source_path("checkpoints/qwen3-0.6b"));
  EXPECT_EQ(big.data.seq_len, 4096);
  EXPECT_EQ(big.grad_accumulation_steps, 8);
  const TrainConfig draft = load_train_config(
      testing::source_path("train/configs/tiny_dflash.yaml"), {}, &speculative::dflash_kind());
  EXPECT_EQ(draft.loss_normalization, LossNormalization::mean);  // the drafts' default
}

}  // namespace
}  // namespace sprig

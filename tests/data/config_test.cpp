// DataConfig from YAML: values, defaults, and every validation message.
#include "data/config.h"

#include <gtest/gtest.h>

#include "tests/data/data_test_util.h"

namespace sprig::data {
namespace {

using testing::TempFile;

DataConfig parse(const std::string& yaml) {
  TempFile f(yaml, ".yaml");
  return load_data_config(f.path());
}

// The message of the error parsing `yaml`, without the " in FILE" suffix.
std::string config_error(const std::string& yaml) {
  TempFile f(yaml, ".yaml");
  try {
    load_data_config(f.path());
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what(), suffix = " in " + f.path();
    return what.ends_with(suffix) ? what.substr(0, what.size() - suffix.size()) : what;
  }
  return "";
}

TEST(DataConfig, FullTrainingConfig) {
  const DataConfig c = parse(R"(
seed: 42
model: {hidden_size: 64}      # other sections are not read here
optimizer:
  lr: 1.0e-4
data:
  train: [a.bin, b.bin]
  val: c.bin
  format: shards
  seq_len: 4096
  packing: bfd
  micro_batch_size: 4
  pad_id: 3
  eot_id: 50256
  vocab_size: 50304
  skip_bad_records: true
  shuffle: false
  drop_long_samples: false
  max_packs: 100
)");
  EXPECT_EQ(c.seed, 42u);
  // Beside the config file (a TempFile under the temporary directory).
  const std::string dir = std::filesystem::temp_directory_path().string();
  EXPECT_EQ(c.train, (std::vector<std::string>{dir + "/a.bin", dir + "/b.bin"}));
  EXPECT_EQ(c.val, (std::vector<std::string>{dir + "/c.bin"}));
  EXPECT_EQ(c.format, DataFormat::shards);
  EXPECT_EQ(c.seq_len, 4096);
  EXPECT_EQ(c.packing, Packing::bfd);
  EXPECT_EQ(c.micro_batch_size, 4);
  EXPECT_EQ(c.pad_id, 3);
  EXPECT_EQ(c.eot_id, 50256);
  EXPECT_EQ(c.vocab_size, 50304);
  EXPECT_TRUE(c.skip_bad_records);
  EXPECT_FALSE(c.shuffle);
  EXPECT_FALSE(c.drop_long_samples);
  EXPECT_EQ(c.max_packs, 100);
  EXPECT_EQ(c.read_options().eot_id, 50256);
  EXPECT_EQ(c.pack_options().max_packs, 100);
}

TEST(DataConfig, Defaults) {
  DataConfig c = parse("data: {train: docs.jsonl, seq_len: 16, packing: dflash}\n");
  EXPECT_EQ(c.seed, 0u);
  EXPECT_TRUE(c.val.empty());
  EXPECT_EQ(c.format, DataFormat::documents);
  EXPECT_EQ(c.micro_batch_size, 1);
  EXPECT_EQ(c.pad_id, 0);
  EXPECT_EQ(c.vocab_size, 0);
  EXPECT_FALSE(c.skip_bad_records);
  EXPECT_TRUE(c.shuffle);
  EXPECT_TRUE(c.drop_long_samples);
  EXPECT_EQ(c.max_packs, 0);
  c = parse("data: {train: r.jsonl, format: rollouts, seq_len: 16}\n");
  EXPECT_EQ(c.packing, Packing::fold);
}

TEST(DataConfig, Errors) {
  EXPECT_EQ(config_error("data: {train: d.jsonl, seq_length: 16, packing: sft}\n"),
            "[config] unknown key data.seq_length (did you mean data.seq_len?)");
  EXPECT_EQ(config_error("data: {train: d.jsonl, seq_len: 16, packing: sft, shufle: true}\n"),
            "[config] unknown key data.shufle (did you mean data.shuffle?)");
  EXPECT_EQ(config_error("model: {}\n"), "[config] missing the data: section");
  EXPECT_EQ(config_error("data: {seq_len: 16, packing: sft}\n"),
            "[config] data.train is required (a path or a list of paths)");
  EXPECT_EQ(config_error("data: {train: d.jsonl, packing: sft}\n"),
            "[config] data.seq_len is required (tokens per row)");
  EXPECT_EQ(config_error("data: {train: d.jsonl, packing: sft, seq_len: 0}\n"),
            "[config] data.seq_len must be positive, got 0");
  EXPECT_EQ(config_error("data: {train: d.jsonl, seq_len: many, packing: sft}\n"),
            "[config] data.seq_len must be an integer, got 'many'");
  EXPECT_EQ(config_error("data: {train: d.jsonl, seq_len: 8}\n"),
            "[config] data.packing is required for format documents (dflash, padded, sft or bfd)");
  EXPECT_EQ(config_error("data: {train: d.jsonl, seq_len: 8, packing: fold}\n"),
            "[data] format documents cannot use packing fold (rollouts use fold; documents and "
            "shards dflash, padded, sft or bfd)");
  EXPECT_EQ(config_error("data: {train: d.jsonl, seq_len: 8, packing: neat}\n"),
            "[pack] unknown packing 'neat' (expected dflash, padded, sft, bfd or fold)");
  EXPECT_EQ(config_error("data: {train: d.bin, format: shards, seq_len: 8, packing: sft}\n"),
            "[config] data.eot_id is required for format shards");
  EXPECT_EQ(config_error("data: {train: d.jsonl, seq_len: 8, packing: sft, vocab_size: 10, "
                         "pad_id: 10}\n"),
            "[config] data.pad_id = 10 is not a token id in [0, 10)");
  EXPECT_EQ(config_error("data: {train: d.jsonl, seq_len: 8, packing: sft, shuffle: maybe}\n"),
            "[config] data.shuffle must be true or false, got 'maybe'");
  EXPECT_EQ(config_error("data: {train: d.jsonl, seq_len: 8, packing: sft, micro_batch_size: 0}\n"),
            "[config] data.micro_batch_size must be positive, got 0");
  EXPECT_EQ(config_error("data: [1, 2]\n"), "[config] data: must be a mapping of keys to values");
  EXPECT_THROW(load_data_config("/nonexistent/config.yaml"), std::invalid_argument);
  EXPECT_THROW(parse("data: {train: [a, b\n"), std::invalid_argument);  // YAML syntax error
  // A key twice: refused with both lines (a YAML reader would keep the first silently).
  const std::string twice = config_error("data:\n  train: d.jsonl\n  seq_len: 8\n  seq_len: 16\n");
  EXPECT_TRUE(twice.starts_with("[config] ")) << twice;
  EXPECT_TRUE(twice.ends_with(":4: data.seq_len appears twice (also on line 3)")) << twice;
}

}  // namespace
}  // namespace sprig::data

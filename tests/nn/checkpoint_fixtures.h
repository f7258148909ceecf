// Checkpoint directories for the converter and CLI tests: self-removing temporary directories, the
// golden tiny models rewritten tensor by tensor (single file or sharded, bytes untouched), the
// broken checkpoints a loader must reject with one sentence, and a bit-for-bit comparison of two
// layouts.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "nn/checkpoint.h"
#include "tests/test_util.h"

namespace sprig::testing {

namespace fs = std::filesystem;

inline const std::string kGoldenDir = testing::source_dir() + "/tests/golden/";

// An empty directory private to this process (tests of one binary may run concurrently),
// removed with its contents when the object goes out of scope. (A name distinct from
// train_test_util.h's TempDir: both headers go into one test binary.)
class NamedTempDir {
 public:
  explicit NamedTempDir(const std::string& name)
      : path((fs::temp_directory_path() / ("sprig_" + name + "_" + std::to_string(::getpid())))
                 .string()) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~NamedTempDir() { fs::remove_all(path); }
  NamedTempDir(const NamedTempDir&) = delete;
  NamedTempDir& operator=(const NamedTempDir&) = delete;

  const std::string path;
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Every tensor of a file as raw entries pointing into its mapping (valid while `file` lives).
inline std::vector<RawTensor> raw_tensors(const SafetensorsFile& file) {
  std::vector<RawTensor> out;
  for (const StTensorInfo& t : file.tensors())
    out.push_back({t.name, t.dtype, t.shape, file.raw(t.name), t.end - t.begin});
  return out;
}

// Writes `dir` as an HF checkpoint: the golden model's config.json (edited by `edit_config`) and
// its tensors (edited by `edit_tensors`, bytes untouched), in one file or split over `shards`
// files named by model.safetensors.index.json.
inline void write_hf_checkpoint(
    const std::string& model, const std::string& dir,
    const std::function<void(std::vector<RawTensor>&)>& edit_tensors = {},
    const std::function<void(nlohmann::json&)>& edit_config = {}, int shards = 1) {
  fs::create_directories(dir);
  nlohmann::json config = nlohmann::json::parse(read_text(kGoldenDir + model + "/config.json"));
  if (edit_config) edit_config(config);
  write_text(dir + "/config.json", config.dump(2));
  const SafetensorsFile golden(kGoldenDir + model + "/model.safetensors");
  std::vector<RawTensor> tensors = raw_tensors(golden);
  if (edit_tensors) edit_tensors(tensors);
  if (shards == 1) {
    save_safetensors_raw(dir + "/model.safetensors", tensors);
    return;
  }
  nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                          {"weight_map", nlohmann::json::object()}};
  const size_t per_shard = (tensors.size() + shards - 1) / shards;
  for (int s = 0; s < shards; ++s) {
    const std::string file =
        "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
    const size_t begin = s * per_shard, end = std::min(tensors.size(), begin + per_shard);
    const std::vector<RawTensor> part(tensors.begin() + begin, tensors.begin() + end);
    for (const RawTensor& t : part) {
      index["weight_map"][t.name] = file;
      index["metadata"]["total_size"] = index["metadata"]["total_size"].get<size_t>() + t.bytes;
    }
    save_safetensors_raw(dir + "/" + file, part);
  }
  write_text(dir + "/model.safetensors.index.json", index.dump(2));
}

// A checkpoint directory broken in one way, and a fragment its error message must contain.
struct BrokenCheckpoint {
  std::string dir, message;
};

inline std::vector<std::string> breakage_kinds() {
  return {"truncated",      "overlapping_offsets", "wrong_shape",
          "integer_weight", "missing_tensor",      "bad_config"};
}

// Rewrites the header of `path` so the second tensor (in offset order) starts 4 bytes early.
inline std::string overlap_offsets(const std::string& path) {
  std::string bytes = read_text(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  std::vector<std::pair<uint64_t, std::string>> by_offset;
  for (const auto& [name, entry] : header.items())
    if (name != "__metadata__") by_offset.emplace_back(entry["data_offsets"][0], name);
  std::sort(by_offset.begin(), by_offset.end());
  const std::string victim = by_offset.at(1).second;
  auto& offsets = header[victim]["data_offsets"];
  offsets = {offsets[0].get<uint64_t>() - 4, offsets[1].get<uint64_t>() - 4};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t len = text.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &len, 8);
  write_text(path, out + text + bytes.substr(8 + n));
  return victim;
}

// The qwen3 golden model broken as `kind` says, under `parent`.
inline BrokenCheckpoint broken_checkpoint(const std::string& kind, const std::string& parent) {
  const std::string dir = parent + "/" + kind;
  const std::string weights = dir + "/model.safetensors";
  if (kind == "truncated") {
    write_hf_checkpoint("qwen3_tiny", dir);
    fs::resize_file(weights, fs::file_size(weights) - 100);
    return {dir, weights + ": data section is truncated"};
  }
  if (kind == "overlapping_offsets") {
    write_hf_checkpoint("qwen3_tiny", dir);
    const std::string victim = overlap_offsets(weights);
    return {dir, weights + ": tensor \"" + victim + "\": data overlaps the previous tensor"};
  }
  if (kind == "wrong_shape") {
    std::string hidden;
    write_hf_checkpoint("qwen3_tiny", dir, [&](std::vector<RawTensor>& ts) {
      for (RawTensor& t : ts)
        if (t.name == "model.norm.weight") {
          hidden = std::to_string(t.shape[0]);
          t.shape = {1, t.shape[0]};
        }
    });
    return {dir, dir +
                     ": the weights do not match config.json: wrong shape model.norm.weight "
                     "(expected [" +
                     hidden + "], got [1, " + hidden + "])"};
  }
  if (kind == "integer_weight") {  // an f32 weight's bytes tagged I32
    write_hf_checkpoint("qwen3_tiny", dir, [](std::vector<RawTensor>& ts) {
      for (RawTensor& t : ts)
        if (t.name == "model.layers.0.mlp.up_proj.weight") t.dtype = StDType::I32;
    });
    return {dir, dir +
                     ": the weights do not match config.json: wrong dtype "
                     "model.layers.0.mlp.up_proj.weight (I32), weights are F32, BF16, F16 or F64"};
  }
  if (kind == "missing_tensor") {
    write_hf_checkpoint("qwen3_tiny", dir, [](std::vector<RawTensor>& ts) {
      std::erase_if(
          ts, [](const RawTensor& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
    });
    return {dir, dir +
                     ": the weights do not match config.json: missing "
                     "model.layers.1.mlp.up_proj.weight"};
  }
  if (kind == "bad_config") {
    write_hf_checkpoint("qwen3_tiny", dir, {}, [](nlohmann::json& c) {
      c["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 4.0}};
    });
    return {dir, dir + "/config.json: rope scaling type \"longrope\" is not supported"};
  }
  throw std::invalid_argument("unknown breakage " + kind);
}

// Names of a directory's entries (to see that nothing was written).
inline std::set<std::string> entries_of(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

// Every tensor of `a` (one file) is in `b` (single or sharded) with the same dtype, shape and
// bytes, and `b` holds nothing else.
inline void expect_same_tensors(const std::string& a_file, const std::string& b_dir) {
  const SafetensorsFile a(a_file);
  const WeightFiles b(b_dir);
  std::vector<std::string> a_names;
  for (const StTensorInfo& t : a.tensors()) a_names.push_back(t.name);
  std::sort(a_names.begin(), a_names.end());
  EXPECT_EQ(b.names(), a_names);
  for (const StTensorInfo& t : a.tensors()) {
    if (!b.contains(t.name)) continue;
    const StTensorInfo& u = b.file_of(t.name).info(t.name);
    EXPECT_EQ(u.dtype, t.dtype) << t.name;
    EXPECT_EQ(u.shape, t.shape) << t.name;
    ASSERT_EQ(u.end - u.begin, t.end - t.begin) << t.name;
    EXPECT_EQ(std::memcmp(b.file_of(t.name).raw(t.name), a.raw(t.name), t.end - t.begin), 0)
        << t.name;
  }
}

}  // namespace sprig::testing

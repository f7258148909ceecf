// Hugging Face Qwen checkpoints and sprig checkpoint directories.
//
// An HF directory holds config.json and either model.safetensors or a sharded set described by
// model.safetensors.index.json. A sprig checkpoint directory holds config.json (HF format) and one
// model.safetensors with HF tensor names (docs/architecture.md §5). Conversions keep every tensor's
// bytes and dtype, check every expected tensor is present with the right shape (listing all
// missing, unexpected and mis-shaped tensors in one error) and write nothing on failure.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/qwen.h"
#include "tensor/safetensors.h"

namespace sprig {

// Every parameter name of a Qwen model with this config and its shape, in HF naming.
std::map<std::string, Shape> expected_tensor_shapes(const QwenConfig& config);

// The safetensors files of a directory (single or sharded), opened and validated.
class WeightFiles {
 public:
  explicit WeightFiles(const std::string& dir);
  std::vector<std::string> names() const;  // every tensor name, sorted
  bool contains(const std::string& name) const { return by_name_.count(name) > 0; }
  const SafetensorsFile& file_of(const std::string& name) const;
  Tensor load(const std::string& name, Device device = Device::cpu()) const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> by_name_;
};

// Throws std::runtime_error naming `dir` and listing every missing, unexpected and mis-shaped
// tensor. A tied model may carry a redundant lm_head.weight; it is ignored.
void check_weights(const WeightFiles& weights, const QwenConfig& config, const std::string& dir);

// Loads a model (HF directory or sprig checkpoint) onto the CPU in f32, ready to move with to().
std::unique_ptr<QwenForCausalLM> load_qwen(const std::string& dir);

// Creates `dir` by filling a fresh sibling temporary directory, then renaming it into place, so a
// reader never sees a half-written directory. An existing `dir` is replaced only once the new one
// is complete and only when `replace`; otherwise one that is not empty is refused, untouched.
void write_directory(const std::string& dir,
                     const std::function<void(const std::filesystem::path& tmp)>& fill,
                     bool replace);

// Checks, before any work, that a new output file can go to `path`: nothing (or an empty file) is
// there and its directory exists. Throws "<path> ..." naming what is wrong.
void check_new_file(const std::string& path);
// Writes `path` (checked as above) by filling a sibling temporary file, renamed on success and
// removed on failure.
void write_new_file(const std::string& path,
                    const std::function<void(const std::string& tmp)>& fill);

// Writes a model's config and weights (in their current dtype) as a checkpoint directory.
void save_qwen(const QwenForCausalLM& model, const std::string& dir);

// `sprig convert`: copies config.json and the expected tensors bit for bit into one
// model.safetensors under out_dir (created through a temporary directory and a rename).
// from_hf reads single or sharded HF layouts; to_hf writes the HF layout from a sprig checkpoint.
void convert_checkpoint(const std::string& in_dir, const std::string& out_dir);

}  // namespace sprig

// Hugging Face Qwen checkpoints and sprig checkpoint directories.
//
// An HF directory holds config.json and either model.safetensors or a sharded set described by
// model.safetensors.index.json. A sprig checkpoint directory holds config.json (HF format) and one
// model.safetensors with HF tensor names (docs/architecture.md §5). Conversions keep every tensor's
// bytes and dtype, check every expected tensor is present with the right shape (listing all
// missing, unexpected and mis-shaped tensors in one error) and write nothing on failure.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/qwen.h"
#include "tensor/output.h"
#include "tensor/safetensors.h"

namespace sprig {

// `dir`/config.json of a model directory, or a sentence saying why `dir` is not one (missing, a
// file such as the config.json itself, or without config.json).
std::string model_config_path(const std::string& dir);

// Every parameter name of a Qwen model with this config and its shape, in HF naming.
std::map<std::string, Shape> expected_tensor_shapes(const QwenConfig& config);

// The safetensors files of a directory (single or sharded), opened and validated.
class WeightFiles {
 public:
  explicit WeightFiles(const std::string& dir);
  std::vector<std::string> names() const;  // every tensor name, sorted
  bool contains(const std::string& name) const { return by_name_.count(name) > 0; }
  const SafetensorsFile& file_of(const std::string& name) const;
  // The tensor in its stored dtype; throws std::runtime_error naming the file and the tensor when
  // it holds NaN or inf.
  Tensor load(const std::string& name, Device device = Device::cpu()) const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> by_name_;
};

// Throws std::runtime_error "<what>: missing ...; unexpected ...; wrong shape ...; wrong dtype ..."
// listing every tensor of `weights` that is not in `expected` with its shape and a floating-point
// dtype (an integer weight would load as numbers of another scale); `optional` tensors may be there
// or not (the caller checks them).
void check_tensors(const WeightFiles& weights, const std::map<std::string, Shape>& expected,
                   const std::string& what, const std::vector<std::string>& optional = {});

// check_tensors against a Qwen model's tensors, naming `dir`. A tied model may carry a redundant
// lm_head.weight; it is ignored.
void check_weights(const WeightFiles& weights, const QwenConfig& config, const std::string& dir);

// Loads a model (HF directory or sprig checkpoint) onto the CPU in f32, ready to move with to().
std::unique_ptr<QwenForCausalLM> load_qwen(const std::string& dir);

// Tokenizer files a model directory may hold beside its weights (copied into draft exports).
extern const std::vector<std::string> kTokenizerFiles;

// A model directory's companion files: kTokenizerFiles and generation_config.json. Conversions
// both ways and training checkpoints carry them, so an exported model loads with its tokenizer
// and its generation defaults.
extern const std::vector<std::string> kCompanionFiles;

// Copies those of kCompanionFiles that `from` holds as regular files into the directory `to`;
// returns their names.
std::vector<std::string> copy_companion_files(const std::string& from, const std::string& to);

// A model directory: config.json with weights, generation_config.json and tokenizer files only,
// whose model.safetensors records "checkpoint" under kOutputKey (what sprig writes). `--overwrite`
// replaces such a directory and nothing else.
extern const OutputKind kCheckpointDirOutput;

// Writes a model's config and weights (in their current dtype) as a checkpoint directory, a new
// one (tensor/output.h) unless `overwrite` lets it replace an earlier checkpoint.
void save_qwen(const QwenForCausalLM& model, const std::string& dir, bool overwrite = false);

// `sprig convert`: copies config.json and the expected tensors bit for bit into one
// model.safetensors under out_dir, with the companion files in_dir holds (an Output: checked
// before reading anything, written whole or not at all). from_hf reads single or sharded HF
// layouts; to_hf writes the HF layout from a sprig checkpoint. Shard names of an index must stay
// inside in_dir. With `dtype`, every tensor is cast to it instead (refused when the cast weights
// would take over half the memory available). config.json's dtype says what the written weights
// are.
struct ConvertedModel {
  DType dtype;                               // of the written weights
  std::vector<std::string> companion_files;  // carried over
};
ConvertedModel convert_checkpoint(const std::string& in_dir, const std::string& out_dir,
                                  bool overwrite = false,
                                  std::optional<DType> dtype = std::nullopt);

// The tensor whose dtype stands for a model's stored weights: the embedding.
inline constexpr const char* kEmbeddingWeight = "model.embed_tokens.weight";

// The dtype of a model's stored weights: that of `tensor`.
DType stored_dtype(const WeightFiles& weights, const std::string& tensor = kEmbeddingWeight);

// A config.json whose declared dtype is not its weights' (`tensor`'s) gets one warning on stderr:
// the weights load as stored, and an export labels them so.
void warn_on_dtype_mismatch(const WeightFiles& weights, const QwenConfig& config,
                            const std::string& dir, const std::string& tensor = kEmbeddingWeight);

}  // namespace sprig

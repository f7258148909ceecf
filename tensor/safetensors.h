// safetensors I/O: a memory-mapped reader that enforces every rule of the official implementation
// (header size cap, UTF-8 JSON object header, no duplicate keys, known dtypes, offsets contiguous
// from 0 without overlap or holes, exact byte sizes, no trailing bytes) and names the file and the
// tensor in its errors; and a writer emitting `__metadata__: {"format": "pt"}` with the header
// padded to 8-byte alignment.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace sprig {

// The dtypes of the file format that sprig reads and writes (others are rejected clearly).
enum class StDType { BF16, F16, F32, F64, I64, I32, BOOL, U8 };
const char* st_dtype_name(StDType t);
DType to_dtype(StDType t);  // the dtype a tensor of this tag loads as (U8 widens to i32)

struct StTensorInfo {
  std::string name;
  StDType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
};

class SafetensorsFile {
 public:
  // Maps and validates the file; throws std::runtime_error "<path>: <reason>" on any violation.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<StTensorInfo>& tensors() const { return tensors_; }  // in offset order
  bool contains(const std::string& name) const { return index_.count(name) > 0; }
  const StTensorInfo& info(const std::string& name) const;
  // The tensor's bytes inside the mapping (valid while this object lives).
  const uint8_t* raw(const std::string& name) const;
  // A copy as a sprig Tensor (U8 loads as i32) on `device`.
  Tensor load(const std::string& name, Device device = Device::cpu()) const;

 private:
  std::string path_;
  const uint8_t* map_ = nullptr;
  size_t map_size_ = 0;
  const uint8_t* data_ = nullptr;  // start of the data section
  std::vector<StTensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Validates an in-memory image of a file (what the reader and the fuzz target call).
// Returns the tensor list and metadata or throws std::runtime_error "<label>: <reason>".
struct ParsedSafetensors {
  std::vector<StTensorInfo> tensors;
  std::map<std::string, std::string> metadata;
  size_t data_offset = 0;  // 8 + header length
};
ParsedSafetensors parse_safetensors(const uint8_t* bytes, size_t size, const std::string& label);

// The `__metadata__` of a file's header, read without its tensors; std::nullopt when the file does
// not start with a well-formed safetensors header. An empty map: a header without metadata.
std::optional<std::map<std::string, std::string>> safetensors_metadata(const std::string& path);

struct SafetensorsEntry {
  std::string name;
  Tensor tensor;
  bool as_u8 = false;  // write a bool tensor with the U8 dtype tag
};
// Writes the file (metadata gets "format": "pt"); callers wanting atomicity write to a temporary
// path and rename.
void save_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                      std::map<std::string, std::string> metadata = {});

// The same from raw bytes already in the file format's layout (e.g. another file's mapping), so
// conversions copy each tensor once.
struct RawTensor {
  std::string name;
  StDType dtype;
  Shape shape;
  const uint8_t* data;
  size_t bytes;
};
void save_safetensors_raw(const std::string& path, const std::vector<RawTensor>& tensors,
                          std::map<std::string, std::string> metadata = {});

}  // namespace sprig

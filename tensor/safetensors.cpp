#include "tensor/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "tensor/input_file.h"
#include "tensor/json_text.h"

namespace sprig {

namespace {

using json = nlohmann::json;
constexpr uint64_t kMaxHeaderSize = 100'000'000;  // the official reader's cap

[[noreturn]] void fail(const std::string& label, const std::string& reason) {
  throw std::runtime_error(label + ": " + reason);
}

constexpr StDType kAllDTypes[] = {StDType::BF16, StDType::F16, StDType::F32,  StDType::F64,
                                  StDType::I64,  StDType::I32, StDType::BOOL, StDType::U8};

size_t st_dtype_size(StDType t) {
  switch (t) {
    case StDType::F64:
    case StDType::I64: return 8;
    case StDType::F32:
    case StDType::I32: return 4;
    case StDType::BF16:
    case StDType::F16: return 2;
    case StDType::BOOL:
    case StDType::U8: return 1;
  }
  return 0;
}

StDType from_dtype(DType t, bool as_u8) {
  switch (t) {
    case DType::bf16: return StDType::BF16;
    case DType::f16: return StDType::F16;
    case DType::f32: return StDType::F32;
    case DType::f64: return StDType::F64;
    case DType::i64: return StDType::I64;
    case DType::i32: return StDType::I32;
    case DType::boolean: return as_u8 ? StDType::U8 : StDType::BOOL;
  }
  return StDType::F32;
}

bool valid_utf8(const uint8_t* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else
      return false;
    if (i + len > n) return false;
    for (size_t j = 1; j < len; ++j) {
      if ((s[i + j] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + j] & 0x3F);
    }
    const uint32_t min_cp = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

// Parses the header JSON (strictly: a key twice in one object is refused).
json parse_header_json(const std::string& text, const std::string& label) {
  try {
    return parse_json(text);
  } catch (const std::runtime_error& e) {
    fail(label, std::string("header is not valid JSON (") + e.what() + ")");
  }
}

uint64_t to_u64(const json& v, const std::string& label, const std::string& what) {
  if (!v.is_number_unsigned()) fail(label, what + " must be a non-negative integer");
  return v.get<uint64_t>();
}

}  // namespace

DType to_dtype(StDType t) {
  switch (t) {
    case StDType::BF16: return DType::bf16;
    case StDType::F16: return DType::f16;
    case StDType::F32: return DType::f32;
    case StDType::F64: return DType::f64;
    case StDType::I64: return DType::i64;
    case StDType::I32: return DType::i32;
    case StDType::BOOL: return DType::boolean;
    case StDType::U8: return DType::i32;  // widened on load
  }
  return DType::f32;
}

const char* st_dtype_name(StDType t) {
  switch (t) {
    case StDType::BF16: return "BF16";
    case StDType::F16: return "F16";
    case StDType::F32: return "F32";
    case StDType::F64: return "F64";
    case StDType::I64: return "I64";
    case StDType::I32: return "I32";
    case StDType::BOOL: return "BOOL";
    case StDType::U8: return "U8";
  }
  return "?";
}

ParsedSafetensors parse_safetensors(const uint8_t* bytes, size_t size, const std::string& label) {
  if (size < 8) fail(label, "file is too small (" + std::to_string(size) + " bytes) for a header");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > kMaxHeaderSize)
    fail(label, "header length " + std::to_string(n) + " exceeds the limit of " +
                    std::to_string(kMaxHeaderSize) + " bytes");
  if (n > size - 8)
    fail(label, "header length " + std::to_string(n) + " runs past the end of the file (" +
                    std::to_string(size) + " bytes): the file is truncated");
  const uint8_t* header = bytes + 8;
  if (!valid_utf8(header, n)) fail(label, "header is not valid UTF-8");
  const std::string text(reinterpret_cast<const char*>(header), n);
  if (text.empty() || text[0] != '{') fail(label, "header does not start with '{'");
  const json j = parse_header_json(text, label);
  if (!j.is_object()) fail(label, "header is not a JSON object");

  ParsedSafetensors out;
  out.data_offset = 8 + n;
  for (const auto& [name, entry] : j.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(label, "__metadata__ must be an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail(label, "__metadata__ value for \"" + k + "\" is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = label + ": tensor \"" + name + "\"";
    if (!entry.is_object()) fail(where, "entry is not an object");
    if (!entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      fail(where, "entry needs dtype, shape and data_offsets");
    StTensorInfo info;
    info.name = name;
    const json& dt = entry["dtype"];
    if (!dt.is_string()) fail(where, "dtype is not a string");
    const std::string dts = dt.get<std::string>();
    auto it = std::find_if(std::begin(kAllDTypes), std::end(kAllDTypes),
                           [&](StDType t) { return dts == st_dtype_name(t); });
    if (it == std::end(kAllDTypes))
      fail(where, "unsupported dtype " + dts + " (supported: BF16 F16 F32 F64 I64 I32 BOOL U8)");
    info.dtype = *it;
    if (!entry["shape"].is_array()) fail(where, "shape is not an array");
    uint64_t numel = 1;
    for (const json& d : entry["shape"]) {
      const uint64_t v = to_u64(d, where, "shape entry");
      if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / v)
        fail(where, "shape overflows");
      numel *= v;
      info.shape.push_back(static_cast<int64_t>(v));
    }
    const json& offs = entry["data_offsets"];
    if (!offs.is_array() || offs.size() != 2) fail(where, "data_offsets must be [begin, end]");
    info.begin = to_u64(offs[0], where, "data_offsets");
    info.end = to_u64(offs[1], where, "data_offsets");
    const uint64_t esize = st_dtype_size(info.dtype);
    if (numel > std::numeric_limits<uint64_t>::max() / esize) fail(where, "byte size overflows");
    if (info.end < info.begin || info.end - info.begin != numel * esize)
      fail(where, "data_offsets [" + std::to_string(info.begin) + ", " + std::to_string(info.end) +
                      ") do not match " + std::to_string(numel) + " elements of " + dts + " (" +
                      std::to_string(numel * esize) + " bytes)");
    out.tensors.push_back(std::move(info));
  }
  std::sort(out.tensors.begin(), out.tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  for (const StTensorInfo& t : out.tensors) {
    if (t.begin != expected)
      fail(label + ": tensor \"" + t.name + "\"",
           t.begin < expected ? "data overlaps the previous tensor"
                              : "leaves a gap before its data (offsets must be contiguous)");
    expected = t.end;
  }
  const uint64_t data_size = size - out.data_offset;
  if (expected != data_size)
    fail(label, expected < data_size ? "has " + std::to_string(data_size - expected) +
                                           " trailing bytes after the tensors"
                                     : "data section is truncated (" + std::to_string(data_size) +
                                           " of " + std::to_string(expected) + " bytes)");
  return out;
}

std::optional<std::map<std::string, std::string>> safetensors_metadata(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint8_t size_bytes[8];
  if (!in.read(reinterpret_cast<char*>(size_bytes), 8)) return std::nullopt;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | size_bytes[i];
  if (n == 0 || n > kMaxHeaderSize) return std::nullopt;
  std::string text(n, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(n)) || text[0] != '{') return std::nullopt;
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  std::map<std::string, std::string> metadata;
  const auto it = j.find("__metadata__");
  if (it != j.end() && it->is_object())
    for (const auto& [k, v] : it->items())
      if (v.is_string()) metadata[k] = v.get<std::string>();
  return metadata;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  check_input_file(path, "a safetensors file");
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail(path, "cannot stat");
  }
  map_size_ = static_cast<size_t>(st.st_size);
  if (map_size_ > 0) {
    void* p = ::mmap(nullptr, map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) fail(path, std::string("cannot mmap: ") + std::strerror(errno));
    map_ = static_cast<const uint8_t*>(p);
  } else {
    ::close(fd);
  }
  try {
    ParsedSafetensors parsed = parse_safetensors(map_, map_size_, path);
    tensors_ = std::move(parsed.tensors);
    metadata_ = std::move(parsed.metadata);
    data_ = map_ + parsed.data_offset;
  } catch (...) {
    if (map_) ::munmap(const_cast<uint8_t*>(map_), map_size_);
    throw;
  }
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), map_size_);
}

const StTensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) fail(path_, "no tensor named \"" + name + "\"");
  return tensors_[it->second];
}

const uint8_t* SafetensorsFile::raw(const std::string& name) const {
  return data_ + info(name).begin;
}

Tensor SafetensorsFile::load(const std::string& name, Device device) const {
  const StTensorInfo& i = info(name);
  const uint8_t* src = raw(name);
  if (i.dtype == StDType::U8) {
    std::vector<int32_t> v(src, src + (i.end - i.begin));
    return Tensor::from_vector(v, i.shape, device);
  }
  Tensor host = Tensor::empty(i.shape, to_dtype(i.dtype));
  if (i.dtype == StDType::BOOL) {
    for (uint64_t k = 0; k < i.end - i.begin; ++k)
      if (src[k] > 1) fail(path_ + ": tensor \"" + name + "\"", "BOOL value is not 0 or 1");
  }
  // An empty tensor has no storage to copy into (memcpy's pointers must not be null even for 0
  // bytes).
  if (i.end > i.begin) std::memcpy(host.data_ptr(), src, i.end - i.begin);
  return host.to(device);
}

void save_safetensors_raw(const std::string& path, const std::vector<RawTensor>& tensors,
                          std::map<std::string, std::string> metadata) {
  metadata["format"] = "pt";
  json header = json::object();
  header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const RawTensor& t : tensors) {
    if (header.contains(t.name))
      throw std::invalid_argument("[save_safetensors] duplicate tensor name \"" + t.name + "\"");
    header[t.name] = {{"dtype", st_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(path + ": cannot open for writing");
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const RawTensor& t : tensors)
    out.write(reinterpret_cast<const char*>(t.data), static_cast<std::streamsize>(t.bytes));
  out.flush();
  if (!out) throw std::runtime_error(path + ": write failed");
}

void save_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                      std::map<std::string, std::string> metadata) {
  std::vector<Tensor> hosts;
  std::vector<RawTensor> raw;
  hosts.reserve(entries.size());
  for (const SafetensorsEntry& e : entries) {
    if (e.as_u8 && e.tensor.dtype() != DType::boolean)
      throw std::invalid_argument("[save_safetensors] as_u8 needs a bool tensor: " + e.name);
    hosts.push_back(e.tensor.to(Device::cpu()).contiguous());
    raw.push_back({e.name, from_dtype(e.tensor.dtype(), e.as_u8), e.tensor.shape(),
                   static_cast<const uint8_t*>(hosts.back().data_ptr()), hosts.back().nbytes()});
  }
  save_safetensors_raw(path, raw, std::move(metadata));
}

}  // namespace sprig

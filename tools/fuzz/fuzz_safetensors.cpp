// libFuzzer target: the safetensors header parser on arbitrary bytes. Every input must either
// parse into tensors that lie inside the data section or be rejected with std::runtime_error;
// anything else (a crash, a sanitizer report, another exception type) is a finding.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>

#include "tensor/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const sprig::ParsedSafetensors parsed = sprig::parse_safetensors(data, size, "fuzz");
    for (const sprig::StTensorInfo& t : parsed.tensors)
      if (t.begin > t.end || parsed.data_offset + t.end > size) std::abort();
  } catch (const std::runtime_error&) {
  }
  return 0;
}

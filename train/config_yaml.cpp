// The YAML reading helpers of train/config_yaml.h.
#include "train/config_yaml.h"

#include <charconv>
#include <stdexcept>

namespace sprig::config_yaml {

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("[config] " + message);
}

bool present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }

std::string shortest(double v) {
  char buf[64];
  const double magnitude = std::abs(v);
  const bool fixed = magnitude == 0 || (magnitude >= 1e-4 && magnitude < 1e16);
  return std::string(buf,
                     std::to_chars(buf, buf + sizeof buf, v,
                                   fixed ? std::chars_format::fixed : std::chars_format::scientific)
                         .ptr);
}

std::string written(const YAML::Node& n) {
  YAML::Emitter out;
  out.SetSeqFormat(YAML::Flow);
  out.SetMapFormat(YAML::Flow);
  out << n;
  return out.c_str();
}

std::string compared(const YAML::Node& node) {
  if (node.IsSequence()) {
    std::string out = "[";
    for (const auto& item : node) out += (out.size() > 1 ? ", " : "") + compared(item);
    return out + "]";
  }
  if (node.IsScalar()) {
    const std::string& text = node.Scalar();
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && end == text.data() + text.size()) return shortest(v);
  }
  return written(node);
}

}  // namespace sprig::config_yaml

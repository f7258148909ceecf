#include "tools/overrides.h"

#include <stdexcept>

namespace sprig::tools {

std::vector<std::string> parse_overrides(const std::vector<std::string>& words) {
  std::vector<std::string> overrides;
  for (size_t i = 0; i < words.size(); ++i) {
    std::string o = words[i];
    if (o.rfind("--", 0) != 0 || o.size() == 2)
      throw std::invalid_argument("unexpected argument '" + o +
                                  "' (overrides look like --section.key=value)");
    o = o.substr(2);
    if (o.find('=') == std::string::npos) {
      if (i + 1 == words.size() || words[i + 1].rfind("--", 0) == 0)
        throw std::invalid_argument("override --" + o + " has no value (--" + o + "=value or --" +
                                    o + " value)");
      o += "=" + words[++i];
    }
    if (o.find_first_not_of(" \t", o.find('=') + 1) == std::string::npos)
      throw std::invalid_argument("override --" + o + " has no value (--" +
                                  o.substr(0, o.find('=')) + "=value; null for none)");
    overrides.push_back(o);
  }
  return overrides;
}

}  // namespace sprig::tools

// `sprig mask --spec MASK.json --out FILE.safetensors [--png FILE.png]`: builds a mask from its
// JSON spec (attention/mask_io.h), dumps it dense as U8 [Q, K] and optionally draws it.
#include <CLI/CLI.hpp>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "attention/mask_io.h"
#include "tensor/storage.h"
#include "tools/commands.h"
#include "tools/options.h"
#include "tools/viz/mask_image.h"
#include "tools/viz/png.h"

namespace sprig::tools {

void add_mask_command(CLI::App& app) {
  struct Options {
    std::string spec, out, png;
    int64_t tile = 64;
    bool overwrite = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("mask",
                                     "Build an attention mask from a JSON spec, dump it "
                                     "dense (safetensors) and draw it (PNG)");
  cmd->add_option("--spec", opt->spec, "mask spec (JSON): causal, documents, prefix_tree, dflash")
      ->required();
  cmd->add_option("--out", opt->out, "output safetensors file (tensor \"mask\", U8 [Q, K])")
      ->required();
  cmd->add_option("--png", opt->png, "also draw the mask: allowed white, masked black, tile grid");
  add_int_option(cmd, "--tile", opt->tile, "tile size of the grid drawn in the PNG")
      ->check(kPositive);
  add_overwrite_flag(cmd, opt->overwrite);
  cmd->callback([opt] {
    // Both outputs are checked first and appear together, or neither does.
    const std::vector<InputPath> inputs = {{"--spec", opt->spec}};
    Output out(opt->out, safetensors_output("mask"), opt->overwrite, "--out", inputs);
    std::optional<Output> png;
    if (!opt->png.empty()) png.emplace(opt->png, kPngOutput, opt->overwrite, "--png", inputs);
    const Mask mask = load_mask_spec(opt->spec);
    // The dense dump holds one byte per element: refuse what cannot fit before building it (the
    // size in long double, which no [Q, K] overflows).
    const size_t available = cpu_memory_available();
    const long double bytes = static_cast<long double>(mask.q_len) * mask.k_len;
    if (bytes > available / 2) {
      std::ostringstream mib;
      mib << std::fixed << std::setprecision(0) << std::floor(bytes / (1 << 20));
      throw std::runtime_error("[mask] the dense [" + std::to_string(mask.q_len) + ", " +
                               std::to_string(mask.k_len) + "] mask needs " + mib.str() +
                               " MiB, over half the " + std::to_string(available >> 20) +
                               " MiB of memory available");
    }
    save_mask_safetensors(mask, out.temp(), out.metadata());
    if (png) save_mask_png(mask, png->temp(), opt->tile);
    out.commit();
    if (png) png->commit();
    std::cout << "mask [" << mask.q_len << ", " << mask.k_len << "] with " << mask.rects.size()
              << " rectangles written to " << opt->out
              << (opt->png.empty() ? "" : " and " + opt->png) << "\n";
  });
}

}  // namespace sprig::tools

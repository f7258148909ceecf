// Training curves (`sprig plot`): the loss (and validation loss), the learning rate and the
// recipe's own metrics (a draft's accuracy and accept_len, Domino's base and final losses, RL's
// advantage-weighted log-probs, each with its val_ twin) of a run's metrics.jsonl against the
// step, drawn as a PNG with axes, ticks and a legend.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sprig {

// The logged series of one run; NaN where a record has no value (a skipped step's loss, val_loss
// on records without validation).
struct Metrics {
  std::vector<double> step, loss, val_loss, lr;
  // Every other number the records hold but the run's bookkeeping (tokens, throughput, epoch,
  // grad_norm, skipped steps), in the order the file first names them.
  std::vector<std::pair<std::string, std::vector<double>>> recipe;
};

// Reads <run_dir>/metrics.jsonl, its records sorted by step. Throws std::runtime_error when it is
// missing, has a malformed line, a value neither a number nor null, or two records of one step
// (file:line), or holds no record.
Metrics read_metrics(const std::string& run_dir);

// An RGB picture, row-major, 3 bytes per pixel.
struct RgbImage {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> pixels;
};

// Panels sharing the step axis: loss and val_loss on top, lr below it, then one per recipe metric
// (with its val_ twin). `title` heads the picture.
RgbImage render_curves(const Metrics& metrics, const std::string& title);

// read_metrics + render_curves (titled with the run directory) + a PNG at `out_png`.
void plot_run(const std::string& run_dir, const std::string& out_png);

}  // namespace sprig

// Training curves as a PNG: metrics.jsonl parsing, a small RGB canvas (lines, rectangles, a 5x7
// bitmap font drawn at twice its size), "nice" tick values, and the two-panel layout.
#include "tools/viz/plot.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "tensor/input_file.h"
#include "tools/viz/png.h"

namespace sprig {

Metrics read_metrics(const std::string& run_dir) {
  const std::string path = run_dir + "/metrics.jsonl";
  check_input_file(path, "a run's metrics.jsonl");
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open (is " + run_dir + " a run directory?)");
  // A value, or NaN when the record has none (JSON null is how a NaN loss is written).
  const auto number = [](const nlohmann::json& rec, const char* key) {
    const auto it = rec.find(key);
    return it != rec.end() && it->is_number() ? it->get<double>() : NAN;
  };
  // Records are drawn in step order, whatever order the file holds them in; two with the same
  // step cannot both be drawn and are refused (a run writes each step once, docs/semantics.md
  // §10.8).
  struct Record {
    double step, loss, val_loss, lr;
    int64_t line;
    std::string step_text;  // as the file writes it
    std::map<std::string, double> recipe;
  };
  static const std::set<std::string> kNotRecipe = {
      "step",         "loss",  "val_loss",      "lr",         "grad_norm", "tokens",
      "tokens_per_s", "epoch", "skipped_steps", "flops_per_s"};
  std::vector<std::string> recipe_names;  // in the order the file first names them
  std::vector<Record> records;
  int64_t line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    const auto rec = nlohmann::json::parse(line, nullptr, false);
    if (rec.is_discarded() || !rec.is_object() || !rec.contains("step") ||
        !std::isfinite(number(rec, "step")))
      throw std::runtime_error(path + ":" + std::to_string(line_number) + ": not a metrics record");
    records.push_back({number(rec, "step"),
                       number(rec, "loss"),
                       number(rec, "val_loss"),
                       number(rec, "lr"),
                       line_number,
                       rec.at("step").dump(),
                       {}});
    for (const auto& [key, value] : rec.items()) {
      if (!value.is_number() && !value.is_null())
        throw std::runtime_error(path + ":" + std::to_string(line_number) + ": \"" + key +
                                 "\" must be a number, got " + value.dump());
      if (value.is_null() || kNotRecipe.count(key)) continue;
      records.back().recipe[key] = value.get<double>();
      if (std::find(recipe_names.begin(), recipe_names.end(), key) == recipe_names.end())
        recipe_names.push_back(key);
    }
  }
  std::stable_sort(records.begin(), records.end(),
                   [](const Record& a, const Record& b) { return a.step < b.step; });
  Metrics m;
  for (const std::string& name : recipe_names) m.recipe.push_back({name, {}});
  for (size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    if (i > 0 && records[i - 1].step == r.step)
      throw std::runtime_error(path + ":" + std::to_string(r.line) + ": step " + r.step_text +
                               " again (also on line " + std::to_string(records[i - 1].line) + ")");
    m.step.push_back(r.step);
    m.loss.push_back(r.loss);
    m.val_loss.push_back(r.val_loss);
    m.lr.push_back(r.lr);
    for (auto& [name, values] : m.recipe) {
      const auto it = r.recipe.find(name);
      values.push_back(it == r.recipe.end() ? NAN : it->second);
    }
  }
  if (m.step.empty()) throw std::runtime_error(path + ": no records to plot");
  return m;
}

namespace {

struct Rgb {
  uint8_t r, g, b;
};
constexpr Rgb kWhite{255, 255, 255}, kBlack{0, 0, 0}, kGrid{225, 225, 225}, kText{40, 40, 40};
constexpr Rgb kLossColor{31, 119, 180}, kValColor{255, 127, 14}, kLrColor{44, 160, 44};

// 5x7 glyphs, one byte per row (bit 4 is the leftmost pixel). Upper case is drawn as lower case.
const std::map<char, std::array<uint8_t, 7>>& font() {
  static const std::map<char, std::array<uint8_t, 7>> glyphs = {
      {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}},
      {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
      {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}},
      {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
      {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}},
      {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
      {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}},
      {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
      {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}},
      {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
      {'a', {0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F}},
      {'b', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E}},
      {'c', {0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E}},
      {'d', {0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F}},
      {'e', {0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E}},
      {'f', {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08}},
      {'g', {0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E}},
      {'h', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11}},
      {'i', {0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E}},
      {'j', {0x02, 0x00, 0x06, 0x02, 0x02, 0x12, 0x0C}},
      {'k', {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12}},
      {'l', {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}},
      {'m', {0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11}},
      {'n', {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11}},
      {'o', {0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E}},
      {'p', {0x00, 0x00, 0x1E, 0x11, 0x1E, 0x10, 0x10}},
      {'q', {0x00, 0x00, 0x0D, 0x13, 0x0F, 0x01, 0x01}},
      {'r', {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10}},
      {'s', {0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E}},
      {'t', {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06}},
      {'u', {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D}},
      {'v', {0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04}},
      {'w', {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A}},
      {'x', {0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11}},
      {'y', {0x00, 0x00, 0x11, 0x11, 0x0F, 0x01, 0x0E}},
      {'z', {0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F}},
      {'.', {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}},
      {'-', {0x00, 0x00, 0x00, 0x0E, 0x00, 0x00, 0x00}},
      {'+', {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00}},
      {'_', {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F}},
      {':', {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00}},
      {'/', {0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x10}},
      {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}},
      {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}},
  };
  return glyphs;
}

constexpr int kScale = 2;               // font pixels per glyph pixel
constexpr int kCharWidth = 6 * kScale;  // 5 columns and a gap
constexpr int kCharHeight = 7 * kScale;

class Canvas {
 public:
  Canvas(int width, int height) : image_{width, height, {}} {
    image_.pixels.assign(static_cast<size_t>(width * height * 3), 255);
  }

  void set(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= image_.width || y >= image_.height) return;
    uint8_t* p = &image_.pixels[static_cast<size_t>((y * image_.width + x) * 3)];
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
  }

  void fill(int x0, int y0, int x1, int y1, Rgb c) {  // [x0, x1] x [y0, y1]
    for (int y = y0; y <= y1; ++y)
      for (int x = x0; x <= x1; ++x) set(x, y, c);
  }

  // A line `width` pixels thick (Bresenham, a square brush).
  void line(int x0, int y0, int x1, int y1, Rgb c, int width = 1) {
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    for (int err = dx + dy;;) {
      fill(x0, y0, x0 + width - 1, y0 + width - 1, c);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) err += dy, x0 += sx;
      if (e2 <= dx) err += dx, y0 += sy;
    }
  }

  // Text with its top-left corner at (x, y); characters without a glyph are left blank.
  void text(int x, int y, const std::string& s, Rgb c) {
    for (char ch : s) {
      const auto it = font().find(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
      if (it != font().end())
        for (int row = 0; row < 7; ++row)
          for (int col = 0; col < 5; ++col)
            if (it->second[static_cast<size_t>(row)] & (0x10 >> col))
              fill(x + col * kScale, y + row * kScale, x + col * kScale + kScale - 1,
                   y + row * kScale + kScale - 1, c);
      x += kCharWidth;
    }
  }

  RgbImage take() { return std::move(image_); }

 private:
  RgbImage image_;
};

int text_width(const std::string& s) { return static_cast<int>(s.size()) * kCharWidth; }

// Tick values: multiples of 1, 2 or 5 x 10^k inside [lo, hi], about `count` of them.
std::vector<double> nice_ticks(double lo, double hi, int count) {
  const double raw = (hi - lo) / count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {2.0, 5.0, 10.0})
    if (raw > step) step = m * magnitude;
  std::vector<double> ticks;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return ticks;
}

std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The finite range of some series, widened when flat; [0, 1] when nothing is finite.
std::pair<double, double> value_range(const std::vector<const std::vector<double>*>& series) {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto* s : series)
    for (double v : *s)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (lo > hi) return {0.0, 1.0};
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) {
    const double pad = std::max(std::abs(hi) * 0.1, 1e-12);
    return {lo - pad, hi + pad};
  }
  const double pad = (hi - lo) * 0.05;
  return {lo - pad, hi + pad};
}

struct Series {
  const std::vector<double>* values;
  Rgb color;
  std::string name;
};

// One panel: frame, grid, y ticks on the left, x ticks below, the series, and a legend.
void draw_panel(Canvas& canvas, int x0, int y0, int x1, int y1, double step_lo, double step_hi,
                const std::vector<double>& steps, const std::vector<Series>& series) {
  std::vector<const std::vector<double>*> values;
  for (const Series& s : series) values.push_back(s.values);
  const std::pair<double, double> range = value_range(values);
  const double lo = range.first, hi = range.second;  // plain names: the lambdas capture them
  const auto px = [&](double step) {
    return x0 + static_cast<int>(std::lround((step - step_lo) / (step_hi - step_lo) * (x1 - x0)));
  };
  const auto py = [&](double v) {
    return y1 - static_cast<int>(std::lround((v - lo) / (hi - lo) * (y1 - y0)));
  };
  for (double t : nice_ticks(lo, hi, 5)) {
    const int y = py(t);
    canvas.line(x0, y, x1, y, kGrid);
    canvas.line(x0 - 5, y, x0, y, kBlack);
    const std::string label = tick_label(t);
    canvas.text(x0 - 9 - text_width(label), y - kCharHeight / 2, label, kText);
  }
  for (double t : nice_ticks(step_lo, step_hi, 8)) {
    const int x = px(t);
    canvas.line(x, y0, x, y1, kGrid);
    canvas.line(x, y1, x, y1 + 5, kBlack);
    const std::string label = tick_label(t);
    canvas.text(x - text_width(label) / 2, y1 + 9, label, kText);
  }
  for (const Series& s : series) {
    // Connects consecutive finite points; a single point becomes a dot.
    int last_x = -1, last_y = -1;
    for (size_t i = 0; i < steps.size(); ++i) {
      const double v = (*s.values)[i];
      if (!std::isfinite(v)) continue;
      const int x = px(steps[i]), y = py(v);
      if (last_x >= 0)
        canvas.line(last_x, last_y, x, y, s.color, 2);
      else
        canvas.fill(x - 1, y - 1, x + 1, y + 1, s.color);
      last_x = x, last_y = y;
    }
  }
  canvas.line(x0, y0, x1, y0, kBlack);
  canvas.line(x0, y1, x1, y1, kBlack);
  canvas.line(x0, y0, x0, y1, kBlack);
  canvas.line(x1, y0, x1, y1, kBlack);
  // Legend above the frame's right end: a colour swatch and the name of each series.
  int x = x1;
  for (auto it = series.rbegin(); it != series.rend(); ++it) {
    x -= text_width(it->name);
    canvas.text(x, y0 - kCharHeight - 6, it->name, kText);
    x -= 26;
    canvas.fill(x, y0 - kCharHeight / 2 - 7, x + 18, y0 - kCharHeight / 2 - 5, it->color);
    x -= 16;
  }
}

bool any_finite(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

}  // namespace

RgbImage render_curves(const Metrics& m, const std::string& title) {
  // One panel per recipe metric, its val_ twin beside it (a val_ metric without one alone).
  std::vector<std::vector<Series>> recipe_panels;
  const auto values_of = [&](const std::string& name) -> const std::vector<double>* {
    for (const auto& [n, v] : m.recipe)
      if (n == name) return &v;
    return nullptr;
  };
  for (const auto& [name, values] : m.recipe) {
    const bool twin = name.rfind("val_", 0) == 0 && values_of(name.substr(4));
    if (twin) continue;
    recipe_panels.push_back({{&values, kLossColor, name}});
    if (const std::vector<double>* val = values_of("val_" + name))
      recipe_panels.back().push_back({val, kValColor, "val_" + name});
  }
  constexpr int kWidth = 900, kLeft = 100, kRight = 880, kPanel = 170;
  const int height = 640 + kPanel * static_cast<int>(recipe_panels.size());
  Canvas canvas(kWidth, height);
  double step_lo = m.step.front(), step_hi = m.step.back();
  if (step_hi <= step_lo) step_lo -= 1, step_hi += 1;
  canvas.text(kLeft, 12, title, kBlack);

  std::vector<Series> losses = {{&m.loss, kLossColor, "loss"}};
  if (any_finite(m.val_loss)) losses.push_back({&m.val_loss, kValColor, "val_loss"});
  draw_panel(canvas, kLeft, 70, kRight, 370, step_lo, step_hi, m.step, losses);
  draw_panel(canvas, kLeft, 440, kRight, 570, step_lo, step_hi, m.step, {{&m.lr, kLrColor, "lr"}});
  for (size_t i = 0; i < recipe_panels.size(); ++i) {
    const int y0 = 440 + kPanel * static_cast<int>(i + 1);
    draw_panel(canvas, kLeft, y0, kRight, y0 + 130, step_lo, step_hi, m.step, recipe_panels[i]);
  }
  canvas.text((kLeft + kRight - text_width("step")) / 2, height - 34, "step", kBlack);
  return canvas.take();
}

void plot_run(const std::string& run_dir, const std::string& out_png) {
  const RgbImage image = render_curves(read_metrics(run_dir), run_dir);
  write_png(out_png, image.width, image.height, 3, image.pixels);
}

}  // namespace sprig

// Training curves: metrics.jsonl parsing (missing values, bad lines, records out of order or
// repeated) and the picture: every panel carries its curves in their colours (loss, lr, and each of
// the recipe's own metrics), the loss curve falls as the logged loss does, and the PNG file is
// written.
#include "tools/viz/plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "tests/train/train_test_util.h"

namespace sprig {
namespace {

using testing::contains;
using testing::TempDir;

// 50 logged steps: a falling loss (NaN at step 7), val_loss every 10 steps, warmup + decay lr.
std::string metrics_jsonl() {
  std::string text;
  for (int step = 1; step <= 50; ++step) {
    const std::string loss = step == 7 ? "null" : std::to_string(4.0 * std::exp(-step / 15.0));
    text += "{\"step\": " + std::to_string(step) + ", \"loss\": " + loss +
            ", \"lr\": " + std::to_string(step < 5 ? 1e-3 * step / 5 : 1e-3 * (55 - step) / 50);
    if (step % 10 == 0) text += ", \"val_loss\": " + std::to_string(4.2 * std::exp(-step / 18.0));
    text += ", \"tokens\": 100}\n";
  }
  return text;
}

// Pixels of exactly this colour, per column.
std::vector<std::vector<int64_t>> rows_by_column(const RgbImage& img, uint8_t r, uint8_t g,
                                                 uint8_t b) {
  std::vector<std::vector<int64_t>> columns(static_cast<size_t>(img.width));
  for (int64_t y = 0; y < img.height; ++y)
    for (int64_t x = 0; x < img.width; ++x) {
      const uint8_t* p = &img.pixels[static_cast<size_t>((y * img.width + x) * 3)];
      if (p[0] == r && p[1] == g && p[2] == b) columns[static_cast<size_t>(x)].push_back(y);
    }
  return columns;
}

// Mean row of the coloured pixels in columns [x0, x1), and how many there are.
std::pair<double, int64_t> mean_row(const std::vector<std::vector<int64_t>>& columns, int64_t x0,
                                    int64_t x1) {
  double sum = 0;
  int64_t n = 0;
  for (int64_t x = x0; x < x1; ++x)
    for (int64_t y : columns[static_cast<size_t>(x)]) sum += static_cast<double>(y), ++n;
  return {n ? sum / static_cast<double>(n) : 0.0, n};
}

TEST(Plot, ReadsSeriesWithMissingValues) {
  TempDir dir;
  testing::write_text(dir / "metrics.jsonl", metrics_jsonl());
  const Metrics m = read_metrics(dir.path().string());
  ASSERT_EQ(m.step.size(), 50u);
  EXPECT_EQ(m.step[49], 50.0);
  EXPECT_NEAR(m.loss[0], 4.0 * std::exp(-1 / 15.0), 1e-6);
  EXPECT_TRUE(std::isnan(m.loss[6]));      // null
  EXPECT_TRUE(std::isnan(m.val_loss[0]));  // absent
  EXPECT_NEAR(m.val_loss[9], 4.2 * std::exp(-10 / 18.0), 1e-6);
  EXPECT_NEAR(m.lr[4], 1e-3, 1e-9);
}

TEST(Plot, CurvesFollowTheData) {
  TempDir dir;
  testing::write_text(dir / "metrics.jsonl", metrics_jsonl());
  const RgbImage img = render_curves(read_metrics(dir.path().string()), "run");
  ASSERT_EQ(img.pixels.size(), static_cast<size_t>(img.width * img.height * 3));
  const auto loss = rows_by_column(img, 31, 119, 180);
  const auto val = rows_by_column(img, 255, 127, 14);
  const auto lr = rows_by_column(img, 44, 160, 44);
  // The plotted area's left and right tenths (the legend swatches sit above the frames).
  const int64_t left = img.width / 8, right = img.width - img.width / 8;
  const auto [loss_left, n_loss_left] = mean_row(loss, left, left + img.width / 10);
  const auto [loss_right, n_loss_right] = mean_row(loss, right - img.width / 10, right);
  EXPECT_GT(n_loss_left, 20);
  EXPECT_GT(n_loss_right, 20);
  EXPECT_LT(loss_left + 100, loss_right);  // falling loss: drawn higher (smaller rows) on the left
  EXPECT_GT(mean_row(val, left, right).second, 100);
  // The lr panel lies below the loss panel; lr rises then falls, so its curve is highest (smallest
  // row) early on.
  const auto [lr_rows, n_lr] = mean_row(lr, left, right);
  EXPECT_GT(n_lr, 100);
  EXPECT_GT(lr_rows, mean_row(loss, left, right).first);
  // Axis labels and frames are drawn in the neutral colours.
  EXPECT_GT(mean_row(rows_by_column(img, 0, 0, 0), 0, img.width).second, 2000);
  EXPECT_GT(mean_row(rows_by_column(img, 40, 40, 40), 0, img.width).second, 500);
}

TEST(Plot, RecordsOutOfOrderAreDrawnInStepOrder) {
  // The 50 records of metrics_jsonl(), last line first.
  std::vector<std::string> lines;
  std::istringstream in(metrics_jsonl());
  for (std::string line; std::getline(in, line);) lines.insert(lines.begin(), line);
  std::string reversed;
  for (const std::string& line : lines) reversed += line + "\n";
  TempDir dir, ordered;
  testing::write_text(dir / "metrics.jsonl", reversed);
  testing::write_text(ordered / "metrics.jsonl", metrics_jsonl());
  const Metrics m = read_metrics(dir.path().string());
  ASSERT_EQ(m.step.size(), 50u);
  EXPECT_EQ(m.step.front(), 1.0);
  EXPECT_EQ(m.step.back(), 50.0);
  EXPECT_TRUE(std::isnan(m.loss[6]));
  EXPECT_NEAR(m.val_loss[9], 4.2 * std::exp(-10 / 18.0), 1e-6);
  EXPECT_EQ(render_curves(m, "run").pixels,
            render_curves(read_metrics(ordered.path().string()), "run").pixels);
}

// A draft run's records: accept_len rising, accuracy, val_accept_len every 10 steps, and the
// bookkeeping (tokens, grad_norm, epoch) that gets no panel.
TEST(Plot, TheRecipesOwnMetricsGetAPanelEach) {
  std::string text;
  for (int step = 1; step <= 30; ++step) {
    text += "{\"step\": " + std::to_string(step) + ", \"loss\": 2.0, \"lr\": 0.001" +
            ", \"accept_len\": " + std::to_string(1.0 + step / 10.0) +
            ", \"accuracy\": 0.5, \"tokens\": 100, \"grad_norm\": 1.0, \"epoch\": 0";
    if (step % 10 == 0) text += ", \"val_accept_len\": " + std::to_string(1.0 + step / 12.0);
    text += "}\n";
  }
  TempDir dir;
  testing::write_text(dir / "metrics.jsonl", text);
  const Metrics m = read_metrics(dir.path().string());
  std::vector<std::string> names;
  for (const auto& [name, values] : m.recipe) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"accept_len", "accuracy", "val_accept_len"}));
  EXPECT_NEAR(m.recipe[0].second[29], 4.0, 1e-9);
  EXPECT_TRUE(std::isnan(m.recipe[2].second[0]));
  EXPECT_NEAR(m.recipe[2].second[9], 1.0 + 10 / 12.0, 1e-6);

  const RgbImage img = render_curves(m, "draft");
  EXPECT_EQ(img.height, 640 + 2 * 170);  // accept_len (with its val_ twin) and accuracy
  // Below the lr panel: accept_len rises (drawn higher, smaller rows, on the right), its val_
  // twin in the validation colour.
  const auto loss_colour = rows_by_column(img, 31, 119, 180);
  std::vector<std::vector<int64_t>> in_accept_panel(loss_colour.size());
  for (size_t x = 0; x < loss_colour.size(); ++x)
    for (int64_t y : loss_colour[x])
      if (y >= 610 && y <= 740) in_accept_panel[x].push_back(y);
  const int64_t left = img.width / 8, right = img.width - img.width / 8;
  const auto [early, n_early] = mean_row(in_accept_panel, left, left + img.width / 10);
  const auto [late, n_late] = mean_row(in_accept_panel, right - img.width / 10, right);
  EXPECT_GT(n_early, 10);
  EXPECT_GT(n_late, 10);
  EXPECT_GT(early, late + 50);
  EXPECT_GT(mean_row(rows_by_column(img, 255, 127, 14), left, right).second, 20);
}

// An RL run's records: the mean log-probs of the positive- and negative-advantage tokens get a
// panel each.
TEST(Plot, AnRlRunsAdvantageLogProbsGetAPanelEach) {
  std::string text;
  for (int step = 1; step <= 5; ++step)
    text += "{\"step\": " + std::to_string(step) +
            ", \"loss\": 1.0, \"lr\": 0.001, \"logprob_adv_pos\": " + std::to_string(-step) +
            ", \"logprob_adv_neg\": -3.0, \"tokens\": 10}\n";
  TempDir dir;
  testing::write_text(dir / "metrics.jsonl", text);
  const Metrics m = read_metrics(dir.path().string());
  ASSERT_EQ(m.recipe.size(), 2u);
  EXPECT_EQ(m.recipe[0].first, "logprob_adv_neg");
  EXPECT_EQ(m.recipe[1].first, "logprob_adv_pos");
  EXPECT_EQ(m.recipe[1].second, (std::vector<double>{-1, -2, -3, -4, -5}));
  EXPECT_EQ(render_curves(m, "rl").height, 640 + 2 * 170);
}

TEST(Plot, WritesAPng) {
  TempDir dir;
  testing::write_text(dir / "metrics.jsonl", metrics_jsonl());
  plot_run(dir.path().string(), dir / "curves.png");
  const std::string png = testing::read_text(dir / "curves.png");
  ASSERT_GT(png.size(), 4000u);
  EXPECT_EQ(png.substr(0, 8), "\x89PNG\r\n\x1a\n");
}

TEST(Plot, BadMetricsAreErrors) {
  TempDir dir;
  const auto error = [&] {
    try {
      read_metrics(dir.path().string());
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_TRUE(contains(error(), "metrics.jsonl: cannot open"));
  testing::write_text(dir / "metrics.jsonl", "");
  EXPECT_TRUE(contains(error(), "metrics.jsonl: no records to plot"));
  testing::write_text(dir / "metrics.jsonl", "{\"step\": 1, \"loss\": 2}\n{\"step\": 2, \"lo\n");
  EXPECT_TRUE(contains(error(), "metrics.jsonl:2: not a metrics record"));
  testing::write_text(dir / "metrics.jsonl", "{\"step\": \"1\", \"loss\": 2}\n");
  EXPECT_TRUE(contains(error(), "metrics.jsonl:1: not a metrics record"));
  // A value is a number, or null for none: anything else is not drawn as missing.
  testing::write_text(dir / "metrics.jsonl", "{\"step\": 1, \"accept_len\": [2]}\n");
  EXPECT_EQ(error(), dir / "metrics.jsonl:1: \"accept_len\" must be a number, got [2]");
  // Two records of one step: which to draw is not known.
  testing::write_text(dir / "metrics.jsonl",
                      "{\"step\": 2, \"loss\": 2}\n{\"step\": 1, \"loss\": 3}\n{\"step\": 2, "
                      "\"loss\": 1}\n");
  EXPECT_EQ(error(), dir / "metrics.jsonl:3: step 2 again (also on line 1)");
}

}  // namespace
}  // namespace sprig

#include "experiments/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace speclab {
namespace {

// Tableau's ten categorical colors: distinct in print and for most color vision.
constexpr const char* kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr int kLeft = 64, kTop = 40, kBottom = 52, kLegendWidth = 250, kRightGap = 16;

constexpr size_t kColorCount = sizeof(kColors) / sizeof(kColors[0]);
const char* Color(size_t i) { return kColors[i % kColorCount]; }
// Past the palette, series repeat its colors with dashed lines and hollow markers.
bool Second(size_t i) { return i >= kColorCount; }

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void Add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

// A round step near span / 5: 1, 2 or 5 times a power of ten.
double TickStep(double span) {
  const double raw = span / 5, power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * power) return m * power;
  return 10 * power;
}

// Widens `r` to whole ticks (a span where it has none); returns the step.
double Nice(Range& r, bool from_zero) {
  if (r.empty()) r = {0, 1};
  if (from_zero) r.lo = std::min(r.lo, 0.0);
  if (r.hi - r.lo < 1e-12) {  // one value: a span around it
    const double pad = std::max(std::fabs(r.hi) * 0.1, 0.5);
    r.lo = from_zero && r.lo >= 0 ? r.lo : r.lo - pad;
    r.hi += pad;
  }
  const double step = TickStep(r.hi - r.lo);
  r.lo = std::floor(r.lo / step + 1e-9) * step;
  r.hi = std::ceil(r.hi / step - 1e-9) * step;
  return step;
}

std::string Number(double v) {
  if (std::fabs(v) < 1e-12) return "0";
  return absl::StrFormat("%.4g", v);
}

std::string Text(double x, double y, const std::string& text, const char* anchor, int size = 12,
                 const std::string& extra = "") {
  return absl::StrFormat("<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\"%s>%s</text>\n", x, y, size,
                         anchor, extra, XmlEscape(text));
}

}  // namespace

std::string XmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string RenderSvg(const Chart& chart, int width, int height) {
  const bool bars = chart.kind == Chart::Kind::kBars;
  // Bar groups with long names get their labels at a slant, below a shorter plot.
  size_t longest_category = 0;
  for (const std::string& c : chart.categories) longest_category = std::max(longest_category, c.size());
  const int plot_w = width - kLeft - kLegendWidth - kRightGap;
  const bool slanted = bars && !chart.categories.empty() &&
                       longest_category * 6.5 > static_cast<double>(plot_w) / chart.categories.size();
  const int bottom = slanted ? kBottom + static_cast<int>(std::min<size_t>(longest_category, 28) * 4.5) : kBottom;
  const int plot_h = height - kTop - bottom;
  Range xr, yr;
  size_t points = 0;
  for (const ChartSeries& s : chart.series) {
    for (size_t i = 0; i < s.y.size(); ++i) {
      yr.Add(s.y[i]);
      if (!bars && i < s.x.size()) xr.Add(s.x[i]);
      points += std::isfinite(s.y[i]);
    }
  }
  if (chart.y_reference >= 0) yr.Add(chart.y_reference);
  if (chart.diagonal && !xr.empty() && !yr.empty()) {
    xr.Add(yr.lo), xr.Add(yr.hi), yr.Add(xr.lo), yr.Add(xr.hi);
  }
  const double y_step = Nice(yr, bars);
  const double x_step = bars ? 1 : Nice(xr, false);
  if (bars) xr = {0, static_cast<double>(std::max<size_t>(chart.categories.size(), 1))};
  const auto px = [&](double x) { return kLeft + (x - xr.lo) / (xr.hi - xr.lo) * plot_w; };
  const auto py = [&](double y) { return kTop + plot_h - (y - yr.lo) / (yr.hi - yr.lo) * plot_h; };

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n",
      width, height, width, height);
  absl::StrAppend(&svg, Text(kLeft + plot_w / 2.0, 22, chart.title, "middle", 15, " font-weight=\"bold\""));
  // Grid and y ticks.
  for (double y = yr.lo; y <= yr.hi + y_step * 1e-6; y += y_step) {
    absl::StrAppendFormat(&svg, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", kLeft,
                          kLeft + plot_w, py(y), py(y));
    absl::StrAppend(&svg, Text(kLeft - 6, py(y) + 4, Number(y), "end", 11));
  }
  // x ticks: numbers, or the categories under their bar groups.
  if (bars) {
    for (size_t c = 0; c < chart.categories.size(); ++c) {
      if (!slanted) {
        absl::StrAppend(&svg, Text(px(c + 0.5), kTop + plot_h + 16, chart.categories[c], "middle", 11));
        continue;
      }
      const double x = px(c + 0.5), y = kTop + plot_h + 12;
      absl::StrAppend(&svg, Text(x, y, chart.categories[c], "end", 11,
                                 absl::StrFormat(" transform=\"rotate(-35 %.1f %.1f)\"", x, y)));
    }
  } else {
    for (double x = xr.lo; x <= xr.hi + x_step * 1e-6; x += x_step) {
      absl::StrAppendFormat(&svg, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#f0f0f0\"/>\n", px(x),
                            px(x), kTop, kTop + plot_h);
      absl::StrAppend(&svg, Text(px(x), kTop + plot_h + 16, Number(x), "middle", 11));
    }
  }
  absl::StrAppendFormat(&svg,
                        "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", kLeft,
                        kTop, plot_w, plot_h);
  if (!chart.x_label.empty())
    absl::StrAppend(&svg, Text(kLeft + plot_w / 2.0, height - 12, chart.x_label, "middle", 12));
  absl::StrAppend(&svg, Text(16, kTop + plot_h / 2.0, chart.y_label, "middle", 12,
                             absl::StrFormat(" transform=\"rotate(-90 16 %.1f)\"", kTop + plot_h / 2.0)));
  // Reference lines.
  if (chart.diagonal) {
    const double lo = std::max(xr.lo, yr.lo), hi = std::min(xr.hi, yr.hi);
    if (lo < hi)
      absl::StrAppendFormat(&svg,
                            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" "
                            "stroke-dasharray=\"5 4\"/>\n",
                            px(lo), py(lo), px(hi), py(hi));
  }
  if (chart.y_reference >= 0)
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" "
                          "stroke-dasharray=\"5 4\"/>\n",
                          kLeft, kLeft + plot_w, py(chart.y_reference), py(chart.y_reference));
  // The data.
  const size_t n = chart.series.size();
  for (size_t s = 0; s < n; ++s) {
    const ChartSeries& series = chart.series[s];
    if (bars) {
      const double group = 0.8, bar = group / std::max<size_t>(n, 1);
      for (size_t c = 0; c < series.y.size() && c < chart.categories.size(); ++c) {
        if (!std::isfinite(series.y[c])) continue;
        const double x0 = px(c + 0.1 + s * bar), x1 = px(c + 0.1 + (s + 1) * bar);
        const double top = py(std::max(series.y[c], 0.0)), base = py(std::min(series.y[c], 0.0));
        absl::StrAppendFormat(&svg,
                              "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%s: "
                              "%s</title></rect>\n",
                              x0, top, std::max(x1 - x0 - 1, 1.0), std::max(base - top, 0.5), Color(s),
                              XmlEscape(series.label), Number(series.y[c]));
      }
      continue;
    }
    std::string path;
    for (size_t i = 0; i < series.x.size() && i < series.y.size(); ++i) {
      if (!std::isfinite(series.x[i]) || !std::isfinite(series.y[i])) continue;
      absl::StrAppendFormat(&path, "%s%.1f,%.1f ", path.empty() ? "M" : "L", px(series.x[i]), py(series.y[i]));
      absl::StrAppendFormat(&svg,
                            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\" stroke=\"%s\" "
                            "stroke-width=\"1.5\"><title>%s: (%s, %s)</title></circle>\n",
                            px(series.x[i]), py(series.y[i]), Second(s) ? "white" : Color(s), Color(s),
                            XmlEscape(series.label), Number(series.x[i]), Number(series.y[i]));
    }
    if (chart.kind == Chart::Kind::kLines && !path.empty())
      absl::StrAppendFormat(&svg, "<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", path,
                            Color(s), Second(s) ? " stroke-dasharray=\"6 3\"" : "");
  }
  if (points == 0) absl::StrAppend(&svg, Text(kLeft + plot_w / 2.0, kTop + plot_h / 2.0, "no data", "middle", 14));
  // The legend, beside the plot (long labels are cut, their full text in a tooltip).
  const int legend_x = kLeft + plot_w + kRightGap;
  for (size_t s = 0; s < n; ++s) {
    const double y = kTop + 8 + 18.0 * s;
    if (y > height - 8) break;
    const std::string& label = chart.series[s].label;
    const std::string shown = label.size() > 38 ? label.substr(0, 37) + "…" : label;
    absl::StrAppendFormat(&svg,
                          "<rect x=\"%d\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\" stroke=\"%s\" "
                          "stroke-width=\"2\"%s/>\n",
                          legend_x, y - 10, Second(s) ? "white" : Color(s), Color(s),
                          Second(s) ? " stroke-dasharray=\"3 2\"" : "");
    absl::StrAppendFormat(&svg, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\"><title>%s</title>%s</text>\n",
                          legend_x + 18, y, XmlEscape(label), XmlEscape(shown));
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace speclab

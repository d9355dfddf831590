// SvgChart: line, point and bar charts as standalone SVG text, for
// `speclab report` (no Python or plotting library needed to read a run).
#ifndef SPECLAB_EXPERIMENTS_SVG_CHART_H_
#define SPECLAB_EXPERIMENTS_SVG_CHART_H_

#include <string>
#include <vector>

namespace speclab {

struct ChartSeries {
  std::string label;
  std::vector<double> x, y;  // one point each; bars read y by category index
};

struct Chart {
  enum class Kind { kLines, kPoints, kBars };
  Kind kind = Kind::kLines;
  std::string title, x_label, y_label;
  std::vector<ChartSeries> series;
  std::vector<std::string> categories;  // kBars: the x axis's labels, one a bar group
  bool diagonal = false;                // a dashed y = x line (measured against predicted)
  double y_reference = -1;              // a dashed horizontal line at this y where >= 0 (speedup 1)
};

// The chart as an <svg> element of `width` x `height` pixels: axes with
// rounded ticks, a grid, a legend beside the plot, one color a series. An
// empty chart (no points) draws its frame and says so.
std::string RenderSvg(const Chart& chart, int width = 760, int height = 400);

// `text` with &, <, >, " escaped for XML and HTML.
std::string XmlEscape(const std::string& text);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_SVG_CHART_H_

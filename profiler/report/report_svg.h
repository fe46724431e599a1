// Inline-SVG charts for the HTML report: a stacked area chart over time and horizontal and
// vertical bar charts, with axes labelled in human units (B/KiB/MiB/GiB, µs/ms/s). Output is an
// <svg> element as text; no script, no external resources.
#ifndef SPILLWAY_PROFILER_REPORT_REPORT_SVG_H_
#define SPILLWAY_PROFILER_REPORT_REPORT_SVG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::report {

// A unit to show values in: its name and how many base units one of it is.
struct Unit {
  std::string name;
  double scale = 1;
};
Unit ByteUnitFor(uint64_t max_bytes);  // B, KiB, MiB, GiB or TiB
Unit TimeUnitFor(uint64_t max_ns);     // µs, ms or s (over nanoseconds)

// "1.5 GiB", "12 ms": a value in the unit with at most 3 significant decimals.
std::string FormatIn(double value, const Unit& unit);
std::string FormatBytes(uint64_t bytes);
std::string FormatDuration(uint64_t ns);

// Round tick values covering [0, max] (about `count` of them).
std::vector<double> NiceTicks(double max, int count);

// Escapes text for HTML and SVG (& < > " ').
std::string HtmlEscape(std::string_view text);

// A fixed palette; series i gets color i modulo its size.
const char* SeriesColor(size_t i);

struct AreaSeries {
  std::string label;
  std::vector<uint64_t> values;  // one per x
};

struct AreaChart {
  std::string title;           // for screen readers (<title>)
  std::vector<uint64_t> x_ns;  // times, relative to the chart's start
  uint64_t x_max_ns = 0;
  std::vector<AreaSeries> stacked;  // bottom first
  std::vector<uint64_t> line;       // an optional line over the areas (managed resident)
  size_t line_from = 0;             // the line starts at this x (nothing was sampled before it)
  std::string line_label;
  // A marked point (the peak), and optional thin vertical markers (step starts).
  bool has_mark = false;
  uint64_t mark_x_ns = 0;
  uint64_t mark_y = 0;
  std::string mark_label;
  std::vector<uint64_t> guides_ns;
};
std::string RenderAreaChart(const AreaChart& chart);

struct Bar {
  std::string label;
  uint64_t value = 0;
  std::string tooltip;
};
// Horizontal bars, one row each, labelled on the left, values in bytes.
std::string RenderByteBars(std::string_view title, const std::vector<Bar>& bars);
// Vertical bars in a row (e.g. bytes touched by each launch of a step), x labelled by index.
std::string RenderColumnBars(std::string_view title, std::string_view x_label,
                             const std::vector<Bar>& bars, const std::vector<size_t>& color_of);

}  // namespace spillway::report

#endif  // SPILLWAY_PROFILER_REPORT_REPORT_SVG_H_

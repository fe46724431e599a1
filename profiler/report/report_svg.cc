// Inline-SVG charts: scales, ticks, axes, stacked areas and bars, written as text.
#include "profiler/report/report_svg.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spillway::report {
namespace {

constexpr double kWidth = 1100, kHeight = 340;
constexpr double kLeft = 96, kRight = 24, kTop = 24, kBottom = 48;

std::string Num(double v) { return absl::StrFormat("%.1f", v); }

std::string Truncate(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  return absl::StrCat(std::string(text.substr(0, max - 1)), "…");
}

// Round ticks in `unit` (0, 0.5 GiB, 1 GiB...) covering [0, max], as base-unit values.
std::vector<double> TicksIn(double max, const Unit& unit, int count) {
  std::vector<double> ticks = NiceTicks(max / unit.scale, count);
  for (double& t : ticks) t *= unit.scale;
  return ticks;
}

// A y axis with gridlines: ticks of `max` in `unit`, for a plot of the given height.
void AppendYAxis(std::string& svg, double max, const Unit& unit, double left, double width,
                 double top, double height) {
  for (const double tick : TicksIn(max, unit, 5)) {
    const double y = top + height - height * tick / std::max(max, 1.0);
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", Num(left), "\" x2=\"", Num(left + width),
                    "\" y1=\"", Num(y), "\" y2=\"", Num(y), "\"/>", "<text class=\"tick\" x=\"",
                    Num(left - 6), "\" y=\"", Num(y + 4), "\" text-anchor=\"end\">",
                    HtmlEscape(FormatIn(tick, unit)), "</text>");
  }
}

}  // namespace

Unit ByteUnitFor(uint64_t max_bytes) {
  static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double scale = 1;
  int i = 0;
  while (i < 4 && static_cast<double>(max_bytes) >= scale * 1024) {
    scale *= 1024;
    ++i;
  }
  return {kNames[i], scale};
}

Unit TimeUnitFor(uint64_t max_ns) {
  if (max_ns >= 2'000'000'000) return {"s", 1e9};
  if (max_ns >= 2'000'000) return {"ms", 1e6};
  return {"µs", 1e3};
}

std::string FormatIn(double value, const Unit& unit) {
  const double v = value / unit.scale;
  std::string text = absl::StrFormat("%.3g", v);
  if (std::fabs(v) >= 1000) text = absl::StrFormat("%.0f", v);
  return absl::StrCat(text, " ", unit.name);
}

std::string FormatBytes(uint64_t bytes) {
  return FormatIn(static_cast<double>(bytes), ByteUnitFor(bytes));
}

std::string FormatDuration(uint64_t ns) {
  return FormatIn(static_cast<double>(ns), TimeUnitFor(ns * 2));
}

std::vector<double> NiceTicks(double max, int count) {
  std::vector<double> ticks;
  if (!(max > 0) || count < 1) return {0};
  const double raw = max / count;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  for (double t = 0; t <= max * (1 + 1e-9); t += step) ticks.push_back(t);
  return ticks;
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

const char* SeriesColor(size_t i) {
  static constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                             "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kPalette[i % std::size(kPalette)];
}

std::string RenderAreaChart(const AreaChart& chart) {
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  const size_t n = chart.x_ns.size();
  uint64_t y_max = chart.mark_y;
  for (size_t j = 0; j < n; ++j) {
    uint64_t sum = 0;
    for (const AreaSeries& s : chart.stacked) sum += j < s.values.size() ? s.values[j] : 0;
    y_max = std::max(y_max, sum);
    if (j < chart.line.size()) y_max = std::max(y_max, chart.line[j]);
  }
  const Unit yu = ByteUnitFor(y_max), xu = TimeUnitFor(chart.x_max_ns);
  const double ymax = std::max<double>(static_cast<double>(y_max) * 1.08, 1);
  const double xmax = std::max<double>(static_cast<double>(chart.x_max_ns), 1);
  const auto X = [&](double t) { return kLeft + pw * t / xmax; };
  const auto Y = [&](double v) { return kTop + ph - ph * v / ymax; };

  std::string svg =
      absl::StrCat("<svg class=\"chart\" viewBox=\"0 0 ", Num(kWidth), " ", Num(kHeight),
                   "\" role=\"img\"><title>", HtmlEscape(chart.title), "</title>");
  AppendYAxis(svg, ymax, yu, kLeft, pw, kTop, ph);
  for (const double tick : TicksIn(xmax, xu, 8)) {
    absl::StrAppend(&svg, "<text class=\"tick\" x=\"", Num(X(tick)), "\" y=\"", Num(kTop + ph + 18),
                    "\" text-anchor=\"middle\">", HtmlEscape(FormatIn(tick, xu)), "</text>");
  }
  for (const uint64_t g : chart.guides_ns) {
    absl::StrAppend(&svg, "<line class=\"guide\" x1=\"", Num(X(g)), "\" x2=\"", Num(X(g)),
                    "\" y1=\"", Num(kTop), "\" y2=\"", Num(kTop + ph), "\"/>");
  }
  // Stacked areas: the upper edge left to right, then the lower edge back.
  std::vector<double> below(n, 0);
  for (size_t i = 0; i < chart.stacked.size(); ++i) {
    const AreaSeries& s = chart.stacked[i];
    std::string points;
    std::vector<double> above(n);
    for (size_t j = 0; j < n; ++j) {
      above[j] = below[j] + static_cast<double>(j < s.values.size() ? s.values[j] : 0);
      absl::StrAppend(&points, Num(X(static_cast<double>(chart.x_ns[j]))), ",", Num(Y(above[j])),
                      " ");
    }
    for (size_t j = n; j-- > 0;) {
      absl::StrAppend(&points, Num(X(static_cast<double>(chart.x_ns[j]))), ",", Num(Y(below[j])),
                      " ");
    }
    absl::StrAppend(&svg, "<polygon class=\"area\" fill=\"", SeriesColor(i), "\" points=\"", points,
                    "\"><title>", HtmlEscape(s.label), "</title></polygon>");
    below = std::move(above);
  }
  if (!chart.line.empty()) {
    std::string points;
    for (size_t j = chart.line_from; j < n && j < chart.line.size(); ++j) {
      absl::StrAppend(&points, Num(X(static_cast<double>(chart.x_ns[j]))), ",",
                      Num(Y(static_cast<double>(chart.line[j]))), " ");
    }
    absl::StrAppend(&svg, "<polyline class=\"line\" points=\"", points, "\"><title>",
                    HtmlEscape(chart.line_label), "</title></polyline>");
  }
  // Axes and their labels.
  absl::StrAppend(&svg, "<line class=\"axis\" x1=\"", Num(kLeft), "\" x2=\"", Num(kLeft + pw),
                  "\" y1=\"", Num(kTop + ph), "\" y2=\"", Num(kTop + ph), "\"/>",
                  "<line class=\"axis\" x1=\"", Num(kLeft), "\" x2=\"", Num(kLeft), "\" y1=\"",
                  Num(kTop), "\" y2=\"", Num(kTop + ph), "\"/>");
  absl::StrAppend(&svg, "<text class=\"label\" x=\"", Num(kLeft + pw / 2), "\" y=\"",
                  Num(kHeight - 6), "\" text-anchor=\"middle\">time (", xu.name, ")</text>",
                  "<text class=\"label\" transform=\"translate(18,", Num(kTop + ph / 2),
                  ") rotate(-90)\" text-anchor=\"middle\">live (", yu.name, ")</text>");
  if (chart.has_mark) {
    const double mx = X(static_cast<double>(chart.mark_x_ns));
    const double my = Y(static_cast<double>(chart.mark_y));
    const bool left = mx > kLeft + pw * 0.7;
    absl::StrAppend(&svg, "<g class=\"peak\"><line x1=\"", Num(mx), "\" x2=\"", Num(mx), "\" y1=\"",
                    Num(my), "\" y2=\"", Num(kTop + ph), "\"/><circle cx=\"", Num(mx), "\" cy=\"",
                    Num(my), "\" r=\"5\"/><text x=\"", Num(mx + (left ? -9 : 9)), "\" y=\"",
                    Num(std::max(my - 8, kTop + 12)), "\" text-anchor=\"", left ? "end" : "start",
                    "\">", HtmlEscape(chart.mark_label), "</text></g>");
  }
  absl::StrAppend(&svg, "</svg>");
  return svg;
}

std::string RenderByteBars(std::string_view title, const std::vector<Bar>& bars) {
  constexpr double kRow = 24, kLabel = 340, kTopPad = 10, kAxis = 40;
  const double pw = kWidth - kLabel - kRight - 70;
  const double height = kTopPad + kRow * static_cast<double>(bars.size()) + kAxis;
  uint64_t vmax = 1;
  for (const Bar& b : bars) vmax = std::max(vmax, b.value);
  const Unit unit = ByteUnitFor(vmax);
  const double xmax = static_cast<double>(vmax);
  std::string svg =
      absl::StrCat("<svg class=\"chart\" viewBox=\"0 0 ", Num(kWidth), " ", Num(height),
                   "\" role=\"img\"><title>", HtmlEscape(title), "</title>");
  const double plot_bottom = kTopPad + kRow * static_cast<double>(bars.size());
  for (const double tick : TicksIn(xmax, unit, 6)) {
    if (tick > xmax) break;
    const double x = kLabel + pw * tick / xmax;
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", Num(x), "\" x2=\"", Num(x), "\" y1=\"",
                    Num(kTopPad), "\" y2=\"", Num(plot_bottom), "\"/><text class=\"tick\" x=\"",
                    Num(x), "\" y=\"", Num(plot_bottom + 16), "\" text-anchor=\"middle\">",
                    HtmlEscape(FormatIn(tick, unit)), "</text>");
  }
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double y = kTopPad + kRow * static_cast<double>(i);
    const double w = std::max(pw * static_cast<double>(b.value) / xmax, 1.0);
    absl::StrAppend(&svg, "<g><title>", HtmlEscape(b.tooltip.empty() ? b.label : b.tooltip),
                    "</title><text class=\"barlabel\" x=\"", Num(kLabel - 8), "\" y=\"",
                    Num(y + 16), "\" text-anchor=\"end\">", HtmlEscape(Truncate(b.label, 44)),
                    "</text><rect class=\"bar\" fill=\"", SeriesColor(i), "\" x=\"", Num(kLabel),
                    "\" y=\"", Num(y + 4), "\" width=\"", Num(w), "\" height=\"", Num(kRow - 8),
                    "\"/><text class=\"tick\" x=\"", Num(kLabel + w + 6), "\" y=\"", Num(y + 16),
                    "\">", HtmlEscape(FormatBytes(b.value)), "</text></g>");
  }
  absl::StrAppend(&svg, "<text class=\"label\" x=\"", Num(kLabel + pw / 2), "\" y=\"",
                  Num(height - 4), "\" text-anchor=\"middle\">bytes touched by one launch (",
                  unit.name, ")</text></svg>");
  return svg;
}

std::string RenderColumnBars(std::string_view title, std::string_view x_label,
                             const std::vector<Bar>& bars, const std::vector<size_t>& color_of) {
  constexpr double kH = 220, kB = 44;
  const double pw = kWidth - kLeft - kRight, ph = kH - kTop - kB;
  uint64_t vmax = 1;
  for (const Bar& b : bars) vmax = std::max(vmax, b.value);
  const Unit unit = ByteUnitFor(vmax);
  const double ymax = static_cast<double>(vmax) * 1.05;
  std::string svg = absl::StrCat("<svg class=\"chart\" viewBox=\"0 0 ", Num(kWidth), " ", Num(kH),
                                 "\" role=\"img\"><title>", HtmlEscape(title), "</title>");
  AppendYAxis(svg, ymax, unit, kLeft, pw, kTop, ph);
  const double slot = pw / static_cast<double>(std::max<size_t>(bars.size(), 1));
  for (size_t i = 0; i < bars.size(); ++i) {
    const double h = ph * static_cast<double>(bars[i].value) / ymax;
    const size_t color = i < color_of.size() ? color_of[i] : 0;
    absl::StrAppend(
        &svg, "<rect class=\"bar\" fill=\"", SeriesColor(color), "\" x=\"",
        Num(kLeft + slot * static_cast<double>(i) + slot * 0.1), "\" y=\"", Num(kTop + ph - h),
        "\" width=\"", Num(std::max(slot * 0.8, 0.5)), "\" height=\"", Num(h), "\"><title>",
        HtmlEscape(bars[i].tooltip.empty() ? bars[i].label : bars[i].tooltip), "</title></rect>");
  }
  for (const double tick : NiceTicks(static_cast<double>(bars.size()), 10)) {
    if (tick >= static_cast<double>(bars.size())) break;
    if (tick != std::floor(tick)) continue;  // launches are counted in whole numbers
    absl::StrAppend(&svg, "<text class=\"tick\" x=\"", Num(kLeft + slot * (tick + 0.5)), "\" y=\"",
                    Num(kTop + ph + 16), "\" text-anchor=\"middle\">", static_cast<uint64_t>(tick),
                    "</text>");
  }
  absl::StrAppend(&svg, "<line class=\"axis\" x1=\"", Num(kLeft), "\" x2=\"", Num(kLeft + pw),
                  "\" y1=\"", Num(kTop + ph), "\" y2=\"", Num(kTop + ph), "\"/>",
                  "<text class=\"label\" x=\"", Num(kLeft + pw / 2), "\" y=\"", Num(kH - 6),
                  "\" text-anchor=\"middle\">", HtmlEscape(x_label), "</text>",
                  "<text class=\"label\" transform=\"translate(18,", Num(kTop + ph / 2),
                  ") rotate(-90)\" text-anchor=\"middle\">touched (", unit.name, ")</text></svg>");
  return svg;
}

}  // namespace spillway::report

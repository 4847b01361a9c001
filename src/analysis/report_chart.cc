// report: the chart model, as report.js draws it from the page's JSON block (report_chart.h).
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "graphdump/internal/report_chart.h"

namespace graphdump::analysis::report_internal {
namespace {

using Json = nlohmann::json;

Json ValueJson(const std::optional<double>& v) {
  if (!v) return nullptr;
  if (std::isnan(*v)) return "NaN";
  if (std::isinf(*v)) return *v > 0 ? "Inf" : "-Inf";
  return *v;
}

}  // namespace

std::string ShortName(const std::string& full_name) {
  size_t cut = full_name.rfind('/');
  if (cut != std::string::npos && cut > 0) {
    const size_t parent = full_name.rfind('/', cut - 1);
    cut = parent == std::string::npos ? 0 : parent + 1;
  } else {
    cut = 0;
  }
  std::string s = full_name.substr(cut);
  if (s.size() > 32) s = "\u2026" + s.substr(s.size() - 31);
  return s;
}

Chart MakeChart(std::string id, std::string title, std::string x_title, bool log_y,
                bool kernel_axis, int width, int height) {
  Chart c;
  c.id = std::move(id);
  c.title = std::move(title);
  c.x_title = std::move(x_title);
  c.log_y = log_y;
  c.kernel_axis = kernel_axis;
  c.width = width;
  c.height = height;
  return c;
}

Json ChartJson(const Chart& c) {
  Json points = Json::array(), series = Json::array(), markers = Json::array();
  for (const ChartPoint& p : c.points) {
    points.push_back({{"x", p.x}, {"name", p.name}, {"label", p.label}, {"detail", p.detail}});
  }
  for (const ChartSeries& s : c.series) {
    Json values = Json::array();
    for (const auto& v : s.values) values.push_back(ValueJson(v));
    series.push_back({{"name", s.name}, {"color", s.color}, {"values", std::move(values)}});
  }
  for (const ChartMarker& m : c.markers) {
    markers.push_back(
        {{"index", m.index}, {"class", m.css_class}, {"id", m.id}, {"label", m.label}});
  }
  return {{"id", c.id},
          {"title", c.title},
          {"x_title", c.x_title},
          {"log_y", c.log_y},
          {"kernel_axis", c.kernel_axis},
          {"width", c.width},
          {"height", c.height},
          {"x_count", c.x_count ? c.x_count : c.points.size()},
          {"points", std::move(points)},
          {"series", std::move(series)},
          {"markers", std::move(markers)}};
}

std::string ScriptSafeJson(const Json& j) {
  const std::string text = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace graphdump::analysis::report_internal

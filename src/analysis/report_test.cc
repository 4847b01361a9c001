// The report's choices (which kernel is the first divergence, where the charts look) and what
// the page carries (values as JSON with NaN/Inf spelled out, names that cannot end a script).
#include "graphdump/analysis/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "graphdump/internal/json_text.h"

namespace graphdump::analysis {
namespace {

KernelComparison Kernel(const std::string& name, const std::string& op_type, Verdict verdict,
                        int64_t iteration = 0) {
  KernelComparison k;
  k.name_a = k.name_b = name;
  k.op_type = op_type;
  k.verdict = verdict;
  k.iteration = iteration;
  return k;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The JSON block the page's script draws from.
nlohmann::json ReportData(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"report-data\">";
  const size_t begin = html.find(open);
  EXPECT_NE(begin, std::string::npos);
  const size_t end = html.find("</script>", begin);
  return nlohmann::json::parse(html.substr(begin + open.size(), end - begin - open.size()));
}

TEST(ReportTest, FirstFailingKernelSkipsParametersAndConstants) {
  CompareResult r;
  r.kernels = {Kernel("fc.weight", "Parameter", Verdict::kError),
               Kernel("net/conv-op1", "Conv2D", Verdict::kWarning),
               Kernel("net/data-0", "Parameter", Verdict::kError),
               Kernel("net/relu-op2", "ReLU", Verdict::kError),
               Kernel("net/add-op3", "Add", Verdict::kError)};
  r.first_failure = 0;  // what CompareDumps says: the parameter, listed first
  int64_t position = -2;
  EXPECT_EQ(FirstFailingKernel(r, &position), "net/relu-op2");
  EXPECT_EQ(position, 3);
  r.kernels[3].verdict = Verdict::kPass;
  r.kernels[4].verdict = Verdict::kWarning;
  EXPECT_EQ(FirstFailingKernel(r, &position), std::nullopt);
  EXPECT_EQ(position, -1);
  // A constant (iteration -1) is not a computed kernel whatever its op type says.
  r.kernels.push_back(Kernel("net/const-op9", "Mul", Verdict::kError, -1));
  EXPECT_EQ(FirstFailingKernel(r), std::nullopt);
}

TEST(ReportTest, FocusIsTheFirstHitThenTheFirstDivergenceThenTheLastIteration) {
  DumpIndex index;
  index.ranks.resize(2);
  index.ranks[0].rank = 0;
  index.ranks[1].rank = 1;
  for (RankEntry& r : index.ranks) {
    r.graphs.resize(1);
    for (int64_t it : {0, 1, 2, -1}) r.graphs[0].iterations.push_back({it, "", {}, ""});
  }
  WatchResult watch;
  CompareResult compare;
  compare.kernels = {Kernel("w", "Parameter", Verdict::kError, 0),
                     Kernel("net/mul-op4", "Mul", Verdict::kError, 1)};
  compare.kernels[1].rank = 1;
  ReportFocus f = ChooseReportFocus(index, &watch, &compare);
  EXPECT_EQ(f.rank, 1u);
  EXPECT_EQ(f.iteration, 1);
  WatchHit hit;
  hit.rank = 1;
  hit.iteration = 2;
  hit.kernel = "net/relu-op2";
  watch.hits.push_back(hit);
  f = ChooseReportFocus(index, &watch, &compare);
  EXPECT_EQ(f.rank, 1u);
  EXPECT_EQ(f.iteration, 2);
  f = ChooseReportFocus(index, nullptr, nullptr);
  EXPECT_EQ(f.rank, 0u);
  EXPECT_EQ(f.iteration, 2);  // the last iteration, not the constants (-1)
}

TEST(ReportTest, NonFiniteValuesAreSpelledOutAndMissingOnesAreNull) {
  ReportInput input;
  input.title = "t";
  input.iterations = 1;
  OrderSeries o;
  StatPoint a, b, c;
  a.kernel = "net/a-op0";
  a.max = NAN;
  a.min = -INFINITY;
  a.mean = 0.5;
  a.l2norm = INFINITY;
  b.kernel = "net/b-op1";
  b.max = 2;
  b.min = 1;
  b.l2norm = 3;  // no mean: statistic.csv without "Avg Value"
  c.kernel = "net/c-op2";
  c.max = c.min = 0;
  c.l2norm = 0;
  o.points = {a, b, c};
  input.order = {o};
  const nlohmann::json data = ReportData(RenderReportHtml(input));
  ASSERT_EQ(data["charts"].size(), 2u);
  const nlohmann::json& values = data["charts"][0];
  EXPECT_EQ(values["id"], "order-0-values");
  ASSERT_EQ(values["series"].size(), 3u);
  EXPECT_EQ(values["series"][0]["name"], "max");
  EXPECT_EQ(values["series"][0]["values"], nlohmann::json::parse(R"(["NaN", 2.0, 0.0])"));
  EXPECT_EQ(values["series"][1]["values"], nlohmann::json::parse(R"(["-Inf", 1.0, 0.0])"));
  EXPECT_EQ(values["series"][2]["values"], nlohmann::json::parse(R"([0.5, null, null])"));
  EXPECT_EQ(data["charts"][1]["series"][0]["values"],
            nlohmann::json::parse(R"(["Inf", 3.0, 0.0])"));
  EXPECT_EQ(values["points"][0]["name"], "net/a-op0");
}

TEST(ReportTest, AKernelNameCannotEndTheScript) {
  ReportInput input;
  input.title = "</script><script>alert(1)</script>";
  input.iterations = 1;
  OrderSeries o;
  StatPoint p;
  p.kernel = "net/x</script><!--op1";
  p.max = p.min = p.l2norm = 1;
  o.points = {p};
  input.order = {o};
  const std::string html = RenderReportHtml(input);
  EXPECT_EQ(Count(html, "</script>"), 3u);  // the data, d3.js, the drawing script
  EXPECT_EQ(Count(html, "<script"), 3u);
  EXPECT_EQ(ReportData(html)["charts"][0]["points"][0]["name"], "net/x</script><!--op1");
  EXPECT_NE(html.find("&lt;/script&gt;&lt;script&gt;alert(1)"), std::string::npos);
}

// A page that declares UTF-8 is UTF-8: bytes of a name that are not (a file name can hold any)
// become U+FFFD in the tables as in the chart data.
TEST(ReportTest, NamesThatAreNotUtf8AreReplaced) {
  ReportInput input;
  input.title = "dump\xFF";
  input.iterations = 1;
  OrderSeries o;
  StatPoint p;
  p.kernel = "net/layer\xFE" "1-op1";
  p.max = p.min = p.l2norm = 1;
  o.points = {p};
  input.order = {o};
  WatchResult watch;
  WatchHit hit;
  hit.kernel = "net/layer\xFE" "1-op1";
  hit.check = "nan";
  hit.detail = "1 NaN";
  hit.source_line = "/home/u\xE9/model.py:12";
  watch.hits.push_back(hit);
  watch.hit_counts[{hit.rank, hit.iteration}] = 1;
  input.watch = &watch;
  input.rank_hits = watch.hits;
  const std::string html = RenderReportHtml(input);
  EXPECT_TRUE(graphdump::internal::IsValidUtf8(html));
  EXPECT_NE(html.find("<code>net/layer\xEF\xBF\xBD" "1-op1</code>"), std::string::npos);
  EXPECT_NE(html.find("/home/u\xEF\xBF\xBD/model.py:12"), std::string::npos);
  EXPECT_NE(html.find("<h1>dump\xEF\xBF\xBD</h1>"), std::string::npos);
}

// Whatever the input, the chart data fit kReportChartBytes: 12 series of 5,000 points with
// 1,500-character names (about 20 MB of chart data at full width) are drawn in fewer columns
// until they fit, the first hit still marked exactly.
TEST(ReportTest, ChartDataFitTheBudgetWithTheFirstHitKept) {
  ReportInput input;
  input.title = "big";
  input.iterations = 5000;
  input.ranks = {{0, {0, 1}}};
  const std::string scope(1500, 's');
  for (int k = 0; k < 12; ++k) {
    KernelSeries s;
    s.kernel = scope + "/k" + std::to_string(k);
    for (int64_t i = 0; i < 5000; ++i) {
      StatPoint p;
      p.kernel = s.kernel;
      p.iteration = i;
      p.max = p.min = p.mean = p.l2norm = static_cast<double>((i * 7919 + k) % 1000);
      s.points.push_back(p);
    }
    input.series.push_back(std::move(s));
  }
  input.series[3].points[3456].max = NAN;
  WatchResult watch;
  WatchHit hit;
  hit.kernel = input.series[3].kernel;
  hit.iteration = 3456;
  hit.check = "nan";
  watch.hits.push_back(hit);
  watch.hit_counts[{hit.rank, hit.iteration}] = 1;
  input.watch = &watch;
  input.rank_hits = watch.hits;
  const std::string html = RenderReportHtml(input);
  const nlohmann::json data = ReportData(html);
  EXPECT_LE(data.dump().size(), kReportChartBytes);
  EXPECT_LT(html.size(), 5'000'000u);
  const nlohmann::json* chart = nullptr;
  for (const auto& c : data["charts"]) {
    if (c["id"] == "series-3-values") chart = &c;
  }
  ASSERT_NE(chart, nullptr);
  EXPECT_EQ((*chart)["x_count"], 5000);
  EXPECT_LT((*chart)["points"].size(), 5000u / 8);
  ASSERT_EQ((*chart)["markers"].size(), 1u);
  const auto& marked = (*chart)["points"][(*chart)["markers"][0]["index"].get<size_t>()];
  EXPECT_EQ(marked["x"], 3456);
  EXPECT_EQ(marked["label"], "3456");
  EXPECT_EQ((*chart)["series"][0]["values"][(*chart)["markers"][0]["index"].get<size_t>()],
            "NaN");
}

}  // namespace
}  // namespace graphdump::analysis

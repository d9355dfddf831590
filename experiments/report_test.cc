#include "experiments/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "experiments/csv_table.h"
#include "experiments/records/step_records.h"
#include "experiments/svg_chart.h"
#include "framework/core/file_util.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(CsvTableTest, ReadsQuotedFieldsAndNamesBadLines) {
  auto table = ParseCsv("cell,value\n\"a,b \"\"x\"\"\",1\nplain,2\r\n", "s.csv");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(table->columns, ElementsAre("cell", "value"));
  ASSERT_EQ(table->rows.size(), 2u);
  EXPECT_EQ(table->rows[0][0], "a,b \"x\"");
  EXPECT_EQ(table->rows[1][1], "2");
  EXPECT_EQ(table->Column("value"), 1);
  EXPECT_EQ(table->Column("nope"), -1);
  EXPECT_EQ(CsvField("a,b \"x\""), "\"a,b \"\"x\"\"\"");
  EXPECT_THAT(ParseCsv("a,b\n1,2\n3\n", "s.csv").status().message(), HasSubstr("s.csv:3: 1 fields, expected 2"));
  EXPECT_THAT(ParseCsv("a,b\n\"1,2\n", "s.csv").status().message(), HasSubstr("s.csv:2: a quoted field never ends"));
  EXPECT_THAT(ParseCsv("", "s.csv").status().message(), HasSubstr("s.csv: empty"));
}

TEST(SvgChartTest, DrawsSeriesEscapesTextAndSaysWhenEmpty) {
  Chart lines{.kind = Chart::Kind::kLines, .title = "tau <against> gamma & more", .x_label = "gamma",
              .y_label = "tau"};
  lines.series.push_back({.label = "a", .x = {1, 2, 4}, .y = {1.5, 2.0, 2.5}});
  lines.series.push_back({.label = "b\"", .x = {1, 2}, .y = {1.2, 1.9}});
  const std::string svg = RenderSvg(lines);
  EXPECT_TRUE(svg.rfind("<svg", 0) == 0 && svg.find("</svg>") != std::string::npos);
  EXPECT_THAT(svg, HasSubstr("tau &lt;against&gt; gamma &amp; more"));
  EXPECT_THAT(svg, HasSubstr("b&quot;"));
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(svg, "<circle")).size() - 1, 5u);  // a marker a point
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(svg, "<path")).size() - 1, 2u);    // a line a series
  EXPECT_THAT(svg, Not(HasSubstr("no data")));
  EXPECT_THAT(RenderSvg(Chart{.title = "empty"}), HasSubstr("no data"));
  Chart bars{.kind = Chart::Kind::kBars, .categories = {"x", "y"}};
  bars.series.push_back({.label = "T=0", .y = {1.2, 0.8}});
  bars.series.push_back({.label = "T=1", .y = {1.1, NAN}});  // a missing bar
  const std::string bar_svg = RenderSvg(bars);
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(bar_svg, "<title>T=")).size() - 1, 3u + 2u);  // bars + legend
}

// A sweep's --out folder: the merged summary.csv and each cell's steps.pb.
class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/report_test_" + std::to_string(::getpid());
    RemoveTree(dir_);
    const std::string header =
        "cell,hash,methods[0].length_policy.gamma,method,task,temperature,tokens_per_s,speedup,tau,acceptance_rate,"
        "target_forwards,new_tokens,prompts,accepted_per_node,draft_share,verify_share,other_share,greedy_match,"
        "predicted_speedup,overhead_us_per_step\n";
    std::string csv = header;
    for (int gamma : {2, 4}) {
      const std::string cell = absl::StrCat("\"gamma=", gamma, ",x\"");
      const std::string hash = gamma == 2 ? "0123456789abcdef" : "fedcba9876543210";
      // Two tasks and their `all`: 100 tokens at 100/s each for the baseline; the chain's all row pools them.
      absl::StrAppend(&csv, cell, ",", hash, ",", gamma, ",baseline,code,0,100,1,1,0,100,100,1,0,0,1,0,,1,\n");
      absl::StrAppend(&csv, cell, ",", hash, ",", gamma, ",baseline,all,0,100,1,1,0,200,200,2,0,0,1,0,,1,\n");
      absl::StrAppend(&csv, cell, ",", hash, ",", gamma, ",chain,code,0,200,2,4,0.75,25,100,1,0.7,0.2,0.8,0,1,2.1,\n");
      absl::StrAppend(&csv, cell, ",", hash, ",", gamma, ",chain,all,0,", 100 + 50 * gamma, ",", 1 + 0.5 * gamma,
                      ",", 2 * gamma, ",0.5,", 200 / (2 * gamma), ",200,2,0.5,0.2,0.8,0,1,1.5,\n");
      const std::string folder = absl::StrCat(dir_, "/cells/gamma=", gamma, ",x-", hash.substr(0, 8));
      fs::create_directories(folder);
      std::vector<StepRecordRow> steps;
      for (int s = 0; s < 6; ++s) {
        steps.push_back({.method = "baseline", .task = "code", .step = s});
        // gamma 2 drafts 2 every step; gamma 4 moves between 3 and 4 (an adaptive length).
        const int drafted = gamma == 2 ? 2 : 3 + s % 2;
        steps.push_back({.method = "chain", .task = "code", .step = s, .tree_nodes = drafted,
                         .longest_path = drafted, .accepted = s % 3});
      }
      ASSERT_TRUE(WriteStepRecords(folder + "/steps.pb", steps).ok());
    }
    ASSERT_TRUE(WriteFileAtomically(dir_ + "/summary.csv", csv).ok());
  }
  void TearDown() override { RemoveTree(dir_); }

  std::string dir_;
};

TEST_F(ReportTest, WritesTablesPlotsAndOnePage) {
  auto flags = ParseReportFlags({dir_});
  ASSERT_TRUE(flags.ok()) << flags.status();
  auto written = WriteReport(*flags);
  ASSERT_TRUE(written.ok()) << written.status();
  for (const char* file : {"report.md", "report.csv", "report.html", "tau_by_gamma.svg", "speedup_by_gamma.svg",
                           "measured_vs_predicted.svg", "acceptance_by_position.svg", "drafted_lengths.svg"})
    EXPECT_TRUE(fs::exists(dir_ + "/report/" + file)) << file;
  auto csv = ReadFileToString(dir_ + "/report/report.csv");
  ASSERT_TRUE(csv.ok());
  auto table = ParseCsv(*csv, "report.csv");
  ASSERT_TRUE(table.ok()) << table.status();
  // Default grouping: the swept key, method and temperature over the `all` rows.
  EXPECT_THAT(table->columns, ElementsAre("gamma", "method", "temperature", "prompts", "tokens/s", "speedup",
                                          "predicted", "tau", "acceptance", "greedy match"));  // no overhead anywhere
  ASSERT_EQ(table->rows.size(), 4u);
  EXPECT_THAT(table->rows[1], ElementsAre("2", "chain", "0", "2", "200.0", "2.00x", "1.50x", "4.00", "0.500", "100%"));
  // Only gamma 4's lengths move, so the lengths chart has its one series.
  auto lengths = ReadFileToString(dir_ + "/report/drafted_lengths.svg");
  ASSERT_TRUE(lengths.ok());
  EXPECT_THAT(*lengths, HasSubstr("gamma=4"));
  EXPECT_THAT(*lengths, Not(HasSubstr("gamma=2")));
  auto html = ReadFileToString(dir_ + "/report/report.html");
  ASSERT_TRUE(html.ok());
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(*html, "<svg")).size() - 1, 5u);  // every plot inline
  EXPECT_THAT(*html, HasSubstr("<table>"));
}

TEST_F(ReportTest, PoolsRowsThatShareAGroup) {
  // By method alone: both cells' `all` rows pooled (tokens/s from summed time, tau from summed forwards).
  auto written = WriteReport({.run_dir = dir_, .group_by = {"method"}, .out_dir = dir_ + "/by_method"});
  ASSERT_TRUE(written.ok()) << written.status();
  auto table = ParseCsv(*ReadFileToString(dir_ + "/by_method/report.csv"), "report.csv");
  ASSERT_TRUE(table.ok());
  ASSERT_EQ(table->rows.size(), 2u);
  // chain: 400 tokens in 200/200 + 200/300 s; 400 tokens over 50 + 25 forwards.
  EXPECT_EQ(table->rows[1][table->Column("tokens/s")], absl::StrFormat("%.1f", 400 / (1.0 + 200.0 / 300)));
  EXPECT_EQ(table->rows[1][table->Column("tau")], absl::StrFormat("%.2f", 400.0 / 75));
  EXPECT_TRUE(fs::exists(dir_ + "/by_method/speedup.svg"));  // nothing numeric grouped: speedup by method
  // By task: every task's rows, the `all` rows among them.
  auto by_task = WriteReport({.run_dir = dir_, .group_by = {"gamma", "task"}, .out_dir = dir_ + "/by_task"});
  ASSERT_TRUE(by_task.ok()) << by_task.status();
  EXPECT_EQ(ParseCsv(*ReadFileToString(dir_ + "/by_task/report.csv"), "r")->rows.size(), 4u);
}

TEST_F(ReportTest, BadInputIsNamed) {
  auto unknown = WriteReport({.run_dir = dir_, .group_by = {"gama"}, .out_dir = dir_ + "/r"});
  EXPECT_THAT(unknown.status().message(), HasSubstr("'gama' is not a column of " + dir_ + "/summary.csv"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("methods[0].length_policy.gamma"));
  EXPECT_THAT(WriteReport({.run_dir = dir_, .group_by = {"method", "method"}, .out_dir = dir_ + "/r"})
                  .status()
                  .message(),
              HasSubstr("given twice"));
  RemoveTree(dir_ + "/cells/gamma=4,x-fedcba98/steps.pb");
  EXPECT_THAT(WriteReport({.run_dir = dir_, .out_dir = dir_ + "/r"}).status().message(),
              HasSubstr("gamma=4,x-fedcba98/steps.pb: missing"));
  EXPECT_THAT(WriteReport({.run_dir = dir_ + "/nowhere"}).status().message(), HasSubstr("nowhere/summary.csv"));
  EXPECT_THAT(ParseReportFlags({}).status().message(), HasSubstr("needs a run folder"));
  EXPECT_THAT(ParseReportFlags({"a", "b"}).status().message(), HasSubstr("one run folder"));
  EXPECT_THAT(ParseReportFlags({"a", "--group-by"}).status().message(), HasSubstr("--group-by needs a value"));
  EXPECT_THAT(ParseReportFlags({"a", "--group-by", "x,,y"}).status().message(), HasSubstr("an empty key"));
  EXPECT_THAT(ParseReportFlags({"a", "--bogus"}).status().message(), HasSubstr("unexpected argument '--bogus'"));
  auto flags = ParseReportFlags({"a", "--group-by=x,y", "--out=o"});
  ASSERT_TRUE(flags.ok());
  EXPECT_THAT(flags->group_by, ElementsAre("x", "y"));
  EXPECT_EQ(flags->out_dir, "o");
}

}  // namespace
}  // namespace speclab

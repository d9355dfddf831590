#include "experiments/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "experiments/csv_table.h"
#include "experiments/records/step_records.h"
#include "experiments/svg_chart.h"
#include "framework/core/file_util.h"
#include "framework/core/status_macros.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;

constexpr char kBaseline[] = "baseline";

// summary.csv as read back: a sweep's has `cell`, `hash` and the swept keys before `method`.
struct Summary {
  CsvTable table;
  std::vector<std::string> swept;
  std::string path;
  bool sweep = false;
};

absl::StatusOr<Summary> ReadSummary(const std::string& dir) {
  Summary s;
  s.path = (fs::path(dir) / "summary.csv").string();
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(s.path));
  ASSIGN_OR_RETURN(s.table, ParseCsv(text, s.path));
  for (const char* column : {"method", "task", "temperature", "tokens_per_s", "speedup", "tau", "new_tokens",
                             "target_forwards", "prompts"})
    if (s.table.Column(column) < 0)
      return absl::InvalidArgumentError(
          absl::StrCat(s.path, ": no column '", column, "'; expected a summary.csv that speclab run --out wrote"));
  s.sweep = s.table.Column("cell") == 0 && s.table.Column("hash") == 1;
  if (s.sweep)
    for (int c = 2; c < s.table.Column("method"); ++c) s.swept.push_back(s.table.columns[c]);
  return s;
}

// A swept key's short name: what follows its last '.'.
std::string ShortName(const std::string& key) {
  const size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

absl::StatusOr<std::vector<std::string>> GroupColumns(const ReportFlags& flags, const Summary& s) {
  std::vector<std::string> names = flags.group_by;
  if (names.empty()) {
    names = s.swept;
    names.push_back("method");
    names.push_back("temperature");
  }
  std::vector<std::string> columns;
  for (const std::string& name : names) {
    std::vector<std::string> matches;
    for (const std::string& key : s.swept)
      if (key == name || ShortName(key) == name) matches.push_back(key);
    if (name == "method" || name == "task" || name == "temperature" || (name == "cell" && s.sweep))
      matches = {name};
    if (matches.size() != 1) {
      std::vector<std::string> known = {"method", "task", "temperature"};
      if (s.sweep) known.push_back("cell");
      for (const std::string& key : s.swept) known.push_back(key);
      return absl::InvalidArgumentError(absl::StrCat(
          "--group-by: '", name, "' ", matches.empty() ? "is not a column of " : "names several swept keys of ",
          s.path, "; expected one of: ", absl::StrJoin(known, ", ")));
    }
    if (std::find(columns.begin(), columns.end(), matches[0]) != columns.end())
      return absl::InvalidArgumentError(absl::StrCat("--group-by: '", name, "' given twice"));
    columns.push_back(matches[0]);
  }
  return columns;
}

double Number(const std::string& text) {
  double v;
  return absl::SimpleAtod(text, &v) ? v : NAN;
}

// A weighted mean that ignores missing values.
struct Mean {
  double sum = 0, weight = 0;
  void Add(double v, double w) {
    if (std::isnan(v)) return;
    sum += v * w;
    weight += w;
  }
  double Get() const { return weight > 0 ? sum / weight : NAN; }
};

struct Group {
  std::vector<std::string> key;  // the group columns' values
  std::string method;
  double prompts = 0, new_tokens = 0, forwards = 0, seconds = 0;
  Mean speedup, predicted, acceptance, greedy, overhead;
  double tokens_per_s() const { return seconds > 0 ? new_tokens / seconds : NAN; }
  double tau() const { return forwards > 0 ? new_tokens / forwards : NAN; }
};

// The index of `name` among the group columns, or -1.
int ColumnAt(const std::vector<std::string>& columns, const std::string& name) {
  const auto at = std::find(columns.begin(), columns.end(), name);
  return at == columns.end() ? -1 : static_cast<int>(at - columns.begin());
}

std::vector<Group> Pool(const Summary& s, const std::vector<std::string>& columns) {
  const CsvTable& t = s.table;
  const bool by_task = ColumnAt(columns, "task") >= 0;
  std::vector<int> at;
  for (const std::string& c : columns) at.push_back(t.Column(c));
  auto field = [&](const std::vector<std::string>& row, const char* name) {
    const int c = t.Column(name);
    return c < 0 ? NAN : Number(row[c]);
  };
  std::vector<Group> groups;
  std::map<std::vector<std::string>, size_t> index;
  for (const std::vector<std::string>& row : t.rows) {
    if (!by_task && row[t.Column("task")] != "all") continue;
    std::vector<std::string> key;
    for (int c : at) key.push_back(row[c]);
    auto [it, fresh] = index.emplace(key, groups.size());
    if (fresh) groups.push_back({.key = key, .method = row[t.Column("method")]});
    Group& g = groups[it->second];
    const double tokens = field(row, "new_tokens"), rate = field(row, "tokens_per_s");
    g.prompts += field(row, "prompts");
    g.new_tokens += tokens;
    g.forwards += field(row, "target_forwards");
    if (rate > 0) g.seconds += tokens / rate;
    if (g.method != row[t.Column("method")]) g.method.clear();  // pooled over methods
    g.speedup.Add(field(row, "speedup"), tokens);
    g.predicted.Add(field(row, "predicted_speedup"), tokens);
    g.acceptance.Add(field(row, "acceptance_rate"), tokens);
    g.greedy.Add(field(row, "greedy_match"), tokens);
    g.overhead.Add(field(row, "overhead_us_per_step"), field(row, "target_forwards"));
  }
  return groups;
}

std::string Header(const std::string& column) { return ShortName(column); }

std::string Cell(double v, const char* format) { return std::isnan(v) ? "" : absl::StrFormat(format, v); }

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

Table BuildTable(const std::vector<Group>& groups, const std::vector<std::string>& columns) {
  Table table;
  for (const std::string& c : columns) table.header.push_back(Header(c));
  for (const char* h : {"prompts", "tokens/s", "speedup", "predicted", "tau", "acceptance", "greedy match",
                        "overhead us/step"})
    table.header.push_back(h);
  for (const Group& g : groups) {
    std::vector<std::string> row = g.key;
    row.push_back(absl::StrFormat("%.0f", g.prompts));
    row.push_back(Cell(g.tokens_per_s(), "%.1f"));
    row.push_back(Cell(g.speedup.Get(), "%.2fx"));
    row.push_back(Cell(g.predicted.Get(), "%.2fx"));
    row.push_back(Cell(g.tau(), "%.2f"));
    row.push_back(Cell(g.acceptance.Get(), "%.3f"));
    row.push_back(Cell(g.greedy.Get() * 100, "%.0f%%"));
    row.push_back(Cell(g.overhead.Get(), "%.0f"));
    table.rows.push_back(std::move(row));
  }
  // Columns empty in every row (no predictions, the CPU's overhead) are left out.
  for (size_t c = table.header.size(); c-- > columns.size();) {
    if (!std::all_of(table.rows.begin(), table.rows.end(), [&](const auto& row) { return row[c].empty(); })) continue;
    table.header.erase(table.header.begin() + c);
    for (auto& row : table.rows) row.erase(row.begin() + c);
  }
  return table;
}

std::string Markdown(const Table& t) {
  std::string out = absl::StrCat("| ", absl::StrJoin(t.header, " | "), " |\n|");
  for (size_t i = 0; i < t.header.size(); ++i) absl::StrAppend(&out, "---|");
  absl::StrAppend(&out, "\n");
  for (const auto& row : t.rows) absl::StrAppend(&out, "| ", absl::StrJoin(row, " | "), " |\n");
  return out;
}

std::string Csv(const Table& t) {
  auto line = [](const std::vector<std::string>& fields) {
    std::vector<std::string> quoted;
    for (const std::string& f : fields) quoted.push_back(CsvField(f));
    return absl::StrCat(absl::StrJoin(quoted, ","), "\n");
  };
  std::string out = line(t.header);
  for (const auto& row : t.rows) absl::StrAppend(&out, line(row));
  return out;
}

std::string Html(const Table& t) {
  std::string out = "<table>\n<tr>";
  for (const std::string& h : t.header) absl::StrAppend(&out, "<th>", XmlEscape(h), "</th>");
  absl::StrAppend(&out, "</tr>\n");
  for (const auto& row : t.rows) {
    absl::StrAppend(&out, "<tr>");
    for (const std::string& f : row) absl::StrAppend(&out, "<td>", XmlEscape(f), "</td>");
    absl::StrAppend(&out, "</tr>\n");
  }
  return out + "</table>\n";
}

// A series' label: the group's values but those at `skip` ("T=" before a temperature).
std::string Label(const std::vector<std::string>& key, const std::vector<std::string>& columns, int skip = -1) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < key.size(); ++i) {
    if (static_cast<int>(i) == skip) continue;
    if (columns[i] == "temperature") {
      parts.push_back("T=" + key[i]);
    } else if (columns[i] == "method" || columns[i] == "task" || columns[i] == "cell") {
      parts.push_back(key[i]);
    } else {
      parts.push_back(absl::StrCat(ShortName(columns[i]), "=", key[i]));
    }
  }
  return parts.empty() ? "all" : absl::StrJoin(parts, ", ");
}

struct Plot {
  std::string file, title;
  Chart chart;
};

// The series of `chart` labelled `label`, appended where it is new.
ChartSeries& SeriesNamed(Chart& chart, const std::string& label) {
  for (ChartSeries& series : chart.series)
    if (series.label == label) return series;
  chart.series.push_back({.label = label});
  return chart.series.back();
}

// Drops the label parts ("key=value", split at ", ") that every series of
// `chart` shares: they say nothing there (a sweep over one method, say).
void ShortenLabels(Chart& chart) {
  if (chart.series.size() < 2) return;
  std::vector<std::vector<std::string>> parts;
  for (const ChartSeries& s : chart.series) parts.push_back(absl::StrSplit(s.label, ", "));
  for (size_t i = 0; i < chart.series.size(); ++i) {
    std::vector<std::string> kept;
    for (const std::string& part : parts[i]) {
      const bool shared = std::all_of(parts.begin(), parts.end(), [&](const std::vector<std::string>& other) {
        return std::find(other.begin(), other.end(), part) != other.end();
      });
      if (!shared) kept.push_back(part);
    }
    if (!kept.empty()) chart.series[i].label = absl::StrJoin(kept, ", ");
  }
}

// Tau and speedup against each numeric swept key; else speedup by group.
void SummaryPlots(const std::vector<Group>& groups, const std::vector<std::string>& columns,
                  const Summary& s, std::vector<Plot>& plots) {
  bool any_numeric = false;
  for (size_t k = 0; k < columns.size(); ++k) {
    if (std::find(s.swept.begin(), s.swept.end(), columns[k]) == s.swept.end()) continue;
    const bool numeric = std::all_of(groups.begin(), groups.end(),
                                     [&](const Group& g) { return std::isfinite(Number(g.key[k])); });
    if (!numeric) continue;
    any_numeric = true;
    for (const bool tau : {true, false}) {
      Chart chart{.kind = Chart::Kind::kLines,
                  .title = absl::StrCat(tau ? "tau" : "speedup", " against ", ShortName(columns[k])),
                  .x_label = ShortName(columns[k]),
                  .y_label = tau ? "tokens per target forward (tau)" : "speedup over autoregressive",
                  .y_reference = tau ? -1.0 : 1.0};
      for (const Group& g : groups) {
        if (g.method == kBaseline) continue;
        ChartSeries& series = SeriesNamed(chart, Label(g.key, columns, static_cast<int>(k)));
        series.x.push_back(Number(g.key[k]));
        series.y.push_back(tau ? g.tau() : g.speedup.Get());
      }
      for (ChartSeries& cs : chart.series) {  // in x order
        std::vector<size_t> order(cs.x.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cs.x[a] < cs.x[b]; });
        ChartSeries sorted{.label = cs.label};
        for (size_t i : order) sorted.x.push_back(cs.x[i]), sorted.y.push_back(cs.y[i]);
        cs = std::move(sorted);
      }
      plots.push_back({.file = absl::StrCat(tau ? "tau" : "speedup", "_by_", ShortName(columns[k]), ".svg"),
                       .title = chart.title,
                       .chart = std::move(chart)});
    }
  }
  if (!any_numeric) {
    const int t_at = ColumnAt(columns, "temperature");
    Chart chart{.kind = Chart::Kind::kBars, .title = "speedup over autoregressive", .x_label = "",
                .y_label = "speedup", .y_reference = 1.0};
    for (const Group& g : groups) {
      if (g.method == kBaseline) continue;
      const std::string category = Label(g.key, columns, t_at);
      auto at = std::find(chart.categories.begin(), chart.categories.end(), category);
      if (at == chart.categories.end()) at = chart.categories.insert(at, category);
      const size_t c = static_cast<size_t>(at - chart.categories.begin());
      std::vector<double>& y = SeriesNamed(chart, t_at < 0 ? "all" : "T=" + g.key[t_at]).y;
      if (y.size() <= c) y.resize(c + 1, NAN);
      y[c] = g.speedup.Get();
    }
    plots.push_back({.file = "speedup.svg", .title = chart.title, .chart = std::move(chart)});
  }
  Chart measured{.kind = Chart::Kind::kPoints, .title = "measured against predicted speedup",
                 .x_label = "predicted speedup (forwards priced at measured costs)", .y_label = "measured speedup",
                 .diagonal = true};
  for (const Group& g : groups) {
    if (g.method == kBaseline || std::isnan(g.predicted.Get())) continue;
    ChartSeries& series = SeriesNamed(measured, g.method.empty() ? "pooled" : g.method);
    series.x.push_back(g.predicted.Get());
    series.y.push_back(g.speedup.Get());
  }
  if (!measured.series.empty())
    plots.push_back({.file = "measured_vs_predicted.svg", .title = measured.title, .chart = std::move(measured)});
}

// Steps of every run folder, each with its group key.
struct KeyedSteps {
  std::vector<std::string> key;
  std::vector<const StepRecordRow*> steps;
};

// Acceptance by draft position and the drafted lengths' shares of `groups`
// (labels without column `skip`); files and titles end with `suffix`.
void StepCharts(const std::vector<const KeyedSteps*>& groups, const std::vector<std::string>& columns, int skip,
                const std::pair<std::string, std::string>& suffix, std::vector<Plot>& plots) {
  Chart acceptance{.kind = Chart::Kind::kLines, .title = "acceptance rate by draft position" + suffix.second,
                   .x_label = "draft position i", .y_label = "P(draft i accepted | drafts before it accepted)"};
  Chart lengths{.kind = Chart::Kind::kBars, .title = "drafted lengths (longest path a step)" + suffix.second,
                .x_label = "drafted length", .y_label = "share of steps"};
  int longest = 0;
  for (const KeyedSteps* g : groups)
    for (const StepRecordRow* step : g->steps) longest = std::max(longest, step->longest_path);
  for (int length = 0; length <= longest; ++length) lengths.categories.push_back(absl::StrCat(length));
  for (const KeyedSteps* g : groups) {
    ChartSeries a{.label = Label(g->key, columns, skip)}, l{.label = a.label};
    // Position i: of the steps that drafted i and had drafts 1..i-1 accepted, the share that accepted draft i.
    for (int i = 1; i <= longest; ++i) {
      double reached = 0, accepted = 0;
      for (const StepRecordRow* step : g->steps) {
        if (step->longest_path < i || step->accepted < i - 1) continue;
        ++reached;
        accepted += step->accepted >= i;
      }
      if (reached == 0) continue;
      a.x.push_back(i);
      a.y.push_back(accepted / reached);
    }
    l.y.assign(longest + 1, 0.0);
    std::set<int> distinct;
    for (const StepRecordRow* step : g->steps) {
      l.y[step->longest_path] += 1.0 / g->steps.size();
      distinct.insert(step->longest_path);
    }
    acceptance.series.push_back(std::move(a));
    if (distinct.size() > 1) lengths.series.push_back(std::move(l));  // a length that moves (an adaptive policy)
  }
  if (!acceptance.series.empty())
    plots.push_back({.file = absl::StrCat("acceptance_by_position", suffix.first, ".svg"), .title = acceptance.title,
                     .chart = std::move(acceptance)});
  if (!lengths.series.empty())
    plots.push_back({.file = absl::StrCat("drafted_lengths", suffix.first, ".svg"), .title = lengths.title,
                     .chart = std::move(lengths)});
}

absl::Status StepPlots(const ReportFlags& flags, const Summary& s, const std::vector<std::string>& columns,
                       std::vector<Plot>& plots, std::vector<StepRecordRow>& storage) {
  // Each run folder and its swept values.
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> runs;
  if (s.sweep) {
    std::set<std::string> seen;
    for (const auto& row : s.table.rows) {
      const std::string folder = absl::StrCat(row[0], "-", row[1].substr(0, 8));
      if (!seen.insert(folder).second) continue;
      std::map<std::string, std::string> values{{"cell", row[0]}};
      for (size_t k = 0; k < s.swept.size(); ++k) values[s.swept[k]] = row[2 + k];
      runs.push_back({(fs::path(flags.run_dir) / "cells" / folder).string(), values});
    }
  } else {
    runs.push_back({flags.run_dir, {}});
  }
  std::vector<std::pair<size_t, size_t>> spans;  // per run: [begin, end) in storage
  for (const auto& [folder, values] : runs) {
    const std::string path = (fs::path(folder) / "steps.pb").string();
    if (!fs::exists(path)) return absl::NotFoundError(absl::StrCat(path, ": missing; every run folder has one"));
    ASSIGN_OR_RETURN(std::vector<StepRecordRow> rows, ReadStepRecords(path));
    const size_t begin = storage.size();
    storage.insert(storage.end(), rows.begin(), rows.end());
    spans.push_back({begin, storage.size()});
  }
  std::vector<KeyedSteps> groups;
  std::map<std::vector<std::string>, size_t> index;
  for (size_t r = 0; r < runs.size(); ++r) {
    for (size_t i = spans[r].first; i < spans[r].second; ++i) {
      const StepRecordRow& step = storage[i];
      if (step.method == kBaseline) continue;
      std::vector<std::string> key;
      for (const std::string& c : columns) {
        if (c == "method") {
          key.push_back(step.method);
        } else if (c == "task") {
          key.push_back(step.task);
        } else if (c == "temperature") {
          key.push_back(absl::StrFormat("%g", step.temperature));
        } else {
          key.push_back(runs[r].second.at(c));
        }
      }
      auto [it, fresh] = index.emplace(key, groups.size());
      if (fresh) groups.push_back({.key = key});
      groups[it->second].steps.push_back(&step);
    }
  }
  // One chart a temperature where there are several (their lines differ most).
  const int t_at = ColumnAt(columns, "temperature");
  std::map<std::string, std::vector<const KeyedSteps*>> by_temperature;
  for (const KeyedSteps& g : groups) by_temperature[t_at < 0 ? "" : g.key[t_at]].push_back(&g);
  for (const auto& [temperature, members] : by_temperature) {
    const bool split = by_temperature.size() > 1;
    StepCharts(members, columns, split ? t_at : -1,
               split ? std::pair{absl::StrCat("_T", temperature), absl::StrCat(" (T=", temperature, ")")}
                     : std::pair{std::string(), std::string()},
               plots);
  }
  return absl::OkStatus();
}

std::string Page(const ReportFlags& flags, const std::vector<std::string>& columns, const Table& table,
                 const std::vector<Plot>& plots, const std::vector<std::string>& svgs) {
  std::vector<std::string> grouped;
  for (const std::string& c : columns) grouped.push_back(Header(c));
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>speclab report: ",
      XmlEscape(flags.run_dir),
      "</title>\n<style>\nbody { font-family: 'DejaVu Sans', Helvetica, Arial, sans-serif; margin: 24px; color: #222; "
      "max-width: 1100px; }\ntable { border-collapse: collapse; font-size: 13px; margin: 8px 0 24px; }\nth, td { "
      "border: 1px solid #ccc; padding: 4px 8px; text-align: right; }\nth { background: #f3f3f3; }\ntd:first-child, "
      "th:first-child { text-align: left; }\nfigure { margin: 0 0 24px; }\n</style>\n</head>\n<body>\n<h1>speclab "
      "report</h1>\n<p>Run folder <code>",
      XmlEscape(flags.run_dir), "</code>, rows grouped by ", XmlEscape(absl::StrJoin(grouped, ", ")),
      ". Tokens per second and tau pool the group's tokens, forwards and decode time; the other columns are "
      "weighted by new tokens.</p>\n<h2>Summary</h2>\n",
      Html(table), "<h2>Plots</h2>\n");
  for (size_t i = 0; i < plots.size(); ++i) absl::StrAppend(&html, "<figure>\n", svgs[i], "</figure>\n");
  return html + "</body>\n</html>\n";
}

}  // namespace

absl::StatusOr<ReportFlags> ParseReportFlags(const std::vector<std::string>& args) {
  ReportFlags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string value;
    const bool has_value = i + 1 < args.size();
    if ((a == "--group-by" || a == "--out") && !has_value)
      return absl::InvalidArgumentError(absl::StrCat(a, " needs a value"));
    if (a == "--group-by" || absl::StartsWith(a, "--group-by=")) {
      value = a == "--group-by" ? args[++i] : a.substr(11);
      for (absl::string_view part : absl::StrSplit(value, ',')) {
        if (part.empty()) return absl::InvalidArgumentError(absl::StrCat("--group-by: an empty key in '", value, "'"));
        flags.group_by.emplace_back(part);
      }
    } else if (a == "--out" || absl::StartsWith(a, "--out=")) {
      flags.out_dir = a == "--out" ? args[++i] : a.substr(6);
      if (flags.out_dir.empty()) return absl::InvalidArgumentError("--out needs a folder");
    } else if (absl::StartsWith(a, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("report: unexpected argument '", a,
                                                     "' (flags: --group-by KEYS, --out DIR)"));
    } else if (flags.run_dir.empty()) {
      flags.run_dir = a;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("report: one run folder, got '", flags.run_dir, "' and '", a, "'"));
    }
  }
  if (flags.run_dir.empty()) return absl::InvalidArgumentError("report needs a run folder (speclab run --out DIR)");
  if (flags.out_dir.empty()) flags.out_dir = (fs::path(flags.run_dir) / "report").string();
  return flags;
}

absl::StatusOr<std::vector<std::string>> WriteReport(const ReportFlags& flags) {
  ASSIGN_OR_RETURN(Summary summary, ReadSummary(flags.run_dir));
  ASSIGN_OR_RETURN(std::vector<std::string> columns, GroupColumns(flags, summary));
  const std::vector<Group> groups = Pool(summary, columns);
  if (groups.empty())
    return absl::InvalidArgumentError(absl::StrCat(summary.path, ": no rows of task 'all' (add task to --group-by)"));
  const Table table = BuildTable(groups, columns);
  std::vector<Plot> plots;
  SummaryPlots(groups, columns, summary, plots);
  std::vector<StepRecordRow> steps;
  RETURN_IF_ERROR(StepPlots(flags, summary, columns, plots, steps));

  std::error_code error;
  fs::create_directories(flags.out_dir, error);
  if (error) return absl::InternalError(absl::StrCat(flags.out_dir, ": cannot create (", error.message(), ")"));
  std::vector<std::string> written, svgs;
  auto write = [&](const std::string& name, const std::string& content) -> absl::Status {
    const std::string path = (fs::path(flags.out_dir) / name).string();
    RETURN_IF_ERROR(WriteFileAtomically(path, content));
    written.push_back(path);
    return absl::OkStatus();
  };
  for (Plot& plot : plots) {
    ShortenLabels(plot.chart);
    svgs.push_back(RenderSvg(plot.chart));
    RETURN_IF_ERROR(write(plot.file, svgs.back()));
  }
  std::string markdown = absl::StrCat("# speclab report: ", flags.run_dir, "\n\n", Markdown(table), "\n");
  for (const Plot& plot : plots) absl::StrAppend(&markdown, "![", plot.title, "](", plot.file, ")\n\n");
  RETURN_IF_ERROR(write("report.md", markdown));
  RETURN_IF_ERROR(write("report.csv", Csv(table)));
  RETURN_IF_ERROR(write("report.html", Page(flags, columns, table, plots, svgs)));
  return written;
}

}  // namespace speclab

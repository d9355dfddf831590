#include "experiments/summary.h"

#include <fstream>
#include <map>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"

namespace speclab {
namespace {

struct Totals {
  int prompts = 0, greedy_checked = 0, greedy_equal = 0;
  long tokens = 0, steps = 0, accepted = 0, drafted = 0, nodes = 0;
  double seconds = 0, draft = 0, verify = 0, other = 0;
  double predicted = 0;
  bool all_predicted = true;

  void Add(const RunRecord& r) {
    ++prompts;
    predicted += r.predicted_seconds;
    all_predicted = all_predicted && r.predicted_seconds >= 0;
    tokens += static_cast<long>(r.generation.tokens.size());
    seconds += r.generation.decode_seconds;
    if (r.greedy_match >= 0) {
      ++greedy_checked;
      greedy_equal += r.greedy_match;
    }
    for (const StepStats& s : r.generation.steps) {
      ++steps;
      accepted += s.accepted;
      drafted += s.longest_path;
      nodes += s.tree_nodes;
      draft += s.draft_seconds;
      verify += s.verify_seconds;
      other += s.other_seconds;
    }
  }
};

SummaryRow ToRow(const std::string& method, const std::string& task, double temperature, const Totals& t) {
  SummaryRow row{.method = method, .task = task, .temperature = temperature, .prompts = t.prompts};
  row.tokens_per_s = t.seconds > 0 ? t.tokens / t.seconds : 0;
  row.tau = t.steps > 0 ? 1.0 + static_cast<double>(t.accepted) / t.steps : 0;
  row.acceptance_rate = t.drafted > 0 ? static_cast<double>(t.accepted) / t.drafted : 0;
  row.accepted_per_node = t.nodes > 0 ? static_cast<double>(t.accepted) / t.nodes : 0;
  row.target_forwards = t.steps;
  row.new_tokens = t.tokens;
  const double phases = t.draft + t.verify + t.other;
  if (phases > 0) {
    row.draft_share = t.draft / phases;
    row.verify_share = t.verify / phases;
    row.other_share = t.other / phases;
  }
  if (t.greedy_checked > 0) row.greedy_match = static_cast<double>(t.greedy_equal) / t.greedy_checked;
  if (t.all_predicted && t.steps > 0) row.overhead_us_per_step = 1e6 * (t.seconds - t.predicted) / t.steps;
  return row;
}

// Tokens per second if every run took its predicted time; 0 if unknown.
double PredictedSpeed(const Totals& t) { return t.all_predicted && t.predicted > 0 ? t.tokens / t.predicted : 0; }

}  // namespace

std::vector<SummaryRow> Summarize(const std::vector<RunRecord>& records, const std::string& baseline) {
  // (temperature, task, method order) -> totals; methods keep their config order.
  std::vector<std::string> methods;
  std::vector<std::string> tasks;
  std::map<std::tuple<double, std::string, std::string>, Totals> totals;
  std::vector<double> temperatures;
  for (const RunRecord& r : records) {
    if (std::find(methods.begin(), methods.end(), r.method) == methods.end()) methods.push_back(r.method);
    if (std::find(tasks.begin(), tasks.end(), r.task) == tasks.end()) tasks.push_back(r.task);
    if (std::find(temperatures.begin(), temperatures.end(), r.temperature) == temperatures.end())
      temperatures.push_back(r.temperature);
    totals[{r.temperature, r.task, r.method}].Add(r);
    totals[{r.temperature, "all", r.method}].Add(r);
  }
  tasks.push_back("all");
  std::vector<SummaryRow> rows;
  for (double temperature : temperatures) {
    for (const std::string& task : tasks) {
      auto base = totals.find({temperature, task, baseline});
      const double base_speed =
          base == totals.end() ? 0 : ToRow(baseline, task, temperature, base->second).tokens_per_s;
      const double base_predicted = base == totals.end() ? 0 : PredictedSpeed(base->second);
      for (const std::string& method : methods) {
        auto it = totals.find({temperature, task, method});
        if (it == totals.end()) continue;
        SummaryRow row = ToRow(method, task, temperature, it->second);
        row.speedup = base_speed > 0 ? row.tokens_per_s / base_speed : 0;
        if (base_predicted > 0 && PredictedSpeed(it->second) > 0) {
          row.has_prediction = true;
          row.predicted_speedup = PredictedSpeed(it->second) / base_predicted;
        }
        rows.push_back(row);
      }
    }
  }
  return rows;
}

const char kCpuOverheadNote[] =
    "overhead us/step is not shown on the CPU: there the forwards priced back to back after the run and the same "
    "forwards inside it differ by more than the framework's own work per step (measured: -0.2 ms on a 4 ms step on "
    "an Intel Xeon, -1.4 ms on an AMD EPYC), so the difference would not be the framework's cost. On CUDA the costs "
    "are measured as decoding queues them, and the column is the framework's cost per step. The predicted speedup, "
    "a ratio of such prices, is shown; on the CPU it was seen up to 20% off the measured one.";

std::string MarkdownTables(const std::vector<SummaryRow>& rows) {
  std::string out;
  std::string current;
  for (const SummaryRow& r : rows) {
    const std::string key = absl::StrCat(r.task, "@", r.temperature);
    if (key != current) {
      current = key;
      absl::StrAppendFormat(&out,
                            "\n### task `%s`, temperature %g (%d prompts)\n\n"
                            "| method | tokens/s | speedup | predicted | overhead us/step | tau | acceptance | "
                            "draft %% | verify %% | other %% | greedy match |\n"
                            "|---|---|---|---|---|---|---|---|---|---|---|\n",
                            r.task, r.temperature, r.prompts);
    }
    const std::string match = r.greedy_match < 0 ? "-" : absl::StrFormat("%.0f%%", 100 * r.greedy_match);
    const std::string predicted = r.has_prediction ? absl::StrFormat("%.2fx", r.predicted_speedup) : "-";
    const std::string overhead =
        r.has_prediction && r.has_overhead ? absl::StrFormat("%.0f", r.overhead_us_per_step) : "-";
    absl::StrAppendFormat(&out, "| %s | %.1f | %.2fx | %s | %s | %.2f | %.3f | %.0f | %.0f | %.0f | %s |\n",
                          r.method, r.tokens_per_s, r.speedup, predicted, overhead, r.tau, r.acceptance_rate,
                          100 * r.draft_share, 100 * r.verify_share, 100 * r.other_share, match);
  }
  return out;
}

absl::Status WriteSummaryCsv(const std::string& path, const std::vector<SummaryRow>& rows) {
  std::ofstream out(path);
  if (!out) return absl::InternalError(absl::StrCat(path, ": cannot write"));
  out << "method,task,temperature,tokens_per_s,speedup,tau,acceptance_rate,target_forwards,new_tokens,"
         "prompts,accepted_per_node,draft_share,verify_share,other_share,greedy_match,predicted_speedup,"
         "overhead_us_per_step\n";
  for (const SummaryRow& r : rows) {
    out << absl::StrFormat("%s,%s,%g,%.3f,%.4f,%.4f,%.4f,%d,%d,%d,%.4f,%.4f,%.4f,%.4f,%s,%s,%s\n", r.method, r.task,
                           r.temperature, r.tokens_per_s, r.speedup, r.tau, r.acceptance_rate, r.target_forwards,
                           r.new_tokens, r.prompts, r.accepted_per_node, r.draft_share, r.verify_share,
                           r.other_share, r.greedy_match < 0 ? "" : absl::StrFormat("%.4f", r.greedy_match),
                           r.has_prediction ? absl::StrFormat("%.4f", r.predicted_speedup) : "",
                           r.has_prediction && r.has_overhead ? absl::StrFormat("%.1f", r.overhead_us_per_step) : "");
  }
  return out ? absl::OkStatus() : absl::InternalError(absl::StrCat(path, ": write failed"));
}

// What stepping on the host costs `method`, from its task-`all` rows: the
// measured time beyond its forwards per step at each temperature, or "" where
// not measured (the CPU).
namespace {

std::string StepCost(const std::string& method, const std::vector<SummaryRow>& rows) {
  std::vector<std::string> costs;
  for (const SummaryRow& r : rows)
    if (r.method == method && r.task == "all" && r.has_prediction && r.has_overhead)
      costs.push_back(absl::StrFormat("%.0f us at T=%g", r.overhead_us_per_step, r.temperature));
  return costs.empty() ? "" : absl::StrCat("; a step costs ", absl::StrJoin(costs, ", "), " beyond its forwards");
}

}  // namespace

std::string EngineForms(const std::vector<RunRecord>& records, const std::vector<SummaryRow>& rows,
                        const std::string& baseline) {
  std::map<std::string, std::map<std::string, int>> forms;
  std::vector<std::string> order;
  for (const RunRecord& r : records) {
    if (r.method == baseline) continue;
    if (!forms.count(r.method)) order.push_back(r.method);
    ++forms[r.method][r.generation.engine_form];
  }
  std::string out = order.empty() ? "" : "\nHow each method's steps ran:\n";
  bool pipelined = false;
  for (const std::string& method : order) {
    for (const auto& [form, count] : forms[method]) {
      absl::StrAppendFormat(&out, "- %s: %s (%d generations%s)\n", method, form, count,
                            absl::StartsWith(form, "step by step") ? StepCost(method, rows) : "");
      pipelined |= absl::StartsWith(form, "pipelined");
    }
  }
  if (pipelined)
    out += "(In pipelined steps, draft % is the host's time queuing the next step, verify % its wait for the "
           "device's verdict and other % reading it: a wait near 0% means the host, not the device, sets the pace.)\n";
  return out;
}

std::string DraftedLengths(const std::vector<RunRecord>& records, const std::string& baseline) {
  // (method, temperature) -> length -> steps, in the records' order.
  std::map<std::pair<std::string, double>, std::map<int, int64_t>> lengths;
  std::vector<std::pair<std::string, double>> order;
  for (const RunRecord& r : records) {
    if (r.method == baseline) continue;
    const std::pair<std::string, double> key{r.method, r.temperature};
    if (!lengths.count(key)) order.push_back(key);
    for (const StepStats& s : r.generation.steps) ++lengths[key][s.longest_path];
  }
  std::string out;
  for (const auto& key : order) {
    const std::map<int, int64_t>& counts = lengths[key];
    if (counts.size() < 2) continue;  // one length: nothing to show
    int64_t steps = 0, drafted = 0;
    for (const auto& [length, n] : counts) {
      steps += n;
      drafted += length * n;
    }
    std::vector<std::string> shares;
    for (const auto& [length, n] : counts)
      shares.push_back(absl::StrFormat("%d: %.0f%%", length, 100.0 * static_cast<double>(n) / steps));
    absl::StrAppendFormat(&out, "- %s, T=%g: %s (mean %.2f over %d steps)\n", key.first, key.second,
                          absl::StrJoin(shares, ", "), static_cast<double>(drafted) / steps, steps);
  }
  return out.empty() ? "" : absl::StrCat("\nDrafted lengths (the longest path a step):\n", out);
}

}  // namespace speclab

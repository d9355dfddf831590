// Summary: per (method, task, temperature) metrics of an experiment run,
// following docs/algorithms.md §6 (tau counts the extra token).
#ifndef SPECLAB_EXPERIMENTS_SUMMARY_H_
#define SPECLAB_EXPERIMENTS_SUMMARY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "framework/generation.h"

namespace speclab {

struct RunRecord {
  std::string method, task, prompt_id;
  double temperature = 0;
  Generation generation;
  int greedy_match = -1;  // at temperature 0 for lossless methods: 1 if tokens equal the baseline's
  // Its forwards priced at measured costs (experiments/forward_costs.h); -1 if unknown.
  double predicted_seconds = -1;
};

struct SummaryRow {
  std::string method, task;
  double temperature = 0;
  int prompts = 0;
  double tokens_per_s = 0;     // new tokens / decode time (prefill excluded)
  double speedup = 0;          // tokens_per_s / the baseline's, same task and temperature
  double tau = 0;              // tokens committed per target forward, extra token included
  double acceptance_rate = 0;  // accepted drafts / drafted tokens on the longest path
  double accepted_per_node = 0;  // accepted drafts / drafted tree nodes
  long target_forwards = 0;
  long new_tokens = 0;
  double draft_share = 0, verify_share = 0, other_share = 0;
  double greedy_match = -1;    // fraction of prompts equal to greedy output; -1 if not checked
  // From forwards priced at measured costs, when every run had them: the
  // speedup over the baseline they predict, and the measured time beyond them
  // per target forward (the framework's own cost of a step).
  bool has_prediction = false;
  double predicted_speedup = 0;
  double overhead_us_per_step = 0;
  // False where the overhead cannot be measured this way (on the CPU; see
  // kCpuOverheadNote): the table and summary.csv then leave it out.
  bool has_overhead = true;
};

// Why the CPU's tables have no overhead column, printed under them.
extern const char kCpuOverheadNote[];

// Rows for every method (the baseline included, named `baseline`), grouped by
// temperature, then task (plus an "all" task per temperature).
std::vector<SummaryRow> Summarize(const std::vector<RunRecord>& records, const std::string& baseline);

// One Markdown table per (task, temperature).
std::string MarkdownTables(const std::vector<SummaryRow>& rows);

// How each method's generations ran (Generation::engine_form), one line a
// method and form: pipelined, or step by step and why, with what a step costs
// beyond its forwards (the task-`all` rows' overhead, where measured).
std::string EngineForms(const std::vector<RunRecord>& records, const std::vector<SummaryRow>& rows,
                        const std::string& baseline);

// For methods whose draft length moves (an adaptive length policy): the share
// of steps that drafted each length (the longest path), per temperature,
// with the mean; "" when every method drafts one length.
std::string DraftedLengths(const std::vector<RunRecord>& records, const std::string& baseline);

absl::Status WriteSummaryCsv(const std::string& path, const std::vector<SummaryRow>& rows);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_SUMMARY_H_

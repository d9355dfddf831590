// `speclab report DIR`: tables and plots of a run or a sweep, read back from
// its --out folder (summary.csv, and steps.pb per run or per sweep cell).
//
//   speclab report results/gamma_sweep
//   speclab report results/gamma_sweep --group-by gamma,temperature --out results/gamma_report
//
// Rows are grouped by --group-by: any of the sweep's swept keys (their full
// path, or a unique last part of it: `gamma` for
// `methods[0].length_policy.gamma`), method, task, temperature and cell.
// Default: the swept keys, method and temperature, over the `all` task's rows
// (name `task` to see each task). Rows that share a group are pooled: tokens
// per second and tau from their summed tokens, forwards and decode time; the
// other columns weighted by new tokens (the overhead by target forwards).
//
// Writes into --out (default DIR/report): report.md and report.csv (the
// table), one SVG a plot, and report.html (the table and every plot in one
// self-contained page). The plots: tau and speedup against each numeric
// swept key (a draft length, a tree budget), or speedup by method where
// nothing numeric was swept; measured against predicted speedup; the
// acceptance rate at each draft position; and the drafted lengths' shares.
#ifndef SPECLAB_EXPERIMENTS_REPORT_H_
#define SPECLAB_EXPERIMENTS_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace speclab {

struct ReportFlags {
  std::string run_dir;
  std::vector<std::string> group_by;  // empty: the defaults above
  std::string out_dir;                // empty: run_dir/report
};

absl::StatusOr<ReportFlags> ParseReportFlags(const std::vector<std::string>& args);

// Writes the report; returns the files written.
absl::StatusOr<std::vector<std::string>> WriteReport(const ReportFlags& flags);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_REPORT_H_

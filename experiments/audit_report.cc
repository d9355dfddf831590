#include "experiments/audit_report.h"

#include "absl/strings/str_format.h"

namespace speclab {

std::string FormatAudit(const std::vector<AuditRow>& rows, bool tsv) {
  std::string out;
  if (!tsv)
    absl::StrAppendFormat(&out, "%-12s %-9s %-12s %-12s %-10s %-5s %s\n", "VERIFIER", "CLAIMED", "EXACT_TV",
                          "SAMPLED_TV", "BOUND", "RESULT", "NOTE");
  for (const AuditRow& r : rows) {
    const char* claimed = r.claimed_lossless ? "lossless" : "lossy";
    const char* result = r.pass ? "pass" : "fail";
    if (tsv) {
      absl::StrAppendFormat(&out, "%s\t%s\t%.3e\t%.3e\t%s\n", r.verifier, claimed, r.sampled_tv, r.bound, result);
    } else {
      absl::StrAppendFormat(&out, "%-12s %-9s %-12.3e %-12.3e %-10.3e %-5s %s\n", r.verifier, claimed, r.exact_tv,
                            r.sampled_tv, r.bound, result, r.note);
    }
  }
  return out;
}

}  // namespace speclab

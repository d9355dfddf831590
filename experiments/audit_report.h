// Formatting of `speclab audit` rows.
#ifndef SPECLAB_EXPERIMENTS_AUDIT_REPORT_H_
#define SPECLAB_EXPERIMENTS_AUDIT_REPORT_H_

#include <string>
#include <vector>

#include "experiments/audit.h"

namespace speclab {

// With `tsv`: "verifier<TAB>lossless|lossy<TAB>measured TV<TAB>bound<TAB>pass|fail" per row;
// else a readable table with the exact and sampled distances and notes.
std::string FormatAudit(const std::vector<AuditRow>& rows, bool tsv);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_AUDIT_REPORT_H_

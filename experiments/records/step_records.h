// Writing and reading per-step records as protobuf (experiments/proto/step_record.proto).
// Torch-free on purpose: torch's include folder carries old protobuf headers.
#ifndef SPECLAB_EXPERIMENTS_RECORDS_STEP_RECORDS_H_
#define SPECLAB_EXPERIMENTS_RECORDS_STEP_RECORDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace speclab {

struct StepRecordRow {
  std::string method, task, prompt_id;
  double temperature = 0;
  int step = 0, tree_nodes = 0, longest_path = 0, accepted = 0;
  double draft_seconds = 0, verify_seconds = 0, other_seconds = 0;
};

absl::Status WriteStepRecords(const std::string& path, const std::vector<StepRecordRow>& rows);
absl::StatusOr<std::vector<StepRecordRow>> ReadStepRecords(const std::string& path);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_RECORDS_STEP_RECORDS_H_

#include "experiments/records/step_records.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "experiments/proto/step_record.pb.h"

namespace speclab {

absl::Status WriteStepRecords(const std::string& path, const std::vector<StepRecordRow>& rows) {
  proto::StepRecords records;
  for (const StepRecordRow& row : rows) {
    proto::StepRecord* r = records.add_records();
    r->set_method(row.method);
    r->set_task(row.task);
    r->set_prompt_id(row.prompt_id);
    r->set_temperature(row.temperature);
    r->set_step(row.step);
    r->set_tree_nodes(row.tree_nodes);
    r->set_longest_path(row.longest_path);
    r->set_accepted(row.accepted);
    r->set_draft_seconds(row.draft_seconds);
    r->set_verify_seconds(row.verify_seconds);
    r->set_other_seconds(row.other_seconds);
  }
  std::ofstream out(path, std::ios::binary);
  if (!out || !records.SerializeToOstream(&out)) return absl::InternalError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StepRecordRow>> ReadStepRecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  proto::StepRecords records;
  if (!records.ParseFromIstream(&in)) return absl::DataLossError(absl::StrCat(path, ": not a StepRecords message"));
  std::vector<StepRecordRow> rows;
  for (const proto::StepRecord& r : records.records()) {
    rows.push_back({r.method(), r.task(), r.prompt_id(), r.temperature(), r.step(), r.tree_nodes(),
                    r.longest_path(), r.accepted(), r.draft_seconds(), r.verify_seconds(), r.other_seconds()});
  }
  return rows;
}

}  // namespace speclab

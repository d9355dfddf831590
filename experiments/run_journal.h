// RunJournal: the durable record of an experiment run in progress.
//
// `speclab run --out DIR` appends every finished unit of work (one prompt at
// one temperature: the baseline's and every method's generation) to
// DIR/journal.jsonl as one JSON line, flushed to the disk before the next unit
// starts. A run killed at any point, SIGKILL included, loses at most the unit
// it was decoding; `--resume` reads the finished units back and decodes only
// the rest, so the resumed run ends with the records an uninterrupted run
// would have (the same tokens, steps and acceptance; timings are as measured).
#ifndef SPECLAB_EXPERIMENTS_RUN_JOURNAL_H_
#define SPECLAB_EXPERIMENTS_RUN_JOURNAL_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "experiments/summary.h"

namespace speclab {

class RunJournal {
 public:
  static constexpr const char* kFileName = "journal.jsonl";

  // Opens DIR/journal.jsonl for appending. With `resume`, first reads the
  // units it holds; a torn last line (the kill came mid-write) is cut off.
  // Without, the journal starts empty.
  static absl::StatusOr<RunJournal> Open(const std::string& dir, bool resume);

  RunJournal(RunJournal&& other) noexcept;
  RunJournal& operator=(RunJournal&& other) noexcept;
  ~RunJournal();

  // The records of the unit (temperature, prompt id) if it was finished, or nullptr.
  const std::vector<RunRecord>* Finished(double temperature, const std::string& prompt_id) const;
  int finished_units() const { return static_cast<int>(units_.size()); }

  // Appends a finished unit and waits until it is on the disk.
  absl::Status Append(double temperature, const std::string& prompt_id, const std::vector<RunRecord>& records);

 private:
  RunJournal(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  std::string path_;
  int fd_ = -1;
  std::map<std::pair<double, std::string>, std::vector<RunRecord>> units_;
};

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_RUN_JOURNAL_H_

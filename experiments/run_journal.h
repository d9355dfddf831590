// RunJournal: the durable record of an experiment run in progress.
//
// `speclab run --out DIR` appends every finished generation (one method's, or
// the baseline's, on one prompt at one temperature) to DIR/journal.jsonl as
// one JSON line, flushed to the disk before the next generation starts. A run
// killed at any point, SIGKILL included, loses at most the generation it was
// decoding; `--resume` reads the finished ones back and decodes only the
// rest, so the resumed run ends with the records an uninterrupted run would
// have (the same tokens, steps and acceptance; timings are as measured).
// Drafters that learn across generations (suffix_tree's cache of earlier
// outputs) start a resumed run without what the killed one learned: their
// tokens are still exact, and at T = 0 the same, but at T > 0 another sample.
#ifndef SPECLAB_EXPERIMENTS_RUN_JOURNAL_H_
#define SPECLAB_EXPERIMENTS_RUN_JOURNAL_H_

#include <map>
#include <tuple>
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
  // generations it holds; a torn last line (the kill came mid-write) is cut off.
  // Without, the journal starts empty.
  static absl::StatusOr<RunJournal> Open(const std::string& dir, bool resume);

  RunJournal(RunJournal&& other) noexcept;
  RunJournal& operator=(RunJournal&& other) noexcept;
  ~RunJournal();

  // The record of `method`'s finished generation of (temperature, prompt id), or nullptr.
  const RunRecord* Find(double temperature, const std::string& prompt_id, const std::string& method) const;
  int finished_generations() const { return static_cast<int>(records_.size()); }

  // Appends a finished generation (its record names temperature, prompt and
  // method) and waits until it is on the disk.
  absl::Status Append(const RunRecord& record);

 private:
  RunJournal(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  std::string path_;
  int fd_ = -1;
  std::map<std::tuple<double, std::string, std::string>, RunRecord> records_;
};

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_RUN_JOURNAL_H_

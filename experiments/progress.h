// Progress of a long run on stderr, and a clean stop on Ctrl-C.
//
// On a terminal, one line rewritten in place; in a log (stderr not a
// terminal), a plain line per finished unit, so that `speclab run ... 2> run.log`
// reads well. Ctrl-C asks the run to stop after the unit it is decoding
// (its journal then holds every finished one; a second Ctrl-C kills).
#ifndef SPECLAB_EXPERIMENTS_PROGRESS_H_
#define SPECLAB_EXPERIMENTS_PROGRESS_H_

#include <chrono>
#include <string>

namespace speclab {

class Progress {
 public:
  // `total` units of work, described as `unit` ("prompts").
  Progress(int total, std::string unit);

  // `done` of the total are finished; `what` says what runs now.
  void Update(int done, const std::string& what);
  // Ends the in-place line.
  void Finish();

 private:
  int total_;
  std::string unit_;
  bool terminal_;
  int first_done_ = -1;  // units already done when timing began (a resumed run)
  int last_logged_ = -1;
  std::chrono::steady_clock::time_point start_;
};

// Ctrl-C (SIGINT) sets a flag the run checks between units (and a sweep
// between cells), then restores the default action. The flag stays set.
void StopOnInterrupt();
bool Interrupted();

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_PROGRESS_H_

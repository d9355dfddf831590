#include "experiments/progress.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace speclab {
namespace {

std::atomic<bool> interrupted{false};

void OnInterrupt(int) {
  interrupted.store(true);
  ::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

std::string Duration(double seconds) {
  if (seconds < 90) return absl::StrFormat("%.0f s", seconds);
  if (seconds < 5400) return absl::StrFormat("%.0f min", seconds / 60);
  return absl::StrFormat("%.1f h", seconds / 3600);
}

}  // namespace

Progress::Progress(int total, std::string unit)
    : total_(total), unit_(std::move(unit)), terminal_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

void Progress::Update(int done, const std::string& what) {
  if (first_done_ < 0) {
    first_done_ = done;
    start_ = std::chrono::steady_clock::now();
  }
  std::string line = absl::StrFormat("%d/%d %s", done, total_, unit_);
  const int timed = done - first_done_;
  if (timed > 0) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double per_unit = elapsed / timed;
    absl::StrAppendFormat(&line, ", %.2f s each, about %s left", per_unit, Duration(per_unit * (total_ - done)));
  }
  if (!what.empty()) absl::StrAppend(&line, " | ", what);
  if (terminal_) {
    std::fprintf(stderr, "\r\033[K  %s", line.c_str());
  } else if (done != last_logged_) {  // a log gets a line a unit, not one per method
    std::fprintf(stderr, "speclab: %s\n", line.c_str());
    last_logged_ = done;
  }
  std::fflush(stderr);
}

void Progress::Finish() {
  if (terminal_) std::fprintf(stderr, "\n");
}

void StopOnInterrupt() {
  // Once interrupted, stay so: a sweep's next cell must not forget a Ctrl-C
  // that came while it loaded.
  if (!interrupted.load()) ::signal(SIGINT, OnInterrupt);
}

bool Interrupted() { return interrupted.load(); }

}  // namespace speclab

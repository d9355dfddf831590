// The speclab CLI as a child process, for tests that kill a run part way.
#ifndef SPECLAB_TESTS_SUPPORT_CLI_PROCESS_H_
#define SPECLAB_TESTS_SUPPORT_CLI_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace speclab::testing {

// Starts the speclab binary built beside the test binary with `args`; its
// stdout and stderr go to the file `log`. It gets two compute threads
// (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS) unless the test's environment
// names its own.
pid_t StartCli(const std::vector<std::string>& args, const std::string& log);

// Waits for `pid`: its exit status, or minus the signal that ended it.
int WaitCli(pid_t pid);

// Polls `done` every 2 ms until it holds or `deadline` passes; its last answer.
bool WaitUntil(const std::function<bool()>& done, std::chrono::steady_clock::time_point deadline);

// The whole text of a file ("" if it cannot be read).
std::string FileText(const std::string& path);

}  // namespace speclab::testing

#endif  // SPECLAB_TESTS_SUPPORT_CLI_PROCESS_H_

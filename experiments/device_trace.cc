#include "experiments/device_trace.h"

#include <torch/version.h>

#include <exception>
#include <iostream>
#include <set>

#include "absl/strings/str_cat.h"
#include "framework/error_text.h"

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/autograd/profiler_kineto.h>
#endif

namespace speclab {

absl::Status TraceToFile(const std::string& path, bool cuda, const std::function<absl::Status()>& work) {
#if TORCH_VERSION_MAJOR >= 2
  namespace profiler = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
  std::set<ActivityType> activities{ActivityType::CPU};
  if (cuda) activities.insert(ActivityType::CUDA);
  try {
    profiler::prepareProfiler(config, activities);
    profiler::enableProfiler(config, activities);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("trace ", path, ": cannot start the profiler: ", ErrorText(e)));
  }
  absl::Status status = work();
  try {
    std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
    if (status.ok()) result->save(path);
  } catch (const std::exception& e) {
    if (status.ok()) return absl::InternalError(absl::StrCat("trace ", path, ": ", ErrorText(e)));
  }
  return status;
#else
  return absl::UnimplementedError(absl::StrCat("trace ", path, ": tracing needs LibTorch 2.x; this build has ",
                                               TORCH_VERSION));
#endif
}

absl::Status Traced(const std::string& path, const absl::StatusOr<Generation>& generation) {
  if (!generation.ok()) return generation.status();
  std::cerr << "speclab: traced " << path << ": " << generation->steps.size() << " steps, "
            << generation->tokens.size() << " tokens\n";
  return absl::OkStatus();
}

}  // namespace speclab

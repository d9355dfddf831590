// Kineto traces of decoding: host operators, CUDA runtime calls and device
// kernels on one timeline, saved as Chrome-trace JSON (chrome://tracing,
// Perfetto, scripts/trace_summary.py). They show where a step's time goes
// that forward costs do not explain: device idle gaps, the host work inside
// them, and the device's non-forward kernels.
#ifndef SPECLAB_EXPERIMENTS_DEVICE_TRACE_H_
#define SPECLAB_EXPERIMENTS_DEVICE_TRACE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/generation.h"

namespace speclab {

// Runs `work` under the profiler (CPU activity, plus CUDA when `cuda`) and
// writes the trace to `path`. Fails with Unimplemented on LibTorch 1.x, whose
// profiler API differs; the work's own error wins over the trace's.
absl::Status TraceToFile(const std::string& path, bool cuda, const std::function<absl::Status()>& work);

// For TraceToFile's work: reports a traced generation's steps and tokens on
// stderr (per-step figures need them) and passes its status on.
absl::Status Traced(const std::string& path, const absl::StatusOr<Generation>& generation);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_DEVICE_TRACE_H_

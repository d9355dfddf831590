// Forward costs: the measured time of one Forward() per token count, and the
// time they predict for a run from its forward counts.
//
// A speculative run's time is its forwards plus everything else (sampling,
// verification, KV commits, host-device waits). Pricing the forwards it made
// (Generation::target_forwards / draft_forwards) at measured costs gives the
// time an overhead-free engine would take; the measured time minus that is the
// framework's overhead, and the ratio of predicted times is the speedup the
// acceptance and the cost model promise (docs/algorithms.md §5.3). A
// drafter's own device work besides forwards (heads: DeviceDrafter::graphs())
// is priced beside them, per run of each work (DeviceGraphs::SecondsPerRun).
#ifndef SPECLAB_EXPERIMENTS_FORWARD_COSTS_H_
#define SPECLAB_EXPERIMENTS_FORWARD_COSTS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "framework/device/device_graphs.h"
#include "framework/model/language_model.h"

namespace speclab {

// Seconds per Forward() of n tokens (a causal chain) on top of a committed
// prefix of `context` tokens, for each n in `token_counts`: after a warm-up,
// `repeats` forwards queued back to back, timed on the device's own clock
// with the host ahead of it (framework/device/device_timer.h), so that the
// price is the device's work alone, as in a decode whose host is hidden; on
// an accelerator the median of five such windows. With `synchronize_each`,
// the host instead waits for every forward before launching the next, timed
// on its own clock: the difference is the launch and synchronisation latency
// a step pays when its next forward depends on a host decision.
// Leaves the model's cache empty.
absl::StatusOr<std::map<int64_t, double>> MeasureForwardCosts(LanguageModel& model,
                                                              const std::set<int64_t>& token_counts,
                                                              int64_t context, int repeats,
                                                              bool synchronize_each = false);

// Sum over token counts of count * cost; counts without a cost are an error.
absl::StatusOr<double> PredictSeconds(const std::map<int64_t, int64_t>& counts,
                                      const std::map<int64_t, double>& costs);

// The seconds of a drafter's captured-work runs (Generation::draft_graph_runs):
// each work priced once by graphs.SecondsPerRun(work, repeats) and kept in
// `prices`. NotFound for a work `graphs` never ran (a journaled run's, resumed).
absl::StatusOr<double> GraphRunSeconds(DeviceGraphs& graphs, const std::map<std::string, int64_t>& runs,
                                       int repeats, std::map<std::string, double>& prices);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_FORWARD_COSTS_H_

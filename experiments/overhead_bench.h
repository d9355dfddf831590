// `speclab bench-overhead`: the framework's own cost of a speculative step
// when the forwards are big enough to hide the host's work.
//
// The shipped pair is so small that a forward costs less than its launches,
// so its step time is mostly host work. This benchmark decodes with random
// weights of real shapes (by default a Llama-3.1-8B target and a Llama-3.2-1B
// drafter, same 128256-token vocabulary): chain speculative sampling with
// rejection verification (or --verifier's rule; --tree-builder's drafts in
// place of chains, e.g. a dynamic tree verified by point_mass; --drafter's
// model-free drafter, e.g. prompt lookup, in place of the drafter LM;
// --length-policy's stop in place of a fixed gamma: a stop that never fires
// prices the stop itself) at
// temperatures 0 and 1, step by step and pipelined
// (framework/device/pipelined_steps.h), plus the autoregressive baseline. Each run's
// forwards are priced at costs measured on the same models; the measured time
// beyond that, per step, is the overhead (sampling, verification, commits and
// whatever host work the device waits for). Pipelined steps queued back to
// back with nothing read back split the pipelined overhead into the device's
// own work beyond the forwards and the host time not hidden under it.
// Random weights make acceptance meaningless; the overhead does not depend on it.
#ifndef SPECLAB_EXPERIMENTS_OVERHEAD_BENCH_H_
#define SPECLAB_EXPERIMENTS_OVERHEAD_BENCH_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace speclab {

struct OverheadBenchFlags {
  std::string target_shape = "configs/shapes/llama-3.1-8b.json";
  std::string drafter_shape = "configs/shapes/llama-3.2-1b.json";
  int gamma = 4;
  int top_k = 0;  // 0: off; else drafts and samples from the top_k most probable tokens (khisti's support)
  bool batch_invariant = false;  // the target's batch-invariant numerics (models.batch_invariant)
  std::string verifier = "rejection";  // a rule with a device form (rejection, block, point_mass, greedy)
  std::string tree_builder;            // a YAML mapping; "": chains of gamma drafts
  std::string drafter;                 // a model-free drafter's YAML mapping (prompt_lookup); "": a drafter LM
  // A length policy's YAML mapping, with its device stop where it has one
  // (drafting up to --gamma at most); "": fixed gamma.
  std::string length_policy;
  int new_tokens = 128;
  int prompt_tokens = 64;
  int prompts = 3;
  std::string device = "auto";
  std::string out_dir;  // "": print only
  std::string trace_dir;  // non-empty: untimed Kineto traces of one generation each (device_trace.h)
};

// Parses the arguments after "bench-overhead"; unknown flags are errors.
absl::StatusOr<OverheadBenchFlags> ParseOverheadBenchFlags(const std::vector<std::string>& args);

absl::Status RunOverheadBench(const OverheadBenchFlags& flags);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_OVERHEAD_BENCH_H_

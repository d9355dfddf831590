// What a decoder is asked to do, and what it reports back.
#ifndef SPECLAB_FRAMEWORK_GENERATION_H_
#define SPECLAB_FRAMEWORK_GENERATION_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "framework/sampling.h"

namespace speclab {

struct DecodeOptions {
  SamplingParams sampling;
  int max_new_tokens = 64;
  int32_t eos_token = -1;     // stop after emitting it; -1: never
  uint64_t seed = 0;
  // On CUDA, synchronise at phase boundaries so that each phase's share of the
  // time is its own. Off by default: the extra waits stop the host from
  // running ahead of the device, and so slow decoding down.
  bool time_phases = false;
  // Verify chains with the verifier's device form when it has one
  // (framework/device/device_verifier.h); false: always the host rule.
  bool verify_on_device = true;
  // Chains, and trees shaped on the device, with a fixed length, a device
  // verifier and a drafter that drafts from a device-side root: queue each
  // step before reading the previous one back, so that the host's work hides
  // under the device's (framework/device/pipelined_steps.h). The same law and, where
  // the models' forwards round alike, the same tokens for the same seed.
  // False: always step by step.
  bool pipeline = true;
};

// One target forward (a speculative step, or one autoregressive token).
struct StepStats {
  int tree_nodes = 0;      // drafted nodes, root excluded
  int longest_path = 0;    // depth of the drafted tree
  int accepted = 0;        // accepted drafts; the step emitted accepted + 1 tokens
  // The host's time, by phase. Step by step: drafting; the target forward and
  // the verification rule; commits, drafter and policy updates and
  // bookkeeping. Pipelined (the host one step ahead): queuing the next step;
  // waiting for this step's verdict (near zero where the host, not the
  // device, sets the pace); reading the verdict and bookkeeping.
  double draft_seconds = 0;
  double verify_seconds = 0;
  double other_seconds = 0;
};

struct Generation {
  std::vector<int32_t> tokens;  // new tokens only (prefill excluded)
  std::vector<StepStats> steps;
  double prefill_seconds = 0;
  double decode_seconds = 0;    // everything after prefill
  // Model forwards after prefill, by token count (LanguageModel::forward_counts).
  std::map<int64_t, int64_t> target_forwards;
  std::map<int64_t, int64_t> draft_forwards;
  // The same per drafter model (Drafter::models()' order; summed above):
  // what prices a drafter of several models, each at its own costs.
  std::vector<std::map<int64_t, int64_t>> draft_forwards_by_model;
  // Runs of the drafter's own device work besides forwards (heads, picks:
  // DeviceDrafter::graphs()), by its key, to be priced as forwards are.
  std::map<std::string, int64_t> draft_graph_runs;
  // How the engine ran the steps: "autoregressive", "pipelined chain",
  // "pipelined tree", or "step by step: " and why not pipelined (the option
  // or the plugin that rules it out).
  std::string engine_form;
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_GENERATION_H_

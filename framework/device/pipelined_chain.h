// PipelinedChain: the device work of pipelined chain steps (pipelined_steps.h).
//
// The next root (the previous step's extra token), the token before it (its
// last accepted token) and both positions are computed on the device, and the
// models pick their graphs by the host's bound on the root position
// (DeviceModel::ForwardAt, DeviceDrafter::DraftChainAt). The engine
// (speculative_decoder.cc) runs one step ahead; benchmarks queue many back to
// back to time the device alone.
#ifndef SPECLAB_FRAMEWORK_DEVICE_PIPELINED_CHAIN_H_
#define SPECLAB_FRAMEWORK_DEVICE_PIPELINED_CHAIN_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/generation.h"
#include "framework/method.h"
#include "framework/device/pipelined_steps.h"
#include "framework/model/language_model.h"

namespace speclab {

class PipelinedChain final : public PipelinedSteps {
 public:
  // OK where a generation of a method ChooseEngineForm pipelines as chains
  // can be: a prompt of two tokens or more, and room in the target's cache
  // for one step queued past `max_new_tokens`; otherwise FailedPrecondition
  // saying what is missing. (The builder and drafter may still lack
  // device-rooted chains: Queue() says.)
  static absl::Status Check(const LanguageModel& target, const Method& method, absl::Span<const int32_t> prompt,
                            int max_new_tokens);

  // As PipelinedSteps'.
  PipelinedChain(DeviceModel& target, Method& method, const SamplingParams& sampling,
                 absl::Span<const int32_t> prompt, at::Generator& draft_generator, at::Generator& verify_generator);

  int gamma() const { return gamma_; }  // the most drafts a step (the policy's bound)
  const char* form() const override { return "pipelined chain"; }

  // The record, int64 [gamma + 5]: gamma (this step's drafts: the policy's
  // length, which may move, observed one step late), the root, the gamma
  // drafts, the number accepted, the extra token, and the drafts kept (gamma,
  // or where the length policy's device stop cut the chain: the verdict is
  // then cut there). nullopt, with nothing changed, where the
  // builder or drafter has no device-rooted chains.
  absl::StatusOr<std::optional<at::Tensor>> Queue(int64_t min_root, int64_t max_root) override;
  int64_t max_advance() const override { return gamma_ + 1; }
  absl::StatusOr<PipelinedRead> Read(const at::Tensor& host_record) const override;

 private:
  // A chain of `gamma` drafts as a tree of one path, for a forward with
  // riders: its depths and causal mask, and its drafts' nodes as the path
  // CompactPathAt keeps; made again only when the length moves.
  struct ChainAsTree {
    at::Tensor depths, mask, drafts;
  };
  const ChainAsTree& AsTree(int64_t gamma, const at::TensorOptions& longs);

  int gamma_;
  int64_t queued_ = 0;  // steps queued so far
  std::optional<ChainAsTree> as_tree_;
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_PIPELINED_CHAIN_H_

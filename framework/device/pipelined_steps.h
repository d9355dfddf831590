// PipelinedSteps: speculative steps queued on the device from the previous
// step's verdict while that verdict is still on the device.
//
// The next root, its position and whatever the drafter needs are computed on
// the device, and the models pick their graphs by the host's bounds on the
// root's position (DevicePosition). So the engine (speculative_decoder.cc)
// queues step k + 1 before it reads step k back, and the host's reading,
// bookkeeping and launches hide under the device's work, as in
// autoregressive decoding. Two kinds: chains (pipelined_chain.h) and trees
// whose shape the device chooses (pipelined_tree.h).
#ifndef SPECLAB_FRAMEWORK_DEVICE_PIPELINED_STEPS_H_
#define SPECLAB_FRAMEWORK_DEVICE_PIPELINED_STEPS_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/device/device_drafter.h"
#include "framework/device/device_model.h"
#include "framework/generation.h"
#include "framework/draft_tree.h"
#include "framework/method.h"
#include "framework/model/language_model.h"
#include "framework/sampling.h"

namespace speclab {

// The most tokens a pipelined step writes past its root (the target's
// largest static forward).
inline constexpr int64_t kMaxStepTokens = 128;

// What the host reads from a step's record.
struct PipelinedRead {
  std::vector<int32_t> emitted;  // the accepted drafts, then the extra token
  int tree_nodes = 0;            // drafted nodes, root excluded
  int longest_path = 0;          // depth of the drafted tree
};

class PipelinedSteps {
 public:
  virtual ~PipelinedSteps() = default;

  // Queues a step whose root position lies in [min_root, max_root] (the
  // host's bounds: the exact root of the oldest unread step plus at least 1
  // and at most max_advance()) and returns its record on the device. Never
  // waits for the device. nullopt, with nothing the step-by-step loop relies
  // on changed, where the builder or drafter cannot draft from a device root.
  virtual absl::StatusOr<std::optional<at::Tensor>> Queue(int64_t min_root, int64_t max_root) = 0;

  // The most positions one step moves the root (accepted drafts + 1); known
  // once a step is queued.
  virtual int64_t max_advance() const = 0;

  // Parses a record copied to the host (int64, contiguous).
  virtual absl::StatusOr<PipelinedRead> Read(const at::Tensor& host_record) const = 0;

  // "pipelined chain" or "pipelined tree", as runs report it.
  virtual const char* form() const = 0;

  // The prefill's target features (what Drafter::Reset got), for drafters
  // that read them: before the first Queue().
  void KeepPrefillFeatures(const TargetFeatures& prompt_features, int64_t prompt_length);

  // Why the last Queue() gave nullopt, in words ("" before any refusal).
  const std::string& refusal() const { return refusal_; }

 protected:
  // The target holds the prompt but its last token, and the drafter was Reset
  // with the prompt. The models, method and generators must outlive this.
  PipelinedSteps(DeviceModel& target, Method& method, const SamplingParams& sampling,
                 absl::Span<const int32_t> prompt, at::Generator& draft_generator, at::Generator& verify_generator);

  // The builder's draft of the next step (DeviceTreeBuilder::BuildAt), rooted at
  // last_two() whose root lies in [min_root, max_root], with context().
  // nullopt where the builder or drafter cannot draft from a device root.
  absl::StatusOr<std::optional<DraftTree>> DraftAt(int64_t min_root, int64_t max_root);
  // The drafter's riders for the step being queued (DeviceDrafter::RidersAt;
  // none where it has no device form).
  absl::StatusOr<DeviceRiders> RidersOfStep();
  // The target's forward of a tree (tokens [n], depths, mask: ForwardTreeAt's)
  // at `at` with `riders` after its nodes, which no node sees; the riders'
  // logits go to the drafter (DeviceDrafter::RidersScoredAt). Returns the
  // tree's logits [n, vocab].
  absl::StatusOr<at::Tensor> ForwardTreeWithRiders(const at::Tensor& tokens, const at::Tensor& depths,
                                                   const at::Tensor& mask, const DevicePosition& at,
                                                   const DeviceRiders& riders);
  // The next root's position for the target's forward.
  DevicePosition RootAt(int64_t min_root, int64_t max_root) const;
  // Moves on to the next step's root: the token before it and the root, and their positions ([2] int64 each).
  void AdvanceTo(at::Tensor last_two, at::Tensor positions);
  // Each verification forward's target features, for drafters that read
  // them (DeviceRoot::target): the forward's `rows` ([k] int64 on the
  // device; all of them where undefined), of which the first path_length
  // ([1] int64 on the device) are the accepted path's.
  absl::Status KeepPathFeatures(const at::Tensor& path_length, const at::Tensor& rows = at::Tensor());
  // Whether the drafter reads target features (KeepPathFeatures then keeps them).
  bool reads_target_features() const { return !features_request_.empty(); }
  // Records why Queue() gives nullopt (refusal()).
  void Refuse(std::string reason) { refusal_ = std::move(reason); }

  LanguageModel& target() const { return target_.model(); }
  DeviceModel& target_device() const { return target_; }
  Method& method() const { return method_; }
  const SamplingParams& sampling() const { return sampling_; }
  at::Generator& verify_generator() const { return verify_generator_; }
  const at::Tensor& last_two() const { return last_two_; }
  const at::Tensor& positions() const { return positions_; }
  // The generation's tokens by position (DeviceRoot::context): valid up to
  // the root; a step writes its accepted tokens and the next root.
  const at::Tensor& context() const { return context_; }

 private:
  DeviceModel& target_;
  Method& method_;
  SamplingParams sampling_;
  at::Generator& draft_generator_;
  at::Generator& verify_generator_;
  at::Tensor last_two_;   // [2] int64: the token before the next root, the root
  at::Tensor positions_;  // [2] int64: their positions
  at::Tensor context_;    // int64 [capacity + kMaxStepTokens]
  const TargetFeatureRequest features_request_;  // the drafter's
  TargetFeatures target_features_;
  at::Tensor path_length_;
  std::string refusal_;
};

// The parts of `method` that keep it off the device, in words naming each
// plugin: a tree builder or a verifier without a device form (for trees,
// where `trees`), a length policy that decides each step after the last.
// Empty where every part has one.
std::vector<std::string> PartsWithoutDeviceForms(const Method& method, bool trees);

// How a method's steps run: the one decision, made from the method, the
// target and the decoding options (experiments print it for every method
// when they load). A pipelined method may still step on the host for a
// generation whose prompt or cache cannot take a queued step; its
// Generation::engine_form then says why.
struct EngineForm {
  enum class Kind { kPipelinedChain, kPipelinedTree, kStepByStep };
  Kind kind = Kind::kStepByStep;
  std::string why_step_by_step;  // kStepByStep: the options or the parts (named) that keep it there

  bool pipelined() const { return kind != Kind::kStepByStep; }
  // "pipelined chain", "pipelined tree" or "step by step: WHY".
  std::string Describe() const;
};
EngineForm ChooseEngineForm(LanguageModel& target, const Method& method, const DecodeOptions& options);

// The pipelined form of `method` for a generation of `prompt`, where
// ChooseEngineForm picked one and the generation's checks pass
// (PipelinedChain::Check, PipelinedTree::Check); otherwise FailedPrecondition
// saying why. The target holds the prompt but its last token,
// and the drafter was Reset with the prompt and `prompt_features` (the
// prefill's target features, empty where it reads none); the models, method
// and generators must outlive it. A target without a device form
// (framework/device/device_model.h) runs step by step.
absl::StatusOr<std::unique_ptr<PipelinedSteps>> PipelinedForm(const EngineForm& form, LanguageModel& target,
                                                              Method& method, const SamplingParams& sampling,
                                                              absl::Span<const int32_t> prompt,
                                                              const TargetFeatures& prompt_features, int max_new_tokens,
                                                              at::Generator& draft_generator,
                                                              at::Generator& verify_generator);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_PIPELINED_STEPS_H_

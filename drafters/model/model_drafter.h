// ModelDrafter: an independent small LM that shares the target's vocabulary
// (docs/algorithms.md §4.1). It keeps its own KV cache in step with the
// committed context and feeds tree nodes as tentative slots, so a step costs
// one drafter forward per tree level and no recomputation after acceptance.
#ifndef SPECLAB_DRAFTERS_MODEL_MODEL_DRAFTER_H_
#define SPECLAB_DRAFTERS_MODEL_MODEL_DRAFTER_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "framework/device/device_drafter.h"
#include "framework/device/device_model.h"
#include "framework/drafter.h"
#include "framework/model/language_model.h"

namespace speclab {

// Maps a drafter with its own vocabulary onto the target's (EAGLE-3's d2t).
// `draft_to_target[d]` is the target id of drafter token d, or -1 when the
// target has no such token. The drafter's q is its softmax over the mapped
// tokens only, so q stays exactly the law the drafts are drawn from.
struct VocabularyMap {
  std::vector<int64_t> draft_to_target;
  int64_t target_vocab = 0;
  int64_t unknown_draft_token = 0;  // fed to the drafter for target tokens it lacks
};

// The Drafter interface, and its device form (framework/device/device_drafter.h).
class ModelDrafter final : public Drafter, public DeviceDrafter {
 public:
  explicit ModelDrafter(std::unique_ptr<LanguageModel> model, std::optional<VocabularyMap> vocab_map = std::nullopt);

  DrafterKind kind() const override { return DrafterKind::kDistributions; }
  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures& target) override;
  absl::Status BeginStep(absl::Span<const int32_t> context) override;
  absl::StatusOr<at::Tensor> NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                             const at::Tensor& node_tokens) override;
  int64_t hidden_size() const override;
  absl::StatusOr<at::Tensor> NodeHiddenStates(absl::Span<const int> nodes) override;
  // The model's ForwardChain (one CUDA graph for a LlamaModel on CUDA), after
  // one plain forward of any pending context; Unimplemented with a
  // vocabulary map (picks read target-vocabulary logits).
  absl::StatusOr<ChainResult> DraftChain(int length, const ChainPick& pick) override;
  // One forward of the level: the mask (context and root visible, the
  // given ancestors, itself) is built on the device.
  absl::StatusOr<LevelsKept> DraftLevels(int levels, const LevelPick& pick) override;
  // The model's ForwardChainAt with last_two as the first forward's prefix
  // (the token before the root is fed again: one fixed shape whether or not
  // the previous chain's last draft was accepted), or, where root.refeed > 0,
  // the refeed tokens before them from root.context too (a fixed prefix, as
  // DraftLevelsAt's; Unimplemented until the root's position is at least
  // refeed + 1). Unimplemented with a vocabulary map.
  absl::StatusOr<ChainResult> DraftChainAt(const DeviceRoot& root, int length, const ChainPick& pick) override;
  // DraftChainAt's prefix through the model's ForwardChainInRoundsAt.
  absl::StatusOr<ChainResult> DraftChainInRoundsAt(const DeviceRoot& root, int length, const ChainPick& pick,
                                                   const ChainGuess& guess) override;
  // The model's ForwardLevelsAt with DraftLevels' fixed prefix (levels + 2
  // tokens, the root last) gathered from root.context on the device.
  // Unimplemented until the root's position is at least levels + 1.
  absl::StatusOr<LevelsKept> DraftLevelsAt(const DeviceRoot& root, int levels, const LevelPick& pick) override;
  absl::Status EndStep(const TokenTree& tree, absl::Span<const int> accepted_path,
                       const TargetFeatures& target) override;
  std::vector<LanguageModel*> models() override { return {model_.get()}; }

  LanguageModel& model() { return *model_; }

 private:
  // Target token ids -> the ids the drafter is fed, and drafter logits -> target-vocabulary logits.
  int64_t ToDraftToken(int64_t target_token) const;
  at::Tensor ToTargetLogits(const at::Tensor& draft_logits) const;
  // `pick` over drafter logits, feeding drafter ids (itself without a map).
  absl::StatusOr<LevelPick> InDraftVocabulary(const LevelPick& pick) const;
  // The `before` tokens before last_two[0], then last_two, gathered from
  // root.context on the device (in the drafter's vocabulary), and where the
  // first of them stands; Unimplemented where the root may sit too early.
  struct FedPrefix {
    at::Tensor tokens;
    DevicePosition at;
  };
  absl::StatusOr<FedPrefix> PrefixFromContext(const DeviceRoot& root, int before);
  // A device-rooted chain: `forward` of the prefix (last_two, after
  // root.refeed tokens of the context), its tokens cut to the root and the
  // picks; `what` names the caller in errors.
  using ChainForward =
      absl::FunctionRef<absl::StatusOr<ChainResult>(const at::Tensor& prefix, const DevicePosition& at)>;
  absl::StatusOr<ChainResult> ChainAt(const DeviceRoot& root, int length, const char* what, ChainForward forward);
  // Feeds committed-context tokens as a causal chain of tentative slots.
  absl::Status FeedContext(absl::Span<const int32_t> tokens, int64_t first_position);

  std::unique_ptr<LanguageModel> model_;
  DeviceModel* device_model_;  // model_'s device form, or null (the Draft* paths are then Unimplemented)
  std::optional<VocabularyMap> vocab_map_;
  std::vector<int64_t> target_to_draft_;  // drafter id fed for each target id (its unknown if none)
  at::Tensor target_to_draft_device_;     // the same, on the drafter's device
  at::Tensor draft_to_target_device_;     // mapped drafter ids' target ids
  at::Tensor mapped_draft_ids_device_;    // drafter ids that have a target id
  std::vector<int32_t> cached_;        // tokens committed in the model's cache
  std::vector<int32_t> context_;       // this step's committed context (root last)
  std::vector<int32_t> pending_;       // context tokens not yet in the cache (root excluded)
  int64_t pending_slots_ = 0;          // pending tokens already fed as tentative slots
  std::vector<int64_t> node_slot_;     // tentative slot of each tree node, -1 if not fed
  std::vector<at::Tensor> node_logits_;  // logits row of each fed node
  struct HiddenRow {
    at::Tensor forward;  // the final hidden states of the forward that fed the node
    int64_t row = 0;     // the node's row there
  };
  std::vector<HiddenRow> node_hidden_;
  bool cache_on_device_only_ = false;     // after DraftChainAt: cached_ is unknown to the host
  at::Tensor prefix_offsets_;             // PrefixFromContext: -before .. 1, the prefix's positions from the root's less one
};

}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_MODEL_MODEL_DRAFTER_H_

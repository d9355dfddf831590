// AcceptanceHead: a small trained network that predicts, from the drafter's
// own distribution at a drafted position, the probability that the target
// accepts the token drafted there (given that the drafts before it were
// accepted). The `predicted_acceptance` (SpecDec++) and `disco` length
// policies stop drafting on its predictions; `speclab train` fits it
// (experiments/train_acceptance_head.h).
//
// Its input is the drafter's final hidden state there, or one of three
// feature sets of the drafter's log-probability row there (DraftProgress and
// DeviceDraftFacts carry either):
//   - kHidden: the hidden state itself (the final norm's output, which the
//     drafter's LM head reads): SpecDec++'s input.
//   - kSummary: the kSummaryTopK largest probabilities (zeros past the
//     vocabulary) and the entropy in nats.
//   - kSummaryIndex: the summary, then the draft's index in its chain (its
//     depth: 1 for the first draft of a step): DISCO's features of the
//     draft. A head reading it is trained on drafted continuations
//     (`acceptance_head.rollout`), where the index carries signal.
//   - kLogProbs: the row itself, clamped below at kLogProbFloor and divided
//     by -kLogProbFloor (entries in [-1, 0], for the training's sake), then
//     the summary: the hidden state's image under the LM head less its
//     log-normaliser, with the statistics a deeper head could compute for
//     itself; vocabulary-wide, so about fifty times the hidden state's width
//     on the shipped pair (kept as kHidden's ablation).
// The network: sigmoid(w2 . silu(x W1 + b1) + b2), in float64 so that the
// host rule and the device form decide alike.
#ifndef SPECLAB_ALGORITHMS_LENGTH_POLICIES_COMMON_ACCEPTANCE_HEAD_H_
#define SPECLAB_ALGORITHMS_LENGTH_POLICIES_COMMON_ACCEPTANCE_HEAD_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/core/length_policy.h"
#include "framework/core/options.h"
#include "framework/device/device_length_stop.h"

namespace speclab::acceptance_head {

enum class Features { kLogProbs = 0, kSummary = 1, kSummaryIndex = 2, kHidden = 3 };

constexpr int64_t kSummaryTopK = 10;
constexpr double kLogProbFloor = -30.0;

struct AcceptanceHead {
  Features features = Features::kLogProbs;
  int64_t vocab_size = 0;   // the drafter's vocabulary, whatever the features
  int64_t hidden_size = 0;  // kHidden: the drafter's hidden state width (else 0)
  // float64 on the CPU: w1 [F, H], b1 [H], w2 [H], b2 [1].
  at::Tensor w1, b1, w2, b2;
};

// "log_probs", "summary", "summary_index" or "hidden", as configs name them;
// errors list them.
absl::StatusOr<Features> ParseFeatures(const std::string& name);
const char* FeaturesName(Features features);

// F: the input width for a drafter of `vocab_size` tokens and hidden states
// `hidden_size` wide.
int64_t FeatureCount(Features features, int64_t vocab_size, int64_t hidden_size);
// The row a head of these features reads of each draft (kHidden: the
// drafter's hidden state, else its log-probabilities), and that row's width.
DraftRow RowOf(const AcceptanceHead& head);
int64_t RowWidth(const AcceptanceHead& head);

// True for the feature sets that read each row's draft index.
inline bool ReadsIndex(Features features) { return features == Features::kSummaryIndex; }

// rows [n, width] float32 (any device), each the row the features read
// (RowOf: log-probabilities [n, vocab], or hidden states [n, hidden_size]),
// and the rows' draft indices (depths [n], any number type there; read only
// where ReadsIndex) -> [n, F] float64 there.
at::Tensor FeaturesOf(Features features, const at::Tensor& rows, const at::Tensor& depths);
// A head whose network is `width` wide, initialised as a linear layer is
// (uniform in +-1/sqrt(fan_in)) from `seed`, b2 = `prior_logit`; for
// kHidden, on hidden states `hidden_size` wide.
AcceptanceHead NewHead(Features features, int64_t vocab_size, int64_t width, uint64_t seed, double prior_logit,
                       int64_t hidden_size = 0);

// The predicted acceptance of each row: [n] float64 on x's device, for x the
// rows' features (FeaturesOf) and w1..b2 of the head on that device.
at::Tensor PredictFromFeatures(const at::Tensor& x, const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                               const at::Tensor& b2);

// The loss `speclab train` fits a head with: binary cross-entropy of the
// predictions [n] against soft labels [n] (the acceptance probabilities),
// the reject class weighted by `reject_weight` (SpecDec++'s class weight,
// which its recipe sets to 6 to balance the rare rejections):
//   sum(w (1 - y) (-log(1 - p)) + y (-log p)) / sum(w (1 - y) + y),
// plain binary cross-entropy where w = 1. Predictions are clamped to [1e-6,
// 1 - 1e-6] first, so that a sure prediction costs a finite loss.
at::Tensor AcceptanceLoss(const at::Tensor& predicted, const at::Tensor& labels, double reject_weight);

// The head's weights on `device` (copied once per device), and its
// predictions for log-probability rows there.
class HeadOnDevice {
 public:
  explicit HeadOnDevice(AcceptanceHead head) : head_(std::move(head)) {}
  const AcceptanceHead& head() const { return head_; }
  // The facts of drafts 1..n of one chain in order (the row RowOf() names)
  // -> [n] float64 on their device. For the summary and hidden features on
  // CUDA, one launch for the rows (cuda/acceptance_head_kernel.h, networks up
  // to 64 wide), else ATen.
  at::Tensor Predict(const DeviceDraftFacts& facts) const;
  // One drafted token's progress (its row RowOf() names), the same arithmetic
  // on the CPU.
  double Predict(const DraftProgress& progress) const;

 private:
  // Rows (RowOf) at the given depths ([n] float64 on their device), through ATen.
  at::Tensor PredictAt(const at::Tensor& rows, const at::Tensor& depths) const;
  // The weights on `device` (copied there once).
  const AcceptanceHead& WeightsOn(c10::Device device) const;

  AcceptanceHead head_;
  mutable AcceptanceHead on_device_;  // the last device's copy
};

// The safetensors file speclab writes: w1, b1, w2, b2 (F32) and the I64
// scalars `features` (0 log_probs, 1 summary, 2 summary_index, 3 hidden),
// `vocab_size` and, for hidden, `hidden_size`. Errors name the file and the
// tensor
// (missing, wrong shape or dtype, an unknown feature set).
absl::StatusOr<AcceptanceHead> LoadAcceptanceHead(const std::string& path);
absl::Status SaveAcceptanceHead(const std::string& path, const AcceptanceHead& head);

// A policy's `head` option: the file (relative to the config), loaded, with
// one of the feature sets the policy reads; errors name the key and the file.
absl::StatusOr<AcceptanceHead> ReadHeadOption(Options& options, std::initializer_list<Features> accepted);

}  // namespace speclab::acceptance_head

#endif  // SPECLAB_ALGORITHMS_LENGTH_POLICIES_COMMON_ACCEPTANCE_HEAD_H_

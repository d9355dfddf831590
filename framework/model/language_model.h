// LanguageModel: what the decoding engine needs from a target or a drafter LM.
// Forwards whose tokens or positions only the device knows (chains, levels,
// device-positioned trees) are a model's device form beside it:
// framework/device/device_model.h.
//
// The KV cache holds `committed_length()` committed tokens followed by
// `tentative_length()` tentative slots: the nodes of the trees fed since the
// last commit, in the order they were fed. Forward() appends tentative slots;
// Commit() keeps some of them (KV compaction, no recomputation) and drops the
// rest; Truncate() rolls the committed prefix back.
#ifndef SPECLAB_FRAMEWORK_MODEL_LANGUAGE_MODEL_H_
#define SPECLAB_FRAMEWORK_MODEL_LANGUAGE_MODEL_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/model/model_config.h"

namespace speclab {

// Resolves a hidden-state index (LanguageModel::KeepHiddenStates) of a model
// with `num_layers` decoder layers to 0..num_layers; fails out of range.
absl::StatusOr<int> HiddenStateIndex(int layer, int64_t num_layers);

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;

  virtual const ModelConfig& config() const = 0;
  virtual c10::Device device() const = 0;
  virtual int64_t capacity() const = 0;  // KV slots, committed + tentative
  virtual int64_t committed_length() const = 0;
  virtual int64_t tentative_length() const = 0;

  // Feeds n new tokens as tentative slots.
  //   tokens:    [n] int64 on device()
  //   positions: [n] int64 absolute positions (committed_length() + depth for a tree)
  //   mask:      [n, tentative_length() + n] bool; true where the new token may
  //              attend to that tentative slot (itself included). The committed
  //              prefix is always visible. Undefined: a chain, each new token
  //              seeing every tentative slot and the new tokens before it (no
  //              mask to build or upload on the common path).
  // Returns logits [n, vocab] float32 on device(). Fails (never crashes) on
  // shape mismatches and when the cache would exceed capacity().
  virtual absl::StatusOr<at::Tensor> Forward(const at::Tensor& tokens, const at::Tensor& positions,
                                             const at::Tensor& mask) = 0;

  // Hidden states, named as transformers' `output_hidden_states` names them:
  // index 0 the embeddings, i in 1..L-1 the output of decoder layer i, L
  // (num_hidden_layers) the final norm's output, which the LM head reads; a
  // negative index counts from L + 1 (-1 is L). Forwards keep index L;
  // KeepHiddenStates() adds to what they keep (never removes).
  virtual absl::Status KeepHiddenStates(absl::Span<const int> layers) = 0;
  // A kept hidden state of every token of the last Forward(), ForwardAt() or
  // ForwardTreeAt(): [n, hidden] in the model's dtype on device(), valid until
  // the next forward of any kind (chains and levels keep none).
  virtual absl::StatusOr<at::Tensor> HiddenStates(int layer) const = 0;

  // Appends the listed tentative slots (strictly increasing, 0-based within the
  // tentative region) to the committed prefix, in order, and drops the others.
  virtual absl::Status Commit(absl::Span<const int64_t> tentative_slots) = 0;

  // Drops all tentative slots and keeps the first `length` committed tokens.
  virtual absl::Status Truncate(int64_t length) = 0;

  // Does the one-time work that forwards of up to `max_tokens` tokens need
  // (its device form's, framework/device/device_model.h), so that timed
  // decoding does not pay for it. Leaves the cache's contents as they were.
  virtual absl::Status PrepareForDecoding(int64_t max_tokens) { return absl::OkStatus(); }

  // Successful Forward() calls by token count since the last
  // ResetForwardCounts(). With forward costs measured per count, they predict
  // a run's time (experiments report it next to the measured time). Reads
  // back the counts only the device knows (one synchronisation, where any).
  std::map<int64_t, int64_t> forward_counts() const;
  void ResetForwardCounts();

 protected:
  void CountForward(int64_t tokens) { ++forward_counts_[tokens]; }
  // `count` forwards of `tokens` tokens, where only the device knows how many
  // ran ([1] int64 on the device: a chain's steps before its stop).
  void CountForwardsOnDevice(int64_t tokens, const at::Tensor& count);

 private:
  std::map<int64_t, int64_t> forward_counts_;
  std::map<int64_t, at::Tensor> device_counts_;  // [1] int64 each, summed on the device
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_LANGUAGE_MODEL_H_

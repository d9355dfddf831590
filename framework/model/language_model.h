// LanguageModel: what the decoding engine needs from a target or a drafter LM.
//
// The KV cache holds `committed_length()` committed tokens followed by
// `tentative_length()` tentative slots: the nodes of the trees fed since the
// last commit, in the order they were fed. Forward() appends tentative slots;
// Commit() keeps some of them (KV compaction, no recomputation) and drops the
// rest; Truncate() rolls the committed prefix back.
#ifndef SPECLAB_FRAMEWORK_MODEL_LANGUAGE_MODEL_H_
#define SPECLAB_FRAMEWORK_MODEL_LANGUAGE_MODEL_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/model/model_config.h"
#include "framework/model/pick_key.h"

namespace speclab {

// How ForwardChain() chooses each next token on the device from the logits
// of the token before it. Built with Of() from a function that captures
// nothing and its parameters; the key that captured graphs are cached under
// is derived from them (framework/model/pick_key.h), never written by hand.
class ChainPick {
 public:
  // (token [1] int64, row [1, vocab] float32 or undefined: what the caller
  // wants kept, e.g. the distribution the token was drawn from).
  using Result = std::pair<at::Tensor, at::Tensor>;

  // `function(params, logits [1, vocab] float32, noise [1, vocab] float32 or
  // undefined)`: device work only, depending on nothing but its arguments (no
  // host reads, no RNG). With a noise generator, before the chain runs the
  // model draws noise [steps, vocab] of i.i.d. Exp(1) values from it, and
  // step i's pick gets row i.
  template <typename Function, typename... Params>
  static ChainPick Of(Function function, std::tuple<Params...> params = {}, at::Generator* noise_generator = nullptr) {
    using Pointer = Result (*)(const std::tuple<Params...>&, const at::Tensor&, const at::Tensor&);
    static_assert(std::is_convertible_v<Function, Pointer>,
                  "a pick is a function of its declared parameters and arguments: it may capture nothing");
    const Pointer pointer = function;
    ChainPick pick;
    pick.key_ = absl::StrCat(PickFunctionKey(pointer), PickKeyParts(params), noise_generator ? "+noise" : "");
    pick.function_ = [pointer, params](const at::Tensor& logits, const at::Tensor& noise) {
      return pointer(params, logits, noise);
    };
    pick.noise_generator_ = noise_generator;
    return pick;
  }

  Result operator()(const at::Tensor& logits, const at::Tensor& noise) const { return function_(logits, noise); }
  const std::string& key() const { return key_; }
  at::Generator* noise_generator() const { return noise_generator_; }
  bool defined() const { return static_cast<bool>(function_); }

 private:
  std::string key_;
  std::function<Result(const at::Tensor& logits, const at::Tensor& noise)> function_;
  at::Generator* noise_generator_ = nullptr;
};

struct ChainResult {
  at::Tensor tokens;  // [steps + 1] int64: the first token, then each pick
  at::Tensor rows;    // [steps, vocab] float32: each pick's row (undefined when pick gives none)
};

// How ForwardLevels() grows a tree on the device, one level of `width`
// nodes at a time: from the logits of a level's nodes, the pick chooses the
// next level's nodes, each extending one node of that level (EAGLE-2's
// frontier). Built as ChainPick is; the width is part of the key.
class LevelPick {
 public:
  struct Choice {
    at::Tensor tokens;              // [width] int64: the next level's tokens
    at::Tensor parents;             // [width] int64: the node of this level each extends (0 at level 0)
    std::vector<at::Tensor> carry;  // handed to the next level's pick
    std::vector<at::Tensor> kept;   // returned to the caller, level by level
  };

  // `function(params, level, logits float32, carry)`: level 0 gets the last
  // prefix token's logits [1, vocab] and an empty carry, level l >= 1 the
  // logits of its width nodes [width, vocab] and level l - 1's carry. Device
  // work only, depending on nothing but its arguments: no host reads, no RNG.
  template <typename Function, typename... Params>
  static LevelPick Of(int64_t width, Function function, std::tuple<Params...> params = {}) {
    using Pointer = Choice (*)(const std::tuple<Params...>&, int64_t, const at::Tensor&, const std::vector<at::Tensor>&);
    static_assert(std::is_convertible_v<Function, Pointer>,
                  "a pick is a function of its declared parameters and arguments: it may capture nothing");
    const Pointer pointer = function;
    LevelPick pick;
    pick.key_ = absl::StrCat(PickFunctionKey(pointer), PickKeyParts(params), "x", width);
    pick.width_ = width;
    pick.function_ = [pointer, params](int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry) {
      return pointer(params, level, logits, carry);
    };
    return pick;
  }

  Choice operator()(int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry) const {
    return function_(level, logits, carry);
  }
  const std::string& key() const { return key_; }
  int64_t width() const { return width_; }  // nodes per level
  bool defined() const { return static_cast<bool>(function_); }

 private:
  std::string key_;
  int64_t width_ = 1;
  std::function<Choice(int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry)> function_;
};

// A pick among another pick's parameters is keyed by its own key.
inline std::string PickKeyPart(const ChainPick& pick) { return absl::StrCat("{", pick.key(), "}"); }
inline std::string PickKeyPart(const LevelPick& pick) { return absl::StrCat("{", pick.key(), "}"); }

// ForwardLevels' result: each level's Choice::kept, level 0 (the prefix's) first.
using LevelsKept = std::vector<std::vector<at::Tensor>>;

// Where a forward's tokens go when only the device knows it: decoding loops
// that queue a step before reading the previous one back (the engine's
// pipelined chains) keep the cache's length on the device.
struct DevicePosition {
  at::Tensor start;       // [1] int64 on the model's device: slot and position of the first token
  int64_t max_start = 0;  // what the host knows: min_start <= start <= max_start
  int64_t min_start = 0;
};

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

  // A chain of `steps` one-token forwards whose tokens the device chooses:
  // token 0 is `first` ([1] int64 on device()) at `position`, token i + 1 is
  // pick's choice from token i's logits, at position + i + 1. The last choice
  // is returned but not fed. Appends `steps` tentative slots and counts as
  // `steps` forwards of one token, exactly as the Forward() calls it stands
  // for. This default makes those calls; a model may run the whole chain
  // without the host in between (LlamaModel on CUDA: one CUDA graph).
  virtual absl::StatusOr<ChainResult> ForwardChain(const at::Tensor& first, int64_t position, int64_t steps,
                                                   const ChainPick& pick);

  // A causal chain of n tokens ([n] int64) at slots and positions start ..
  // start + n - 1, each attending to every slot below its own: the slots
  // below `start` hold whatever the caller last wrote there (a prefix it
  // tracks on the device; tentative slots count as written). Afterwards
  // tentative_length() is 0 and committed_length() is at least start + n but
  // may be more (the model need not know start): Truncate() to the true length
  // once the host knows it. Returns logits [n, vocab] float32. This default
  // reads `start` back (one synchronisation); LlamaModel does not.
  virtual absl::StatusOr<at::Tensor> ForwardAt(const at::Tensor& tokens, const DevicePosition& at);

  // ForwardChain at a device-side position, with the cache contract of
  // ForwardAt: the first forward feeds `prefix` ([c] int64, c >= 1) at
  // start .. start + c - 1 and pick chooses from its last row; steps - 1
  // one-token forwards follow. Returns tokens [c + steps] (the prefix, then
  // each pick) and pick's rows [steps, vocab].
  virtual absl::StatusOr<ChainResult> ForwardChainAt(const at::Tensor& prefix, const DevicePosition& at, int64_t steps,
                                                     const ChainPick& pick);

  // A draft tree at a device-side position, with the cache contract of
  // ForwardAt: node i of tokens ([n] int64, the root first) at slot start + i
  // and position start + depths[i] ([n] int64), seeing every slot below
  // `start` and the nodes mask ([n, n] bool) allows (its ancestors and
  // itself). Returns logits [n, vocab] float32. This default reads start
  // back; LlamaModel with static shapes does not.
  virtual absl::StatusOr<at::Tensor> ForwardTreeAt(const at::Tensor& tokens, const at::Tensor& depths,
                                                   const at::Tensor& mask, const DevicePosition& at);

  // After ForwardTreeAt at `at`: moves the cache entries of the accepted
  // nodes below the root (nodes, [m] int64: increasing, then zeros; a tree
  // walk's answer as it stands) from slot start + nodes[i] to slot start + 1
  // + i, so that the root and its accepted path become a causal context.
  // Slots past the path may receive other entries: they lie beyond the
  // context and are written again before anything sees them. This default
  // reads nodes and start back and commits the path; LlamaModel with static
  // shapes moves the entries on the device.
  virtual absl::Status CompactPathAt(const at::Tensor& nodes, const DevicePosition& at);

  // A tree grown level by level on the device after a causal prefix:
  // `prefix` ([c] int64, c >= 1) is fed at positions position .. position +
  // c - 1, each token seeing every tentative slot before it (as Forward()
  // without a mask), and level 1's nodes are pick's choice from the prefix's
  // last token; level l + 1 is pick's choice from level l's logits. Level l's
  // nodes sit at position + c - 1 + l and each sees the committed prefix, the
  // tentative slots written before it (the prefix included), its ancestors
  // among the levels and itself. pick also runs on the last level (its choice
  // is not fed). Appends c + levels * width tentative slots and counts as a
  // forward of c tokens and `levels` forwards of width tokens. This default
  // makes those Forward() calls; a model may run them without the host in
  // between (LlamaModel on CUDA: one CUDA graph).
  virtual absl::StatusOr<LevelsKept> ForwardLevels(const at::Tensor& prefix, int64_t position, int64_t levels,
                                                   const LevelPick& pick);
  // ForwardLevels at a device-side position, with the cache contract of
  // ForwardAt: the prefix at slots and positions start .. start + c - 1, the
  // levels in the slots after it. This default reads start back; LlamaModel
  // with static shapes does not.
  virtual absl::StatusOr<LevelsKept> ForwardLevelsAt(const at::Tensor& prefix, const DevicePosition& at,
                                                     int64_t levels, const LevelPick& pick);
  // The final hidden states (after the last norm) of the last Forward(): [n, hidden].
  virtual at::Tensor last_hidden_states() const = 0;

  // Appends the listed tentative slots (strictly increasing, 0-based within the
  // tentative region) to the committed prefix, in order, and drops the others.
  virtual absl::Status Commit(absl::Span<const int64_t> tentative_slots) = 0;

  // Drops all tentative slots and keeps the first `length` committed tokens.
  virtual absl::Status Truncate(int64_t length) = 0;

  // Does the one-time work for forwards of up to `max_tokens` tokens (CUDA
  // graph capture), so that timed decoding does not pay for it. Leaves the
  // cache's contents as they were.
  virtual absl::Status PrepareForDecoding(int64_t max_tokens) { return absl::OkStatus(); }

  // Successful Forward() calls by token count since the last
  // ResetForwardCounts(). With forward costs measured per count, they predict
  // a run's time (experiments report it next to the measured time).
  const std::map<int64_t, int64_t>& forward_counts() const { return forward_counts_; }
  void ResetForwardCounts() { forward_counts_.clear(); }

 protected:
  void CountForward(int64_t tokens) { ++forward_counts_[tokens]; }

 private:
  std::map<int64_t, int64_t> forward_counts_;
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_LANGUAGE_MODEL_H_

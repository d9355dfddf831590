// DeviceModel: a LanguageModel's device form, beside it.
//
// LanguageModel (framework/model/language_model.h) feeds tokens the host
// chose at positions the host knows. Decoding that never waits for the host
// needs forwards whose tokens the device picks (a drafter's whole chain, a
// tree's levels) and whose positions only the device knows (pipelined steps
// queue step k + 1 before reading step k back). A model implements them here
// (LlamaModel: each as one CUDA graph); the defaults make the plain
// Forward()/Commit() calls they stand for on model(), reading positions back,
// so that every form has the same meaning on every model.
#ifndef SPECLAB_FRAMEWORK_DEVICE_DEVICE_MODEL_H_
#define SPECLAB_FRAMEWORK_DEVICE_DEVICE_MODEL_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/core/length_policy.h"
#include "framework/model/language_model.h"
#include "framework/device/chain_guess.h"
#include "framework/device/pick_key.h"

namespace speclab {

class DeviceLengthStop;

// How ForwardChain() chooses each next token on the device from the logits
// of the token before it. Built with Of() from a function that captures
// nothing and its parameters; the key that captured graphs are cached under
// is derived from them (framework/device/pick_key.h), never written by hand.
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
    pick.function_ = [pointer, params](const at::Tensor& logits, const at::Tensor&, const at::Tensor& noise) {
      return pointer(params, logits, noise);
    };
    pick.noise_generator_ = noise_generator;
    return pick;
  }

  // Of() for picks that also read the model's final hidden state behind the
  // logits (the final norm's output, which its LM head reads): `function(
  // params, logits, hidden [1, hidden_size] float32, noise)`. Models whose
  // chains do not give it refuse such a pick (InvalidArgument).
  template <typename Function, typename... Params>
  static ChainPick OnHidden(Function function, std::tuple<Params...> params = {},
                            at::Generator* noise_generator = nullptr) {
    using Pointer = Result (*)(const std::tuple<Params...>&, const at::Tensor&, const at::Tensor&, const at::Tensor&);
    static_assert(std::is_convertible_v<Function, Pointer>,
                  "a pick is a function of its declared parameters and arguments: it may capture nothing");
    const Pointer pointer = function;
    ChainPick pick;
    pick.key_ = absl::StrCat(PickFunctionKey(pointer), PickKeyParts(params), noise_generator ? "+noise" : "",
                             "+hidden");
    pick.function_ = [pointer, params](const at::Tensor& logits, const at::Tensor& hidden, const at::Tensor& noise) {
      return pointer(params, logits, hidden, noise);
    };
    pick.noise_generator_ = noise_generator;
    pick.reads_hidden_ = true;
    return pick;
  }

  // This pick (one that gives rows), ending the chain at a length policy's
  // stop (framework/device/device_length_stop.h): after each pick, `stop`
  // reads the facts (DeviceDraftFacts' columns, with the row `layout.row`)
  // in the last layout.columns columns of the rows so far ([picks, width]),
  // and the chain keeps the picks up to the first stop (ChainResult::kept).
  // Where a model can, it skips the forwards past the stop (LlamaModel's
  // graph: conditional nodes); the tokens and rows there are then stale,
  // rows a copy of the first. `stop` must outlive the pick and the model's
  // graphs (the method owns both).
  struct FactsLayout {
    int64_t columns = 3;
    DraftRow row = DraftRow::kNone;
  };
  ChainPick StoppedBy(const DeviceLengthStop& stop, FactsLayout layout) const;
  bool stops() const { return stop_ != nullptr; }

  // This pick, declared row-wise: its function also takes logits [k, vocab]
  // (noise and hidden states [k, ...] alike) and gives tokens [k] and rows
  // [k, width], row i from row i alone, as k calls would. A chain in rounds
  // then picks a round's rows in one call (framework/device/chain_rounds.h).
  ChainPick RowWise() const;
  bool row_wise() const { return row_wise_; }

  // `hidden`: the hidden state behind `logits` ([1, hidden_size] float32),
  // for a pick that reads_hidden(); else ignored.
  Result operator()(const at::Tensor& logits, const at::Tensor& noise, const at::Tensor& hidden = at::Tensor()) const {
    return function_(logits, hidden, noise);
  }
  bool reads_hidden() const { return reads_hidden_; }
  const std::string& key() const { return key_; }
  at::Generator* noise_generator() const { return noise_generator_; }
  bool defined() const { return static_cast<bool>(function_); }

  // A chain's stop, as models keep it on the device: go [1] bool (drafting
  // goes on) and kept [1] int64 (picks so far, up to the stop).
  struct StopState {
    at::Tensor go, kept;
  };
  // The state before the first pick, on `device`.
  StopState StartStop(c10::Device device) const;
  // After a pick whose row is the last of `rows` ([picks so far, width]):
  // counts it where drafting went on, and stops where stop() says so. Sets
  // `next` (CudaGraph::NewCondition) to whether drafting goes on, in the
  // same launch: the next pick's CudaGraph::BeginIfSet.
  void ObserveStop(const at::Tensor& rows, StopState& state, std::optional<uint64_t> next = std::nullopt) const;

 private:
  std::string key_;
  std::function<Result(const at::Tensor& logits, const at::Tensor& hidden, const at::Tensor& noise)> function_;
  at::Generator* noise_generator_ = nullptr;
  bool reads_hidden_ = false;
  bool row_wise_ = false;
  const DeviceLengthStop* stop_ = nullptr;
  FactsLayout facts_;
};

struct ChainResult {
  at::Tensor tokens;  // [steps + 1] int64: the first token, then each pick
  at::Tensor rows;    // [steps, vocab] float32: each pick's row (undefined when pick gives none)
  // With a pick StoppedBy a stop: [1] int64, the picks kept (1 to steps);
  // past them tokens and rows may be stale. Else undefined.
  at::Tensor kept;
};

// How ForwardLevels() grows a tree on the device, one level of `width`
// nodes at a time: from the logits of a level's nodes, the pick chooses the
// next level's nodes, each extending one node of that level (EAGLE-2's
// frontier), or with Choice::depths any node fed so far (SpecExec's
// best-first growth). Built as ChainPick is; the width is part of the key.
class LevelPick {
 public:
  struct Choice {
    at::Tensor tokens;   // [width] int64: the next level's tokens
    at::Tensor parents;  // [width] int64: the node each extends (below)
    // Undefined: each node extends node parents[i] of this level (0 at
    // level 0) and sits one deeper than it. Defined ([width] int64, >= 1, at
    // every level or at none): parents[i] is any node fed so far, numbered in
    // feeding order (0 the root, 1 + (l - 1) * width + j node j of level l),
    // and depths[i] is node i's depth below the root (its parent's plus one).
    at::Tensor depths;
    std::vector<at::Tensor> carry;  // handed to the next level's pick
    std::vector<at::Tensor> kept;   // returned to the caller, level by level
    // Optional ([1] bool, at every level or at none): growth goes on. Once
    // false it must stay false. A pick that gives it gives `kept` at every
    // level, the same shapes each time: the draft as grown so far, which the
    // levels past the stop must leave as it is. A model may then skip those
    // levels, their forwards and their picks (LlamaModel's graph: conditional
    // nodes); every level's kept is returned as the draft when growth ended.
    at::Tensor go;
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
    pick.function_ = [pointer, params](int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry,
                                       const at::Tensor&) { return pointer(params, level, logits, carry); };
    return pick;
  }

  // Of() for picks that draw: `function(params, level, logits, carry,
  // noise)`, where before the levels run the model draws noise [levels + 1,
  // width, vocab] of i.i.d. Exp(1) values from `noise_generator` and level
  // l's pick gets noise[l] ([width, vocab], at level 0 too: k draws from the
  // root's one row may use k rows).
  template <typename Function, typename... Params>
  static LevelPick Sampled(int64_t width, Function function, std::tuple<Params...> params,
                           at::Generator* noise_generator) {
    using Pointer = Choice (*)(const std::tuple<Params...>&, int64_t, const at::Tensor&, const std::vector<at::Tensor>&,
                               const at::Tensor&);
    static_assert(std::is_convertible_v<Function, Pointer>,
                  "a pick is a function of its declared parameters and arguments: it may capture nothing");
    const Pointer pointer = function;
    LevelPick pick;
    pick.key_ = absl::StrCat(PickFunctionKey(pointer), PickKeyParts(params), "x", width, "+noise");
    pick.width_ = width;
    pick.function_ = [pointer, params](int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry,
                                       const at::Tensor& noise) { return pointer(params, level, logits, carry, noise); };
    pick.noise_generator_ = noise_generator;
    return pick;
  }

  // `noise`: level l's rows of the drawn noise; undefined without a noise generator.
  Choice operator()(int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry,
                    const at::Tensor& noise = at::Tensor()) const {
    return function_(level, logits, carry, noise);
  }
  const std::string& key() const { return key_; }
  int64_t width() const { return width_; }  // nodes per level
  bool defined() const { return static_cast<bool>(function_); }
  at::Generator* noise_generator() const { return noise_generator_; }

 private:
  std::string key_;
  int64_t width_ = 1;
  std::function<Choice(int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry,
                       const at::Tensor& noise)>
      function_;
  at::Generator* noise_generator_ = nullptr;
};

// The parents of the nodes `choice` gives for level `level` (>= 1) of a
// pick of `width`, numbered in feeding order as LevelFeed::parents: as given
// where the choice gives depths, else shifted past the levels before.
at::Tensor ParentsInFeedingOrder(const LevelPick::Choice& choice, int64_t level, int64_t width);

// The noise a LevelPick with a noise generator reads over `levels` levels:
// [levels + 1, width, vocab] float32 Exp(1) draws on `device`, freshly drawn;
// undefined for a pick without one.
at::Tensor LevelNoise(const LevelPick& pick, int64_t levels, int64_t vocab, c10::Device device);

// A chain drawn one pick at a time, with the host free to queue each step:
// `logits_after(i, token)` gives the logits [1, vocab] float32 after the
// chain's token i (token: [1] int64 on the device; i = 0 is `first`). The
// noise, rows and stop are ForwardChain's. The plain form of every
// ForwardChain, and of drafters' DraftChain where no graph serves them.
// `noise`, where given, is the noise the pick reads (ChainNoise(), drawn
// beforehand: work captured into a graph draws no random numbers);
// otherwise PickEach draws it.
// `hidden_now()`, where given, is the hidden state behind the logits
// logits_after just gave ([1, hidden_size], any float type), for picks that
// read it (ChainPick::OnHidden); PickEach refuses those without it.
using LogitsAfter = std::function<absl::StatusOr<at::Tensor>(int64_t i, const at::Tensor& token)>;
using HiddenNow = std::function<absl::StatusOr<at::Tensor>()>;
absl::StatusOr<ChainResult> PickEach(const at::Tensor& first, int64_t steps, int64_t vocab, const ChainPick& pick,
                                     const LogitsAfter& logits_after, const at::Tensor* noise = nullptr,
                                     const HiddenNow& hidden_now = nullptr);

// The noise a ChainPick with a noise generator reads over `steps` picks:
// [steps, vocab] float32 Exp(1) draws on `device`, freshly drawn; undefined
// for a pick without one.
at::Tensor ChainNoise(const ChainPick& pick, int64_t steps, int64_t vocab, c10::Device device);

// A pick among another pick's parameters is keyed by its own key.
inline std::string PickKeyPart(const ChainPick& pick) { return absl::StrCat("{", pick.key(), "}"); }
inline std::string PickKeyPart(const LevelPick& pick) { return absl::StrCat("{", pick.key(), "}"); }

// ForwardLevels' result: each level's Choice::kept, level 0 (the prefix's) first.
using LevelsKept = std::vector<std::vector<at::Tensor>>;

// ForwardLevels' growth after the root, for models and drafters that feed a
// level their own way: from the root's logits [1, vocab], `pick` chooses each
// level and `feed` runs it, giving its logits [width, vocab] float32. The
// first level's nodes see `tentative` slots written before them (besides the
// committed ones); each later node sees what its parent sees, and itself.
struct LevelFeed {
  at::Tensor tokens;   // [width] int64
  at::Tensor depths;   // [width] int64: below the root (>= 1)
  at::Tensor parents;  // [width] int64: in feeding order, 0 the root, 1 + (l - 1) * width + j node j of level l
  at::Tensor visible;  // [width, tentative + nodes fed so far + width] bool: the forward's mask
  int64_t level = 0;   // 1 for the first level fed
  // Known on the host: every node sits at depth `level` (picks without
  // free parents); otherwise depths are at most `level`.
  bool at_level_depth = true;
};
// `noise`, where given, is the pick's (LevelNoise(), drawn beforehand), as
// for PickEach.
using FeedLevel = std::function<absl::StatusOr<at::Tensor>(const LevelFeed& level)>;
absl::StatusOr<LevelsKept> GrowLevels(const at::Tensor& root_logits, int64_t tentative, int64_t levels,
                                      const LevelPick& pick, const FeedLevel& feed,
                                      const at::Tensor* noise = nullptr);

// Where a forward's tokens go when only the device knows it: decoding loops
// that queue a step before reading the previous one back (the engine's
// pipelined chains) keep the cache's length on the device.
struct DevicePosition {
  at::Tensor start;       // [1] int64 on the model's device: slot and position of the first token
  int64_t max_start = 0;  // what the host knows: min_start <= start <= max_start
  int64_t min_start = 0;
};

class DeviceModel {
 public:
  virtual ~DeviceModel() = default;

  // The model whose cache these forms read and write, and whose forwards they count.
  virtual LanguageModel& model() = 0;

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

  // ForwardChainAt drafted in rounds (staged speculation,
  // framework/device/chain_rounds.h): each round, `guess` guesses how the
  // chain goes on from `context` (int64, the generation by position, valid
  // below the prefix's position; read, not written) and the chain so far,
  // and one forward feeds the chain's last token and the guesses; the picks
  // go on through the guesses they match. The same tokens, rows and cache
  // contract as ForwardChainAt, pick i reading noise row i; fewer forwards
  // where the guesses hit, counted as they ran (a forward of prefix +
  // guesses tokens, then one of 1 + guesses tokens a round). The slots past
  // the chain may hold the guesses' entries: beyond the context, as
  // ForwardAt allows. Unimplemented for a pick that stops. This default
  // feeds each round through ForwardAt and reads the picks so far back before
  // each; LlamaModel with static shapes runs every round in one CUDA graph.
  virtual absl::StatusOr<ChainResult> ForwardChainInRoundsAt(const at::Tensor& prefix, const DevicePosition& at,
                                                             int64_t steps, const ChainPick& pick,
                                                             const ChainGuess& guess, const at::Tensor& context);

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
  // last token; level l + 1 is pick's choice from level l's logits. A node
  // sits at position + c - 1 + its depth (l at level l, unless
  // Choice::depths says otherwise) and sees the committed prefix, the
  // tentative slots written before the levels (the prefix included), its
  // ancestors among the levels and itself. pick also runs on the last level
  // (its choice is not fed). Appends c + levels * width tentative slots and
  // counts as a forward of c tokens and `levels` forwards of width tokens.
  // This default makes those Forward() calls; a model may run them without
  // the host in between (LlamaModel on CUDA: one CUDA graph).
  virtual absl::StatusOr<LevelsKept> ForwardLevels(const at::Tensor& prefix, int64_t position, int64_t levels,
                                                   const LevelPick& pick);
  // ForwardLevels at a device-side position, with the cache contract of
  // ForwardAt: the prefix at slots and positions start .. start + c - 1, the
  // levels in the slots after it. This default reads start back; LlamaModel
  // with static shapes does not.
  virtual absl::StatusOr<LevelsKept> ForwardLevelsAt(const at::Tensor& prefix, const DevicePosition& at,
                                                     int64_t levels, const LevelPick& pick);
};

// `model`'s device form where it has one (LlamaModel), else null.
DeviceModel* DeviceFormOf(LanguageModel& model);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_DEVICE_MODEL_H_

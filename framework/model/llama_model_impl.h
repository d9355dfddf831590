// LlamaModel's insides, shared by its sources (not part of the API):
//   llama_model.cc   construction, loading, saving, the public methods;
//   llama_forward.cc the decoder: layers, the eager forward, training, commit;
//   llama_static.cc  static-shape forwards: CUDA graphs, device-picked chains
//                    and levels, device-positioned forwards.
#ifndef SPECLAB_FRAMEWORK_MODEL_LLAMA_MODEL_IMPL_H_
#define SPECLAB_FRAMEWORK_MODEL_LLAMA_MODEL_IMPL_H_

#include <ATen/ATen.h>
#include <torch/version.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status_macros.h"
#include "framework/device/chain_rounds.h"
#include "framework/model/cuda_graph.h"
#include "framework/model/fused_ops.h"
#include "framework/model/llama_model.h"

namespace speclab {
namespace llama_internal {

inline std::string ShapeString(at::IntArrayRef sizes) { return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]"); }

// Runs `fn`, turning LibTorch exceptions into a Status so none escape the API.
template <typename Fn>
auto Guarded(const std::string& what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what()));
  }
}

// One decoder layer. q/k/v and gate/up live in fused tensors (one matmul each
// at inference); the HuggingFace-named parameters are views into them, so a
// trainer updating those views in place updates the fused weights too.
struct LayerWeights {
  at::Tensor qkv_weight;      // [(heads + 2 kv_heads) * head_dim, hidden]
  at::Tensor qkv_bias;        // [(heads + 2 kv_heads) * head_dim] or undefined
  at::Tensor gate_up_weight;  // [2 * intermediate, hidden]
  at::Tensor q_weight, k_weight, v_weight, q_bias, k_bias, v_bias;
  at::Tensor o_weight, o_bias;  // o_bias: Llama with attention_bias only (Qwen2 has none)
  at::Tensor gate_weight, up_weight, down_weight;
  at::Tensor input_norm, post_attention_norm;

  // False once a view was re-pointed (e.g. set_data by a trainer): then the
  // fused tensors are stale and the separate views must be used.
  bool FusedIntact() const {
    bool ok = q_weight.is_alias_of(qkv_weight) && k_weight.is_alias_of(qkv_weight) &&
              v_weight.is_alias_of(qkv_weight) && gate_weight.is_alias_of(gate_up_weight) &&
              up_weight.is_alias_of(gate_up_weight);
    if (qkv_bias.defined()) {
      ok = ok && q_bias.is_alias_of(qkv_bias) && k_bias.is_alias_of(qkv_bias) && v_bias.is_alias_of(qkv_bias);
    }
    return ok;
  }
};

inline at::Tensor RotateHalf(const at::Tensor& x) {
  const auto halves = x.chunk(2, -1);
  return at::cat({-halves[1], halves[0]}, -1);
}

// x: [..., tokens, heads, head_dim]; cos/sin: [tokens, head_dim].
inline at::Tensor ApplyRope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return x * cos.unsqueeze(-2) + RotateHalf(x) * sin.unsqueeze(-2);
}

// inv_freq as transformers computes it (float32 arithmetic, same op order):
// _compute_default_rope_parameters, then the llama3 or linear adjustment.
inline at::Tensor ComputeInvFreq(const ModelConfig& c) {
  const int64_t dim = c.head_dim;
  const at::Tensor exponent = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / static_cast<double>(dim);
  at::Tensor inv_freq = at::reciprocal(at::pow(c.rope_theta, exponent));
  const RopeScaling& s = c.rope_scaling;
  if (s.type == "linear") return inv_freq / s.factor;
  if (s.type != "llama3") return inv_freq;
  const double old_context = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / s.low_freq_factor;
  const double high_freq_wavelen = old_context / s.high_freq_factor;
  const at::Tensor wavelen = at::reciprocal(inv_freq) * (2 * M_PI);
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  const at::Tensor smooth =
      (at::reciprocal(wavelen) * old_context - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  const at::Tensor smoothed = at::rsub(smooth, 1.0) * scaled / s.factor + smooth * scaled;
  const at::Tensor medium = (wavelen < high_freq_wavelen).logical_not() & (wavelen > low_freq_wavelen).logical_not();
  return at::where(medium, smoothed, scaled);
}

// The attention pattern of one forward, in the two forms the kernels want.
struct AttentionMask {
  at::Tensor allowed;  // [n, S] bool: query token may attend to key slot
  at::Tensor blocked;  // logical_not(allowed), for the matmul-softmax path
  at::Tensor grouped;  // allowed repeated per query head of a group: [g * n, S] (SDPA path)
};

inline AttentionMask MakeAttentionMask(const at::Tensor& allowed, int64_t group, bool use_sdpa) {
  AttentionMask m;
  m.allowed = allowed;
  if (use_sdpa) {
    m.grouped = group > 1 ? allowed.repeat({group, 1}) : allowed;
  } else {
    m.blocked = allowed.logical_not();
  }
  return m;
}

inline bool UseSdpa(const c10::Device& device) {
#if TORCH_VERSION_MAJOR >= 2
  return device.is_cuda();
#else
  (void)device;
  return false;
#endif
}

struct ForwardContext {
  at::Tensor cos, sin;  // [n, head_dim]
  AttentionMask mask;
  bool fused = false;
  // With the cache: where the new K/V go. Either the n slots from `start`, or
  // (static shapes) the slots listed in `write_slots`. Attention covers slots
  // [0, kv_length).
  int64_t start = 0;
  at::Tensor write_slots;
  int64_t kv_length = 0;
  // [n, hidden]: the first layer's input in place of the tokens' embeddings
  // (LlamaModel::ForwardEmbedded).
  at::Tensor inputs;
};

// Static shapes for CUDA graphs: token counts round up to a power of two (up
// to kMaxTokenBucket; larger forwards such as a long prefill run eagerly) and
// the attended KV length to a power of two of at least kMinKvBucket (or the
// whole cache), so a model needs few graphs and reads at most twice the KV
// slots it uses. Padding rows write K/V
// just past the real ones, which is why the cache has kMaxTokenBucket spare
// slots; nothing reads those slots before a real token overwrites them.
constexpr int64_t kMaxTokenBucket = 128;
constexpr int64_t kMinKvBucket = 256;

inline int64_t TokenBucket(int64_t n) {
  int64_t bucket = 1;
  while (bucket < n) bucket *= 2;
  return bucket;
}

// Longest chain ForwardChain runs as one graph, and the longest prefix its
// first forward may feed (ForwardChainAt).
constexpr int64_t kMaxChainSteps = 32;
constexpr int64_t kMaxChainPrefix = 4;

inline int64_t KvBucket(int64_t slots, int64_t cache_slots) {
  return std::min(std::max(TokenBucket(slots), kMinKvBucket), cache_slots);
}

// The entry of `graphs` for key(kv_length), made on first use: on CUDA for
// every KV length bucket that holds `fed` slots at once (so that later calls
// never capture), elsewhere for kv_length alone (the bodies run eagerly).
// make(length) -> StatusOr<Captured>.
template <typename Captured, typename Key, typename Make>
absl::StatusOr<Captured*> EveryKvBucket(std::map<Key, Captured>& graphs, const std::function<Key(int64_t)>& key,
                                        int64_t kv_length, int64_t fed, bool on_cuda, int64_t cache_slots,
                                        const Make& make) {
  if (auto it = graphs.find(key(kv_length)); it != graphs.end()) return &it->second;
  if (!on_cuda) {
    ASSIGN_OR_RETURN(Captured captured, make(kv_length));
    return &graphs.emplace(key(kv_length), std::move(captured)).first->second;
  }
  for (int64_t length = KvBucket(1, cache_slots);; length = KvBucket(2 * length, cache_slots)) {
    if (length >= fed && !graphs.count(key(length))) {
      ASSIGN_OR_RETURN(Captured captured, make(length));
      graphs.emplace(key(length), std::move(captured));
    }
    if (length == cache_slots) break;
  }
  auto it = graphs.find(key(kv_length));
  if (it == graphs.end()) return absl::InternalError(absl::StrCat("LlamaModel: no graph for KV length ", kv_length));
  return &it->second;
}

}  // namespace llama_internal

using namespace llama_internal;  // NOLINT: the sources of one class

struct LlamaModel::Impl {
  ModelConfig config;
  c10::Device device = c10::kCPU;
  at::ScalarType dtype = at::kFloat;
  int64_t group = 1;  // query heads per KV head

  at::Tensor embed;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  at::Tensor final_norm;
  at::Tensor lm_head;  // the embedding itself when tied

  at::Tensor inv_freq;            // [head_dim / 2] float32 on device
  at::Tensor rope_cos, rope_sin;  // [capacity, head_dim] in dtype: the table for positions < capacity

  int64_t capacity = 0;
  int64_t cache_slots = 0;      // capacity + kMaxTokenBucket spare slots for padding rows
  at::Tensor k_cache, v_cache;  // [layers, kv_heads, cache_slots, head_dim]
  at::Tensor slot_positions;    // [capacity] int64, kept only for sliding-window attention
  int64_t committed = 0;
  int64_t tentative = 0;
  // transformers' output_hidden_states indices the forwards keep, increasing,
  // ending with num_hidden_layers (the final norm's output).
  std::vector<int> kept_layers;
  at::Tensor last_hidden;  // [kept_layers, n, hidden] of the last Forward / ForwardAt / ForwardTreeAt

  // Static-shape forwards (CUDA graphs on CUDA; run eagerly on the CPU, where
  // tests check them against the plain forward).
  bool static_shapes = false;
  bool batch_invariant = false;  // LlamaModel::SetBatchInvariant
  struct StaticInputs {
    at::Tensor tokens, positions, write_slots;  // [kMaxTokenBucket] int64
    at::Tensor allowed;                         // [kMaxTokenBucket, cache_slots] bool
    at::Tensor columns;                         // [cache_slots] int64: 0, 1, 2, ...
  } static_in;
  struct CapturedForward {
    std::unique_ptr<CudaGraph> graph;
    at::Tensor logits, hidden;  // outputs, [bucket, vocab] and [kept_layers, bucket, hidden]
  };
  std::map<std::pair<int64_t, int64_t>, CapturedForward> graphs;  // by (token bucket, KV length)
  // Chains of device-picked tokens (ForwardChain): the first token and each
  // pick, the cache slot of the first token and its position.
  struct ChainInputs {
    at::Tensor tokens;           // [kMaxChainPrefix + kMaxChainSteps + kMaxGuessesPerRound + 1] int64
    at::Tensor start, position;  // [1] int64
    // Chains in rounds (ForwardChainInRoundsAt): the generation by position,
    // [cache_slots + kMaxChainPrefix + kMaxChainSteps + kMaxGuessesPerRound + 2] int64.
    at::Tensor sequence;
  } chain_in;
  struct CapturedChain {
    std::unique_ptr<CudaGraph> graph;  // null on the CPU: the body runs eagerly
    at::Tensor noise;                  // [steps, vocab] float32, refilled before each run; undefined without noise
    at::Tensor rows;                   // output: [steps, vocab] (or undefined)
    at::Tensor kept;                   // output with a stop: [1] int64 (ChainResult::kept)
    bool conditional = false;          // the steps past a stop are skipped (ChainBody)
    at::Tensor later_rounds;           // output of a chain in rounds: [1] int64 (ChainRounds::later_rounds)
  };
  // By (steps, prefix length, KV length, pick key).
  std::map<std::tuple<int64_t, int64_t, int64_t, std::string>, CapturedChain> chain_graphs;
  // Whether the last chain run skipped the steps past its stop (so that only
  // the device knows how many forwards ran).
  bool last_chain_skips = false;
  // The rounds after the first of the last chain in rounds ([1] int64 on the device).
  at::Tensor last_later_rounds;
  // The levels the last levels' run fed, where it skipped those past its
  // stop ([1] int64 on the device); else undefined.
  at::Tensor last_levels_fed;
  // Growths on features (ForwardChainOnFeatures, ForwardLevelsOnFeatures),
  // which use chain_in's or levels_in's start and position: the root's
  // readout, and every fed node's feature (the root's first).
  struct FeatureBuffers {
    at::Tensor logits;    // [1, vocab] float32
    at::Tensor features;  // [1 + kMaxTokenBucket, hidden] in dtype
    // A path fed before the growth (FeaturePathAt): its tokens and features
    // (up to kMaxTokenBucket rows), length, first slot and position.
    at::Tensor path_tokens, path_features, path_length, path_slot, path_position;
  } features_in;
  // Trees grown level by level (ForwardLevels): the prefix, the cache slot
  // of its first token and its position.
  struct LevelsInputs {
    at::Tensor tokens;           // [kMaxTokenBucket] int64
    at::Tensor start, position;  // [1] int64
  } levels_in;
  struct CapturedLevels {
    std::unique_ptr<CudaGraph> graph;  // null on the CPU: the body runs eagerly
    LevelsKept kept;                   // outputs, per level
    at::Tensor noise;                  // the pick's noise [levels + 1, width, vocab], drawn before each run
    at::Tensor levels_fed;             // [1] int64: the levels fed, with a pick that stops (Choice::go)
    bool conditional = false;          // the levels past a stop are skipped (GrowLevelsBody)
  };
  // By (levels, prefix length, KV length, pick key).
  std::map<std::tuple<int64_t, int64_t, int64_t, std::string>, CapturedLevels> level_graphs;
  std::vector<const void*> captured_weights;  // the weight addresses the graphs read
  int64_t captures = 0;
  std::map<int64_t, int64_t> passes;  // CachedLayers runs by token count (LlamaModel::executed_passes)

  // Parameters are allocated (uninitialised) unless `allocate` is false: the
  // caller then points them at another model's (ShareLayers).
  static absl::StatusOr<std::unique_ptr<Impl>> Create(const ModelConfig& config, c10::Device device,
                                                     at::ScalarType dtype, int64_t kv_capacity, bool allocate = true);
  void AllocateParameters();
  void AllocateLayers();
  // `from`'s embedding, final norm and LM head (the same tensors) and its
  // forward settings: a model of other layers around them.
  void ShareEnds(const Impl& from);
  void AllocateCache(int64_t kv_capacity);
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() const;
  at::TensorOptions Options() const { return at::TensorOptions().device(device).dtype(dtype); }

  absl::Status ValidateForward(const at::Tensor& tokens, const at::Tensor& positions, const at::Tensor& mask) const;
  absl::Status ValidateAt(const char* what, const at::Tensor& tokens, const DevicePosition& at, int64_t fed) const;
  absl::Status ValidateFeatureGrowth(const char* what, const FeatureRoot& root, const NodeInputs& inputs,
                                     int64_t fed) const;
  std::pair<at::Tensor, at::Tensor> RopeAngles(const at::Tensor& positions, int64_t max_position) const;
  at::Tensor Layer(int64_t index, const at::Tensor& x, const ForwardContext& ctx, bool use_cache);
  at::Tensor CachedLayers(const at::Tensor& tokens, const ForwardContext& ctx);
  absl::StatusOr<at::Tensor> Forward(const at::Tensor& tokens, const at::Tensor& positions, const at::Tensor& mask);
  // `tokens` or, where defined, `inputs` [n, hidden] (their embeddings).
  absl::StatusOr<at::Tensor> ForwardEager(const at::Tensor& tokens, const at::Tensor& positions,
                                          const at::Tensor& mask, const at::Tensor& inputs = at::Tensor());
  absl::Status ValidatePlacement(int64_t n, const at::Tensor& positions, const at::Tensor& mask) const;
  absl::Status ValidateInputs(const at::Tensor& inputs, const at::Tensor& positions, const at::Tensor& mask) const;
  absl::StatusOr<at::Tensor> ForwardStatic(const at::Tensor& tokens, const at::Tensor& positions,
                                           const at::Tensor& mask);
  std::pair<at::Tensor, at::Tensor> StaticBody(int64_t bucket, int64_t kv_length);
  // `inputs` [n, hidden], where defined, in place of the tokens' embeddings.
  std::pair<at::Tensor, at::Tensor> StaticForwardBody(const at::Tensor& tokens, const at::Tensor& positions,
                                                      const at::Tensor& write_slots, const at::Tensor& allowed,
                                                      int64_t kv_length, const at::Tensor& inputs = at::Tensor());
  std::pair<at::Tensor, at::Tensor> CausalBody(const at::Tensor& tokens, const at::Tensor& start,
                                               const at::Tensor& position, int64_t offset, int64_t kv_length,
                                               const at::Tensor& inputs = at::Tensor());
  // The work of a chain's or levels' graph, for a KV length.
  using ChainWork = std::function<void(int64_t kv_length, CapturedChain& chain)>;
  using LevelsWork = std::function<void(int64_t kv_length, CapturedLevels& captured)>;
  // Picks `steps` tokens, pick i from after(i): logits [1, vocab] and the
  // final hidden state [1, hidden] behind them (undefined where the body
  // gives none), writing pick i to picked[i]: the loop of every chain body.
  struct LogitsAndHidden {
    at::Tensor logits, hidden;
  };
  void PickChain(int64_t steps, const ChainPick& pick, CapturedChain& chain, const at::Tensor& picked,
                 const std::function<LogitsAndHidden(int64_t i)>& after);
  void ChainBody(int64_t steps, int64_t prefix, int64_t kv_length, const ChainPick& pick, CapturedChain& chain);
  void RoundsBody(int64_t steps, int64_t prefix, int64_t kv_length, const ChainPick& pick, const ChainGuess& guess,
                  CapturedChain& chain);
  void FeatureChainBody(int64_t steps, int64_t kv_length, const ChainPick& pick, const NodeInputs& inputs,
                        CapturedChain& chain);
  // Feeds the path of `w` rows in features_in and makes its last real row
  // the root: its readout and feature into features_in.
  void FeaturePathBody(int64_t w, int64_t kv_length, const NodeInputs& inputs);
  // Fills features_in's path from `path`.
  void LoadFeaturePath(const FeaturePathAt& path);
  // Every static input's capture-time value: captures run on the spare
  // slots past the capacity, so that the cache's contents stay as they were.
  void ResetInputsForCapture();
  absl::StatusOr<ChainResult> ForwardChainOnFeaturesAtStatic(const FeaturePathAt& path, int64_t steps,
                                                             const ChainPick& pick, const NodeInputs& inputs);
  absl::StatusOr<LevelsKept> ForwardLevelsOnFeaturesAtStatic(const FeaturePathAt& path, int64_t levels,
                                                             const LevelPick& pick, const NodeInputs& inputs);
  // A level's forward: its nodes (choice.tokens, choice.parents), at
  // `positions` in `slots` ([width] int64), each seeing its row of `visible`.
  using LevelForward = std::function<at::Tensor(int64_t level, const LevelPick::Choice& choice,
                                                const at::Tensor& positions, const at::Tensor& slots,
                                                const at::Tensor& visible)>;
  // Levels grown from root_logits [1, vocab] float32: level 1 in the slots
  // from level_start ([1] int64), below which every slot is seen, a node
  // of depth d at root_position ([1] int64) + d.
  void GrowLevelsBody(int64_t levels, int64_t kv_length, const LevelPick& pick, CapturedLevels& captured,
                      const at::Tensor& root_logits, const at::Tensor& level_start, const at::Tensor& root_position,
                      const LevelForward& forward);
  void LevelsBody(int64_t levels, int64_t prefix, int64_t kv_length, const LevelPick& pick, CapturedLevels& captured);
  void FeatureLevelsBody(int64_t levels, int64_t kv_length, const LevelPick& pick, const NodeInputs& inputs,
                         CapturedLevels& captured);
  // The levels' graph for (levels, prefix, kv_length, key), made with `work`
  // as Chain() makes chains; `fed` slots are written.
  absl::StatusOr<CapturedLevels*> Levels(int64_t levels, int64_t prefix, int64_t kv_length, const LevelPick& pick,
                                         const std::string& key, int64_t fed, const LevelsWork& work);
  // Whether ForwardLevels' prefix and levels run as one static graph: every
  // slot must fit the spare slots that captures write.
  bool LevelsFitGraph(const at::Tensor& prefix, int64_t levels, const LevelPick& pick) const {
    return static_shapes && config.sliding_window == 0 && prefix.defined() && prefix.dim() == 1 && levels >= 1 &&
           pick.width() >= 1 && prefix.size(0) + levels * pick.width() <= kMaxTokenBucket;
  }
  absl::StatusOr<LevelsKept> ForwardLevelsStatic(const at::Tensor& prefix, int64_t position, int64_t levels,
                                                 const LevelPick& pick);
  absl::StatusOr<LevelsKept> ForwardLevelsAtStatic(const at::Tensor& prefix, const DevicePosition& at, int64_t levels,
                                                   const LevelPick& pick);
  absl::StatusOr<LevelsKept> ForwardLevelsOnFeaturesStatic(const FeatureRoot& root, int64_t levels,
                                                            const LevelPick& pick, const NodeInputs& inputs);
  LevelsKept RunLevels(CapturedLevels& captured, int64_t kv_length, const LevelPick& pick, const LevelsWork& work);
  void AllocateFeatureBuffers();
  // Fills features_in from `root`.
  void LoadFeatureRoot(const FeatureRoot& root);
  void DropGraphs();
  // `result` of a drafting forward (chains, levels) that ran the plain
  // forwards: they keep hidden states, which drafting never does.
  template <typename T>
  T WithoutHiddenStates(T result) {
    last_hidden = at::Tensor();
    return result;
  }
  // x @ weight^T + bias and the cache's attention, batch-invariant where set.
  at::Tensor Project(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) const {
    return batch_invariant ? fused::LinearBatchInvariant(x, weight, bias) : fused::Linear(x, weight, bias);
  }
  at::Tensor Logits(const at::Tensor& hidden) const {
    return batch_invariant ? fused::LinearBatchInvariant(hidden, lm_head, at::Tensor()) : at::linear(hidden, lm_head);
  }
  at::Tensor Attend(const at::Tensor& q, const at::Tensor& k_layer, const at::Tensor& v_layer,
                    const at::Tensor& allowed, int64_t kv_length) const {
    return batch_invariant ? fused::DecodeAttentionBatchInvariant(q, k_layer, v_layer, allowed, kv_length)
                           : fused::DecodeAttention(q, k_layer, v_layer, allowed, kv_length);
  }
  void DropGraphsIfWeightsMoved();
  const CudaGraph* PoolOwner() const;
  // The chain's graph for (steps, prefix, kv_length, key), captured with
  // `work` on first use for every KV length bucket that holds `fed` slots.
  absl::StatusOr<CapturedChain*> Chain(int64_t steps, int64_t prefix, int64_t kv_length, const ChainPick& pick,
                                       const std::string& key, int64_t fed, const ChainWork& work);
  absl::StatusOr<ChainResult> ForwardChainStatic(const at::Tensor& first, int64_t position, int64_t steps,
                                                 const ChainPick& pick);
  absl::StatusOr<ChainResult> ForwardChainAtStatic(const at::Tensor& prefix, const DevicePosition& at,
                                                   int64_t steps, const ChainPick& pick);
  absl::StatusOr<ChainResult> ForwardChainInRoundsAtStatic(const at::Tensor& prefix, const DevicePosition& at,
                                                           int64_t steps, const ChainPick& pick,
                                                           const ChainGuess& guess, const at::Tensor& context);
  absl::StatusOr<ChainResult> ForwardChainOnFeaturesStatic(const FeatureRoot& root, int64_t steps,
                                                           const ChainPick& pick, const NodeInputs& inputs);
  // Replays the chain (or runs `work` on the CPU); the result's tokens are
  // chain_in's first `tokens`.
  ChainResult RunChain(CapturedChain& chain, int64_t tokens, int64_t kv_length, const ChainPick& pick,
                       const ChainWork& work);
  absl::StatusOr<at::Tensor> ForwardAtStatic(const at::Tensor& tokens, const DevicePosition& at);
  absl::StatusOr<at::Tensor> ForwardTreeAtStatic(const at::Tensor& tokens, const at::Tensor& depths,
                                                 const at::Tensor& mask, const DevicePosition& at);
  absl::StatusOr<at::Tensor> ReplayForward(int64_t n, int64_t bucket, int64_t kv_length);
  absl::StatusOr<CapturedForward*> Graph(int64_t bucket, int64_t kv_length);
  absl::Status PrepareForDecoding(int64_t max_tokens);
  void AllocateStaticInputs();
  std::vector<const void*> WeightAddresses() const;
  at::Tensor ForwardTraining(const at::Tensor& tokens);
  at::Tensor ForwardTrainingEmbedded(const at::Tensor& inputs, int64_t first_position);
  // Hidden states `indices` (resolved: 0..num_hidden_layers) of a training
  // forward on any attention pattern.
  std::vector<at::Tensor> TrainingLayers(const at::Tensor& inputs, const at::Tensor& positions,
                                         const at::Tensor& allowed, absl::Span<const int> indices);
  absl::Status Commit(absl::Span<const int64_t> slots);
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_LLAMA_MODEL_IMPL_H_

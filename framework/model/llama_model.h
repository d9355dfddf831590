// LlamaModel: the Llama-family decoder (Llama 1/2/3, Qwen2, Mistral) in LibTorch.
//
// RMSNorm, RoPE (rope_theta; llama3 and linear scaling), SwiGLU MLP,
// grouped-query attention, optional q/k/v bias, tied or untied embeddings.
// Inference goes through the LanguageModel interface with a pre-allocated KV
// cache; training uses ForwardTraining() (autograd, no cache).
#ifndef SPECLAB_FRAMEWORK_MODEL_LLAMA_MODEL_H_
#define SPECLAB_FRAMEWORK_MODEL_LLAMA_MODEL_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/device/device_model.h"
#include "framework/device/feature_inputs.h"
#include "framework/model/language_model.h"
#include "framework/model/model_config.h"

namespace speclab {

// A LanguageModel and its device form (framework/device/device_model.h).
class LlamaModel final : public LanguageModel, public DeviceModel {
 public:
  // Random weights (normal, std 0.02; norms 1), reproducible from `seed`.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> CreateRandom(const ModelConfig& config, c10::Device device,
                                                                   at::ScalarType dtype, int64_t kv_capacity,
                                                                   uint64_t seed);
  // Random weights drawn directly on `device` (fast for billion-parameter
  // shapes; the values depend on the device's generator, so use CreateRandom
  // where two devices must hold the same model). For benchmarks.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> CreateRandomOnDevice(const ModelConfig& config,
                                                                           c10::Device device, at::ScalarType dtype,
                                                                           int64_t kv_capacity, uint64_t seed);
  // Loads a HuggingFace folder: config.json plus model.safetensors, or shards
  // listed by model.safetensors.index.json. Weights are cast to `dtype`.
  // Errors name the file and tensor (missing, truncated, wrong shape).
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(const std::string& dir, c10::Device device,
                                                          at::ScalarType dtype, int64_t kv_capacity);
  // A model made of the listed decoder layers of `target` (in that order,
  // repeats allowed) with its embedding, final norm and LM head: the same
  // tensors, nothing copied, so that a self-speculative drafter (early exit,
  // skipped layers) costs only its own KV cache of `kv_capacity` slots. The
  // target must outlive it; a trainer that re-points the target's parameters
  // leaves it reading the old ones.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> ShareLayers(const LlamaModel& target,
                                                                 absl::Span<const int> layers, int64_t kv_capacity);

  // A model of `layers` new decoder layers (random, drawn as CreateRandom
  // draws them, from `seed`) on `target`'s embedding, final norm and LM head,
  // shared as ShareLayers shares them: the body of an EAGLE head, which reads
  // out its predicted features through the target's LM head.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> WithNewLayers(const LlamaModel& target, int64_t layers,
                                                                   int64_t kv_capacity, uint64_t seed);

  // Both: `target`'s decoder layers `shared` (as ShareLayers shares them),
  // then `added` new ones (as WithNewLayers draws them, named
  // model.layers.{shared.size() + i}), on its embedding, final norm and LM
  // head: a shallow sub-network of the target with an adapter on top
  // (Kangaroo). At least one layer in all.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> ShareLayersThenNew(const LlamaModel& target,
                                                                        absl::Span<const int> shared, int64_t added,
                                                                        int64_t kv_capacity, uint64_t seed);

  // The model's parts, for drafters built on them (EAGLE's head embeds tokens
  // and reads its predictions through the target's LM head):
  // tokens [n] int64 -> [n, hidden] in the model's dtype;
  at::Tensor Embed(const at::Tensor& tokens) const;
  // [n, hidden] -> the final RMSNorm of each row, in the input's dtype;
  at::Tensor FinalNorm(const at::Tensor& hidden) const;
  // [n, hidden] (after the final norm) -> logits [n, vocab] float32.
  at::Tensor LmHead(const at::Tensor& hidden) const;
  // The dtype and device of the model's parameters, for tensors that join them.
  at::TensorOptions parameter_options() const;

  // Writes config.json and model.safetensors (in `save_dtype`) loadable by transformers.
  absl::Status Save(const std::string& dir, at::ScalarType save_dtype) const;

  // LanguageModel.
  const ModelConfig& config() const override;
  c10::Device device() const override;
  int64_t capacity() const override;
  int64_t committed_length() const override;
  int64_t tentative_length() const override;
  absl::StatusOr<at::Tensor> Forward(const at::Tensor& tokens, const at::Tensor& positions,
                                     const at::Tensor& mask) override;
  // Forward() with the first layer's inputs [n, hidden] (in the model's
  // dtype) given in place of the tokens' embeddings: an EAGLE head's fused
  // features. Always the eager forward (no CUDA graph); hidden states are kept
  // as Forward() keeps them.
  absl::StatusOr<at::Tensor> ForwardEmbedded(const at::Tensor& inputs, const at::Tensor& positions,
                                             const at::Tensor& mask);
  // Keeping more hidden states drops captured graphs (they return what they
  // captured): keep them before PrepareForDecoding().
  absl::Status KeepHiddenStates(absl::Span<const int> layers) override;
  absl::StatusOr<at::Tensor> HiddenStates(int layer) const override;
  absl::Status Commit(absl::Span<const int64_t> tentative_slots) override;
  absl::Status Truncate(int64_t length) override;
  absl::Status PrepareForDecoding(int64_t max_tokens) override;

  // DeviceModel.
  LanguageModel& model() override { return *this; }
  // With static shapes (on CUDA, by default) the whole chain is one CUDA
  // graph: per step the one-token forward, pick, and the next step's inputs
  // computed on the device; the host fills three scalars, draws the noise and
  // launches once. The first call for a (steps, pick.key()) captures that chain
  // for every KV length bucket, so later calls do not capture. Otherwise (CPU,
  // sliding window, more than 32 steps) the plain Forward() calls; on the CPU
  // with static shapes enabled the same chain body runs eagerly (tests compare
  // the two).
  absl::StatusOr<ChainResult> ForwardChain(const at::Tensor& first, int64_t position, int64_t steps,
                                           const ChainPick& pick) override;
  // With static shapes: the forward's slots, positions and mask are computed
  // on the device from `at.start` and its graph is chosen by at.max_start, so
  // nothing waits for the host (ForwardChainAt: one graph per prefix length
  // too). Otherwise the default, which reads start back.
  absl::StatusOr<at::Tensor> ForwardAt(const at::Tensor& tokens, const DevicePosition& at) override;
  absl::StatusOr<ChainResult> ForwardChainAt(const at::Tensor& prefix, const DevicePosition& at, int64_t steps,
                                             const ChainPick& pick) override;
  // With static shapes, every round in one CUDA graph (a conditional node a
  // round after the first, so that a chain whose guesses hit skips the
  // rest), captured as ForwardChainAt's; the CPU runs the same body eagerly,
  // reading the picks so far back between rounds. Otherwise the default.
  absl::StatusOr<ChainResult> ForwardChainInRoundsAt(const at::Tensor& prefix, const DevicePosition& at,
                                                     int64_t steps, const ChainPick& pick, const ChainGuess& guess,
                                                     const at::Tensor& context) override;

  // With static shapes and c + levels * width <= 128, the prefix and every
  // level in one CUDA graph (captured, as chains are, for every KV length
  // bucket on first use); the CPU with static shapes runs the same body
  // eagerly. Otherwise the default.
  absl::StatusOr<LevelsKept> ForwardLevels(const at::Tensor& prefix, int64_t position, int64_t levels,
                                           const LevelPick& pick) override;
  // With static shapes (trees of up to 128 nodes; levels as ForwardLevels):
  // slots, positions and the mask's placement are computed on the device from
  // `at.start`, and CompactPathAt moves every layer's entries (each one
  // launch on CUDA, fused_ops.h), so that nothing waits for the host.
  // Otherwise the defaults, which read start back.
  absl::StatusOr<at::Tensor> ForwardTreeAt(const at::Tensor& tokens, const at::Tensor& depths, const at::Tensor& mask,
                                           const DevicePosition& at) override;
  absl::Status CompactPathAt(const at::Tensor& nodes, const DevicePosition& at) override;
  absl::StatusOr<LevelsKept> ForwardLevelsAt(const at::Tensor& prefix, const DevicePosition& at, int64_t levels,
                                             const LevelPick& pick) override;

  // Drafting on features (framework/device/feature_inputs.h), for a head
  // fed its own predictions (EAGLE). A chain of `steps` picks after
  // root.token: pick i chooses chain token i + 1 from the readout after
  // token i (root.logits for i = 0), and tokens 1 .. steps - 1 are fed, token
  // j at position root.position + j with inputs(its embedding, the feature
  // after token j - 1), each seeing every slot written before it and itself.
  // Appends steps - 1 tentative slots, counted as as many one-token
  // forwards. Returns ForwardChain's result (tokens[0] the root). With
  // static shapes and steps <= 32, one CUDA graph (the CPU runs its body
  // eagerly); otherwise the eager forwards.
  absl::StatusOr<ChainResult> ForwardChainOnFeatures(const FeatureRoot& root, int64_t steps, const ChainPick& pick,
                                                     const NodeInputs& inputs);
  // Tree levels grown from `root` as ForwardLevels grows them after its
  // prefix, each node fed inputs(its embedding, its parent's feature) at
  // root.position + its depth. Appends levels * width tentative slots,
  // counted as `levels` forwards of width tokens. With static shapes and
  // levels * width <= 128, one CUDA graph; otherwise the eager forwards.
  absl::StatusOr<LevelsKept> ForwardLevelsOnFeatures(const FeatureRoot& root, int64_t levels, const LevelPick& pick,
                                                     const NodeInputs& inputs);
  // The growths on features at a root only the device knows (pipelined
  // steps), with the cache contract of ForwardAt: first path's w rows, row i
  // fed inputs(embedding of tokens[i], features[i]) at slot path.slot.start +
  // i and position path.position + i, each seeing every slot up to its own.
  // The rows past path.length are padding: their slots lie past the root's,
  // where the growth writes before it reads. Row length - 1 is the root,
  // whose readout and feature start the chain or levels, grown as above in
  // the slots after it. Returns what the forms above return (a chain's
  // tokens[0]: the root). With static shapes (w + steps, or w + levels *
  // width, <= 128) one CUDA graph for the path and the growth; otherwise the
  // path's length and slot are read back and the eager forwards run.
  absl::StatusOr<ChainResult> ForwardChainOnFeaturesAt(const FeaturePathAt& path, int64_t steps,
                                                       const ChainPick& pick, const NodeInputs& inputs);
  absl::StatusOr<LevelsKept> ForwardLevelsOnFeaturesAt(const FeaturePathAt& path, int64_t levels,
                                                       const LevelPick& pick, const NodeInputs& inputs);

  // Static-shape forwards: token counts up to 128 are padded to a power of
  // two and attention covers the KV cache up to a multiple of 256 slots, so
  // that on CUDA each shape is captured once into a CUDA graph and replayed.
  // On by default on CUDA (where the build has CUDA); off on the CPU, where
  // enabling it runs the same padded forward eagerly (tests compare it with
  // the plain one). Sliding-window models always run the plain forward.
  void EnableCudaGraphs(bool enable);
  bool cuda_graphs_enabled() const;
  // Batch-invariant numerics (fused::LinearBatchInvariant and
  // DecodeAttentionBatchInvariant, the logits included): each token's logits
  // are bit for bit those of a one-token forward at its position, whatever
  // the forward's token count, so that speculative decoding reproduces greedy
  // decoding token for token in bf16 on CUDA. Off by default (slower: no
  // SIMT GEMV for one token, no cuBLAS, no split attention). Drops captured
  // graphs. The fused decoding path only (the training path keeps cuBLAS).
  void SetBatchInvariant(bool enable);
  bool batch_invariant() const;
  // Bytes of parameters one decoding step reads (the embedding table counts
  // once when tied, and not at all otherwise: a step reads one row of it).
  int64_t DecodeWeightBytes() const;
  // CUDA graphs captured so far (a capture during timed decoding costs
  // milliseconds: experiments report it).
  int64_t graph_captures() const;
  // The passes over the cache this model's host code ran, by token count
  // (padded where static shapes pad a forward to its bucket): what
  // forward_counts() must match, pass for pass, for predicted times to price
  // the work done (experiments/forward_costs.h). A CUDA graph's body runs on
  // the host once, at capture, so compare them where bodies run eagerly (the
  // CPU, or graphs off).
  const std::map<int64_t, int64_t>& executed_passes() const;

  // Training: causal forward of tokens [B, T] (positions 0..T-1), no cache,
  // autograd enabled. Returns logits [B, T, vocab] in the parameters' dtype.
  at::Tensor ForwardTraining(const at::Tensor& tokens);
  // Training from the first layer's inputs [B, T, hidden] at positions
  // first_position, first_position + 1, ...: the final norm's output
  // [B, T, hidden] (what LmHead() reads), autograd enabled.
  at::Tensor ForwardTrainingEmbedded(const at::Tensor& inputs, int64_t first_position);
  // Training on any attention pattern (EAGLE-3's training-time test), or for
  // intermediate layers (features of several layers): inputs [B, R, hidden]
  // at `positions` ([R] int64), row i attending to the rows j where
  // allowed[i][j] ([R, R] bool). The hidden states `layers`
  // (KeepHiddenStates' indices), each [B, R, hidden], in that order;
  // autograd enabled. InvalidArgument for an index out of range or shapes
  // that do not match.
  absl::StatusOr<std::vector<at::Tensor>> ForwardTrainingLayers(const at::Tensor& inputs, const at::Tensor& positions,
                                                                const at::Tensor& allowed, absl::Span<const int> layers);
  // HuggingFace names ("model.layers.0.self_attn.q_proj.weight", ...) and tensors.
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() const;
  // Casts parameters (for mixed-precision training copies) and resizes the cache.
  absl::Status ResetCache(int64_t kv_capacity);

  ~LlamaModel() override;

 private:
  struct Impl;
  explicit LlamaModel(std::unique_ptr<Impl> impl);
  void CountLevelForwards(int64_t prefix, int64_t levels, int64_t width);
  // The eager forms of the growths at a device root: feeds the path (its
  // length and slot read back) and gives the root it ends with.
  absl::StatusOr<FeatureRoot> FeedPathEagerly(const FeaturePathAt& path, const NodeInputs& inputs);
  // A chain's forwards: its first, of `first_tokens` (none where 0), then one-token ones up
  // to `steps` in all, or, where the last chain skipped the steps past its
  // stop, up to result.kept (counted on the device).
  void CountChainForwards(int64_t first_tokens, int64_t steps, const ChainResult& result);
  std::unique_ptr<Impl> impl_;
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_LLAMA_MODEL_H_

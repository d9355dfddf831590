#include "framework/model/llama_model.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status_macros.h"
#include "framework/device_transfer.h"
#include "framework/model/cuda_graph.h"
#include "framework/model/fused_ops.h"
#include "framework/model/safetensors.h"
#include "yaml-cpp/yaml.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;

std::string ShapeString(at::IntArrayRef sizes) { return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]"); }

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

at::Tensor RotateHalf(const at::Tensor& x) {
  const auto halves = x.chunk(2, -1);
  return at::cat({-halves[1], halves[0]}, -1);
}

// x: [..., tokens, heads, head_dim]; cos/sin: [tokens, head_dim].
at::Tensor ApplyRope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return x * cos.unsqueeze(-2) + RotateHalf(x) * sin.unsqueeze(-2);
}

// inv_freq as transformers computes it (float32 arithmetic, same op order):
// _compute_default_rope_parameters, then the llama3 or linear adjustment.
at::Tensor ComputeInvFreq(const ModelConfig& c) {
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

AttentionMask MakeAttentionMask(const at::Tensor& allowed, int64_t group, bool use_sdpa) {
  AttentionMask m;
  m.allowed = allowed;
  if (use_sdpa) {
    m.grouped = group > 1 ? allowed.repeat({group, 1}) : allowed;
  } else {
    m.blocked = allowed.logical_not();
  }
  return m;
}

bool UseSdpa(const c10::Device& device) {
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

int64_t TokenBucket(int64_t n) {
  int64_t bucket = 1;
  while (bucket < n) bucket *= 2;
  return bucket;
}

// Longest chain ForwardChain runs as one graph, and the longest prefix its
// first forward may feed (ForwardChainAt).
constexpr int64_t kMaxChainSteps = 32;
constexpr int64_t kMaxChainPrefix = 4;

int64_t KvBucket(int64_t slots, int64_t cache_slots) {
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

}  // namespace

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
  at::Tensor last_hidden;

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
    at::Tensor logits, hidden;  // outputs, [bucket, vocab] and [bucket, hidden]
  };
  std::map<std::pair<int64_t, int64_t>, CapturedForward> graphs;  // by (token bucket, KV length)
  // Chains of device-picked tokens (ForwardChain): the first token and each
  // pick, the cache slot of the first token and its position.
  struct ChainInputs {
    at::Tensor tokens;           // [kMaxChainPrefix + kMaxChainSteps] int64
    at::Tensor start, position;  // [1] int64
  } chain_in;
  struct CapturedChain {
    std::unique_ptr<CudaGraph> graph;  // null on the CPU: the body runs eagerly
    at::Tensor noise;                  // [steps, vocab] float32, refilled before each run; undefined without noise
    at::Tensor rows, hidden;           // outputs: [steps, vocab] (or undefined), [1, hidden]
  };
  // By (steps, prefix length, KV length, pick key).
  std::map<std::tuple<int64_t, int64_t, int64_t, std::string>, CapturedChain> chain_graphs;
  // Trees grown level by level (ForwardLevels): the prefix, the cache slot
  // of its first token and its position.
  struct LevelsInputs {
    at::Tensor tokens;           // [kMaxTokenBucket] int64
    at::Tensor start, position;  // [1] int64
  } levels_in;
  struct CapturedLevels {
    std::unique_ptr<CudaGraph> graph;  // null on the CPU: the body runs eagerly
    LevelsKept kept;                   // outputs, per level
    at::Tensor hidden;                 // output: the last level's [m, hidden]
  };
  // By (levels, prefix length, KV length, pick key).
  std::map<std::tuple<int64_t, int64_t, int64_t, std::string>, CapturedLevels> level_graphs;
  std::vector<const void*> captured_weights;  // the weight addresses the graphs read
  int64_t captures = 0;

  static absl::StatusOr<std::unique_ptr<Impl>> Create(const ModelConfig& config, c10::Device device,
                                                     at::ScalarType dtype, int64_t kv_capacity);
  void AllocateParameters();
  void AllocateCache(int64_t kv_capacity);
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() const;
  at::TensorOptions Options() const { return at::TensorOptions().device(device).dtype(dtype); }

  absl::Status ValidateForward(const at::Tensor& tokens, const at::Tensor& positions, const at::Tensor& mask) const;
  absl::Status ValidateAt(const char* what, const at::Tensor& tokens, const DevicePosition& at, int64_t fed) const;
  std::pair<at::Tensor, at::Tensor> RopeAngles(const at::Tensor& positions, int64_t max_position) const;
  at::Tensor Layer(int64_t index, const at::Tensor& x, const ForwardContext& ctx, bool use_cache);
  at::Tensor CachedLayers(const at::Tensor& tokens, const ForwardContext& ctx);
  absl::StatusOr<at::Tensor> Forward(const at::Tensor& tokens, const at::Tensor& positions, const at::Tensor& mask);
  absl::StatusOr<at::Tensor> ForwardEager(const at::Tensor& tokens, const at::Tensor& positions,
                                          const at::Tensor& mask);
  absl::StatusOr<at::Tensor> ForwardStatic(const at::Tensor& tokens, const at::Tensor& positions,
                                           const at::Tensor& mask);
  std::pair<at::Tensor, at::Tensor> StaticBody(int64_t bucket, int64_t kv_length);
  std::pair<at::Tensor, at::Tensor> StaticForwardBody(const at::Tensor& tokens, const at::Tensor& positions,
                                                      const at::Tensor& write_slots, const at::Tensor& allowed,
                                                      int64_t kv_length);
  std::pair<at::Tensor, at::Tensor> CausalBody(const at::Tensor& tokens, const at::Tensor& start,
                                               const at::Tensor& position, int64_t offset, int64_t kv_length);
  void ChainBody(int64_t steps, int64_t prefix, int64_t kv_length, const ChainPick& pick, CapturedChain& chain);
  void LevelsBody(int64_t levels, int64_t prefix, int64_t kv_length, const LevelPick& pick, CapturedLevels& captured);
  absl::StatusOr<CapturedLevels*> Levels(int64_t levels, int64_t prefix, int64_t kv_length, const LevelPick& pick);
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
  LevelsKept RunLevels(CapturedLevels& captured, int64_t levels, int64_t prefix, int64_t kv_length,
                       const LevelPick& pick);
  void DropGraphs();
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
  absl::StatusOr<CapturedChain*> Chain(int64_t steps, int64_t prefix, int64_t kv_length, const ChainPick& pick);
  absl::StatusOr<ChainResult> ForwardChainStatic(const at::Tensor& first, int64_t position, int64_t steps,
                                                 const ChainPick& pick);
  absl::StatusOr<ChainResult> ForwardChainAtStatic(const at::Tensor& prefix, const DevicePosition& at,
                                                   int64_t steps, const ChainPick& pick);
  ChainResult RunChain(CapturedChain& chain, int64_t steps, int64_t prefix, int64_t kv_length,
                       const ChainPick& pick);
  absl::StatusOr<at::Tensor> ForwardAtStatic(const at::Tensor& tokens, const DevicePosition& at);
  absl::StatusOr<at::Tensor> ForwardTreeAtStatic(const at::Tensor& tokens, const at::Tensor& depths,
                                                 const at::Tensor& mask, const DevicePosition& at);
  absl::StatusOr<at::Tensor> ReplayForward(int64_t n, int64_t bucket, int64_t kv_length);
  absl::StatusOr<CapturedForward*> Graph(int64_t bucket, int64_t kv_length);
  absl::Status PrepareForDecoding(int64_t max_tokens);
  void AllocateStaticInputs();
  std::vector<const void*> WeightAddresses() const;
  at::Tensor ForwardTraining(const at::Tensor& tokens);
  absl::Status Commit(absl::Span<const int64_t> slots);
};

absl::StatusOr<std::unique_ptr<LlamaModel::Impl>> LlamaModel::Impl::Create(const ModelConfig& config,
                                                                         c10::Device device, at::ScalarType dtype,
                                                                         int64_t kv_capacity) {
  RETURN_IF_ERROR(config.Validate());
  if (kv_capacity <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel: kv_capacity must be positive, got ", kv_capacity));
  }
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) {
    return absl::InvalidArgumentError(
        absl::StrCat("LlamaModel: dtype must be float32, bfloat16 or float16, got ", c10::toString(dtype)));
  }
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->dtype = dtype;
  impl->group = config.num_attention_heads / config.num_key_value_heads;
  RETURN_IF_ERROR(Guarded("LlamaModel: allocating weights", [&]() -> absl::Status {
    // Parameters must be ordinary tensors (trainable), whatever mode the caller is in.
    c10::InferenceMode normal_tensors(false);
    c10::AutoGradMode grad_mode(true);
    // Resolves "cuda" to "cuda:<current>" so device checks compare equal.
    impl->device = at::empty({0}, at::TensorOptions().device(device)).device();
    impl->AllocateParameters();
    impl->AllocateCache(kv_capacity);
    impl->static_shapes = impl->device.is_cuda() && CudaGraph::Supported();
    return absl::OkStatus();
  }));
  return impl;
}

void LlamaModel::Impl::AllocateParameters() {
  const ModelConfig& c = config;
  const int64_t hidden = c.hidden_size;
  const int64_t q_rows = c.num_attention_heads * c.head_dim;
  const int64_t kv_rows = c.num_key_value_heads * c.head_dim;
  const int64_t inter = c.intermediate_size;
  embed = at::empty({c.vocab_size, hidden}, Options());
  layers.resize(c.num_hidden_layers);
  for (LayerWeights& w : layers) {
    w.qkv_weight = at::empty({q_rows + 2 * kv_rows, hidden}, Options());
    w.q_weight = w.qkv_weight.narrow(0, 0, q_rows);
    w.k_weight = w.qkv_weight.narrow(0, q_rows, kv_rows);
    w.v_weight = w.qkv_weight.narrow(0, q_rows + kv_rows, kv_rows);
    if (c.attention_bias) {
      w.qkv_bias = at::empty({q_rows + 2 * kv_rows}, Options());
      w.q_bias = w.qkv_bias.narrow(0, 0, q_rows);
      w.k_bias = w.qkv_bias.narrow(0, q_rows, kv_rows);
      w.v_bias = w.qkv_bias.narrow(0, q_rows + kv_rows, kv_rows);
    }
    w.o_weight = at::empty({hidden, q_rows}, Options());
    if (c.attention_bias && c.model_type == "llama") w.o_bias = at::empty({hidden}, Options());
    w.gate_up_weight = at::empty({2 * inter, hidden}, Options());
    w.gate_weight = w.gate_up_weight.narrow(0, 0, inter);
    w.up_weight = w.gate_up_weight.narrow(0, inter, inter);
    w.down_weight = at::empty({hidden, inter}, Options());
    w.input_norm = at::empty({hidden}, Options());
    w.post_attention_norm = at::empty({hidden}, Options());
  }
  final_norm = at::empty({hidden}, Options());
  lm_head = c.tie_word_embeddings ? embed : at::empty({c.vocab_size, hidden}, Options());
  inv_freq = ComputeInvFreq(c).to(device);
}

void LlamaModel::Impl::AllocateCache(int64_t kv_capacity) {
  const ModelConfig& c = config;
  capacity = kv_capacity;
  cache_slots = kv_capacity + kMaxTokenBucket;
  DropGraphs();  // they captured the old cache's addresses
  static_in = StaticInputs();
  committed = 0;
  tentative = 0;
  last_hidden = at::Tensor();
  {
    // The RoPE tables feed autograd in ForwardTraining: ordinary tensors.
    c10::InferenceMode normal_tensors(false);
    const at::Tensor angles =
        at::outer(at::arange(capacity, at::TensorOptions().dtype(at::kFloat).device(device)), inv_freq);
    const at::Tensor emb = at::cat({angles, angles}, -1);
    rope_cos = emb.cos().to(dtype);
    rope_sin = emb.sin().to(dtype);
  }
  // The cache is only touched under InferenceMode, so it can be an inference tensor.
  c10::InferenceMode guard;
  k_cache = at::zeros({c.num_hidden_layers, c.num_key_value_heads, cache_slots, c.head_dim}, Options());
  v_cache = at::zeros_like(k_cache);
  slot_positions = c.sliding_window > 0 ? at::zeros({cache_slots}, Options().dtype(at::kLong)) : at::Tensor();
}

std::vector<std::pair<std::string, at::Tensor>> LlamaModel::Impl::NamedParameters() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  out.emplace_back("model.embed_tokens.weight", embed);
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerWeights& w = layers[i];
    const std::string p = absl::StrCat("model.layers.", i, ".");
    out.emplace_back(p + "self_attn.q_proj.weight", w.q_weight);
    if (w.q_bias.defined()) out.emplace_back(p + "self_attn.q_proj.bias", w.q_bias);
    out.emplace_back(p + "self_attn.k_proj.weight", w.k_weight);
    if (w.k_bias.defined()) out.emplace_back(p + "self_attn.k_proj.bias", w.k_bias);
    out.emplace_back(p + "self_attn.v_proj.weight", w.v_weight);
    if (w.v_bias.defined()) out.emplace_back(p + "self_attn.v_proj.bias", w.v_bias);
    out.emplace_back(p + "self_attn.o_proj.weight", w.o_weight);
    if (w.o_bias.defined()) out.emplace_back(p + "self_attn.o_proj.bias", w.o_bias);
    out.emplace_back(p + "mlp.gate_proj.weight", w.gate_weight);
    out.emplace_back(p + "mlp.up_proj.weight", w.up_weight);
    out.emplace_back(p + "mlp.down_proj.weight", w.down_weight);
    out.emplace_back(p + "input_layernorm.weight", w.input_norm);
    out.emplace_back(p + "post_attention_layernorm.weight", w.post_attention_norm);
  }
  out.emplace_back("model.norm.weight", final_norm);
  if (!config.tie_word_embeddings) out.emplace_back("lm_head.weight", lm_head);
  return out;
}

absl::Status LlamaModel::Impl::ValidateForward(const at::Tensor& tokens, const at::Tensor& positions,
                                               const at::Tensor& mask) const {
  auto bad = [](const std::string& msg) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::Forward: ", msg));
  };
  auto check = [&](const at::Tensor& t, const char* name, at::ScalarType type, int64_t dims) -> absl::Status {
    if (!t.defined()) return bad(absl::StrCat(name, " is undefined"));
    if (t.dim() != dims) {
      return bad(absl::StrCat(name, " must have ", dims, " dims, got shape ", ShapeString(t.sizes())));
    }
    if (t.scalar_type() != type) {
      return bad(absl::StrCat(name, " must be ", c10::toString(type), ", got ", c10::toString(t.scalar_type())));
    }
    if (t.device() != device) return bad(absl::StrCat(name, " is on ", t.device().str(), ", model on ", device.str()));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(check(tokens, "tokens", at::kLong, 1));
  RETURN_IF_ERROR(check(positions, "positions", at::kLong, 1));
  if (mask.defined()) RETURN_IF_ERROR(check(mask, "mask", at::kBool, 2));
  const int64_t n = tokens.size(0);
  if (n == 0) return bad("no tokens");
  if (positions.size(0) != n) {
    return bad(absl::StrCat("positions has shape ", ShapeString(positions.sizes()), ", expected [", n, "]"));
  }
  if (mask.defined() && (mask.size(0) != n || mask.size(1) != tentative + n)) {
    return bad(absl::StrCat("mask has shape ", ShapeString(mask.sizes()), ", expected [", n, ", ", tentative + n,
                            "] (new tokens x (tentative slots ", tentative, " + new tokens))"));
  }
  if (committed + tentative + n > capacity) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "LlamaModel::Forward: KV cache full: ", committed, " committed + ", tentative, " tentative + ", n,
        " new tokens exceed the capacity of ", capacity, " slots (commit, truncate or ResetCache with more)"));
  }
  return absl::OkStatus();
}

// cos/sin [n, head_dim] for the positions: from the table, or computed the
// same way for positions beyond it.
std::pair<at::Tensor, at::Tensor> LlamaModel::Impl::RopeAngles(const at::Tensor& positions,
                                                               int64_t max_position) const {
  if (max_position < capacity) return {rope_cos.index_select(0, positions), rope_sin.index_select(0, positions)};
  return fused::RopeAngles(positions, inv_freq, dtype);
}

// One decoder layer on x [B, n, hidden]. With the cache (B == 1), the new K/V
// go to slots [start, start + n) and attention covers slots [0, start + n).
at::Tensor LlamaModel::Impl::Layer(int64_t index, const at::Tensor& x, const ForwardContext& ctx, bool use_cache) {
  const ModelConfig& c = config;
  const LayerWeights& w = layers[index];
  const int64_t batch = x.size(0);
  const int64_t n = x.size(1);
  const int64_t heads = c.num_attention_heads;
  const int64_t kv_heads = c.num_key_value_heads;
  const int64_t hd = c.head_dim;

  const at::Tensor h = fused::RmsNorm(x, w.input_norm, c.rms_norm_eps);
  // q and k side by side, so RoPE runs once over all their heads.
  at::Tensor qk, v;
  if (ctx.fused) {
    const at::Tensor qkv = at::linear(h, w.qkv_weight, w.qkv_bias);
    qk = qkv.narrow(-1, 0, (heads + kv_heads) * hd);
    v = qkv.narrow(-1, (heads + kv_heads) * hd, kv_heads * hd);
  } else {
    qk = at::cat({at::linear(h, w.q_weight, w.q_bias), at::linear(h, w.k_weight, w.k_bias)}, -1);
    v = at::linear(h, w.v_weight, w.v_bias);
  }
  qk = ApplyRope(qk.reshape({batch, n, heads + kv_heads, hd}), ctx.cos, ctx.sin);
  const at::Tensor q = qk.narrow(2, 0, heads);
  at::Tensor k = qk.narrow(2, heads, kv_heads).transpose(1, 2);  // [B, kv_heads, n, hd]
  v = v.reshape({batch, n, kv_heads, hd}).transpose(1, 2);
  if (use_cache) {
    at::Tensor k_layer = k_cache[index], v_layer = v_cache[index];
    if (ctx.write_slots.defined()) {
      k_layer.index_copy_(1, ctx.write_slots, k[0]);
      v_layer.index_copy_(1, ctx.write_slots, v[0]);
    } else {
      k_layer.narrow(1, ctx.start, n).copy_(k[0]);
      v_layer.narrow(1, ctx.start, n).copy_(v[0]);
    }
    k = k_layer.narrow(1, 0, ctx.kv_length).unsqueeze(0);
    v = v_layer.narrow(1, 0, ctx.kv_length).unsqueeze(0);
  }
  // [B, n, heads, hd] -> [B, kv_heads, group * n, hd], heads ordered kv_head * group + j as in HF repeat_kv.
  const at::Tensor q_grouped =
      q.reshape({batch, n, kv_heads, group, hd}).permute({0, 2, 3, 1, 4}).reshape({batch, kv_heads, group * n, hd});
  // Grouped-query attention without repeating K/V: the query heads that share
  // a KV head are stacked along the query axis.
  const at::Tensor attn = fused::GroupedAttentionAten(q_grouped, k, v, ctx.mask.allowed, ctx.mask.grouped,
                                                      ctx.mask.blocked, group)
                              .reshape({batch, kv_heads, group, n, hd})
                              .permute({0, 3, 1, 2, 4})
                              .reshape({batch, n, heads * hd});
  const at::Tensor x1 = x + at::linear(attn, w.o_weight, w.o_bias);

  const at::Tensor h2 = fused::RmsNorm(x1, w.post_attention_norm, c.rms_norm_eps);
  at::Tensor gate, up;
  if (ctx.fused) {
    const at::Tensor gate_up = at::linear(h2, w.gate_up_weight);
    gate = gate_up.narrow(-1, 0, c.intermediate_size);
    up = gate_up.narrow(-1, c.intermediate_size, c.intermediate_size);
  } else {
    gate = at::linear(h2, w.gate_weight);
    up = at::linear(h2, w.up_weight);
  }
  return x1 + at::linear(at::silu(gate) * up, w.down_weight);
}

absl::StatusOr<at::Tensor> LlamaModel::Impl::Forward(const at::Tensor& tokens, const at::Tensor& positions,
                                                     const at::Tensor& mask) {
  RETURN_IF_ERROR(ValidateForward(tokens, positions, mask));
  c10::InferenceMode guard;
  const bool fits_static = config.sliding_window == 0 && tokens.size(0) <= kMaxTokenBucket;
  return static_shapes && fits_static ? ForwardStatic(tokens, positions, mask) : ForwardEager(tokens, positions, mask);
}

absl::StatusOr<at::Tensor> LlamaModel::Impl::ForwardEager(const at::Tensor& tokens, const at::Tensor& positions,
                                                          const at::Tensor& mask) {
  const int64_t n = tokens.size(0);
  const int64_t start = committed + tentative;
  const int64_t total = start + n;

  // On the CPU, check ids and positions (out-of-range ids would index out of
  // bounds). On an accelerator the check would cost a host sync per forward,
  // the very thing speculative decoding must avoid: ids there come from the
  // model's own distributions or from a tokenizer whose size was checked at
  // load, and RoPE angles are computed from the positions directly (no table
  // lookup that an unchecked position could overrun).
  int64_t max_position = std::numeric_limits<int64_t>::max();
  if (!device.is_cuda()) {
    const at::Tensor bounds = at::stack({tokens.min(), tokens.max(), positions.min(), positions.max()}).cpu();
    const int64_t* b = bounds.data_ptr<int64_t>();
    if (b[0] < 0 || b[1] >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("LlamaModel::Forward: token ids must lie in [0, ",
                                                     config.vocab_size, "), got [", b[0], ", ", b[1], "]"));
    }
    if (b[2] < 0) return absl::InvalidArgumentError("LlamaModel::Forward: positions must be non-negative");
    max_position = b[3];
  }

  ForwardContext ctx;
  std::tie(ctx.cos, ctx.sin) = RopeAngles(positions, max_position);
  at::Tensor allowed = at::ones({n, total}, at::TensorOptions().dtype(at::kBool).device(device));
  if (mask.defined()) {
    allowed.narrow(1, committed, tentative + n).copy_(mask);
  } else {
    allowed.narrow(1, start, n).tril_();
  }
  if (config.sliding_window > 0) {
    // A token at position t sees positions > t - window (transformers' sliding_window_overlay).
    slot_positions.narrow(0, start, n).copy_(positions);
    const at::Tensor distance = positions.unsqueeze(1) - slot_positions.narrow(0, 0, total).unsqueeze(0);
    allowed.logical_and_(distance < config.sliding_window);
  }
  ctx.fused = std::all_of(layers.begin(), layers.end(), [](const LayerWeights& w) { return w.FusedIntact(); });
  // The fused layers attend through fused::DecodeAttention: no derived masks.
  ctx.mask = ctx.fused ? AttentionMask{.allowed = allowed} : MakeAttentionMask(allowed, group, UseSdpa(device));
  ctx.start = start;
  ctx.kv_length = total;

  last_hidden = CachedLayers(tokens, ctx);
  tentative += n;
  return Logits(last_hidden).to(at::kFloat);
}

// Graphs read weights at the addresses seen at capture; a trainer that
// re-points a parameter (set_data) makes them stale.
std::vector<const void*> LlamaModel::Impl::WeightAddresses() const {
  std::vector<const void*> out{embed.data_ptr(), final_norm.data_ptr(), lm_head.data_ptr()};
  for (const LayerWeights& w : layers) {
    for (const at::Tensor* t : {&w.qkv_weight, &w.qkv_bias, &w.q_weight, &w.k_weight, &w.v_weight, &w.q_bias,
                                &w.k_bias, &w.v_bias, &w.o_weight, &w.o_bias, &w.gate_up_weight, &w.gate_weight,
                                &w.up_weight, &w.down_weight, &w.input_norm, &w.post_attention_norm}) {
      out.push_back(t->defined() ? t->data_ptr() : nullptr);
    }
  }
  return out;
}

// Graphs captured before a parameter was re-pointed would read stale weights.
void LlamaModel::Impl::DropGraphsIfWeightsMoved() {
  std::vector<const void*> weights = WeightAddresses();
  if (weights != captured_weights) {
    DropGraphs();
    captured_weights = std::move(weights);
  }
}

void LlamaModel::Impl::DropGraphs() {
  graphs.clear();
  chain_graphs.clear();
  level_graphs.clear();
}

// Every graph of the model allocates from one memory pool.
const CudaGraph* LlamaModel::Impl::PoolOwner() const {
  if (!graphs.empty()) return graphs.begin()->second.graph.get();
  for (const auto& [key, chain] : chain_graphs)
    if (chain.graph) return chain.graph.get();
  for (const auto& [key, levels] : level_graphs)
    if (levels.graph) return levels.graph.get();
  return nullptr;
}

// The graph of a shape, captured on first use (capture also runs the work once,
// on whatever the static inputs hold).
absl::StatusOr<LlamaModel::Impl::CapturedForward*> LlamaModel::Impl::Graph(int64_t bucket, int64_t kv_length) {
  DropGraphsIfWeightsMoved();
  const auto key = std::make_pair(bucket, kv_length);
  auto it = graphs.find(key);
  if (it == graphs.end()) {
    CapturedForward captured;
    ASSIGN_OR_RETURN(captured.graph, CudaGraph::Capture(device, PoolOwner(), [&] {
                       std::tie(captured.logits, captured.hidden) = StaticBody(bucket, kv_length);
                     }));
    it = graphs.emplace(key, std::move(captured)).first;
    ++captures;
  }
  return &it->second;
}

// Captures every shape a forward of up to max_tokens tokens can take. The
// capture's eager run writes K/V only into the spare slots past the capacity,
// so the cache's contents stay as they were.
absl::Status LlamaModel::Impl::PrepareForDecoding(int64_t max_tokens) {
  if (!static_shapes || !device.is_cuda() || config.sliding_window > 0) return absl::OkStatus();
  c10::InferenceMode guard;
  if (!static_in.tokens.defined()) AllocateStaticInputs();
  const int64_t largest = TokenBucket(std::min(std::max<int64_t>(max_tokens, 1), kMaxTokenBucket));
  for (int64_t bucket = 1; bucket <= largest; bucket *= 2) {
    for (int64_t kv_length = KvBucket(1, cache_slots);; kv_length = KvBucket(2 * kv_length, cache_slots)) {
      if (kv_length >= bucket) {
        static_in.tokens.zero_();
        static_in.positions.zero_();
        at::arange_out(static_in.write_slots, at::Scalar(capacity), at::Scalar(capacity + kMaxTokenBucket),
                       at::Scalar(1));
        // Every row sees slot 0 (finite, whatever it holds): a row seeing
        // nothing would write NaN into the spare slots.
        static_in.allowed.zero_();
        static_in.allowed.select(1, 0).fill_(true);
        RETURN_IF_ERROR(Graph(bucket, kv_length).status());
      }
      if (kv_length == cache_slots) break;
    }
  }
  return absl::OkStatus();
}

void LlamaModel::Impl::AllocateStaticInputs() {
  const auto longs = at::TensorOptions().dtype(at::kLong).device(device);
  static_in.tokens = at::zeros({kMaxTokenBucket}, longs);
  static_in.positions = at::zeros({kMaxTokenBucket}, longs);
  static_in.write_slots = at::zeros({kMaxTokenBucket}, longs);
  static_in.allowed = at::zeros({kMaxTokenBucket, cache_slots}, longs.dtype(at::kBool));
  static_in.columns = at::arange(cache_slots, longs);
  chain_in.tokens = at::zeros({kMaxChainPrefix + kMaxChainSteps}, longs);
  chain_in.start = at::zeros({1}, longs);
  chain_in.position = at::zeros({1}, longs);
  levels_in.tokens = at::zeros({kMaxTokenBucket}, longs);
  levels_in.start = at::zeros({1}, longs);
  levels_in.position = at::zeros({1}, longs);
}

// The forward over the static inputs' first `bucket` rows, attending to KV
// slots [0, kv_length): the work a CUDA graph captures.
std::pair<at::Tensor, at::Tensor> LlamaModel::Impl::StaticBody(int64_t bucket, int64_t kv_length) {
  return StaticForwardBody(static_in.tokens.narrow(0, 0, bucket), static_in.positions.narrow(0, 0, bucket),
                           static_in.write_slots.narrow(0, 0, bucket),
                           static_in.allowed.narrow(0, 0, bucket).narrow(1, 0, kv_length), kv_length);
}

// One forward with every input on the device (graph-capturable): tokens,
// positions and write_slots [n], allowed [n, kv_length] bool.
std::pair<at::Tensor, at::Tensor> LlamaModel::Impl::StaticForwardBody(const at::Tensor& tokens,
                                                                      const at::Tensor& positions,
                                                                      const at::Tensor& write_slots,
                                                                      const at::Tensor& allowed, int64_t kv_length) {
  ForwardContext ctx;
  std::tie(ctx.cos, ctx.sin) = RopeAngles(positions, std::numeric_limits<int64_t>::max());
  ctx.fused = std::all_of(layers.begin(), layers.end(), [](const LayerWeights& w) { return w.FusedIntact(); });
  ctx.mask = ctx.fused ? AttentionMask{.allowed = allowed} : MakeAttentionMask(allowed, group, UseSdpa(device));
  ctx.write_slots = write_slots;
  ctx.kv_length = kv_length;
  at::Tensor hidden = CachedLayers(tokens, ctx);
  at::Tensor logits = Logits(hidden);  // in the model's dtype: the copy out converts
  return {logits, hidden};
}

// A causal forward of tokens [c] at slots start + offset .. and positions
// position + offset .. (start, position: [1] int64 on the device), each token
// seeing every slot up to its own: the forwards of ChainBody, and
// LevelsBody's prefix.
std::pair<at::Tensor, at::Tensor> LlamaModel::Impl::CausalBody(const at::Tensor& tokens, const at::Tensor& start,
                                                               const at::Tensor& position, int64_t offset,
                                                               int64_t kv_length) {
  const at::Tensor columns = static_in.columns.narrow(0, 0, kv_length).unsqueeze(0);
  const at::Tensor offsets = static_in.columns.narrow(0, offset, tokens.size(0));
  const at::Tensor write_slots = start + offsets;
  return StaticForwardBody(tokens, position + offsets, write_slots, at::le(columns, write_slots.unsqueeze(1)),
                           kv_length);
}

// The chain of ForwardChain over chain_in: the first forward feeds tokens[0,
// prefix) at slots start.. and positions position.., each seeing every slot up
// to its own; each later forward feeds the token the step before picked. Pick
// writes token i + prefix (from the last row of step i's forward).
void LlamaModel::Impl::ChainBody(int64_t steps, int64_t prefix, int64_t kv_length, const ChainPick& pick,
                                 CapturedChain& chain) {
  std::vector<at::Tensor> rows;
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t offset = i == 0 ? 0 : prefix + i - 1;  // of the fed tokens, from the chain's start
    const int64_t fed = i == 0 ? prefix : 1;
    auto [logits, hidden] =
        CausalBody(chain_in.tokens.narrow(0, offset, fed), chain_in.start, chain_in.position, offset, kv_length);
    auto [token, row] = pick(logits.narrow(0, fed - 1, 1).to(at::kFloat),
                                  chain.noise.defined() ? chain.noise.narrow(0, i, 1) : at::Tensor());
    chain_in.tokens.narrow(0, offset + fed, 1).copy_(token.view({1}));
    if (row.defined()) rows.push_back(row);
    chain.hidden = hidden;
  }
  chain.rows = rows.empty() ? at::Tensor() : at::cat(rows);
}

// The chain for (steps, prefix, kv_length, pick.key()). On CUDA its first use
// captures the chain for every KV length bucket, each run once on the spare
// slots past the capacity (the cache's contents stay as they were).
absl::StatusOr<LlamaModel::Impl::CapturedChain*> LlamaModel::Impl::Chain(int64_t steps, int64_t prefix,
                                                                        int64_t kv_length, const ChainPick& pick) {
  if (device.is_cuda()) DropGraphsIfWeightsMoved();
  auto make = [&](int64_t length) -> absl::StatusOr<CapturedChain> {
    CapturedChain chain;
    if (pick.noise_generator() != nullptr)
      chain.noise = at::ones({steps, config.vocab_size}, at::TensorOptions().device(device).dtype(at::kFloat));
    if (!device.is_cuda()) return chain;
    chain_in.start.fill_(capacity);
    chain_in.position.fill_(0);
    chain_in.tokens.zero_();
    ASSIGN_OR_RETURN(chain.graph, CudaGraph::Capture(device, PoolOwner(), [&] { ChainBody(steps, prefix, length, pick, chain); }));
    ++captures;
    return chain;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, std::string>;
  return EveryKvBucket<CapturedChain, Key>(
      chain_graphs, [&](int64_t length) { return Key{steps, prefix, length, pick.key()}; }, kv_length,
      prefix + steps - 1, device.is_cuda(), cache_slots, make);
}

absl::StatusOr<ChainResult> LlamaModel::Impl::ForwardChainStatic(const at::Tensor& first, int64_t position,
                                                                 int64_t steps, const ChainPick& pick) {
  const int64_t start = committed + tentative;
  if (!static_in.tokens.defined()) AllocateStaticInputs();
  const int64_t kv_length = KvBucket(start + steps, cache_slots);
  ASSIGN_OR_RETURN(CapturedChain * chain, Chain(steps, 1, kv_length, pick));
  chain_in.start.fill_(start);
  chain_in.position.fill_(position);
  chain_in.tokens.narrow(0, 0, 1).copy_(first, /*non_blocking=*/true);
  ChainResult result = RunChain(*chain, steps, 1, kv_length, pick);
  tentative += steps;
  return result;
}

// Slots and positions coincide here: the caller's prefix is a plain causal
// context. The host knows only max_start, so committed becomes that bound
// (ForwardAt's contract).
absl::StatusOr<ChainResult> LlamaModel::Impl::ForwardChainAtStatic(const at::Tensor& prefix, const DevicePosition& at,
                                                                   int64_t steps, const ChainPick& pick) {
  const int64_t c = prefix.size(0);
  if (!static_in.tokens.defined()) AllocateStaticInputs();
  const int64_t kv_length = KvBucket(at.max_start + c + steps, cache_slots);
  ASSIGN_OR_RETURN(CapturedChain * chain, Chain(steps, c, kv_length, pick));
  chain_in.start.copy_(at.start);
  chain_in.position.copy_(at.start);
  chain_in.tokens.narrow(0, 0, c).copy_(prefix);
  ChainResult result = RunChain(*chain, steps, c, kv_length, pick);
  committed = at.max_start + c + steps - 1;
  tentative = 0;
  return result;
}

// Draws the chain's noise and replays its graph (or runs its body on the
// CPU); the outputs are copied out of the graph's buffers, which the next
// run overwrites.
ChainResult LlamaModel::Impl::RunChain(CapturedChain& chain, int64_t steps, int64_t prefix, int64_t kv_length,
                                       const ChainPick& pick) {
  if (chain.noise.defined()) chain.noise.exponential_(1.0, *pick.noise_generator());
  if (chain.graph) {
    chain.graph->Replay();
  } else {
    ChainBody(steps, prefix, kv_length, pick, chain);
  }
  last_hidden = chain.hidden;
  ChainResult result{.tokens = chain_in.tokens.narrow(0, 0, prefix + steps).clone()};
  if (chain.rows.defined()) result.rows = chain.rows.clone();
  return result;
}

// The levels of ForwardLevels over levels_in: the prefix's c tokens at
// slots start.. as a causal chain, then each level's width nodes in the
// slots after the one before, all of a level at one position. A node sees
// what its parent sees, and itself; level 1's nodes see every slot below
// their own level.
void LlamaModel::Impl::LevelsBody(int64_t levels, int64_t prefix, int64_t kv_length, const LevelPick& pick,
                                  CapturedLevels& captured) {
  const int64_t m = pick.width();
  const at::Tensor columns = static_in.columns.narrow(0, 0, kv_length).unsqueeze(0);
  auto [prefix_logits, prefix_hidden] =
      CausalBody(levels_in.tokens.narrow(0, 0, prefix), levels_in.start, levels_in.position, 0, kv_length);
  captured.hidden = prefix_hidden;
  LevelPick::Choice choice = pick(0, prefix_logits.narrow(0, prefix - 1, 1).to(at::kFloat), {});
  captured.kept.assign(1, std::move(choice.kept));
  // Every level's slots [levels, m], positions [levels, m] and own-slot
  // columns [levels, m, kv_length] at once: three launches, not three a level.
  const at::Tensor level_start = levels_in.start + prefix;
  const at::Tensor slots = (level_start + static_in.columns.narrow(0, 0, levels * m)).view({levels, m});
  const at::Tensor positions =
      levels_in.position + static_in.columns.narrow(0, prefix, levels).unsqueeze(1).expand({levels, m});
  const at::Tensor own = at::eq(columns.unsqueeze(0), slots.unsqueeze(2));
  at::Tensor visible = at::logical_or(at::lt(columns, level_start), own[0]);
  for (int64_t level = 1; level <= levels; ++level) {
    auto [logits, hidden] = StaticForwardBody(choice.tokens.to(at::kLong), positions[level - 1], slots[level - 1],
                                              visible, kv_length);
    captured.hidden = hidden;
    const std::vector<at::Tensor> carry = std::move(choice.carry);
    choice = pick(level, logits.to(at::kFloat), carry);
    captured.kept.push_back(std::move(choice.kept));
    if (level == levels) break;
    visible = at::logical_or(visible.index_select(0, choice.parents), own[level]);
  }
}

// The levels for (levels, prefix, kv_length, pick.key()), captured as Chain()
// is: on first use, for every KV length bucket, each run once on the spare
// slots past the capacity.
absl::StatusOr<LlamaModel::Impl::CapturedLevels*> LlamaModel::Impl::Levels(int64_t levels, int64_t prefix,
                                                                          int64_t kv_length, const LevelPick& pick) {
  if (device.is_cuda()) DropGraphsIfWeightsMoved();
  auto make = [&](int64_t length) -> absl::StatusOr<CapturedLevels> {
    CapturedLevels captured;
    if (!device.is_cuda()) return captured;
    levels_in.start.fill_(capacity);
    levels_in.position.fill_(0);
    levels_in.tokens.zero_();
    ASSIGN_OR_RETURN(captured.graph, CudaGraph::Capture(device, PoolOwner(), [&] {
                       LevelsBody(levels, prefix, length, pick, captured);
                     }));
    ++captures;
    return captured;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, std::string>;
  return EveryKvBucket<CapturedLevels, Key>(
      level_graphs, [&](int64_t length) { return Key{levels, prefix, length, pick.key()}; }, kv_length,
      prefix + levels * pick.width(), device.is_cuda(), cache_slots, make);
}

absl::StatusOr<LevelsKept> LlamaModel::Impl::ForwardLevelsStatic(const at::Tensor& prefix, int64_t position,
                                                                 int64_t levels, const LevelPick& pick) {
  const int64_t c = prefix.size(0);
  const int64_t start = committed + tentative;
  if (!static_in.tokens.defined()) AllocateStaticInputs();
  const int64_t kv_length = KvBucket(start + c + levels * pick.width(), cache_slots);
  ASSIGN_OR_RETURN(CapturedLevels * captured, Levels(levels, c, kv_length, pick));
  levels_in.start.fill_(start);
  levels_in.position.fill_(position);
  levels_in.tokens.narrow(0, 0, c).copy_(prefix, /*non_blocking=*/true);
  LevelsKept kept = RunLevels(*captured, levels, c, kv_length, pick);
  tentative += c + levels * pick.width();
  return kept;
}

// Slots and positions coincide, as in ForwardChainAtStatic; committed
// becomes the host's bound (ForwardAt's contract).
absl::StatusOr<LevelsKept> LlamaModel::Impl::ForwardLevelsAtStatic(const at::Tensor& prefix, const DevicePosition& at,
                                                                   int64_t levels, const LevelPick& pick) {
  const int64_t c = prefix.size(0);
  const int64_t fed = c + levels * pick.width();
  if (!static_in.tokens.defined()) AllocateStaticInputs();
  const int64_t kv_length = KvBucket(at.max_start + fed, cache_slots);
  ASSIGN_OR_RETURN(CapturedLevels * captured, Levels(levels, c, kv_length, pick));
  levels_in.start.copy_(at.start);
  levels_in.position.copy_(at.start);
  levels_in.tokens.narrow(0, 0, c).copy_(prefix);
  LevelsKept kept = RunLevels(*captured, levels, c, kv_length, pick);
  committed = at.max_start + fed;
  tentative = 0;
  return kept;
}

// Replays the levels' graph (or runs their body on the CPU) over levels_in.
// The outputs are copied out of the graph's buffers, which the next replay
// overwrites.
LevelsKept LlamaModel::Impl::RunLevels(CapturedLevels& captured, int64_t levels, int64_t prefix, int64_t kv_length,
                                       const LevelPick& pick) {
  if (captured.graph) {
    captured.graph->Replay();
  } else {
    LevelsBody(levels, prefix, kv_length, pick, captured);
  }
  last_hidden = captured.hidden;
  LevelsKept kept(captured.kept.size());
  for (size_t l = 0; l < kept.size(); ++l)
    for (const at::Tensor& t : captured.kept[l]) kept[l].push_back(t.clone());
  return kept;
}

// Fills the static inputs (a few small copies), then replays the graph of this
// shape, capturing it on first use. Padding rows attend to the first new
// token's slot so that they stay finite: a NaN written into a padding slot
// would poison later scores even where masked.
absl::StatusOr<at::Tensor> LlamaModel::Impl::ForwardStatic(const at::Tensor& tokens, const at::Tensor& positions,
                                                           const at::Tensor& mask) {
  const int64_t n = tokens.size(0);
  const int64_t start = committed + tentative;
  const int64_t bucket = TokenBucket(n);
  const int64_t kv_length = KvBucket(start + bucket, cache_slots);
  if (!static_in.tokens.defined()) AllocateStaticInputs();
  static_in.tokens.narrow(0, 0, n).copy_(tokens, /*non_blocking=*/true);
  static_in.positions.narrow(0, 0, n).copy_(positions, /*non_blocking=*/true);
  at::Tensor write_slots = static_in.write_slots.narrow(0, 0, bucket);
  at::arange_out(write_slots, at::Scalar(start), at::Scalar(start + bucket), at::Scalar(1));
  at::Tensor allowed = static_in.allowed.narrow(0, 0, bucket).narrow(1, 0, kv_length);
  const at::Tensor columns = static_in.columns.narrow(0, 0, kv_length).expand({bucket, kv_length});
  if (mask.defined()) {
    at::lt_out(allowed, columns, at::Scalar(committed));
    allowed.narrow(0, 0, n).narrow(1, committed, tentative + n).copy_(mask, /*non_blocking=*/true);
    if (bucket > n) allowed.narrow(0, n, bucket - n).narrow(1, start, 1).fill_(true);
  } else {
    // A chain: row i sees every slot up to its own; padding rows likewise
    // (the slots they see were all written, by this forward or before).
    at::le_out(allowed, columns, write_slots.unsqueeze(1));
  }
  ASSIGN_OR_RETURN(at::Tensor logits, ReplayForward(n, bucket, kv_length));
  tentative += n;
  return logits;
}

// ForwardStatic for a chain whose start only the device knows: slots and
// positions are start + 0, 1, ..., computed on the device.
absl::StatusOr<at::Tensor> LlamaModel::Impl::ForwardAtStatic(const at::Tensor& tokens, const DevicePosition& at) {
  const int64_t n = tokens.size(0);
  const int64_t bucket = TokenBucket(n);
  const int64_t kv_length = KvBucket(at.max_start + bucket, cache_slots);
  if (!static_in.tokens.defined()) AllocateStaticInputs();
  static_in.tokens.narrow(0, 0, n).copy_(tokens);
  at::Tensor write_slots = static_in.write_slots.narrow(0, 0, bucket);
  at::add_out(write_slots, static_in.columns.narrow(0, 0, bucket), at.start);
  static_in.positions.narrow(0, 0, bucket).copy_(write_slots);
  at::Tensor allowed = static_in.allowed.narrow(0, 0, bucket).narrow(1, 0, kv_length);
  at::le_out(allowed, static_in.columns.narrow(0, 0, kv_length).expand({bucket, kv_length}), write_slots.unsqueeze(1));
  ASSIGN_OR_RETURN(at::Tensor logits, ReplayForward(n, bucket, kv_length));
  committed = at.max_start + n;
  tentative = 0;
  return logits;
}

// ForwardStatic for a tree whose start only the device knows: node i at
// slot start + i and position start + depths[i]; row i sees the slots below
// start and its row of the mask at columns start.. (fused::TreeAtInputs:
// one launch on CUDA). Padding rows see the slots below start and the root.
absl::StatusOr<at::Tensor> LlamaModel::Impl::ForwardTreeAtStatic(const at::Tensor& tokens, const at::Tensor& depths,
                                                                 const at::Tensor& mask, const DevicePosition& at) {
  const int64_t n = tokens.size(0);
  const int64_t bucket = TokenBucket(n);
  const int64_t kv_length = KvBucket(at.max_start + bucket, cache_slots);
  if (!static_in.tokens.defined()) AllocateStaticInputs();
  fused::TreeAtInputs(at.start, tokens, depths, mask, static_in.tokens, static_in.write_slots.narrow(0, 0, bucket),
                      static_in.positions.narrow(0, 0, bucket),
                      static_in.allowed.narrow(0, 0, bucket).narrow(1, 0, kv_length));
  ASSIGN_OR_RETURN(at::Tensor logits, ReplayForward(n, bucket, kv_length));
  committed = at.max_start + n;
  tentative = 0;
  return logits;
}

// Runs the forward of the static inputs' first `bucket` rows (the graph of
// the shape on CUDA) and returns the first n rows of logits as float32.
absl::StatusOr<at::Tensor> LlamaModel::Impl::ReplayForward(int64_t n, int64_t bucket, int64_t kv_length) {
  at::Tensor logits, hidden;
  if (device.is_cuda()) {
    ASSIGN_OR_RETURN(CapturedForward * graph, Graph(bucket, kv_length));
    graph->graph->Replay();
    logits = graph->logits;
    hidden = graph->hidden;
  } else {
    std::tie(logits, hidden) = StaticBody(bucket, kv_length);
  }
  // The outputs live in the graph's buffers, which the next replay overwrites.
  last_hidden = hidden.narrow(0, 0, n);
  const at::Tensor rows = logits.narrow(0, 0, n);
  return rows.scalar_type() == at::kFloat ? rows.clone() : rows.to(at::kFloat);
}

// The decoder over the cache: tokens [n] -> final hidden states [n, hidden].
// With fused weights this is about ten launches a layer (framework/model/
// fused_ops.h): the residual add rides with the next norm, RoPE with the
// K/V cache write. Otherwise (a trainer re-pointed some views) the plain layers.
at::Tensor LlamaModel::Impl::CachedLayers(const at::Tensor& tokens, const ForwardContext& ctx) {
  const ModelConfig& c = config;
  const double eps = c.rms_norm_eps;
  at::Tensor x = at::embedding(embed, tokens);
  if (!ctx.fused) {
    x = x.unsqueeze(0);
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) x = Layer(i, x, ctx, /*use_cache=*/true);
    return fused::RmsNorm(x[0], final_norm, eps);
  }
  const int64_t n = tokens.size(0);
  const at::Tensor write_slots =
      ctx.write_slots.defined() ? ctx.write_slots
                                : at::arange(ctx.start, ctx.start + n, at::TensorOptions().dtype(at::kLong).device(device));
  at::Tensor h = fused::RmsNorm(x, layers[0].input_norm, eps);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const LayerWeights& w = layers[i];
    at::Tensor k_layer = k_cache[i], v_layer = v_cache[i];
    const at::Tensor q = fused::RopeQkvToCache(Project(h, w.qkv_weight, w.qkv_bias), ctx.cos, ctx.sin,
                                               c.num_attention_heads, c.num_key_value_heads, c.head_dim, write_slots,
                                               k_layer, v_layer);
    const at::Tensor attn = Attend(q, k_layer, v_layer, ctx.mask.allowed, ctx.kv_length)
                                .view({c.num_key_value_heads, group, n, c.head_dim})
                                .permute({2, 0, 1, 3})
                                .reshape({n, c.num_attention_heads * c.head_dim});
    at::Tensor x1, h2;
    std::tie(x1, h2) = fused::AddRmsNorm(x, Project(attn, w.o_weight, w.o_bias), w.post_attention_norm, eps);
    const at::Tensor mlp =
        Project(fused::SiluMul(Project(h2, w.gate_up_weight, at::Tensor()), c.intermediate_size), w.down_weight,
                at::Tensor());
    const at::Tensor& next_norm = i + 1 < c.num_hidden_layers ? layers[i + 1].input_norm : final_norm;
    std::tie(x, h) = fused::AddRmsNorm(x1, mlp, next_norm, eps);
  }
  return h;
}

at::Tensor LlamaModel::Impl::ForwardTraining(const at::Tensor& tokens) {
  TORCH_CHECK(tokens.dim() == 2, "ForwardTraining: tokens must be [B, T], got ", tokens.sizes());
  TORCH_CHECK(tokens.scalar_type() == at::kLong, "ForwardTraining: tokens must be int64");
  const int64_t t = tokens.size(1);
  const at::Tensor positions = at::arange(t, at::TensorOptions().dtype(at::kLong).device(device));
  ForwardContext ctx;
  std::tie(ctx.cos, ctx.sin) = RopeAngles(positions, t - 1);
  at::Tensor allowed = at::ones({t, t}, at::TensorOptions().dtype(at::kBool).device(device)).tril();
  if (config.sliding_window > 0) allowed = allowed.triu(-(config.sliding_window - 1));
  ctx.mask = MakeAttentionMask(allowed, group, UseSdpa(device));
  ctx.fused = false;  // autograd must reach the HuggingFace-named views
  at::Tensor x = at::embedding(embed, tokens.to(device));
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) x = Layer(i, x, ctx, /*use_cache=*/false);
  return at::linear(fused::RmsNorm(x, final_norm, config.rms_norm_eps), lm_head);
}

absl::Status LlamaModel::Impl::Commit(absl::Span<const int64_t> slots) {
  const int64_t kept = static_cast<int64_t>(slots.size());
  for (int64_t i = 0; i < kept; ++i) {
    if (slots[i] < 0 || slots[i] >= tentative || (i > 0 && slots[i] <= slots[i - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("LlamaModel::Commit: tentative slots must be strictly increasing in [0, ", tentative,
                       "), got [", absl::StrJoin(slots, ", "), "]"));
    }
  }
  // Slots already in place (a kept prefix) need no move.
  int64_t first = 0;
  while (first < kept && slots[first] == first) ++first;
  if (first < kept) {
    c10::InferenceMode guard;
    std::vector<int64_t> src(slots.begin() + first, slots.end());
    std::vector<int64_t> dst(kept - first);
    for (int64_t i = first; i < kept; ++i) {
      src[i - first] += committed;
      dst[i - first] = committed + i;
    }
    const at::Tensor src_index = LongsToDevice(src, device);
    const at::Tensor dst_index = LongsToDevice(dst, device);
    // index_select copies first, so overlapping source and destination are safe.
    k_cache.index_copy_(2, dst_index, k_cache.index_select(2, src_index));
    v_cache.index_copy_(2, dst_index, v_cache.index_select(2, src_index));
    if (slot_positions.defined()) slot_positions.index_copy_(0, dst_index, slot_positions.index_select(0, src_index));
  }
  committed += kept;
  tentative = 0;
  return absl::OkStatus();
}

namespace {

absl::StatusOr<std::string> DtypeName(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return std::string("float32");
    case at::kBFloat16: return std::string("bfloat16");
    case at::kHalf: return std::string("float16");
    default:
      return absl::InvalidArgumentError(absl::StrCat("unsupported save dtype ", c10::toString(dtype)));
  }
}

// Tensors a checkpoint may carry that the model does not use.
bool IgnorableTensor(const std::string& name, const ModelConfig& config) {
  return (name == "lm_head.weight" && config.tie_word_embeddings) || absl::EndsWith(name, ".rotary_emb.inv_freq");
}

// The checkpoint files of a HuggingFace folder and, per tensor, the file the
// index promises it in (empty for a single file).
struct Checkpoint {
  std::vector<std::string> files;
  std::map<std::string, std::string> index;
  std::string index_path;
};

absl::StatusOr<Checkpoint> FindCheckpoint(const std::string& dir) {
  Checkpoint ckpt;
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(single)) {
    ckpt.files.push_back(single.string());
    return ckpt;
  }
  ckpt.index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  if (!fs::exists(ckpt.index_path)) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": no model.safetensors or model.safetensors.index.json in the model folder"));
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(ckpt.index_path);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(ckpt.index_path, ": invalid JSON: ", e.msg));
  }
  const YAML::Node map = root.IsMap() ? root["weight_map"] : YAML::Node();
  if (!map.IsMap()) return absl::InvalidArgumentError(absl::StrCat(ckpt.index_path, ": key 'weight_map' missing"));
  std::set<std::string> seen;
  for (const auto& item : map) {
    if (!item.second.IsScalar()) {
      return absl::InvalidArgumentError(
          absl::StrCat(ckpt.index_path, ": key 'weight_map.", item.first.Scalar(), "': expected a file name"));
    }
    const std::string file = (fs::path(dir) / item.second.Scalar()).string();
    ckpt.index[item.first.Scalar()] = file;
    if (seen.insert(file).second) ckpt.files.push_back(file);
  }
  return ckpt;
}

}  // namespace

// --- LlamaModel --------------------------------------------------------------

LlamaModel::LlamaModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LlamaModel::~LlamaModel() = default;

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::CreateRandom(const ModelConfig& config, c10::Device device,
                                                                     at::ScalarType dtype, int64_t kv_capacity,
                                                                     uint64_t seed) {
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Impl::Create(config, device, dtype, kv_capacity));
  RETURN_IF_ERROR(Guarded("LlamaModel::CreateRandom", [&]() -> absl::Status {
    c10::InferenceMode normal_tensors(false);
    c10::NoGradGuard no_grad;
    // Drawn on the CPU in float32 so every device and dtype gets the same model.
    at::Generator gen = at::detail::createCPUGenerator(seed);
    for (auto& [name, param] : impl->NamedParameters()) {
      at::Tensor values = at::empty(param.sizes(), at::TensorOptions().dtype(at::kFloat));
      if (absl::EndsWith(name, "norm.weight")) {
        values.fill_(1.0);
      } else {
        values.normal_(0.0, 0.02, gen);
      }
      param.copy_(values);
    }
    return absl::OkStatus();
  }));
  return std::unique_ptr<LlamaModel>(new LlamaModel(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::CreateRandomOnDevice(const ModelConfig& config,
                                                                             c10::Device device, at::ScalarType dtype,
                                                                             int64_t kv_capacity, uint64_t seed) {
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Impl::Create(config, device, dtype, kv_capacity));
  RETURN_IF_ERROR(Guarded("LlamaModel::CreateRandomOnDevice", [&]() -> absl::Status {
    c10::InferenceMode normal_tensors(false);
    c10::NoGradGuard no_grad;
    at::Generator gen = at::globalContext().defaultGenerator(impl->device).clone();
    gen.set_current_seed(seed);
    for (auto& [name, param] : impl->NamedParameters()) {
      if (absl::EndsWith(name, "norm.weight")) {
        param.fill_(1.0);
      } else {
        param.normal_(0.0, 0.02, gen);
      }
    }
    return absl::OkStatus();
  }));
  return std::unique_ptr<LlamaModel>(new LlamaModel(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const std::string& dir, c10::Device device,
                                                             at::ScalarType dtype, int64_t kv_capacity) {
  if (!fs::is_directory(dir)) return absl::NotFoundError(absl::StrCat(dir, ": model folder not found"));
  ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::FromJsonFile((fs::path(dir) / "config.json").string()));
  ASSIGN_OR_RETURN(Checkpoint ckpt, FindCheckpoint(dir));
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Impl::Create(config, device, dtype, kv_capacity));
  std::map<std::string, at::Tensor> expected;
  for (auto& [name, param] : impl->NamedParameters()) expected.emplace(name, param);
  std::set<std::string> loaded;
  // One shard at a time keeps host memory at about one shard.
  for (const std::string& file : ckpt.files) {
    ASSIGN_OR_RETURN(auto tensors, ReadSafetensors(file));
    for (const auto& [name, tensor] : tensors) {
      auto it = expected.find(name);
      if (it == expected.end()) {
        if (IgnorableTensor(name, config)) continue;
        // Refused rather than skipped: an unused weight means the config
        // describes a different model than the checkpoint holds.
        return absl::InvalidArgumentError(absl::StrCat(file, ": unexpected tensor '", name, "' for a ",
                                                       config.model_type, " model with this config.json"));
      }
      if (tensor.sizes() != it->second.sizes()) {
        return absl::InvalidArgumentError(absl::StrCat(file, ": tensor '", name, "' has shape ",
                                                       ShapeString(tensor.sizes()), ", expected ",
                                                       ShapeString(it->second.sizes())));
      }
      RETURN_IF_ERROR(Guarded(absl::StrCat(file, ": tensor '", name, "'"), [&]() -> absl::Status {
        c10::InferenceMode normal_tensors(false);
        c10::NoGradGuard no_grad;
        it->second.copy_(tensor);
        return absl::OkStatus();
      }));
      loaded.insert(name);
    }
  }
  for (const auto& [name, param] : expected) {
    if (loaded.count(name)) continue;
    auto where = ckpt.index.find(name);
    const std::string file = ckpt.index_path.empty() ? ckpt.files[0]
                             : where != ckpt.index.end() ? where->second
                                                         : ckpt.index_path;
    return absl::NotFoundError(absl::StrCat(file, ": tensor '", name, "' is missing"));
  }
  return std::unique_ptr<LlamaModel>(new LlamaModel(std::move(impl)));
}

absl::Status LlamaModel::Save(const std::string& dir, at::ScalarType save_dtype) const {
  ASSIGN_OR_RETURN(std::string dtype_name, DtypeName(save_dtype));
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return absl::PermissionDeniedError(absl::StrCat(dir, ": cannot create folder: ", error.message()));
  ModelConfig config = impl_->config;
  config.torch_dtype = dtype_name;
  RETURN_IF_ERROR(config.WriteJsonFile((fs::path(dir) / "config.json").string()));
  std::map<std::string, at::Tensor> tensors;
  RETURN_IF_ERROR(Guarded(absl::StrCat(dir, ": converting weights"), [&]() -> absl::Status {
    c10::NoGradGuard no_grad;
    for (const auto& [name, param] : impl_->NamedParameters()) {
      tensors.emplace(name, param.detach().to(at::kCPU, save_dtype).contiguous());
    }
    return absl::OkStatus();
  }));
  return WriteSafetensors((fs::path(dir) / "model.safetensors").string(), tensors);
}

const ModelConfig& LlamaModel::config() const { return impl_->config; }

void LlamaModel::EnableCudaGraphs(bool enable) { impl_->static_shapes = enable; }

void LlamaModel::SetBatchInvariant(bool enable) {
  if (enable == impl_->batch_invariant) return;
  impl_->batch_invariant = enable;
  impl_->DropGraphs();  // they captured the other kernels
}

bool LlamaModel::batch_invariant() const { return impl_->batch_invariant; }
int64_t LlamaModel::graph_captures() const { return impl_->captures; }
bool LlamaModel::cuda_graphs_enabled() const { return impl_->static_shapes; }

int64_t LlamaModel::DecodeWeightBytes() const {
  int64_t bytes = 0;
  for (const auto& [name, param] : impl_->NamedParameters()) {
    if (name == "model.embed_tokens.weight" && !impl_->config.tie_word_embeddings) continue;  // one row per step
    bytes += param.numel() * static_cast<int64_t>(param.element_size());
  }
  return bytes;
}
c10::Device LlamaModel::device() const { return impl_->device; }
int64_t LlamaModel::capacity() const { return impl_->capacity; }
int64_t LlamaModel::committed_length() const { return impl_->committed; }
int64_t LlamaModel::tentative_length() const { return impl_->tentative; }
at::Tensor LlamaModel::last_hidden_states() const { return impl_->last_hidden; }

absl::StatusOr<at::Tensor> LlamaModel::Forward(const at::Tensor& tokens, const at::Tensor& positions,
                                               const at::Tensor& mask) {
  absl::StatusOr<at::Tensor> logits =
      Guarded("LlamaModel::Forward", [&] { return impl_->Forward(tokens, positions, mask); });
  if (logits.ok()) CountForward(tokens.size(0));
  return logits;
}

absl::StatusOr<ChainResult> LlamaModel::ForwardChain(const at::Tensor& first, int64_t position, int64_t steps,
                                                     const ChainPick& pick) {
  Impl& m = *impl_;
  const bool chain = m.static_shapes && m.config.sliding_window == 0 && steps >= 1 && steps <= kMaxChainSteps;
  if (!chain) return LanguageModel::ForwardChain(first, position, steps, pick);
  if (!first.defined() || first.dim() != 1 || first.size(0) != 1 || first.scalar_type() != at::kLong ||
      first.device() != m.device)
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::ForwardChain: the first token must be int64 [1] on ",
                                                   m.device.str()));
  if (position < 0) return absl::InvalidArgumentError("LlamaModel::ForwardChain: negative position");
  if (m.committed + m.tentative + steps > m.capacity)
    return absl::ResourceExhaustedError(absl::StrCat("LlamaModel::ForwardChain: ", steps, " more tokens exceed the KV "
                                                     "capacity ", m.capacity, " (", m.committed + m.tentative,
                                                     " slots in use)"));
  absl::StatusOr<ChainResult> result = Guarded("LlamaModel::ForwardChain", [&] {
    c10::InferenceMode guard;
    return m.ForwardChainStatic(first, position, steps, pick);
  });
  if (result.ok())
    for (int64_t i = 0; i < steps; ++i) CountForward(1);
  return result;
}

// Checks a device-positioned forward of `fed` tokens (ForwardAt and
// ForwardChainAt): tokens int64 [n] and start int64 [1] on the model's
// device, and room for max_start + fed slots.
absl::Status LlamaModel::Impl::ValidateAt(const char* what, const at::Tensor& tokens, const DevicePosition& at,
                                          int64_t fed) const {
  auto on_device_longs = [&](const at::Tensor& t, int64_t size) {
    return t.defined() && t.dim() == 1 && (size < 0 || t.size(0) == size) && t.scalar_type() == at::kLong &&
           t.device() == device;
  };
  if (!on_device_longs(tokens, -1) || tokens.size(0) < 1)
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::", what, ": tokens must be int64 [n], n >= 1, on ",
                                                   device.str()));
  if (!on_device_longs(at.start, 1))
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::", what, ": start must be int64 [1] on ", device.str()));
  if (at.max_start < 0) return absl::InvalidArgumentError(absl::StrCat("LlamaModel::", what, ": negative max_start"));
  if (at.max_start + fed > capacity)
    return absl::ResourceExhaustedError(absl::StrCat("LlamaModel::", what, ": ", fed, " tokens from position up to ",
                                                     at.max_start, " exceed the KV capacity ", capacity));
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> LlamaModel::ForwardAt(const at::Tensor& tokens, const DevicePosition& at) {
  Impl& m = *impl_;
  const bool fits_static = m.static_shapes && m.config.sliding_window == 0 && tokens.defined() && tokens.dim() == 1 &&
                           tokens.size(0) <= kMaxTokenBucket;
  if (!fits_static) return LanguageModel::ForwardAt(tokens, at);
  RETURN_IF_ERROR(m.ValidateAt("ForwardAt", tokens, at, tokens.size(0)));
  absl::StatusOr<at::Tensor> logits = Guarded("LlamaModel::ForwardAt", [&] {
    c10::InferenceMode guard;
    return m.ForwardAtStatic(tokens, at);
  });
  if (logits.ok()) CountForward(tokens.size(0));
  return logits;
}

absl::StatusOr<ChainResult> LlamaModel::ForwardChainAt(const at::Tensor& prefix, const DevicePosition& at,
                                                       int64_t steps, const ChainPick& pick) {
  Impl& m = *impl_;
  const bool chain = m.static_shapes && m.config.sliding_window == 0 && steps >= 1 && steps <= kMaxChainSteps &&
                     prefix.defined() && prefix.dim() == 1 && prefix.size(0) <= kMaxChainPrefix;
  if (!chain) return LanguageModel::ForwardChainAt(prefix, at, steps, pick);
  RETURN_IF_ERROR(m.ValidateAt("ForwardChainAt", prefix, at, prefix.size(0) + steps - 1));
  absl::StatusOr<ChainResult> result = Guarded("LlamaModel::ForwardChainAt", [&] {
    c10::InferenceMode guard;
    return m.ForwardChainAtStatic(prefix, at, steps, pick);
  });
  if (result.ok()) {
    CountForward(prefix.size(0));
    for (int64_t i = 1; i < steps; ++i) CountForward(1);
  }
  return result;
}

absl::StatusOr<LevelsKept> LlamaModel::ForwardLevels(const at::Tensor& prefix, int64_t position, int64_t levels,
                                                     const LevelPick& pick) {
  Impl& m = *impl_;
  if (!m.LevelsFitGraph(prefix, levels, pick)) return LanguageModel::ForwardLevels(prefix, position, levels, pick);
  if (!pick.defined()) return absl::InvalidArgumentError("LlamaModel::ForwardLevels: pick has no function");
  if (prefix.size(0) < 1 || prefix.scalar_type() != at::kLong || prefix.device() != m.device)
    return absl::InvalidArgumentError(
        absl::StrCat("LlamaModel::ForwardLevels: the prefix must be int64 [c >= 1] on ", m.device.str()));
  if (position < 0) return absl::InvalidArgumentError("LlamaModel::ForwardLevels: negative position");
  const int64_t fed = prefix.size(0) + pick.width() * levels;
  if (m.committed + m.tentative + fed > m.capacity)
    return absl::ResourceExhaustedError(absl::StrCat("LlamaModel::ForwardLevels: ", fed,
                                                     " more tokens exceed the KV capacity ", m.capacity, " (",
                                                     m.committed + m.tentative, " slots in use)"));
  absl::StatusOr<LevelsKept> kept = Guarded("LlamaModel::ForwardLevels", [&] {
    c10::InferenceMode guard;
    return m.ForwardLevelsStatic(prefix, position, levels, pick);
  });
  if (kept.ok()) CountLevelForwards(prefix.size(0), levels, pick.width());
  return kept;
}

// ForwardLevels' forwards as the default's Forward() calls count them.
void LlamaModel::CountLevelForwards(int64_t prefix, int64_t levels, int64_t width) {
  CountForward(prefix);
  for (int64_t i = 0; i < levels; ++i) CountForward(width);
}

absl::StatusOr<at::Tensor> LlamaModel::ForwardTreeAt(const at::Tensor& tokens, const at::Tensor& depths,
                                                     const at::Tensor& mask, const DevicePosition& at) {
  Impl& m = *impl_;
  const bool fits_static = m.static_shapes && m.config.sliding_window == 0 && tokens.defined() && tokens.dim() == 1 &&
                           tokens.size(0) <= kMaxTokenBucket;
  if (!fits_static) return LanguageModel::ForwardTreeAt(tokens, depths, mask, at);
  RETURN_IF_ERROR(m.ValidateAt("ForwardTreeAt", tokens, at, tokens.size(0)));
  const int64_t n = tokens.size(0);
  if (!depths.defined() || depths.dim() != 1 || depths.size(0) != n || depths.scalar_type() != at::kLong ||
      depths.device() != m.device || !mask.defined() || mask.dim() != 2 || mask.size(0) != n || mask.size(1) != n ||
      mask.scalar_type() != at::kBool || mask.device() != m.device)
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::ForwardTreeAt: depths must be int64 [", n,
                                                   "] and mask bool [", n, ", ", n, "] on ", m.device.str()));
  absl::StatusOr<at::Tensor> logits = Guarded("LlamaModel::ForwardTreeAt", [&] {
    c10::InferenceMode guard;
    return m.ForwardTreeAtStatic(tokens, depths, mask, at);
  });
  if (logits.ok()) CountForward(n);
  return logits;
}

absl::Status LlamaModel::CompactPathAt(const at::Tensor& nodes, const DevicePosition& at) {
  Impl& m = *impl_;
  if (!m.static_shapes || m.config.sliding_window > 0) return LanguageModel::CompactPathAt(nodes, at);
  if (!nodes.defined() || nodes.dim() != 1 || nodes.size(0) < 1 || nodes.size(0) >= kMaxTokenBucket ||
      nodes.scalar_type() != at::kLong || nodes.device() != m.device)
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::CompactPathAt: nodes must be int64 [m], 1 <= m < ",
                                                   kMaxTokenBucket, ", on ", m.device.str()));
  RETURN_IF_ERROR(m.ValidateAt("CompactPathAt", nodes, at, nodes.size(0) + 1));
  return Guarded("LlamaModel::CompactPathAt", [&] {
    c10::InferenceMode guard;
    fused::MovePathEntries(m.k_cache, m.v_cache, at.start, nodes);
    return absl::OkStatus();
  });
}

absl::StatusOr<LevelsKept> LlamaModel::ForwardLevelsAt(const at::Tensor& prefix, const DevicePosition& at,
                                                       int64_t levels, const LevelPick& pick) {
  Impl& m = *impl_;
  if (!m.LevelsFitGraph(prefix, levels, pick)) return LanguageModel::ForwardLevelsAt(prefix, at, levels, pick);
  if (!pick.defined()) return absl::InvalidArgumentError("LlamaModel::ForwardLevelsAt: pick has no function");
  RETURN_IF_ERROR(m.ValidateAt("ForwardLevelsAt", prefix, at, prefix.size(0) + levels * pick.width()));
  absl::StatusOr<LevelsKept> kept = Guarded("LlamaModel::ForwardLevelsAt", [&] {
    c10::InferenceMode guard;
    return m.ForwardLevelsAtStatic(prefix, at, levels, pick);
  });
  if (kept.ok()) CountLevelForwards(prefix.size(0), levels, pick.width());
  return kept;
}

absl::Status LlamaModel::Commit(absl::Span<const int64_t> tentative_slots) {
  return Guarded("LlamaModel::Commit", [&] { return impl_->Commit(tentative_slots); });
}

absl::Status LlamaModel::PrepareForDecoding(int64_t max_tokens) {
  return Guarded("LlamaModel::PrepareForDecoding", [&] { return impl_->PrepareForDecoding(max_tokens); });
}

absl::Status LlamaModel::Truncate(int64_t length) {
  if (length < 0 || length > impl_->committed) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::Truncate: length ", length, " outside [0, ",
                                                   impl_->committed, "] (the committed length)"));
  }
  impl_->committed = length;
  impl_->tentative = 0;
  return absl::OkStatus();
}

at::Tensor LlamaModel::ForwardTraining(const at::Tensor& tokens) {
  // The signature has no Status: failures print the reason and return an
  // undefined tensor rather than throwing.
  try {
    return impl_->ForwardTraining(tokens);
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "LlamaModel::ForwardTraining: %s\n", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "LlamaModel::ForwardTraining: %s\n", e.what());
  }
  return at::Tensor();
}

std::vector<std::pair<std::string, at::Tensor>> LlamaModel::NamedParameters() const {
  return impl_->NamedParameters();
}

absl::Status LlamaModel::ResetCache(int64_t kv_capacity) {
  if (kv_capacity <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::ResetCache: kv_capacity must be positive, got ",
                                                   kv_capacity));
  }
  return Guarded("LlamaModel::ResetCache", [&]() -> absl::Status {
    impl_->AllocateCache(kv_capacity);
    return absl::OkStatus();
  });
}

}  // namespace speclab

// The decoder: layers over the KV cache, the eager forward, training, commit.
#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status_macros.h"
#include "framework/device_transfer.h"
#include "framework/model/fused_ops.h"
#include "framework/model/llama_model_impl.h"

namespace speclab {

namespace {

absl::Status BadForward(const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat("LlamaModel::Forward: ", msg));
}

absl::Status CheckInput(const at::Tensor& t, const char* name, at::ScalarType type, int64_t dims,
                        c10::Device device) {
  if (!t.defined()) return BadForward(absl::StrCat(name, " is undefined"));
  if (t.dim() != dims)
    return BadForward(absl::StrCat(name, " must have ", dims, " dims, got shape ", ShapeString(t.sizes())));
  if (t.scalar_type() != type)
    return BadForward(absl::StrCat(name, " must be ", c10::toString(type), ", got ", c10::toString(t.scalar_type())));
  if (t.device() != device)
    return BadForward(absl::StrCat(name, " is on ", t.device().str(), ", model on ", device.str()));
  return absl::OkStatus();
}

}  // namespace

absl::Status LlamaModel::Impl::ValidateForward(const at::Tensor& tokens, const at::Tensor& positions,
                                               const at::Tensor& mask) const {
  RETURN_IF_ERROR(CheckInput(tokens, "tokens", at::kLong, 1, device));
  return ValidatePlacement(tokens.size(0), positions, mask);
}

// Positions and mask of n new tokens, and room for them in the cache.
absl::Status LlamaModel::Impl::ValidatePlacement(int64_t n, const at::Tensor& positions,
                                                 const at::Tensor& mask) const {
  RETURN_IF_ERROR(CheckInput(positions, "positions", at::kLong, 1, device));
  if (mask.defined()) RETURN_IF_ERROR(CheckInput(mask, "mask", at::kBool, 2, device));
  if (n == 0) return BadForward("no tokens");
  if (positions.size(0) != n) {
    return BadForward(absl::StrCat("positions has shape ", ShapeString(positions.sizes()), ", expected [", n, "]"));
  }
  if (mask.defined() && (mask.size(0) != n || mask.size(1) != tentative + n)) {
    return BadForward(absl::StrCat("mask has shape ", ShapeString(mask.sizes()), ", expected [", n, ", ", tentative + n,
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

absl::Status LlamaModel::Impl::ValidateInputs(const at::Tensor& inputs, const at::Tensor& positions,
                                              const at::Tensor& mask) const {
  RETURN_IF_ERROR(CheckInput(inputs, "inputs", dtype, 2, device));
  if (inputs.size(1) != config.hidden_size)
    return BadForward(absl::StrCat("inputs has shape ", ShapeString(inputs.sizes()), ", expected [n, ",
                                   config.hidden_size, "]"));
  return ValidatePlacement(inputs.size(0), positions, mask);
}

absl::StatusOr<at::Tensor> LlamaModel::Impl::ForwardEager(const at::Tensor& tokens, const at::Tensor& positions,
                                                          const at::Tensor& mask, const at::Tensor& inputs) {
  const int64_t n = inputs.defined() ? inputs.size(0) : tokens.size(0);
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
    // Inputs given in place of tokens have no ids: their slots bound nothing.
    const at::Tensor ids = inputs.defined() ? positions.new_zeros({1}) : tokens;
    const at::Tensor bounds = at::stack({ids.min(), ids.max(), positions.min(), positions.max()}).cpu();
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
  ctx.inputs = inputs;

  last_hidden = CachedLayers(tokens, ctx);
  tentative += n;
  return Logits(last_hidden[-1]).to(at::kFloat);
}

// The decoder over the cache: tokens [n] -> the kept hidden states
// [kept_layers, n, hidden], the final norm's output last. With fused weights this is about ten launches a layer (framework/model/
// fused_ops.h): the residual add rides with the next norm, RoPE with the
// K/V cache write. Otherwise (a trainer re-pointed some views) the plain layers.
at::Tensor LlamaModel::Impl::CachedLayers(const at::Tensor& tokens, const ForwardContext& ctx) {
  at::Tensor x = ctx.inputs.defined() ? ctx.inputs : at::embedding(embed, tokens);
  ++passes[x.size(0)];
  const ModelConfig& c = config;
  const double eps = c.rms_norm_eps;
  // transformers' hidden_states[index]: the embeddings, each layer's output, the final norm's.
  std::vector<at::Tensor> kept;
  auto keep = [&](int64_t index, const at::Tensor& state) {
    if (std::binary_search(kept_layers.begin(), kept_layers.end(), index)) kept.push_back(state);
  };
  auto stacked = [&] { return kept.size() == 1 ? kept[0].unsqueeze(0) : at::stack(kept); };
  keep(0, x);
  if (!ctx.fused) {
    x = x.unsqueeze(0);
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      x = Layer(i, x, ctx, /*use_cache=*/true);
      if (i + 1 < c.num_hidden_layers) keep(i + 1, x[0]);
    }
    keep(c.num_hidden_layers, fused::RmsNorm(x[0], final_norm, eps));
    return stacked();
  }
  const int64_t n = x.size(0);
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
    if (i + 1 < c.num_hidden_layers) keep(i + 1, x);
  }
  keep(c.num_hidden_layers, h);
  return stacked();
}

at::Tensor LlamaModel::Impl::ForwardTraining(const at::Tensor& tokens) {
  TORCH_CHECK(tokens.dim() == 2, "ForwardTraining: tokens must be [B, T], got ", tokens.sizes());
  TORCH_CHECK(tokens.scalar_type() == at::kLong, "ForwardTraining: tokens must be int64");
  return at::linear(ForwardTrainingEmbedded(at::embedding(embed, tokens.to(device)), 0), lm_head);
}

at::Tensor LlamaModel::Impl::ForwardTrainingEmbedded(const at::Tensor& inputs, int64_t first_position) {
  TORCH_CHECK(inputs.dim() == 3 && inputs.size(2) == config.hidden_size,
              "ForwardTrainingEmbedded: inputs must be [B, T, ", config.hidden_size, "], got ", inputs.sizes());
  TORCH_CHECK(first_position >= 0, "ForwardTrainingEmbedded: negative first position");
  const int64_t t = inputs.size(1);
  const at::TensorOptions options = at::TensorOptions().device(device);
  at::Tensor allowed = at::ones({t, t}, options.dtype(at::kBool)).tril();
  if (config.sliding_window > 0) allowed = allowed.triu(-(config.sliding_window - 1));
  return TrainingLayers(inputs, at::arange(first_position, first_position + t, options.dtype(at::kLong)), allowed,
                        {static_cast<int>(config.num_hidden_layers)})[0];
}

std::vector<at::Tensor> LlamaModel::Impl::TrainingLayers(const at::Tensor& inputs, const at::Tensor& positions,
                                                         const at::Tensor& allowed, absl::Span<const int> indices) {
  TORCH_CHECK(inputs.dim() == 3 && inputs.size(2) == config.hidden_size,
              "training forward: inputs must be [B, R, ", config.hidden_size, "], got ", inputs.sizes());
  const int64_t r = inputs.size(1);
  TORCH_CHECK(positions.dim() == 1 && positions.size(0) == r && allowed.sizes() == at::IntArrayRef({r, r}),
              "training forward: ", r, " rows need [", r, "] positions and a [", r, ", ", r, "] mask");
  TORCH_CHECK(!indices.empty(), "training forward: no hidden state asked for");
  ForwardContext ctx;
  std::tie(ctx.cos, ctx.sin) = RopeAngles(positions.to(device), positions.max().item<int64_t>());
  ctx.mask = MakeAttentionMask(allowed.to(device), group, UseSdpa(device));
  ctx.fused = false;  // autograd must reach the HuggingFace-named views
  // transformers' hidden_states[index]: the embeddings, each layer's output, the final norm's.
  std::vector<at::Tensor> states = {inputs.to(device)};
  const int64_t last = *std::max_element(indices.begin(), indices.end());
  for (int64_t i = 0; i < std::min(last, config.num_hidden_layers); ++i) states.push_back(Layer(i, states.back(), ctx, false));
  if (last == config.num_hidden_layers) states.back() = fused::RmsNorm(states.back(), final_norm, config.rms_norm_eps);
  std::vector<at::Tensor> out;
  for (int index : indices) out.push_back(states[index]);
  return out;
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

}  // namespace speclab

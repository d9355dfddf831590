// Static-shape forwards: CUDA graphs (run eagerly on the CPU), device-picked
// chains and levels, and forwards at positions only the device knows.
#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status_macros.h"
#include "framework/device_transfer.h"
#include "framework/model/cuda_graph.h"
#include "framework/model/fused_ops.h"
#include "framework/model/llama_model_impl.h"

namespace speclab {

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
  chain_in.tokens = at::zeros({kMaxChainPrefix + kMaxChainSteps + kMaxGuessesPerRound + 1}, longs);
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
                                                                      const at::Tensor& allowed, int64_t kv_length,
                                                                      const at::Tensor& inputs) {
  ForwardContext ctx;
  std::tie(ctx.cos, ctx.sin) = RopeAngles(positions, std::numeric_limits<int64_t>::max());
  ctx.fused = std::all_of(layers.begin(), layers.end(), [](const LayerWeights& w) { return w.FusedIntact(); });
  ctx.mask = ctx.fused ? AttentionMask{.allowed = allowed} : MakeAttentionMask(allowed, group, UseSdpa(device));
  ctx.write_slots = write_slots;
  ctx.kv_length = kv_length;
  ctx.inputs = inputs;
  at::Tensor hidden = CachedLayers(tokens, ctx);
  at::Tensor logits = Logits(hidden[-1]);  // in the model's dtype: the copy out converts
  return {logits, hidden};
}

// A causal forward of tokens [c] (or inputs [c, hidden]) at slots start +
// offset .. and positions position + offset .. (start, position: [1] int64
// on the device), each token seeing every slot up to its own: the forwards
// of chain bodies, and LevelsBody's prefix.
std::pair<at::Tensor, at::Tensor> LlamaModel::Impl::CausalBody(const at::Tensor& tokens, const at::Tensor& start,
                                                               const at::Tensor& position, int64_t offset,
                                                               int64_t kv_length, const at::Tensor& inputs) {
  const at::Tensor columns = static_in.columns.narrow(0, 0, kv_length).unsqueeze(0);
  const at::Tensor offsets = static_in.columns.narrow(0, offset, inputs.defined() ? inputs.size(0) : tokens.size(0));
  const at::Tensor write_slots = start + offsets;
  return StaticForwardBody(tokens, position + offsets, write_slots, at::le(columns, write_slots.unsqueeze(1)),
                           kv_length, inputs);
}

// The picks of a chain: pick i chooses from the logits (and, for a pick
// that reads it, the final hidden state) that after(i) gives, and is written
// to picked[i]. With a stop (ChainPick::StoppedBy), each step after the
// first is conditional on drafting going on (chain.conditional says whether
// the capture made it so), and nested in the step before: the stop's own
// launch after step i sets the condition of step i + 1 (CudaGraph::
// BeginIfSet), so a chain that stopped meets one false condition, not one a
// remaining step. The rows land in a buffer holding copies of the first
// step's row until then.
void LlamaModel::Impl::PickChain(int64_t steps, const ChainPick& pick, CapturedChain& chain, const at::Tensor& picked,
                                 const std::function<LogitsAndHidden(int64_t i)>& after) {
  std::vector<at::Tensor> rows;
  ChainPick::StopState stop;
  if (pick.stops()) stop = pick.StartStop(device);
  std::optional<uint64_t> go_on;  // set by the stop after step i - 1
  std::vector<bool> nested;       // the conditional steps begun, ended innermost first
  for (int64_t i = 0; i < steps; ++i) {
    const bool conditional = i > 0 && pick.stops() && CudaGraph::BeginIfSet(go_on);
    chain.conditional = chain.conditional || conditional;
    const auto [logits, hidden] = after(i);
    auto [token, row] = pick(logits.to(at::kFloat), chain.noise.defined() ? chain.noise.narrow(0, i, 1) : at::Tensor(),
                             pick.reads_hidden() ? hidden.to(at::kFloat) : at::Tensor());
    picked.narrow(0, i, 1).copy_(token.view({1}));
    if (pick.stops()) {
      if (i == 0) rows.push_back(row.expand({steps, row.size(1)}).contiguous());
      rows.front().narrow(0, i, 1).copy_(row);
      go_on = i + 1 < steps ? CudaGraph::NewCondition() : std::nullopt;
      pick.ObserveStop(rows.front().narrow(0, 0, i + 1), stop, go_on);
    } else if (row.defined()) {
      rows.push_back(row);
    }
    nested.push_back(conditional);
  }
  CudaGraph::EndNested(nested);
  chain.rows = rows.empty() ? at::Tensor() : pick.stops() ? rows.front() : at::cat(rows);
  chain.kept = stop.kept;
}

// The chain of ForwardChain over chain_in: the first forward feeds tokens[0,
// prefix) at slots start.. and positions position.., each seeing every slot up
// to its own; each later forward feeds the token the step before picked,
// which it wrote to tokens[prefix + i].
void LlamaModel::Impl::ChainBody(int64_t steps, int64_t prefix, int64_t kv_length, const ChainPick& pick,
                                 CapturedChain& chain) {
  PickChain(steps, pick, chain, chain_in.tokens.narrow(0, prefix, steps), [&](int64_t i) {
    const int64_t offset = i == 0 ? 0 : prefix + i - 1;  // of the fed tokens, from the chain's start
    const int64_t fed = i == 0 ? prefix : 1;
    const auto [logits, hidden] =
        CausalBody(chain_in.tokens.narrow(0, offset, fed), chain_in.start, chain_in.position, offset, kv_length);
    return LogitsAndHidden{logits.narrow(0, fed - 1, 1), hidden[-1].narrow(0, fed - 1, 1)};
  });
}

// The chain of ForwardChainInRoundsAt over chain_in: the prefix at slots
// start.. and positions position..; each round feeds the chain's last token
// and the guesses after it (CausalBody), every round after the first a
// conditional node of the graph nested in the one before (on the CPU the
// picks so far are read back between rounds instead).
void LlamaModel::Impl::RoundsBody(int64_t steps, int64_t prefix, int64_t kv_length, const ChainPick& pick,
                                  const ChainGuess& guess, CapturedChain& chain) {
  ChainRounds rounds{.sequence = chain_in.sequence, .tokens = chain_in.tokens, .position = chain_in.position,
                     .noise = chain.noise};
  const FeedRound feed = [&](const at::Tensor& tokens, const at::Tensor& offset, const at::Tensor& position)
      -> absl::StatusOr<std::pair<at::Tensor, at::Tensor>> {
    auto [logits, hidden] = CausalBody(tokens, chain_in.start + offset, position, 0, kv_length);
    return std::make_pair(logits, pick.reads_hidden() ? hidden[-1] : at::Tensor());
  };
  const absl::Status status = DraftInRounds(prefix, steps, pick, guess, rounds, feed,
                                            device.is_cuda() ? RoundSkip::kConditional : RoundSkip::kReadBack);
  if (!status.ok()) throw std::runtime_error(std::string(status.message()));  // Guarded's to report
  chain.rows = rounds.rows;
  chain.later_rounds = rounds.later_rounds;
}

// The chain of ForwardChainOnFeatures over chain_in (tokens[0] the root) and
// features_in: token i >= 1 is fed at slot start + i - 1 and position
// position + i - 1 (position: the root's plus one), with inputs from its
// embedding and the feature after token i - 1.
void LlamaModel::Impl::FeatureChainBody(int64_t steps, int64_t kv_length, const ChainPick& pick,
                                        const NodeInputs& inputs, CapturedChain& chain) {
  at::Tensor feature = features_in.features.narrow(0, 0, 1);
  PickChain(steps, pick, chain, chain_in.tokens.narrow(0, 1, steps), [&](int64_t i) {
    // Feature chains give no hidden states (ForwardChainOnFeatures refuses picks that read them).
    if (i == 0) return LogitsAndHidden{features_in.logits, at::Tensor()};
    const at::Tensor x = inputs(at::embedding(embed, chain_in.tokens.narrow(0, i, 1)), feature);
    auto [logits, hidden] = CausalBody(at::Tensor(), chain_in.start, chain_in.position, i - 1, kv_length, x);
    feature = hidden[-1];
    return LogitsAndHidden{logits, at::Tensor()};
  });
}

// The chain for (steps, prefix, kv_length, key). On CUDA its first use
// captures the chain for every KV length bucket, each run once on the spare
// slots past the capacity (the cache's contents stay as they were).
absl::StatusOr<LlamaModel::Impl::CapturedChain*> LlamaModel::Impl::Chain(int64_t steps, int64_t prefix,
                                                                        int64_t kv_length, const ChainPick& pick,
                                                                        const std::string& key, int64_t fed,
                                                                        const ChainWork& work) {
  if (device.is_cuda()) DropGraphsIfWeightsMoved();
  auto make = [&](int64_t length) -> absl::StatusOr<CapturedChain> {
    CapturedChain chain;
    if (pick.noise_generator() != nullptr)
      chain.noise = at::ones({steps, config.vocab_size}, at::TensorOptions().device(device).dtype(at::kFloat));
    if (!device.is_cuda()) return chain;
    ResetInputsForCapture();
    ASSIGN_OR_RETURN(chain.graph, CudaGraph::Capture(device, PoolOwner(), [&] { work(length, chain); }));
    ++captures;
    return chain;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, std::string>;
  return EveryKvBucket<CapturedChain, Key>(
      chain_graphs, [&](int64_t length) { return Key{steps, prefix, length, key}; }, kv_length, fed,
      device.is_cuda(), cache_slots, make);
}

namespace {

// The key of a growth on features: the pick's and the inputs'.
std::string FeatureKey(const std::string& pick_key, const NodeInputs& inputs) {
  return absl::StrCat(pick_key, "|on features:", inputs.key());
}

}  // namespace

absl::StatusOr<ChainResult> LlamaModel::Impl::ForwardChainStatic(const at::Tensor& first, int64_t position,
                                                                 int64_t steps, const ChainPick& pick) {
  const int64_t start = committed + tentative;
  if (!static_in.tokens.defined()) AllocateStaticInputs();
  const int64_t kv_length = KvBucket(start + steps, cache_slots);
  const ChainWork work = [&](int64_t length, CapturedChain& chain) { ChainBody(steps, 1, length, pick, chain); };
  ASSIGN_OR_RETURN(CapturedChain * chain, Chain(steps, 1, kv_length, pick, pick.key(), steps, work));
  chain_in.start.fill_(start);
  chain_in.position.fill_(position);
  chain_in.tokens.narrow(0, 0, 1).copy_(first, /*non_blocking=*/true);
  ChainResult result = RunChain(*chain, 1 + steps, kv_length, pick, work);
  tentative += steps;
  return result;
}

void LlamaModel::Impl::ResetInputsForCapture() {
  for (auto* in : {&chain_in.start, &levels_in.start}) in->fill_(capacity);
  for (auto* in : {&chain_in.position, &levels_in.position}) in->fill_(0);
  chain_in.tokens.zero_();
  levels_in.tokens.zero_();
  if (features_in.path_slot.defined()) {
    features_in.path_slot.fill_(capacity);
    features_in.path_position.fill_(0);
    features_in.path_length.fill_(1);
  }
}

void LlamaModel::Impl::AllocateFeatureBuffers() {
  if (!static_in.tokens.defined()) AllocateStaticInputs();
  const auto longs = at::TensorOptions().device(device).dtype(at::kLong);
  features_in.logits = at::zeros({1, config.vocab_size}, longs.dtype(at::kFloat));
  features_in.features = at::zeros({1 + kMaxTokenBucket, config.hidden_size}, Options());
  features_in.path_tokens = at::zeros({kMaxTokenBucket}, longs);
  features_in.path_features = at::zeros({kMaxTokenBucket, config.hidden_size}, Options());
  features_in.path_length = at::ones({1}, longs);
  features_in.path_slot = at::full({1}, capacity, longs);
  features_in.path_position = at::zeros({1}, longs);
}

void LlamaModel::Impl::LoadFeatureRoot(const FeatureRoot& root) {
  features_in.logits.copy_(root.logits);
  features_in.features.narrow(0, 0, 1).copy_(root.feature);
}

void LlamaModel::Impl::LoadFeaturePath(const FeaturePathAt& path) {
  const int64_t w = path.tokens.size(0);
  features_in.path_tokens.narrow(0, 0, w).copy_(path.tokens);
  features_in.path_features.narrow(0, 0, w).copy_(path.features);
  features_in.path_length.copy_(path.length);
  features_in.path_slot.copy_(path.slot.start);
  features_in.path_position.copy_(path.position);
}

// Row length - 1 of the path is the root; the rows after it are padding.
void LlamaModel::Impl::FeaturePathBody(int64_t w, int64_t kv_length, const NodeInputs& inputs) {
  const at::Tensor x = inputs(at::embedding(embed, features_in.path_tokens.narrow(0, 0, w)),
                              features_in.path_features.narrow(0, 0, w));
  auto [logits, hidden] =
      CausalBody(at::Tensor(), features_in.path_slot, features_in.path_position, 0, kv_length, x);
  const at::Tensor last = features_in.path_length - 1;
  features_in.logits.copy_(logits.index_select(0, last));
  features_in.features.narrow(0, 0, 1).copy_(hidden[-1].index_select(0, last));
}

// The chain's first fed token (chain token 1) takes the next slot.
absl::StatusOr<ChainResult> LlamaModel::Impl::ForwardChainOnFeaturesStatic(const FeatureRoot& root, int64_t steps,
                                                                           const ChainPick& pick,
                                                                           const NodeInputs& inputs) {
  const int64_t start = committed + tentative;
  if (!features_in.logits.defined()) AllocateFeatureBuffers();
  const int64_t kv_length = KvBucket(start + steps, cache_slots);
  const ChainWork work = [&](int64_t length, CapturedChain& chain) {
    FeatureChainBody(steps, length, pick, inputs, chain);
  };
  ASSIGN_OR_RETURN(CapturedChain * chain,
                   Chain(steps, 1, kv_length, pick, FeatureKey(pick.key(), inputs), steps - 1, work));
  LoadFeatureRoot(root);
  chain_in.start.fill_(start);
  chain_in.position.fill_(root.position + 1);
  chain_in.tokens.narrow(0, 0, 1).copy_(root.token, /*non_blocking=*/true);
  ChainResult result = RunChain(*chain, 1 + steps, kv_length, pick, work);
  tentative += steps - 1;
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
  const ChainWork work = [&](int64_t length, CapturedChain& chain) { ChainBody(steps, c, length, pick, chain); };
  ASSIGN_OR_RETURN(CapturedChain * chain, Chain(steps, c, kv_length, pick, pick.key(), c + steps - 1, work));
  chain_in.start.copy_(at.start);
  chain_in.position.copy_(at.start);
  chain_in.tokens.narrow(0, 0, c).copy_(prefix);
  ChainResult result = RunChain(*chain, c + steps, kv_length, pick, work);
  committed = at.max_start + c + steps - 1;
  tentative = 0;
  return result;
}

// ForwardChainAtStatic's inputs and cache contract; the graph's key adds
// the guess's, and its slots reach a round's guesses past the chain.
absl::StatusOr<ChainResult> LlamaModel::Impl::ForwardChainInRoundsAtStatic(const at::Tensor& prefix,
                                                                           const DevicePosition& at, int64_t steps,
                                                                           const ChainPick& pick,
                                                                           const ChainGuess& guess,
                                                                           const at::Tensor& context) {
  const int64_t c = prefix.size(0), g = guess.count();
  if (!static_in.tokens.defined()) AllocateStaticInputs();
  if (!chain_in.sequence.defined())
    chain_in.sequence = at::zeros({cache_slots + kMaxChainPrefix + kMaxChainSteps + kMaxGuessesPerRound + 2},
                                  chain_in.tokens.options());
  const int64_t kv_length = KvBucket(at.max_start + c + steps + g, cache_slots);
  const ChainWork work = [&](int64_t length, CapturedChain& chain) {
    RoundsBody(steps, c, length, pick, guess, chain);
  };
  ASSIGN_OR_RETURN(CapturedChain * chain,
                   Chain(steps, c, kv_length, pick, absl::StrCat(pick.key(), "|rounds:", guess.key()),
                         c + steps + g - 1, work));
  chain_in.start.copy_(at.start);
  chain_in.position.copy_(at.start);
  chain_in.tokens.narrow(0, 0, c).copy_(prefix);
  const int64_t known = std::min(context.size(0), chain_in.sequence.size(0));
  chain_in.sequence.narrow(0, 0, known).copy_(context.narrow(0, 0, known));
  ChainResult result = RunChain(*chain, c + steps, kv_length, pick, work);
  last_later_rounds = chain->later_rounds.clone();
  committed = at.max_start + c + steps - 1;
  tentative = 0;
  return result;
}

// Draws the chain's noise and replays its graph (or runs its body on the
// CPU); the outputs are copied out of the graph's buffers, which the next
// run overwrites.
ChainResult LlamaModel::Impl::RunChain(CapturedChain& chain, int64_t tokens, int64_t kv_length, const ChainPick& pick,
                                       const ChainWork& work) {
  if (chain.noise.defined()) chain.noise.exponential_(1.0, *pick.noise_generator());
  if (chain.graph) {
    chain.graph->Replay();
  } else {
    work(kv_length, chain);
  }
  last_chain_skips = chain.graph && chain.conditional;
  last_hidden = at::Tensor();  // chains keep no hidden states
  ChainResult result{.tokens = chain_in.tokens.narrow(0, 0, tokens).clone()};
  if (chain.rows.defined()) result.rows = chain.rows.clone();
  if (chain.kept.defined()) result.kept = chain.kept.clone();
  return result;
}

// Levels grown from the root: each level's width nodes in the slots after
// the one before, all of a level at one position (or at their
// Choice::depths). A node sees what its parent sees, and itself; level 1's
// nodes see every slot below level_start.
void LlamaModel::Impl::GrowLevelsBody(int64_t levels, int64_t kv_length, const LevelPick& pick,
                                      CapturedLevels& captured, const at::Tensor& root_logits,
                                      const at::Tensor& level_start, const at::Tensor& root_position,
                                      const LevelForward& forward) {
  const int64_t m = pick.width();
  const at::Tensor columns = static_in.columns.narrow(0, 0, kv_length).unsqueeze(0);
  const auto level_noise = [&](int64_t level) {
    return captured.noise.defined() ? captured.noise[level] : at::Tensor();
  };
  LevelPick::Choice choice = pick(0, root_logits, {}, level_noise(0));
  const bool free = choice.depths.defined();
  // A pick that says when growth stops (Choice::go): each later level, its
  // forward and its pick, is conditional on growth going on, nested in the
  // level before (a tree that stopped meets one false condition, not one a
  // remaining level; PickChain's reason), so the kept
  // draft and `go` live in buffers of their own that each level that runs
  // overwrites (every level's kept is the draft when growth ended); the
  // levels fed are counted on the device.
  const bool stops = choice.go.defined();
  captured.conditional = false;
  captured.levels_fed = stops ? at::zeros({1}, static_in.columns.options()) : at::Tensor();
  at::Tensor go;
  std::vector<at::Tensor> kept;
  if (stops) {
    go = choice.go.clone();
    for (const at::Tensor& t : choice.kept) kept.push_back(t.clone());
    captured.kept.assign(1, kept);
  } else {
    captured.kept.assign(1, std::move(choice.kept));
  }
  // Every level's slots [levels, m], positions [levels, m] and own-slot
  // columns [levels, m, kv_length] at once: three launches, not three a level.
  const at::Tensor slots = (level_start + static_in.columns.narrow(0, 0, levels * m)).view({levels, m});
  const at::Tensor positions =
      root_position + 1 + static_in.columns.narrow(0, 0, levels).unsqueeze(1).expand({levels, m});
  const at::Tensor own = at::eq(columns.unsqueeze(0), slots.unsqueeze(2));
  const at::Tensor below_levels = at::lt(columns, level_start);
  at::Tensor visible = at::logical_or(below_levels, own[0]);
  // With free parents, every fed node's row: the root's, then each level's.
  at::Tensor fed;
  if (free) fed = at::cat({below_levels, at::zeros({levels * m, kv_length}, below_levels.options())});
  std::vector<bool> nested;  // the conditional levels begun, ended innermost first
  for (int64_t level = 1; level <= levels; ++level) {
    TORCH_CHECK(choice.depths.defined() == free, "ForwardLevels: pick '", pick.key(), "' gives depths at level ",
                level - 1, " but not at every level");
    TORCH_CHECK(choice.go.defined() == stops && (!stops || choice.kept.size() == kept.size()), "ForwardLevels: pick '",
                pick.key(), "' gives go at level 0, so it must give go and kept at every level (level ", level - 1,
                " does not)");
    const bool conditional = stops && CudaGraph::BeginIf(go);
    captured.conditional = captured.conditional || conditional;
    const at::Tensor level_positions = free ? root_position + choice.depths.to(at::kLong) : positions[level - 1];
    const at::Tensor logits = forward(level, choice, level_positions, slots[level - 1], visible);
    if (stops) captured.levels_fed.add_(1);
    const std::vector<at::Tensor> carry = std::move(choice.carry);
    choice = pick(level, logits.to(at::kFloat), carry, level_noise(level));
    if (stops) {
      for (size_t i = 0; i < kept.size(); ++i) kept[i].copy_(choice.kept[i]);
      go.copy_(choice.go);
      captured.kept.push_back(kept);  // every level's: the draft when growth ended
    } else {
      captured.kept.push_back(std::move(choice.kept));
    }
    if (level < levels) {
      if (free) {
        fed.narrow(0, 1 + (level - 1) * m, m).copy_(visible);
        visible = at::logical_or(fed.index_select(0, choice.parents), own[level]);
      } else {
        visible = at::logical_or(visible.index_select(0, choice.parents), own[level]);
      }
    }
    nested.push_back(conditional);
  }
  CudaGraph::EndNested(nested);
}

// The levels of ForwardLevels over levels_in: the prefix's c tokens at
// slots start.. as a causal chain, then the levels in the slots after it.
void LlamaModel::Impl::LevelsBody(int64_t levels, int64_t prefix, int64_t kv_length, const LevelPick& pick,
                                  CapturedLevels& captured) {
  const at::Tensor prefix_logits =
      CausalBody(levels_in.tokens.narrow(0, 0, prefix), levels_in.start, levels_in.position, 0, kv_length).first;
  GrowLevelsBody(levels, kv_length, pick, captured, prefix_logits.narrow(0, prefix - 1, 1).to(at::kFloat),
                 levels_in.start + prefix, levels_in.position + (prefix - 1),
                 [&](int64_t, const LevelPick::Choice& choice, const at::Tensor& positions,
                     const at::Tensor& slots, const at::Tensor& visible) {
                   return StaticForwardBody(choice.tokens.to(at::kLong), positions, slots, visible, kv_length).first;
                 });
}

// The levels of ForwardLevelsOnFeatures over levels_in (start: level 1's
// first slot; position: the root's) and features_in, whose features gain
// each level's as it is fed, in feeding order.
void LlamaModel::Impl::FeatureLevelsBody(int64_t levels, int64_t kv_length, const LevelPick& pick,
                                         const NodeInputs& inputs, CapturedLevels& captured) {
  const int64_t m = pick.width();
  GrowLevelsBody(levels, kv_length, pick, captured, features_in.logits, levels_in.start, levels_in.position,
                 [&](int64_t level, const LevelPick::Choice& choice, const at::Tensor& positions,
                     const at::Tensor& slots, const at::Tensor& visible) {
                   const at::Tensor parents = ParentsInFeedingOrder(choice, level, m);
                   const at::Tensor x = inputs(at::embedding(embed, choice.tokens.to(at::kLong)),
                                               features_in.features.index_select(0, parents));
                   auto [logits, hidden] = StaticForwardBody(at::Tensor(), positions, slots, visible, kv_length, x);
                   features_in.features.narrow(0, 1 + (level - 1) * m, m).copy_(hidden[-1]);
                   return logits;
                 });
}

// The levels for (levels, prefix, kv_length, key), captured as Chain() is:
// on first use, for every KV length bucket, each run once on the spare slots
// past the capacity.
absl::StatusOr<LlamaModel::Impl::CapturedLevels*> LlamaModel::Impl::Levels(int64_t levels, int64_t prefix,
                                                                          int64_t kv_length, const LevelPick& pick,
                                                                          const std::string& key, int64_t fed,
                                                                          const LevelsWork& work) {
  if (device.is_cuda()) DropGraphsIfWeightsMoved();
  auto make = [&](int64_t length) -> absl::StatusOr<CapturedLevels> {
    CapturedLevels captured;
    if (pick.noise_generator() != nullptr)
      captured.noise = at::ones({levels + 1, pick.width(), config.vocab_size},
                                at::TensorOptions().device(device).dtype(at::kFloat));
    if (!device.is_cuda()) return captured;
    ResetInputsForCapture();
    ASSIGN_OR_RETURN(captured.graph, CudaGraph::Capture(device, PoolOwner(), [&] { work(length, captured); }));
    ++captures;
    return captured;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, std::string>;
  return EveryKvBucket<CapturedLevels, Key>(
      level_graphs, [&](int64_t length) { return Key{levels, prefix, length, key}; }, kv_length, fed,
      device.is_cuda(), cache_slots, make);
}

absl::StatusOr<LevelsKept> LlamaModel::Impl::ForwardLevelsStatic(const at::Tensor& prefix, int64_t position,
                                                                 int64_t levels, const LevelPick& pick) {
  const int64_t c = prefix.size(0);
  const int64_t start = committed + tentative;
  if (!static_in.tokens.defined()) AllocateStaticInputs();
  const int64_t fed = c + levels * pick.width();
  const int64_t kv_length = KvBucket(start + fed, cache_slots);
  const LevelsWork work = [&](int64_t length, CapturedLevels& captured) {
    LevelsBody(levels, c, length, pick, captured);
  };
  ASSIGN_OR_RETURN(CapturedLevels * captured, Levels(levels, c, kv_length, pick, pick.key(), fed, work));
  levels_in.start.fill_(start);
  levels_in.position.fill_(position);
  levels_in.tokens.narrow(0, 0, c).copy_(prefix, /*non_blocking=*/true);
  LevelsKept kept = RunLevels(*captured, kv_length, pick, work);
  tentative += fed;
  return kept;
}

absl::StatusOr<LevelsKept> LlamaModel::Impl::ForwardLevelsOnFeaturesStatic(const FeatureRoot& root, int64_t levels,
                                                                           const LevelPick& pick,
                                                                           const NodeInputs& inputs) {
  const int64_t start = committed + tentative;
  const int64_t fed = levels * pick.width();
  if (!features_in.logits.defined()) AllocateFeatureBuffers();
  const int64_t kv_length = KvBucket(start + fed, cache_slots);
  const LevelsWork work = [&](int64_t length, CapturedLevels& captured) {
    FeatureLevelsBody(levels, length, pick, inputs, captured);
  };
  ASSIGN_OR_RETURN(CapturedLevels * captured,
                   Levels(levels, 0, kv_length, pick, FeatureKey(pick.key(), inputs), fed, work));
  LoadFeatureRoot(root);
  levels_in.start.fill_(start);
  levels_in.position.fill_(root.position);
  LevelsKept kept = RunLevels(*captured, kv_length, pick, work);
  tentative += fed;
  return kept;
}

// The path, then the chain after its root, in one graph per path width;
// committed becomes the host's bound (ForwardAt's contract).
absl::StatusOr<ChainResult> LlamaModel::Impl::ForwardChainOnFeaturesAtStatic(const FeaturePathAt& path,
                                                                             int64_t steps, const ChainPick& pick,
                                                                             const NodeInputs& inputs) {
  const int64_t w = path.tokens.size(0);
  if (!features_in.logits.defined()) AllocateFeatureBuffers();
  const int64_t kv_length = KvBucket(path.slot.max_start + w + steps, cache_slots);
  const ChainWork work = [&](int64_t length, CapturedChain& chain) {
    FeaturePathBody(w, length, inputs);
    at::add_out(chain_in.start, features_in.path_slot, features_in.path_length);
    at::add_out(chain_in.position, features_in.path_position, features_in.path_length);
    chain_in.tokens.narrow(0, 0, 1).copy_(features_in.path_tokens.index_select(0, features_in.path_length - 1));
    FeatureChainBody(steps, length, pick, inputs, chain);
  };
  ASSIGN_OR_RETURN(CapturedChain * chain, Chain(steps, w, kv_length, pick,
                                                absl::StrCat(FeatureKey(pick.key(), inputs), "|path"),
                                                w + steps - 1, work));
  LoadFeaturePath(path);
  ChainResult result = RunChain(*chain, 1 + steps, kv_length, pick, work);
  committed = path.slot.max_start + w + steps - 1;
  tentative = 0;
  return result;
}

absl::StatusOr<LevelsKept> LlamaModel::Impl::ForwardLevelsOnFeaturesAtStatic(const FeaturePathAt& path,
                                                                             int64_t levels, const LevelPick& pick,
                                                                             const NodeInputs& inputs) {
  const int64_t w = path.tokens.size(0);
  const int64_t fed = w + levels * pick.width();
  if (!features_in.logits.defined()) AllocateFeatureBuffers();
  const int64_t kv_length = KvBucket(path.slot.max_start + fed, cache_slots);
  const LevelsWork work = [&](int64_t length, CapturedLevels& captured) {
    FeaturePathBody(w, length, inputs);
    at::add_out(levels_in.start, features_in.path_slot, features_in.path_length);
    at::add_out(levels_in.position, features_in.path_position, features_in.path_length - 1);
    FeatureLevelsBody(levels, length, pick, inputs, captured);
  };
  ASSIGN_OR_RETURN(CapturedLevels * captured,
                   Levels(levels, w, kv_length, pick, absl::StrCat(FeatureKey(pick.key(), inputs), "|path"), fed,
                          work));
  LoadFeaturePath(path);
  LevelsKept kept = RunLevels(*captured, kv_length, pick, work);
  committed = path.slot.max_start + fed;
  tentative = 0;
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
  const LevelsWork work = [&](int64_t length, CapturedLevels& captured) {
    LevelsBody(levels, c, length, pick, captured);
  };
  ASSIGN_OR_RETURN(CapturedLevels * captured, Levels(levels, c, kv_length, pick, pick.key(), fed, work));
  levels_in.start.copy_(at.start);
  levels_in.position.copy_(at.start);
  levels_in.tokens.narrow(0, 0, c).copy_(prefix);
  LevelsKept kept = RunLevels(*captured, kv_length, pick, work);
  committed = at.max_start + fed;
  tentative = 0;
  return kept;
}

// Draws the pick's noise and replays the levels' graph (or runs their body
// on the CPU) over levels_in.
// The outputs are copied out of the graph's buffers, which the next replay
// overwrites.
LevelsKept LlamaModel::Impl::RunLevels(CapturedLevels& captured, int64_t kv_length, const LevelPick& pick,
                                       const LevelsWork& work) {
  if (captured.noise.defined()) captured.noise.exponential_(1.0, *pick.noise_generator());
  if (captured.graph) {
    captured.graph->Replay();
  } else {
    work(kv_length, captured);
  }
  last_hidden = at::Tensor();  // levels keep no hidden states
  last_levels_fed = captured.graph && captured.conditional ? captured.levels_fed : at::Tensor();
  LevelsKept kept(captured.kept.size());
  for (size_t l = 0; l < kept.size(); ++l) {
    // A stopping pick's levels all hold the same buffers (GrowLevelsBody): copy them once.
    const std::vector<at::Tensor>& level = captured.kept[l];
    const bool as_before = l > 0 && level.size() == captured.kept[l - 1].size() &&
                           std::equal(level.begin(), level.end(), captured.kept[l - 1].begin(),
                                      [](const at::Tensor& a, const at::Tensor& b) { return a.is_same(b); });
    if (as_before) {
      kept[l] = kept[l - 1];
      continue;
    }
    for (const at::Tensor& t : level) kept[l].push_back(t.clone());
  }
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
  last_hidden = hidden.narrow(1, 0, n);
  const at::Tensor rows = logits.narrow(0, 0, n);
  return rows.scalar_type() == at::kFloat ? rows.clone() : rows.to(at::kFloat);
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

}  // namespace speclab

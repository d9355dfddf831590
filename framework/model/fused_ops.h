// Fused decoder-layer ops with one at::Tensor API on every device.
//
// On CUDA (builds with SPECLAB_WITH_CUDA) each op is one kernel launch from
// framework/model/cuda/decode_kernels.h; everywhere else, and for any input
// the kernels do not cover (other dtypes, non-contiguous or misplaced
// tensors, autograd), it is the ATen composition documented below, which is
// the formula llama_model.cc used before (HF transformers' op order). The
// kernels round where that composition rounds, so both paths agree bit for
// bit except RMSNorm's fp32 sum order (within one ulp of the storage type).
//
// All CUDA paths run on the current stream of the inputs' device, allocate
// only through the caching allocator and never synchronise with the host:
// they may be captured into a CUDA graph.
//
// Kernel coverage: float32, bfloat16 and float16 tensors on one CUDA device,
// contiguous, all of one dtype; no tensor requiring grad while grad mode is
// on. Shape errors throw c10::Error on every path.
#ifndef SPECLAB_FRAMEWORK_MODEL_FUSED_OPS_H_
#define SPECLAB_FRAMEWORK_MODEL_FUSED_OPS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <utility>

namespace speclab {
namespace fused {

// True when this build has the CUDA kernels (CUDA inputs then use them).
bool HasCudaKernels();

// Turns the CUDA kernels off (true: on, the default) for every later call
// in the process, e.g. to A/B them against the ATen path. Set
// SPECLAB_FUSED_KERNELS=0 in the environment for the same at start-up.
void SetCudaKernelsEnabled(bool enabled);
bool CudaKernelsEnabled();

// The number of launches of these ops' CUDA kernels so far in this process
// (a multi-kernel op counts once): tests use it to show that an op ran its
// kernel rather than the ATen formula, which gives the same answer.
int64_t CudaKernelLaunches();

// HF LlamaRMSNorm. x [..., hidden], weight [hidden]:
//   xf = x.to(float); weight * (xf * rsqrt(mean(xf^2, -1) + eps)).to(x.dtype)
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps);

// The residual add and the next norm: {sum, RmsNorm(sum, weight, eps)} with
// sum = x + delta (in x.dtype). x, delta [..., hidden].
std::pair<at::Tensor, at::Tensor> AddRmsNorm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& weight,
                                             double eps);

// The MLP activation on the fused gate/up projection:
//   silu(gate_up[..., :intermediate]) * gate_up[..., intermediate:]
// gate_up [..., 2 * intermediate]; returns [..., intermediate], contiguous.
at::Tensor SiluMul(const at::Tensor& gate_up, int64_t intermediate);

// RoPE's cos and sin rows [n, head_dim] in `dtype` for positions [n] int64,
// computed from inv_freq [head_dim / 2] float32 as transformers does (float32
// angles, their cos and sin, both halves alike, one rounding to dtype): one
// launch on CUDA instead of ATen's seven, bit-equal to the ATen formula but
// for the last ulp of cosf/sinf.
std::pair<at::Tensor, at::Tensor> RopeAngles(const at::Tensor& positions, const at::Tensor& inv_freq,
                                             at::ScalarType dtype);

// RoPE on the fused q/k/v projection, K/V into the layer's cache, q in the
// grouped layout attention reads.
//   qkv            [n, (heads + 2 * kv_heads) * head_dim] (or [1, n, ...]):
//                  q heads, then k heads, then v heads
//   cos, sin       [n, head_dim], qkv's dtype
//   write_slots    [n] int64 on qkv's device: the cache slot of each token
//   k_cache_layer, v_cache_layer  [kv_heads, S, head_dim]
// With rope(x) = x * cos + rotate_half(x) * sin per head (HF convention,
// rotate_half(x) = cat(-x[D/2:], x[:D/2])), writes
//   k_cache_layer[kv][write_slots[t]] = rope(k)[t][kv]
//   v_cache_layer[kv][write_slots[t]] = v[t][kv]
// and returns q_grouped [kv_heads, group * n, head_dim] (contiguous, group =
// heads / kv_heads) with q_grouped[kv][j * n + t] = rope(q)[t][kv * group + j],
// the query-head order of HF repeat_kv. Slots outside [0, S) are an error on
// the ATen path; the kernel skips their writes (it cannot raise without a sync).
at::Tensor RopeQkvToCache(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t heads,
                          int64_t kv_heads, int64_t head_dim, const at::Tensor& write_slots, at::Tensor& k_cache_layer,
                          at::Tensor& v_cache_layer);

// at::linear(x, weight, bias) = x @ weight^T + bias for x [..., k], weight
// [n, k], bias [n] or undefined (no bias); returns [..., n] in x's dtype.
//
// On CUDA this may run a GEMV kernel (decode_kernels.h) built for decoding's
// few rows: it reads the weight matrix once, 16 bytes per load, where cuBLAS's
// GEMM for m = 1 leaves part of the bandwidth unused on mid-sized matrices.
// fp32 accumulation, bias added in fp32, one rounding: results agree with
// cuBLAS to about one ulp, not bit for bit. The kernel runs when, besides the
// coverage rules above (one CUDA device, contiguous, one dtype, no grad):
//  - x, weight and bias are bfloat16 or float16;
//  - x holds m = x.numel() / k rows with 1 <= m <= 8, and n <= 8192 (where
//    it measured faster than cuBLAS; fused_ops.cc has the numbers);
//  - k is a multiple of 8 and x and weight start on 16-byte boundaries.
// Everything else, gate_up and lm_head sized matrices included, is at::linear.
at::Tensor Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// The GEMV kernel Linear() launches; kAuto is Linear()'s own choice.
enum class LinearKernel { kAuto, kTensorCore, kSimt };

// Linear() with the kernel pinned, and the number of warps (1..16) that split
// k within a block (0: chosen per shape), for tests and benchmarks. A pinned
// kernel runs for any n and up to 16 rows (kSimt: up to 4; more throws), not
// only where it beats cuBLAS; inputs the kernels do not cover still go to
// at::linear.
at::Tensor LinearWithKernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            LinearKernel kernel, int warps_per_block);

// Batch-invariant forms of Linear and DecodeAttention: each row's result is
// bit for bit the same whatever the number of rows computed with it, so that
// a model verifying n tokens in one forward computes exactly the logits of n
// one-token forwards (greedy decoding reproduced token for token in bf16).
// Linear pins the tensor-core GEMV with a fixed k split in slices of at most
// 16 rows (the MMA's rows are independent); attention runs the ordered
// kernel (decode_kernels.h: a token's result depends on the sequence of keys
// it sees alone, so a tree's tokens, their ancestors in tentative slots with
// siblings between them, get what one-token forwards get), or where that does
// not apply the tiled kernel with 256-slot chunks (a partition fixed by the
// slots: chains only). Slower than the tuned choices (no SIMT GEMV for one
// row, no cuBLAS for long batches, SIMT attention). Inputs the kernels do not
// cover (float32, the CPU) take the ATen path, whose invariance is cuBLAS's.
at::Tensor LinearBatchInvariant(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor DecodeAttentionBatchInvariant(const at::Tensor& q, const at::Tensor& k_cache_layer,
                                         const at::Tensor& v_cache_layer, const at::Tensor& allowed,
                                         int64_t kv_length);

// Grouped-query attention in ATen, any batch: the formula DecodeAttention's
// kernel stands in for, and the one the model's unfused (training) path uses.
//   q [B, kv_heads, group * n, D] (row j * n + t: token t of head kv * group + j),
//   k, v [B, kv_heads, S, D], allowed [n, S] bool (token t may see slot s).
// `grouped` (allowed repeated per query head of a group) selects SDPA
// (PyTorch 2); otherwise the fp32 matmul-softmax with a finite fill, with
// `blocked` = !allowed when the caller has it at hand. Callers running many
// layers over one mask pass these precomputed.
at::Tensor GroupedAttentionAten(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const at::Tensor& allowed, const at::Tensor& grouped, const at::Tensor& blocked,
                                int64_t group);

// Grouped-query attention of a decoding step over one layer's KV cache:
//   q              [kv_heads, group * n, D], the layout RopeQkvToCache returns
//                  (row j * n + t: query token t of head kv * group + j)
//   k_cache_layer, v_cache_layer  [kv_heads, S, D]; slots [0, kv_length) attended
//   allowed        [n, kv_length] bool, any row stride (e.g. a narrow() view of
//                  a [128, S] buffer): allowed[t][s] says token t may see slot s;
//                  every row must allow at least one slot
// Returns [kv_heads, group * n, D], contiguous, in q's dtype:
//   softmax(q k^T * D^-0.5 masked by allowed) v   per KV head and query row,
// i.e. at::scaled_dot_product_attention(q[None], k[:, :L][None], v[:, :L][None],
// allowed.repeat({group, 1})) on CUDA, and llama_model.cc's matmul-softmax
// formula elsewhere (those two are the ATen path, run exactly as Attend() runs
// them).
//
// On CUDA this runs a flash-decoding kernel (decode_kernels.h): K/V read once
// per KV head by 64-slot tiles split over chunks that fill the SMs, scores and
// P @ V on the tensor cores with fp32 accumulation and an fp32 softmax, one
// small kernel merging the chunks (none when one chunk suffices); for the few
// rows of plain decoding (group * n <= 16, kv_length <= 8192, sm_90+) the
// split kernel instead: 16-slot steps per warp, the blocks of a KV head one
// thread block cluster merging through distributed shared memory, one launch
// (1.1x to 1.7x faster than the tiled kernel there; H200, NOTES.md run 3).
// P is rounded to the storage type for P @ V as in flash attention; errors against a
// float64 reference are SDPA's own (H200, bf16: relative 2-norm error 2.1e-3
// to 2.8e-3 where SDPA's was 2.1e-3 to 2.3e-3; fused_ops_test.cc). Slots
// that no query token may see are never read: NaN or garbage there cannot
// reach the output (the ATen path lets NaN in V through, since 0 * NaN = NaN).
// The kernel runs when, besides the coverage rules above (one CUDA device,
// contiguous q/k/v of one dtype, no grad; allowed bool on that device with
// unit column stride):
//  - q/k/v are bfloat16 or float16, 16-byte aligned;
//  - D is 64, 80, 96 or 128; 1 <= n <= 128; group * n <= 4096; kv_length >= 1;
//  - and group * n <= 128, or <= 256 with kv_length >= 1024: where it measured
//    faster than the ATen path (1.7x to 9x for n <= 16 at the Llama 3 8B/1B
//    shapes on an H200; fused_ops.cc has the numbers). Above that (n = 128
//    at group 4) SDPA's tensor-core tiles are the faster.
// Everything else takes the ATen path. The workspace for the chunk partials
// comes from the caching allocator, so calls may be captured in a CUDA graph.
at::Tensor DecodeAttention(const at::Tensor& q, const at::Tensor& k_cache_layer, const at::Tensor& v_cache_layer,
                           const at::Tensor& allowed, int64_t kv_length);

// DecodeAttention() for tests and benchmarks: runs the tiled kernel
// (AttentionKernel::kTiled below) wherever it covers the inputs (not only
// where it is preferred), with chunk_tiles 64-slot tiles per chunk (0: the
// kernel's own choice; at least the tile count: one chunk and no merge pass).
// Inputs the kernel does not cover take the ATen path.
at::Tensor DecodeAttentionWithChunks(const at::Tensor& q, const at::Tensor& k_cache_layer,
                                     const at::Tensor& v_cache_layer, const at::Tensor& allowed, int64_t kv_length,
                                     int64_t chunk_tiles);

// The decode attention kernels (decode_kernels.h, DecodeAttentionVariant):
//  - kTiled: 64-slot tiles per chunk, one warp per 16 query rows, a merge
//    kernel when a head's range is split into several chunks;
//  - kSplit: rows = group * n <= 16 and kv_length <= 8192 on sm_90+: every
//    warp takes its own 16-slot steps, blocks of one KV head form a thread
//    block cluster and merge through distributed shared memory, one launch;
//  - kAuto: DecodeAttention()'s own choice (ATen path included); the
//    environment variable SPECLAB_SPLIT_ATTENTION=0 takes kSplit out of it.
enum class AttentionKernel { kAuto, kTiled, kSplit };

// DecodeAttention() with the kernel pinned, for tests and benchmarks. kTiled:
// DecodeAttentionWithChunks(..., blocks). kSplit: the split kernel with
// `blocks` blocks per KV head (1..8 where the slots fit; 0: its own choice)
// where it covers the inputs, else the tiled kernel with its own chunking,
// else the ATen path. kAuto: DecodeAttention() (blocks ignored).
at::Tensor DecodeAttentionWithKernel(const at::Tensor& q, const at::Tensor& k_cache_layer,
                                     const at::Tensor& v_cache_layer, const at::Tensor& allowed, int64_t kv_length,
                                     AttentionKernel kernel, int64_t blocks);

// --- Vocabulary-wide rows -------------------------------------------------
//
// Decoding reduces a few rows of logits or probabilities over the whole
// vocabulary. ATen gives each row one thread block (a 128k-token row: ~28 us
// for argmax, ~34 us for softmax on an H200); on CUDA these cut each row into
// 2048-element chunks over many blocks (cuda/row_kernels.h). Kernel coverage:
// float32, contiguous, one CUDA device, at most 65535 rows; anything else,
// and every CPU tensor, takes the ATen formula given.

// The index of the largest entry of each row of x [rows, cols]: int64 [rows].
// With `divisor` ([rows, cols], defined), the largest x / max(divisor,
// FLT_MIN) (the exponential race of SampleRows). Ties go to the first index,
// NaN beats every number. ATen: at::argmax(x or at::div(x,
// divisor.clamp_min(FLT_MIN)), -1).
at::Tensor ArgmaxRows(const at::Tensor& x, const at::Tensor& divisor = at::Tensor());

// at::softmax(x / temperature, -1) for x [rows, cols] float32; on CUDA the
// chunked kernel with the division fused, whose fp32 sum runs in another
// order (results agree to a few ulps). temperature > 0.
at::Tensor SoftmaxRows(const at::Tensor& x, double temperature = 1.0);

// A drafted token's facts for the length policies (framework/core/
// length_policy.h), for logits [rows, cols] float32 (the drafter's own) and
// p their rows' softmax: [rows, 3] float32, q[r][tokens[r]] (1 where q is
// undefined: an argmax draft's one-hot), p's entropy in nats and its largest
// entry. q [rows, cols] float32 (the distribution drawn from), tokens [rows]
// int64. One launch on CUDA (the entropy as log S - sum exp(x - M) (x - M) /
// S: it agrees with ATen's -sum p log p to float rounding); ATen: the
// softmax, -sum p log p and its max.
at::Tensor DraftFactsRows(const at::Tensor& logits, const at::Tensor& q, const at::Tensor& tokens);

// The k largest x / max(divisor, FLT_MIN) of each row of x [rows, cols]
// float32 (x alone for an undefined divisor), best first, among equal values
// the smaller index, NaN above every number: (values [rows, k] float32,
// indices [rows, k] int64). 1 <= k <= cols. With Exp(1) noise as the
// divisor, the exponential race's first k ranks: k draws without
// replacement. One launch on CUDA for k <= 32; ATen: a stable descending sort.
std::pair<at::Tensor, at::Tensor> TopKRows(const at::Tensor& x, const at::Tensor& divisor, int64_t k);

// The top-k warp's probabilities for x [rows, cols] float32 (sampling.h's
// Probabilities with top_k = k and no top_p): y = x / temperature, the
// softmax of the entries at least the row's k-th largest y (ties kept), 0
// elsewhere. 1 <= k <= cols, temperature > 0. One launch on CUDA (a radix
// select and the softmax in one block a row, instead of at::topk's select,
// a comparison, a masked fill and the softmax); ATen: that sequence.
at::Tensor TopKSoftmaxRows(const at::Tensor& x, double temperature, int64_t k);

// TopKSoftmaxRows of x's rows `rows` (int64 [n] indices into x [m, cols]
// float32, repeats allowed; undefined: every row of x, n = m) written into
// out [n, cols] float32, and draws from each row written by the exponential
// race against noise [n, cols] (Exp(1) values): the first `ranks` places,
// TopKRows(out, noise, ranks)'s indices, int64 [n, ranks] (draws without
// replacement; at one place ArgmaxRows(out, noise)). k >= cols keeps every
// entry (the softmax at the temperature). One launch on CUDA for ranks <=
// 32, where the warp, the gather, the copy into a draft's buffer and the
// race were four; elsewhere those four.
at::Tensor TopKSoftmaxRace(const at::Tensor& x, const at::Tensor& rows, double temperature, int64_t k,
                           const at::Tensor& noise, const at::Tensor& out, int64_t ranks = 1);

// The k largest entries of each row of x [rows, cols] float32, best first
// (ties: the smaller index; NaN beats every number), and their log-softmax:
// (log-probabilities [rows, k] float32, indices [rows, k] int64). 1 <= k <=
// cols. One launch on CUDA for k <= 32 (at::topk's radix select takes ~27 us
// for an 8000-token row); ATen: a stable descending sort and log_softmax.
std::pair<at::Tensor, at::Tensor> TopKLogSoftmax(const at::Tensor& x, int64_t k);

// --- Trees grown on the device --------------------------------------------
// Index work on a few hundred entries, which ATen spreads over several
// launches; one each on CUDA (cuda/tree_kernels.h) for up to 1024 entries.

// The tree given by parents [n] int64 (node 0 the root, whose entry is
// ignored; 0 <= parents[i] < i otherwise): (mask [n, n] bool, row i true at
// i and at each of its ancestors; depths [n] int64). Elsewhere than CUDA,
// a walk on the host.
std::pair<at::Tensor, at::Tensor> TreeMask(const at::Tensor& parents);

// Pipelined tree steps (framework/device/pipelined_tree.h): each one launch on CUDA
// (cuda/tree_kernels.h), ATen elsewhere.

// The static inputs of a tree forward whose start ([1] int64) only the
// device knows, written in place: for rows r < bucket = write_slots.size(0),
// write_slots[r] = start + r, positions[r] = start + depths[r] (start for
// padding rows r >= n), token_buffer[r] = tokens[r] (r < n), and allowed
// ([bucket, kv_length] bool, rows may be strided) true below start and at
// start + j where mask[r][j] (padding rows: at start only). tokens and
// depths int64 [n], mask bool [n, n].
void TreeAtInputs(const at::Tensor& start, const at::Tensor& tokens, const at::Tensor& depths, const at::Tensor& mask,
                  const at::Tensor& token_buffer, const at::Tensor& write_slots, const at::Tensor& positions,
                  const at::Tensor& allowed);

// Moves an accepted path's cache entries into place, in k_cache and v_cache
// ([layers, heads, slots, head_dim], contiguous) in place: node nodes[i]'s
// slot start + nodes[i] goes to start + 1 + i for each i while nodes[i] > 0
// (nodes [m] int64: the accepted nodes below the root, increasing, then
// zeros; ATen also copies the root's entries past the path, harmlessly).
void MovePathEntries(const at::Tensor& k_cache, const at::Tensor& v_cache, const at::Tensor& start,
                     const at::Tensor& nodes);

// A drafted chain's stop after one more draft, in place on the device:
// where go ([1] bool), kept ([1] int64) += 1 and go = !stop ([1] bool).
// One launch on CUDA, which also sets `condition` (CudaGraph::NewCondition,
// for the next draft's BeginIfSet) to go.
void AdvanceStop(const at::Tensor& go, const at::Tensor& kept, const at::Tensor& stop,
                 std::optional<uint64_t> condition = std::nullopt);

// A chain in rounds (framework/device/chain_rounds.h) after one round, in
// place on the device. state [6 + g] int64: p (the picks so far), the later
// rounds run, the chain's last token, its offset from the prefix's first (c
// - 1 + p), its position, then the next round's noise rows min(p + j, steps
// - 1) for j <= g. The round picked picks [g + 1] int64 after the last token
// and guesses [g] int64: it keeps min(1 + the guesses matched before the
// first miss, steps - p) picks (none once p = steps). Pick j goes to
// tokens[c + p + j] and sequence[position + 1 + j], and with rows ([steps +
// g + 1, w] float32) block's row j ([g + 1, w] float32) to rows[p + j]; with
// `later` the later rounds count one more where p < steps; then p, the last
// token, the offset, the position and the noise rows move on. One launch on
// CUDA (two with rows), which also sets `condition` (CudaGraph::
// NewCondition, the next round's BeginIfSet) to p < steps.
void AdvanceRound(const at::Tensor& picks, const at::Tensor& guesses, const at::Tensor& block, const at::Tensor& state,
                  const at::Tensor& tokens, const at::Tensor& sequence, const at::Tensor& rows, int64_t prefix,
                  int64_t steps, bool later, std::optional<uint64_t> condition = std::nullopt);
// AdvanceRound's state before the first round of a chain whose prefix is
// tokens[0, c) at position ([1] int64), with g guesses a round.
at::Tensor FirstRoundState(const at::Tensor& tokens, int64_t prefix, const at::Tensor& position, int64_t steps,
                           int64_t guesses);

// A chain's verdict cut after its first `kept` drafts, where a length
// policy's device stop ended the chain (device_length_stop.h): (min(a, k),
// the extra token where a < k, else a token drawn from rows[k], the target's
// row after draft k), for answer [2] int64 (a accepted, the extra token),
// kept [1] int64 (k), rows [gamma + 1, vocab] (the target's: logits at
// temperature 0, else probabilities). The draw: the first index of the
// largest rows[k] / max(noise, FLT_MIN) with noise [1, vocab] float32 of
// Exp(1) values (the exponential race), or of the largest rows[k] where
// noise is undefined (the argmax). One launch on CUDA (float32 rows), where
// ATen takes eight; ATen: index_select, ArgmaxRows, minimum, where, cat.
at::Tensor CutChainAnswer(const at::Tensor& answer, const at::Tensor& kept, const at::Tensor& rows,
                          const at::Tensor& noise);

// A pipelined chain step's bookkeeping from its verdict (answer [2]: a
// accepted, the extra token) over tokens [g + 1] int64 (the root, then g
// drafts): writes the drafts, then the extra token after the last accepted
// one, into context (int64, by position) after the root at positions[1]
// (positions [2]: the root's position less one, the root's), and returns the
// next positions (positions + a + 1), the next last_two (tokens[a], the extra
// token) and the step's record [g + 5]: g, tokens, answer, kept ([1] int64;
// g where undefined). One launch on CUDA.
struct ChainRootAdvance {
  at::Tensor positions;  // [2] int64
  at::Tensor last_two;   // [2] int64
  at::Tensor record;     // [g + 5] int64
};
ChainRootAdvance AdvanceChainRoot(const at::Tensor& answer, const at::Tensor& tokens, const at::Tensor& kept,
                                  const at::Tensor& positions, const at::Tensor& context);

// A pipelined tree step's bookkeeping from its walk (verifiers::TreeWalk's answer
// [n + 1], a accepted) over tokens and parents [n] int64: writes the
// accepted tokens and the extra token into context (int64, by position)
// after the root at positions[1] (positions [2]: the root's position less
// one, the root's), and returns the next positions (positions + a + 1), the
// next last_two (the token before the next root, the next root) and the
// step's record [3n + 1]: tokens, parents, walk. ATen may also write the
// root's token past the accepted ones (past the next root: stale context).
struct TreeRootAdvance {
  at::Tensor positions;  // [2] int64
  at::Tensor last_two;   // [2] int64
  at::Tensor record;     // [3n + 1] int64
};
TreeRootAdvance AdvanceTreeRoot(const at::Tensor& walk, const at::Tensor& tokens, const at::Tensor& parents,
                                const at::Tensor& positions, const at::Tensor& context);

}  // namespace fused
}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_FUSED_OPS_H_

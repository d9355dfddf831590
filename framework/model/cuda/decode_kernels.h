// Fused CUDA kernels for batch-1 decoding of a Llama layer.
//
// At batch 1 a layer is bound by kernel launches, not by bandwidth: the ATen
// composition of RMSNorm, RoPE, the KV-cache writes and SiLU-and-multiply is
// ~30 small kernels. These replace each of those groups with one launch.
//
// This header (and norm_rope_, gemv_ and attention_kernels.cu) deliberately know nothing of torch or of
// the CUDA headers: nvcc compiles the .cu alone, fast, and free of torch's
// header quirks. framework/model/fused_ops.h wraps them for at::Tensor.
//
// Conventions shared by every launcher:
//  - pointers are device pointers to contiguous data of element type `dtype`;
//  - `stream` is a cudaStream_t; the launch is asynchronous, allocates nothing
//    and never synchronises, so it may be captured into a CUDA graph;
//  - the return value is a cudaError_t (0 == cudaSuccess) from the launch;
//    DecodeKernelErrorString() turns it into text;
//  - the arithmetic reproduces the ATen formulas in fused_ops.h step by step,
//    rounding to `dtype` where ATen materialises an intermediate tensor, so
//    results match ATen's bit for bit up to the order of the fp32 sum in RMSNorm.
#ifndef SPECLAB_FRAMEWORK_MODEL_CUDA_DECODE_KERNELS_H_
#define SPECLAB_FRAMEWORK_MODEL_CUDA_DECODE_KERNELS_H_

#include <cstdint>

namespace speclab {
namespace decode_kernels {

enum class DType : int { kF32 = 0, kBF16 = 1, kF16 = 2 };

// Text for an error code returned by the launchers (cudaGetErrorString).
const char* DecodeKernelErrorString(int error);

// Row-wise (optionally residual-add then) RMSNorm over `rows` rows of `hidden`:
//   sum = x + delta                      (rounded to dtype; only if delta != nullptr)
//   out = weight * (float(sum) * rsqrt(mean(float(sum)^2) + eps)).to(dtype)
// With delta == nullptr, sum_out is ignored and `x` is normalised; otherwise
// sum_out receives `sum`. One block per row.
int LaunchAddRmsNorm(DType dtype, const void* x, const void* delta, const void* weight, void* sum_out, void* out,
                     int64_t rows, int64_t hidden, float eps, void* stream);

// out[r][i] = silu(gate_up[r][i]) * gate_up[r][intermediate + i] for
// gate_up [rows, 2 * intermediate] and out [rows, intermediate]; silu's
// result is rounded to dtype before the multiply, as ATen's two kernels do.
int LaunchSiluMul(DType dtype, const void* gate_up, void* out, int64_t rows, int64_t intermediate, void* stream);

// RoPE (HF rotate_half) on the q and k heads of a fused projection, K/V into
// the cache, q into the grouped layout attention reads. Shapes:
//   qkv          [n, (heads + 2 * kv_heads) * head_dim]  q heads, k heads, v heads
//   cos, sin     [n, head_dim]
//   write_slots  [n] int64: the cache slot of each token; tokens whose slot is
//                outside [0, cache_slots) are not written (ATen would assert)
//   q_out        [heads, n, head_dim] == [kv_heads, group * n, head_dim] with
//                q_out[kv][j * n + t] = rope(q)[t][kv * group + j]
//   k_cache, v_cache  [kv_heads, cache_slots, head_dim]
// head_dim must be even.
int LaunchRopeQkvToCache(DType dtype, const void* qkv, const void* cos, const void* sin, const int64_t* write_slots,
                         void* q_out, void* k_cache, void* v_cache, int64_t n, int64_t heads, int64_t kv_heads,
                         int64_t head_dim, int64_t cache_slots, void* stream);

// RoPE's cos and sin rows for n positions, in one launch, as transformers
// computes them: angle = float(position) * inv_freq[j] in float32, its cosf
// and sinf in float32, repeated over both halves of the row, rounded once to
// dtype.
//   positions [n] int64; inv_freq [head_dim / 2] float32
//   cos, sin  [n, head_dim] in dtype
int LaunchRopeAngles(DType dtype, const int64_t* positions, const float* inv_freq, void* cos, void* sin, int64_t n,
                     int64_t head_dim, void* stream);

// --- Decode GEMV --------------------------------------------------------------
//
// y = x @ weight^T (+ bias) for the few rows of a decoding step:
//   x [m, k], weight [n, k], bias [n] or nullptr, y [m, n], all contiguous.
// Accumulates in fp32, adds the bias in fp32 and rounds once to dtype; the
// fp32 sum runs in another order than cuBLAS's, so results agree with
// at::linear to about one ulp of dtype, not bit for bit.
//
// At m <= 16 a linear layer is a pass over its weight matrix, bound by memory
// bandwidth; on mid-sized matrices (n <= 6144 of the Llama 3 shapes) cuBLAS's
// GEMM for m = 1 leaves part of it unused. These kernels read every weight
// element exactly once, 16 bytes per load, several loads in flight per
// thread, and split k over the warps of a block so that small n still keeps
// every SM busy.

// Which kernel LaunchGemv runs. kAuto picks kSimt for m = 1 and kTensorCore
// otherwise (the faster on an H200; see ChooseGemvKernel); tests and
// benchmarks pin one.
//  - kTensorCore: blocks of 16 weight rows; each 16-byte load of a weight row
//    feeds mma.sync m16n8k16 directly (x rows are the MMA's n side), so the
//    arithmetic costs the same few instructions for m = 1 and m = 16.
//  - kSimt: blocks of 4 weight rows, fp32 FMAs on CUDA cores, each warp load
//    512 contiguous bytes of one row; m <= 4 only.
enum class GemvKernel : int { kAuto = 0, kTensorCore = 1, kSimt = 2 };

// Most rows of x the GEMV kernels take (two 8-column MMA tiles).
constexpr int64_t kGemvMaxRows = 16;

// Whether LaunchGemv takes these arguments: bfloat16 or float16 (float32 is
// left to cuBLAS: decoding runs in 16-bit types), 1 <= m <= kGemvMaxRows,
// n >= 1, k a positive multiple of 8, and x and weight 16-byte aligned (bias
// and y need only their element alignment).
bool GemvSupported(DType dtype, const void* x, const void* weight, int64_t m, int64_t n, int64_t k);

// Runs y = x @ weight^T (+ bias) under the contract above (GemvSupported must
// hold, or cudaErrorInvalidValue comes back). `warps_per_block` (1..16) pins
// how many warps split k for one block's rows; 0 lets the launcher choose from
// the shape and the device's SM count.
int LaunchGemv(DType dtype, const void* x, const void* weight, const void* bias, void* y, int64_t m, int64_t n,
               int64_t k, void* stream, GemvKernel kernel = GemvKernel::kAuto, int warps_per_block = 0);

// --- Decode attention ----------------------------------------------------------
//
// softmax(q k^T * head_dim^-0.5, masked) v for the few query rows of a decoding
// step, grouped-query layout (flash-decoding):
//   q        [kv_heads, rows, head_dim]; rows = group * tokens, row j * tokens + t
//            is query token t of query head kv * group + j
//   k_cache, v_cache  [kv_heads, cache_slots, head_dim]; slots [0, kv_length) attended
//   allowed  bytes (bool, 0 or 1): allowed[t * mask_stride + s] says whether token t
//            may see slot s, for t < tokens and s < kv_length (nothing else is read)
//   out      [kv_heads, rows, head_dim]
// The KV range is cut into 64-slot tiles and the tiles into chunks; one block
// takes one chunk of one KV head for up to 64 query rows (16 per warp, the
// rows of an m16n8k16 MMA): it reads each of its K/V tiles once into shared
// memory, 16 bytes per copy, and serves every query row of the head from it.
// Scores and P @ V run on the tensor cores (fp32 accumulators), the softmax in
// fp32 with a running max (base 2); P is rounded to the storage type for the
// second product, as flash attention does, and the running sum adds the rounded
// values, so each output row is an exact convex combination of V rows up to the
// fp32 accumulation and the one final rounding. With more than one chunk, each
// block writes (max, sum, acc[head_dim]) in fp32 to the workspace and a second
// kernel merges the chunks; with one chunk the first kernel writes `out`.
//
// Masking selects: a masked score is -inf whatever K holds, and K/V rows of
// slots that no query token sees are never read (zeros stand in), so NaN or
// uninitialised cache contents there cannot reach the output. Tiles no token
// sees cost one pass over their mask bytes. Rows without any visible slot get
// zeros (callers must not rely on it: ATen gives NaN or a uniform average).

// One call's sizes. mask_stride is in elements (bytes) of `allowed`.
struct DecodeAttentionShape {
  int64_t kv_heads = 0;
  int64_t rows = 0;    // group * tokens
  int64_t tokens = 0;  // query tokens (rows of allowed)
  int64_t head_dim = 0;
  int64_t kv_length = 0;
  int64_t cache_slots = 0;
  int64_t mask_stride = 0;
};

// KV slots per tile; at most this many query tokens (rows of allowed).
constexpr int64_t kDecodeAttentionTile = 64;
constexpr int64_t kDecodeAttentionMaxTokens = 128;
constexpr int64_t kDecodeAttentionMaxRows = 4096;

// Whether LaunchDecodeAttention takes these arguments: bfloat16 or float16;
// head_dim 64, 80, 96 or 128; 1 <= tokens <= 128 with rows a multiple of
// tokens and rows <= 4096; 1 <= kv_length <= cache_slots; mask_stride >=
// kv_length when tokens > 1; q, k_cache and v_cache 16-byte aligned.
bool DecodeAttentionSupported(DType dtype, const void* q, const void* k_cache, const void* v_cache,
                              const DecodeAttentionShape& shape);

// Which kernel a plan runs.
//  - kTiled: the kernel described above (64-slot tiles, one chunk of tiles per
//    block, a merge kernel when there is more than one chunk).
//  - kSplit: for the few rows of plain decoding (rows <= 16: one m16 MMA
//    tile) on sm_90+, where kTiled is latency bound (one warp per 64-slot
//    tile: mask, then loads, then compute, nothing overlapped, then a second
//    kernel). Every warp of a block takes its own run of 16-slot steps (K/V
//    copied with cp.async, two steps in flight per warp, the mask of all its
//    steps read first), the warps of a block merge in shared memory, and the
//    blocks of one KV head, launched as one thread block cluster (<= 8),
//    merge through distributed shared memory: one kernel, no workspace. Same
//    arithmetic per step as kTiled (MMA scores, fp32 softmax with a running
//    max, P rounded to the storage type for P @ V), same masking guarantees.
enum class DecodeAttentionVariant : int { kTiled = 0, kSplit = 1 };

// How a call splits its KV range. kTiled: chunk_tiles tiles per chunk, chunks
// chunks per KV head, and the fp32 workspace the launch needs (0 with one
// chunk). kSplit: split_blocks blocks per KV head (one cluster) of
// split_warps warps, each warp split_warp_steps 16-slot steps; no workspace.
struct DecodeAttentionPlan {
  DecodeAttentionVariant variant = DecodeAttentionVariant::kTiled;
  int64_t chunk_tiles = 0;
  int64_t chunks = 0;
  int64_t workspace_floats = 0;
  int64_t split_blocks = 0;
  int64_t split_warps = 0;
  int64_t split_warp_steps = 0;
};

// Limits of kSplit: rows (group * tokens), and kv_length (8 blocks x 8 warps
// x 8 steps x 16 slots).
constexpr int64_t kDecodeAttentionSplitMaxRows = 16;
constexpr int64_t kDecodeAttentionSplitMaxLength = 8192;

// Whether kSplit takes a shape that DecodeAttentionSupported accepts: rows <=
// kDecodeAttentionSplitMaxRows, kv_length <= kDecodeAttentionSplitMaxLength,
// and the current device (and the kernel's compiled code) is sm_90 or newer.
bool DecodeAttentionSplitSupported(const DecodeAttentionShape& shape);

// The plan for a supported shape. chunk_tiles > 0 pins the tiles per chunk
// (clamped to the tile count); 0 picks them so that the grid holds a few warps
// per SM (kv_heads x row blocks x chunks blocks), no more blocks than fit at
// once, without the partial results outgrowing the K/V bytes they summarise.
DecodeAttentionPlan PlanDecodeAttention(const DecodeAttentionShape& shape, int64_t chunk_tiles);

// The kSplit plan for a shape DecodeAttentionSplitSupported accepts (for any
// other shape: PlanDecodeAttention(shape, 0)). blocks_per_head in 1..8 pins
// the blocks per KV head where the steps fit (at most 8 warps of 8 steps per
// block); 0 (or a pin that does not fit) picks them: one block of up to 8
// warps x 2 steps for head_dim <= 64 and kv_length <= 256, else one 16-slot
// step per warp, 4 warps per block, up to 8 blocks, then up to 8 warps, then
// more steps (timings in build-fusedcheck/NOTES.md, run 3).
DecodeAttentionPlan PlanDecodeAttentionSplit(const DecodeAttentionShape& shape, int64_t blocks_per_head);

// Runs the attention under the contract above with `plan` from
// PlanDecodeAttention or PlanDecodeAttentionSplit (same shape); `workspace` holds plan.workspace_floats
// floats (may be null when that is 0). Returns cudaErrorInvalidValue for
// unsupported arguments.
int LaunchDecodeAttention(DType dtype, const void* q, const void* k_cache, const void* v_cache, const void* allowed,
                          void* out, float* workspace, const DecodeAttentionShape& shape,
                          const DecodeAttentionPlan& plan, void* stream);

// --- Ordered attention (batch-invariant mode) ----------------------------------
//
// Attention whose result for a query token is a function of the sequence of
// K/V rows it sees, in slot order, and of nothing else: not of the slots they
// sit in, the slots it does not see, kv_length, or the other tokens of the
// call. A token of a draft tree, whose ancestors sit in tentative slots with
// siblings between them, thus gets bit for bit what a one-token forward over
// the same keys gives (ordered_attention.cu says how). Same layouts and
// masking guarantees as LaunchDecodeAttention (q [kv_heads][group * tokens]
// [head_dim], row j * tokens + t; unseen K/V rows never read; a token that
// sees nothing gets zeros); fp32 scores and softmax, P @ V in fp32 without
// rounding P. SIMT, a warp per (query row, 128 visible slots), then a merge
// kernel: slower than the tiled kernel.
struct OrderedAttentionShape {
  int64_t kv_heads = 0;
  int64_t group = 0;   // query heads a KV head
  int64_t tokens = 0;  // query tokens (rows of allowed)
  int64_t head_dim = 0;
  int64_t kv_length = 0;
  int64_t cache_slots = 0;
  int64_t mask_stride = 0;  // in elements (bytes) of `allowed`
};

// bfloat16 or float16; head_dim 64, 80, 96 or 128; 1 <= kv_length <=
// cache_slots < 2^31; mask_stride >= kv_length when tokens > 1; q, k_cache
// and v_cache 16-byte aligned.
bool OrderedAttentionSupported(DType dtype, const OrderedAttentionShape& shape);

// The fp32 workspace a launch needs: (2 + head_dim) floats a query row and
// 128 slots of kv_length.
int64_t OrderedAttentionWorkspaceFloats(const OrderedAttentionShape& shape);

// Returns cudaErrorInvalidValue for unsupported arguments.
int LaunchOrderedAttention(DType dtype, const void* q, const void* k_cache, const void* v_cache, const void* allowed,
                           void* out, float* workspace, const OrderedAttentionShape& shape, void* stream);

}  // namespace decode_kernels
}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_CUDA_DECODE_KERNELS_H_

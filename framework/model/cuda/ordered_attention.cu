// The ordered attention kernels (see decode_kernels.h for the contract).
//
// The slots a query token sees are numbered by their rank among the visible
// slots, in slot order, and cut into segments of kSegment ranks. One warp
// takes one (query row, segment): it finds where its segment starts (a warp
// ballot over 32-slot windows of the mask, counting visible slots), queues
// the segment's slots in shared memory, and runs them 32 at a time: lane l
// scores the chunk's l-th slot (a sequential fp32 dot product over
// head_dim), the chunk's maximum and sum go through a fixed butterfly, and
// P @ V adds the chunk's slots one after the other in rank order, each lane
// owning a few of head_dim's columns. A second kernel merges each row's
// segments in segment order. Every operation thus depends on the sequence of
// visible K/V rows alone, never on the slots they sit in: segments past the
// visible count are empty, and the merge skips them. A token verified in a
// tree, its ancestors in tentative slots with siblings between them, gets
// the bits a one-token forward over the same keys gets.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "framework/model/cuda/decode_kernels.h"
#include "framework/model/cuda/kernel_support.cuh"

namespace speclab {
namespace decode_kernels {
namespace {

using namespace support;  // NOLINT: the kernels' shared vocabulary

constexpr int kOrderedWarps = 4;     // warps a block, each its own (row, segment)
constexpr int64_t kSegment = 128;    // visible slots a segment (a multiple of the warp)
constexpr int kOrderedMaxDim = 128;

struct OrderedParams {
  const void* q;
  const void* k;
  const void* v;
  const uint8_t* allowed;
  void* out;
  float* partial;  // [kv_heads * rows][segments][2 + head_dim]: (max, sum, acc)
  int kv_heads, group, tokens, head_dim;
  int64_t kv_length, cache_slots, mask_stride, segments;
  float scale_log2;  // head_dim^-0.5 * log2(e)
};

// Grid (segments, ceil(kv_heads * rows / kOrderedWarps)).
template <typename T, int kD>
__global__ void __launch_bounds__(kOrderedWarps* kWarpSize) OrderedSegmentsKernel(const OrderedParams p) {
  constexpr int kCols = (kD + kWarpSize - 1) / kWarpSize;  // head_dim columns a lane owns
  __shared__ float q_s[kOrderedWarps][kD];
  __shared__ int queue_s[kOrderedWarps][kSegment + kWarpSize];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int rows = p.group * p.tokens;
  const int64_t task = static_cast<int64_t>(blockIdx.y) * kOrderedWarps + warp;  // head * rows + row
  if (task >= static_cast<int64_t>(p.kv_heads) * rows) return;  // whole warps only
  const int64_t segment = blockIdx.x;
  const int head = static_cast<int>(task / rows), row = static_cast<int>(task % rows);
  const int token = row % p.tokens;  // row j * tokens + t
  const T* q = static_cast<const T*>(p.q) + task * kD;
  const T* k = static_cast<const T*>(p.k) + static_cast<int64_t>(head) * p.cache_slots * kD;
  const T* v = static_cast<const T*>(p.v) + static_cast<int64_t>(head) * p.cache_slots * kD;
  const uint8_t* mask = p.allowed + static_cast<int64_t>(token) * p.mask_stride;
  for (int d = lane; d < kD; d += kWarpSize) q_s[warp][d] = ToFloat(q[d]);
  int* queue = queue_s[warp];

  // The segment's slots: skip the first segment * kSegment visible ones.
  const int64_t skip = segment * kSegment;
  int64_t counted = 0;
  int queued = 0;
  for (int64_t base = 0; base < p.kv_length && queued < kSegment; base += kWarpSize) {
    const int64_t slot = base + lane;
    const bool seen = slot < p.kv_length && mask[slot] != 0;
    const unsigned ballot = __ballot_sync(0xffffffffu, seen);
    const int64_t rank = counted + __popc(ballot & ((1u << lane) - 1u));  // among visible slots
    if (seen && rank >= skip && rank < skip + kSegment) queue[rank - skip] = static_cast<int>(slot);
    counted += __popc(ballot);
    queued = static_cast<int>(min(max(counted - skip, int64_t{0}), kSegment));
  }
  __syncwarp();

  float m = -INFINITY, l = 0.0f, acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc[c] = 0.0f;
  for (int first = 0; first < queued; first += kWarpSize) {
    const int count = min(kWarpSize, queued - first);
    const bool mine = lane < count;
    float s = -INFINITY;
    if (mine) {
      const T* key = k + static_cast<int64_t>(queue[first + lane]) * kD;
      constexpr int kPack = kWidePack<T>;  // K rows are 16-byte aligned (head_dim * 2 bytes, a multiple of 16)
      float dot = 0.0f;
      for (int d0 = 0; d0 < kD; d0 += kPack) {
        const Pack<T, kPack> pk = LoadPack<T, kPack>(key + d0);
#pragma unroll
        for (int e = 0; e < kPack; ++e) dot += q_s[warp][d0 + e] * ToFloat(pk.v[e]);
      }
      s = dot * p.scale_log2;
    }
    float top = s;
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, offset));
    const float next = fmaxf(m, top);
    const float keep = m == -INFINITY ? 0.0f : exp2f(m - next);
    const float prob = mine ? exp2f(s - next) : 0.0f;
    float sum = prob;
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    l = l * keep + sum;
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[c] *= keep;
    m = next;
    for (int i = 0; i < count; ++i) {
      const T* value = v + static_cast<int64_t>(queue[first + i]) * kD;
      const float pi = __shfl_sync(0xffffffffu, prob, i);
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const int d = lane + c * kWarpSize;
        if (d < kD) acc[c] += pi * ToFloat(value[d]);
      }
    }
  }
  // An empty segment writes (-inf, 0, zeros): it merges as exact zeros.
  float* out = p.partial + (task * p.segments + segment) * (2 + kD);
  if (lane == 0) {
    out[0] = m;
    out[1] = l;
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    const int d = lane + c * kWarpSize;
    if (d < kD) out[2 + d] = acc[c];
  }
}

// One warp a row: the row's segments merged in segment order.
template <typename T, int kD>
__global__ void __launch_bounds__(kOrderedWarps* kWarpSize) OrderedMergeKernel(const OrderedParams p) {
  constexpr int kCols = (kD + kWarpSize - 1) / kWarpSize;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int rows = p.group * p.tokens;
  const int64_t task = static_cast<int64_t>(blockIdx.x) * kOrderedWarps + warp;
  if (task >= static_cast<int64_t>(p.kv_heads) * rows) return;
  const float* parts = p.partial + task * p.segments * (2 + kD);
  float top = -INFINITY;
  for (int64_t s = 0; s < p.segments; ++s) top = fmaxf(top, parts[s * (2 + kD)]);
  float l = 0.0f, acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc[c] = 0.0f;
  if (top != -INFINITY) {
    for (int64_t s = 0; s < p.segments; ++s) {
      const float* part = parts + s * (2 + kD);
      if (part[0] == -INFINITY) continue;  // empty: skipped, not added as zeros (a -0 stays -0)
      const float weight = exp2f(part[0] - top);
      l += part[1] * weight;
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const int d = lane + c * kWarpSize;
        if (d < kD) acc[c] += part[2 + d] * weight;
      }
    }
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  T* out = static_cast<T*>(p.out) + task * kD;
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    const int d = lane + c * kWarpSize;
    if (d < kD) out[d] = FromFloat<T>(acc[c] * inv);
  }
}

template <typename T, int kD>
int RunOrdered(const OrderedParams& params, cudaStream_t stream) {
  const int64_t tasks = static_cast<int64_t>(params.kv_heads) * params.group * params.tokens;
  const unsigned task_blocks = static_cast<unsigned>((tasks + kOrderedWarps - 1) / kOrderedWarps);
  const unsigned threads = kOrderedWarps * kWarpSize;
  OrderedSegmentsKernel<T, kD><<<dim3(static_cast<unsigned>(params.segments), task_blocks), threads, 0, stream>>>(
      params);
  OrderedMergeKernel<T, kD><<<task_blocks, threads, 0, stream>>>(params);
  return cudaGetLastError();
}

template <typename T>
int RunOrderedTyped(const OrderedParams& params, cudaStream_t stream) {
  switch (params.head_dim) {
    case 64: return RunOrdered<T, 64>(params, stream);
    case 80: return RunOrdered<T, 80>(params, stream);
    case 96: return RunOrdered<T, 96>(params, stream);
    case 128: return RunOrdered<T, 128>(params, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

bool OrderedAttentionSupported(DType dtype, const OrderedAttentionShape& shape) {
  const int64_t d = shape.head_dim;
  return (dtype == DType::kBF16 || dtype == DType::kF16) && (d == 64 || d == 80 || d == 96 || d == 128) &&
         d <= kOrderedMaxDim && shape.group >= 1 && shape.kv_heads >= 1 && shape.tokens >= 1 &&
         shape.kv_length >= 1 && shape.kv_length <= shape.cache_slots && shape.cache_slots < (int64_t{1} << 31) &&
         (shape.tokens == 1 || shape.mask_stride >= shape.kv_length) &&
         shape.kv_heads * shape.group * shape.tokens < (int64_t{1} << 31);
}

int64_t OrderedAttentionWorkspaceFloats(const OrderedAttentionShape& shape) {
  const int64_t segments = (shape.kv_length + kSegment - 1) / kSegment;
  return shape.kv_heads * shape.group * shape.tokens * segments * (2 + shape.head_dim);
}

int LaunchOrderedAttention(DType dtype, const void* q, const void* k_cache, const void* v_cache, const void* allowed,
                           void* out, float* workspace, const OrderedAttentionShape& shape, void* stream) {
  if (!OrderedAttentionSupported(dtype, shape) || workspace == nullptr) return cudaErrorInvalidValue;
  OrderedParams params{};
  params.q = q;
  params.k = k_cache;
  params.v = v_cache;
  params.allowed = static_cast<const uint8_t*>(allowed);
  params.out = out;
  params.partial = workspace;
  params.kv_heads = static_cast<int>(shape.kv_heads);
  params.group = static_cast<int>(shape.group);
  params.tokens = static_cast<int>(shape.tokens);
  params.head_dim = static_cast<int>(shape.head_dim);
  params.kv_length = shape.kv_length;
  params.cache_slots = shape.cache_slots;
  params.mask_stride = shape.mask_stride;
  params.segments = (shape.kv_length + kSegment - 1) / kSegment;
  params.scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(shape.head_dim)));
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dtype == DType::kBF16 ? RunOrderedTyped<__nv_bfloat16>(params, s) : RunOrderedTyped<__half>(params, s);
}

}  // namespace decode_kernels
}  // namespace speclab

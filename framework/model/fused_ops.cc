#include "framework/model/fused_ops.h"

#include "framework/device/kernel_launch.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <vector>

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "framework/model/cuda/decode_kernels.h"
#include "framework/model/cuda/row_kernels.h"
#include "framework/model/cuda/tree_kernels.h"
#endif

namespace speclab {
namespace fused {
namespace {

// The framework's launch plumbing (framework/device/kernel_launch.h), under
// the names these wrappers have always used.
constexpr auto& CheckLaunch = kernel_launch::Check;
constexpr auto& CurrentStream = kernel_launch::Stream;

#ifdef SPECLAB_WITH_CUDA
// A row kernel's workspace of `per_chunk` values a row chunk; undefined for
// rows of one block, which read none (row_kernels::WorkspaceChunks): eager
// steps then allocate nothing for it.
at::Tensor RowWorkspace(int64_t rows, int64_t cols, int64_t per_chunk, const at::TensorOptions& options) {
  const int64_t chunks = row_kernels::WorkspaceChunks(cols);
  return chunks > 0 ? at::empty({per_chunk * rows * chunks}, options) : at::Tensor();
}

template <typename T>
T* WorkspacePointer(const at::Tensor& workspace) {
  return workspace.defined() ? workspace.data_ptr<T>() : nullptr;
}
#endif

// --- The ATen compositions: the reference semantics and the fallback. -------

at::Tensor RmsNormAten(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor variance = xf.pow(2).mean(-1, /*keepdim=*/true);
  return weight * (xf * at::rsqrt(variance + eps)).to(x.scalar_type());
}

at::Tensor RotateHalf(const at::Tensor& x) {
  const auto halves = x.chunk(2, -1);
  return at::cat({-halves[1], halves[0]}, -1);
}

at::Tensor RopeQkvToCacheAten(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t n,
                              int64_t heads, int64_t kv_heads, int64_t head_dim, const at::Tensor& write_slots,
                              at::Tensor& k_cache_layer, at::Tensor& v_cache_layer) {
  const int64_t group = heads / kv_heads;
  const at::Tensor rows = qkv.reshape({n, qkv.size(-1)});
  const at::Tensor qk = rows.narrow(1, 0, (heads + kv_heads) * head_dim).reshape({n, heads + kv_heads, head_dim});
  const at::Tensor roped =
      qk * cos.reshape({n, 1, head_dim}) + RotateHalf(qk) * sin.reshape({n, 1, head_dim});
  const at::Tensor k = roped.narrow(1, heads, kv_heads).transpose(0, 1);  // [kv_heads, n, head_dim]
  const at::Tensor v =
      rows.narrow(1, (heads + kv_heads) * head_dim, kv_heads * head_dim).reshape({n, kv_heads, head_dim}).transpose(0, 1);
  const at::Tensor slots = write_slots.reshape({n});
  k_cache_layer.index_copy_(1, slots, k);
  v_cache_layer.index_copy_(1, slots, v);
  return roped.narrow(1, 0, heads)
      .reshape({n, kv_heads, group, head_dim})
      .permute({1, 2, 0, 3})
      .reshape({kv_heads, group * n, head_dim})
      .contiguous();
}

void CheckLinearShapes(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1), "Linear: x ", x.sizes(),
              " and weight ", weight.sizes(), " do not match");
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)), "Linear: bias ", bias.sizes(),
              " does not match weight ", weight.sizes());
}

void CheckNormShapes(const at::Tensor& x, const at::Tensor& weight) {
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && x.size(-1) == weight.size(0), "RmsNorm: x ", x.sizes(),
              " and weight ", weight.sizes(), " do not match");
}

void CheckAttentionShapes(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed,
                          int64_t kv_length) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.sizes() == k.sizes() && k.size(0) == q.size(0) &&
                  k.size(2) == q.size(2),
              "DecodeAttention: q ", q.sizes(), " is not [kv_heads, rows, D] or the caches ", k.sizes(), " / ",
              v.sizes(), " are not [kv_heads, S, D]");
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "DecodeAttention: q, k and v must share a dtype");
  TORCH_CHECK(allowed.dim() == 2 && allowed.scalar_type() == at::kBool, "DecodeAttention: allowed ", allowed.sizes(),
              " is not a 2-D bool tensor");
  TORCH_CHECK(kv_length >= 0 && kv_length <= k.size(1) && allowed.size(1) == kv_length, "DecodeAttention: kv_length ",
              kv_length, " does not fit caches of ", k.size(1), " slots or allowed ", allowed.sizes());
  const int64_t n = allowed.size(0);
  TORCH_CHECK(n >= 1 && q.size(1) >= n && q.size(1) % n == 0, "DecodeAttention: q's ", q.size(1),
              " rows are not group * n for the n = ", n, " rows of allowed");
}

// GroupedAttentionAten on the decode layout: SDPA with the mask repeated per
// query head of a group on CUDA (PyTorch 2), else the fp32 matmul-softmax.
at::Tensor DecodeAttentionAten(const at::Tensor& q, const at::Tensor& k_cache_layer, const at::Tensor& v_cache_layer,
                               const at::Tensor& allowed, int64_t kv_length) {
  const int64_t group = q.size(1) / allowed.size(0);
  at::Tensor grouped;
#if TORCH_VERSION_MAJOR >= 2
  if (q.is_cuda()) grouped = group > 1 ? allowed.repeat({group, 1}) : allowed;
#endif
  return GroupedAttentionAten(q.unsqueeze(0), k_cache_layer.narrow(1, 0, kv_length).unsqueeze(0),
                              v_cache_layer.narrow(1, 0, kv_length).unsqueeze(0), allowed, grouped, at::Tensor(),
                              group)[0]
      .contiguous();
}

#ifdef SPECLAB_WITH_CUDA

namespace dk = decode_kernels;

using TensorRefs = std::initializer_list<std::reference_wrapper<const at::Tensor>>;

bool KernelDType(at::ScalarType type, dk::DType* dtype) {
  switch (type) {
    case at::kFloat:
      *dtype = dk::DType::kF32;
      return true;
    case at::kBFloat16:
      *dtype = dk::DType::kBF16;
      return true;
    case at::kHalf:
      *dtype = dk::DType::kF16;
      return true;
    default:
      return false;
  }
}

// True when the kernels cover these tensors: contiguous CUDA tensors on the
// first one's device, of its dtype (one the kernels know), none needing grad.
// On success, *dtype is that dtype.
bool Covered(TensorRefs tensors, dk::DType* dtype) {
  if (!CudaKernelsEnabled()) return false;
  const at::Tensor& first = tensors.begin()->get();
  if (!first.defined() || !first.is_cuda() || !KernelDType(first.scalar_type(), dtype)) return false;
  const bool grad = c10::GradMode::is_enabled();
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || t.device() != first.device() || t.scalar_type() != first.scalar_type() || !t.is_contiguous() ||
        (grad && t.requires_grad())) {
      return false;
    }
  }
  return true;
}

dk::GemvKernel ToGemvKernel(LinearKernel kernel) {
  switch (kernel) {
    case LinearKernel::kTensorCore:
      return dk::GemvKernel::kTensorCore;
    case LinearKernel::kSimt:
      return dk::GemvKernel::kSimt;
    case LinearKernel::kAuto:
      break;
  }
  return dk::GemvKernel::kAuto;
}

// Where Linear() prefers the GEMV kernel to cuBLAS, from bf16 timings on an
// H200 (graph replay, weights rotated past L2; build-fusedcheck/gemv_bench.cc)
// on the Llama 3 8B and 1B projections:
//  - n <= 6144 (qkv, o, down): 4 to 36% faster at m = 1 (the o projections
//    and the 1B down gain most); at m = 2, 4 and 8 level to 15% faster, but
//    for the 1B qkv at m = 8 (4% slower);
//  - n >= 16384 (gate_up, lm_head): cuBLAS already streams at 3.5-4.2 TB/s;
//    the kernel was level to 4% slower on lm_head and 5 to 8% on gate_up;
//  - m = 16: cuBLAS was faster on four of the six n <= 6144 shapes (m = 9..15
//    were not measured; they run the same two-tile kernel as m = 16).
// n between 6144 and 16384 was not measured; 8192 splits the difference.
constexpr int64_t kGemvMaxPreferredRows = 8;
constexpr int64_t kGemvMaxPreferredN = 8192;

bool PreferGemv(int64_t m, int64_t n) { return m <= kGemvMaxPreferredRows && n <= kGemvMaxPreferredN; }

// The GEMV kernel for x @ weight^T + bias, or an undefined tensor where the
// kernel does not cover the inputs or, for kAuto, where cuBLAS is the faster
// (the caller then runs at::linear).
at::Tensor GemvOrUndefined(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, LinearKernel kernel,
                           int warps_per_block) {
  dk::DType dtype;
  const bool covered = bias.defined() ? Covered({x, weight, bias}, &dtype) : Covered({x, weight}, &dtype);
  if (!covered) return {};
  const int64_t n = weight.size(0), k = weight.size(1);
  const int64_t m = k == 0 ? 0 : x.numel() / k;
  if (!dk::GemvSupported(dtype, x.data_ptr(), weight.data_ptr(), m, n, k)) return {};
  if (kernel == LinearKernel::kAuto && !PreferGemv(m, n)) return {};
  const c10::cuda::CUDAGuard guard(x.device());
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = n;
  at::Tensor out = at::empty(sizes, x.options());
  CheckLaunch(dk::LaunchGemv(dtype, x.data_ptr(), weight.data_ptr(), bias.defined() ? bias.data_ptr() : nullptr,
                             out.data_ptr(), m, n, k, CurrentStream(x), ToGemvKernel(kernel), warps_per_block),
              "Linear");
  return out;
}

// Where DecodeAttention() prefers the kernel to the ATen path (allowed.repeat
// + SDPA), from bf16 timings on an H200 (graph replay of 32 layer caches;
// build-fusedcheck/attn_bench.cc, NOTES.md run 2), kv_heads 8, group 4, D 128
// (8B) and 64 (1B), us per call, SDPA -> kernel:
//  - rows = group * n <= 64 (n <= 16): 1.7-2.3x faster at L = 256 (8B n = 1:
//    17.5 -> 10.3), 3.1-3.6x at 1024, 5.2-7.2x at 4096, 6.3-9x at 8192;
//  - rows 256 (n = 64): slower at L = 256 (8B 19.3 -> 24.3, 1B 16.6 -> 17.0),
//    1.35-2x faster from L = 1024 on;
//  - rows 512 (n = 128): slower or level at every L (0.6-0.9x), its 64-row
//    blocks re-reading each K/V tile from L2 eight times.
// rows 65..255 and group != 4 were not measured: rows <= 128 is taken as
// winning at any L (n = 16 won 2.1x at L = 256 where n = 64 lost 0.8x),
// rows <= 256 from L = 1024 on. D 80/96 and float16 were not timed.
constexpr int64_t kAttentionKernelMaxRows = 128;
constexpr int64_t kAttentionKernelMaxRowsLong = 256;
constexpr int64_t kAttentionKernelLongKv = 1024;

bool PreferDecodeAttentionKernel(const dk::DecodeAttentionShape& shape) {
  return shape.rows <= kAttentionKernelMaxRows ||
         (shape.rows <= kAttentionKernelMaxRowsLong && shape.kv_length >= kAttentionKernelLongKv);
}

// Where DecodeAttention() takes the split kernel over the tiled one (among
// shapes DecodeAttentionSplitSupported accepts: rows <= 16, L <= 8192, sm_90+).
// H200, bf16, same graph-replay timing (NOTES.md run 3), tiled -> split, us:
// faster at every point measured, n = 1, 2, 4 (rows 4..16) x L = 256, 1024,
// 4096, 8192, both models, full and half masks: 8B n = 1 10.19 -> 5.88
// (L 256), 10.95 -> 7.08 (1024), 13.23 -> 11.04 (4096), 20.11 -> 16.19
// (8192); 8B n = 4 10.84 -> 8.82, 11.44 -> 9.47, 14.51 -> 13.41, 21.65 ->
// 18.55; 1B n = 1 7.20 -> 4.81, 8.26 -> 5.56; 1B n = 4 7.58 -> 6.57, 8.58 ->
// 7.41 (1.08x to 1.73x). So: wherever it applies.
// SPECLAB_SPLIT_ATTENTION=0 keeps to the tiled kernel, to A/B the two inside
// whole decoding runs (the split kernel's thread block clusters are the one
// cluster launch in a forward's graph).
bool PreferSplitAttentionKernel(const dk::DecodeAttentionShape& shape) {
  static const bool allowed = [] {
    const char* env = std::getenv("SPECLAB_SPLIT_ATTENTION");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return allowed && shape.rows <= dk::kDecodeAttentionSplitMaxRows;
}

// The decode attention kernel's output, or an undefined tensor where it does
// not cover the inputs or, unless `pinned`, is not preferred. `blocks`: the
// tiled kernel's chunk_tiles or the split kernel's blocks per KV head.
at::Tensor DecodeAttentionKernelOrUndefined(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                            const at::Tensor& allowed, int64_t kv_length, AttentionKernel kernel,
                                            int64_t blocks, bool pinned) {
  dk::DType dtype;
  if (!Covered({q, k, v}, &dtype)) return {};
  if (allowed.device() != q.device() || (allowed.size(1) > 1 && allowed.stride(1) != 1)) return {};
  dk::DecodeAttentionShape shape;
  shape.kv_heads = q.size(0);
  shape.rows = q.size(1);
  shape.tokens = allowed.size(0);
  shape.head_dim = q.size(2);
  shape.kv_length = kv_length;
  shape.cache_slots = k.size(1);
  shape.mask_stride = allowed.stride(0);
  if (!dk::DecodeAttentionSupported(dtype, q.data_ptr(), k.data_ptr(), v.data_ptr(), shape)) return {};
  if (!pinned && !PreferDecodeAttentionKernel(shape)) return {};
  const c10::cuda::CUDAGuard guard(q.device());
  const bool split = (kernel == AttentionKernel::kSplit ||
                      (kernel == AttentionKernel::kAuto && PreferSplitAttentionKernel(shape))) &&
                     dk::DecodeAttentionSplitSupported(shape);
  const dk::DecodeAttentionPlan plan =
      split ? dk::PlanDecodeAttentionSplit(shape, kernel == AttentionKernel::kSplit ? blocks : 0)
            : dk::PlanDecodeAttention(shape, kernel == AttentionKernel::kTiled ? blocks : 0);
  at::Tensor out = at::empty(q.sizes(), q.options());
  // Freed on return but stream-ordered: the caching allocator hands it out
  // again only to work queued after this launch (also during graph capture).
  const at::Tensor workspace =
      plan.workspace_floats > 0 ? at::empty({plan.workspace_floats}, q.options().dtype(at::kFloat)) : at::Tensor();
  CheckLaunch(dk::LaunchDecodeAttention(dtype, q.data_ptr(), k.data_ptr(), v.data_ptr(), allowed.data_ptr(),
                                        out.data_ptr(), workspace.defined() ? workspace.data_ptr<float>() : nullptr,
                                        shape, plan, CurrentStream(q)),
              "DecodeAttention");
  return out;
}

// The ordered attention kernel's output (batch-invariant mode), or an
// undefined tensor where it does not cover the inputs.
at::Tensor OrderedAttentionOrUndefined(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                       const at::Tensor& allowed, int64_t kv_length) {
  dk::DType dtype;
  if (!Covered({q, k, v}, &dtype)) return {};
  if (allowed.device() != q.device() || allowed.scalar_type() != at::kBool ||
      (allowed.size(1) > 1 && allowed.stride(1) != 1) || allowed.size(1) < kv_length)
    return {};
  dk::OrderedAttentionShape shape;
  shape.kv_heads = q.size(0);
  shape.tokens = allowed.size(0);
  shape.group = q.size(1) / shape.tokens;
  shape.head_dim = q.size(2);
  shape.kv_length = kv_length;
  shape.cache_slots = k.size(1);
  shape.mask_stride = allowed.stride(0);
  const auto aligned = [](const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; };
  if (shape.group * shape.tokens != q.size(1) || !dk::OrderedAttentionSupported(dtype, shape) || !aligned(q) ||
      !aligned(k) || !aligned(v))
    return {};
  const c10::cuda::CUDAGuard guard(q.device());
  at::Tensor out = at::empty(q.sizes(), q.options());
  // Freed on return but stream-ordered, as DecodeAttention's workspace.
  const at::Tensor workspace =
      at::empty({dk::OrderedAttentionWorkspaceFloats(shape)}, q.options().dtype(at::kFloat));
  CheckLaunch(dk::LaunchOrderedAttention(dtype, q.data_ptr(), k.data_ptr(), v.data_ptr(), allowed.data_ptr(),
                                         out.data_ptr(), workspace.data_ptr<float>(), shape, CurrentStream(q)),
              "OrderedAttention");
  return out;
}

#endif  // SPECLAB_WITH_CUDA

}  // namespace

bool HasCudaKernels() {
#ifdef SPECLAB_WITH_CUDA
  return true;
#else
  return false;
#endif
}

void SetCudaKernelsEnabled(bool enabled) { kernel_launch::SetEnabled(enabled); }

bool CudaKernelsEnabled() { return kernel_launch::Enabled(); }

int64_t CudaKernelLaunches() { return kernel_launch::Launches(); }

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  CheckNormShapes(x, weight);
#ifdef SPECLAB_WITH_CUDA
  dk::DType dtype;
  if (Covered({x, weight}, &dtype)) {
    const c10::cuda::CUDAGuard guard(x.device());
    at::Tensor out = at::empty(x.sizes(), x.options());
    const int64_t hidden = x.size(-1);
    CheckLaunch(dk::LaunchAddRmsNorm(dtype, x.data_ptr(), nullptr, weight.data_ptr(), nullptr, out.data_ptr(),
                                     hidden == 0 ? 0 : x.numel() / hidden, hidden, static_cast<float>(eps),
                                     CurrentStream(x)),
                "RmsNorm");
    return out;
  }
#endif
  return RmsNormAten(x, weight, eps);
}

std::pair<at::Tensor, at::Tensor> AddRmsNorm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& weight,
                                             double eps) {
  CheckNormShapes(x, weight);
  TORCH_CHECK(x.sizes() == delta.sizes(), "AddRmsNorm: x ", x.sizes(), " and delta ", delta.sizes(), " differ");
#ifdef SPECLAB_WITH_CUDA
  dk::DType dtype;
  if (Covered({x, delta, weight}, &dtype)) {
    const c10::cuda::CUDAGuard guard(x.device());
    at::Tensor sum = at::empty(x.sizes(), x.options());
    at::Tensor out = at::empty(x.sizes(), x.options());
    const int64_t hidden = x.size(-1);
    CheckLaunch(dk::LaunchAddRmsNorm(dtype, x.data_ptr(), delta.data_ptr(), weight.data_ptr(), sum.data_ptr(),
                                     out.data_ptr(), hidden == 0 ? 0 : x.numel() / hidden, hidden,
                                     static_cast<float>(eps), CurrentStream(x)),
                "AddRmsNorm");
    return {std::move(sum), std::move(out)};
  }
#endif
  at::Tensor sum = x + delta;
  at::Tensor out = RmsNormAten(sum, weight, eps);
  return {std::move(sum), std::move(out)};
}

at::Tensor SiluMul(const at::Tensor& gate_up, int64_t intermediate) {
  TORCH_CHECK(gate_up.dim() >= 1 && intermediate >= 0 && gate_up.size(-1) == 2 * intermediate, "SiluMul: gate_up ",
              gate_up.sizes(), " is not [..., 2 * ", intermediate, "]");
#ifdef SPECLAB_WITH_CUDA
  dk::DType dtype;
  if (Covered({gate_up}, &dtype)) {
    const c10::cuda::CUDAGuard guard(gate_up.device());
    std::vector<int64_t> sizes = gate_up.sizes().vec();
    sizes.back() = intermediate;
    at::Tensor out = at::empty(sizes, gate_up.options());
    const int64_t rows = intermediate == 0 ? 0 : gate_up.numel() / (2 * intermediate);
    CheckLaunch(dk::LaunchSiluMul(dtype, gate_up.data_ptr(), out.data_ptr(), rows, intermediate,
                                  CurrentStream(gate_up)),
                "SiluMul");
    return out;
  }
#endif
  return (at::silu(gate_up.narrow(-1, 0, intermediate)) * gate_up.narrow(-1, intermediate, intermediate)).contiguous();
}

std::pair<at::Tensor, at::Tensor> RopeAngles(const at::Tensor& positions, const at::Tensor& inv_freq,
                                             at::ScalarType dtype) {
  TORCH_CHECK(positions.dim() == 1 && positions.scalar_type() == at::kLong, "RopeAngles: positions ",
              positions.sizes(), " are not [n] int64");
  TORCH_CHECK(inv_freq.dim() == 1 && inv_freq.scalar_type() == at::kFloat, "RopeAngles: inv_freq ", inv_freq.sizes(),
              " is not [head_dim / 2] float32");
  const int64_t n = positions.size(0), head_dim = 2 * inv_freq.size(0);
#ifdef SPECLAB_WITH_CUDA
  dk::DType kernel_dtype;
  if (CudaKernelsEnabled() && positions.is_cuda() && inv_freq.device() == positions.device() &&
      positions.is_contiguous() && inv_freq.is_contiguous() && KernelDType(dtype, &kernel_dtype)) {
    const c10::cuda::CUDAGuard guard(positions.device());
    at::Tensor cos = at::empty({n, head_dim}, positions.options().dtype(dtype)), sin = at::empty_like(cos);
    CheckLaunch(dk::LaunchRopeAngles(kernel_dtype, positions.data_ptr<int64_t>(), inv_freq.data_ptr<float>(),
                                     cos.data_ptr(), sin.data_ptr(), n, head_dim, CurrentStream(positions)),
                "RopeAngles");
    return {cos, sin};
  }
#endif
  const at::Tensor angles = at::outer(positions.to(at::kFloat), inv_freq);
  const at::Tensor emb = at::cat({angles, angles}, -1);
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

at::Tensor RopeQkvToCache(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t heads,
                          int64_t kv_heads, int64_t head_dim, const at::Tensor& write_slots, at::Tensor& k_cache_layer,
                          at::Tensor& v_cache_layer) {
  TORCH_CHECK(heads > 0 && kv_heads > 0 && heads % kv_heads == 0 && head_dim > 0 && head_dim % 2 == 0,
              "RopeQkvToCache: bad heads ", heads, ", kv_heads ", kv_heads, ", head_dim ", head_dim);
  const int64_t width = (heads + 2 * kv_heads) * head_dim;
  TORCH_CHECK(qkv.dim() >= 2 && qkv.size(-1) == width, "RopeQkvToCache: qkv ", qkv.sizes(), " is not [n, ", width,
              "]");
  const int64_t n = qkv.numel() / width;
  TORCH_CHECK(cos.numel() == n * head_dim && cos.size(-1) == head_dim && sin.sizes() == cos.sizes(),
              "RopeQkvToCache: cos ", cos.sizes(), " / sin ", sin.sizes(), " are not [", n, ", ", head_dim, "]");
  TORCH_CHECK(cos.scalar_type() == qkv.scalar_type() && sin.scalar_type() == qkv.scalar_type(),
              "RopeQkvToCache: cos/sin must have qkv's dtype");
  TORCH_CHECK(write_slots.numel() == n && write_slots.scalar_type() == at::kLong, "RopeQkvToCache: write_slots ",
              write_slots.sizes(), " is not [", n, "] int64");
  TORCH_CHECK(k_cache_layer.dim() == 3 && k_cache_layer.size(0) == kv_heads && k_cache_layer.size(2) == head_dim &&
                  v_cache_layer.sizes() == k_cache_layer.sizes(),
              "RopeQkvToCache: caches ", k_cache_layer.sizes(), " / ", v_cache_layer.sizes(), " are not [", kv_heads,
              ", S, ", head_dim, "]");
#ifdef SPECLAB_WITH_CUDA
  dk::DType dtype;
  if (Covered({qkv, cos, sin, k_cache_layer, v_cache_layer}, &dtype) && write_slots.device() == qkv.device() &&
      write_slots.is_contiguous()) {
    const c10::cuda::CUDAGuard guard(qkv.device());
    at::Tensor q_grouped = at::empty({kv_heads, heads / kv_heads * n, head_dim}, qkv.options());
    CheckLaunch(dk::LaunchRopeQkvToCache(dtype, qkv.data_ptr(), cos.data_ptr(), sin.data_ptr(),
                                         write_slots.data_ptr<int64_t>(), q_grouped.data_ptr(),
                                         k_cache_layer.data_ptr(), v_cache_layer.data_ptr(), n, heads, kv_heads,
                                         head_dim, k_cache_layer.size(1), CurrentStream(qkv)),
                "RopeQkvToCache");
    return q_grouped;
  }
#endif
  return RopeQkvToCacheAten(qkv, cos, sin, n, heads, kv_heads, head_dim, write_slots, k_cache_layer, v_cache_layer);
}

at::Tensor Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return LinearWithKernel(x, weight, bias, LinearKernel::kAuto, 0);
}

at::Tensor LinearWithKernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            LinearKernel kernel, int warps_per_block) {
  CheckLinearShapes(x, weight, bias);
#ifdef SPECLAB_WITH_CUDA
  at::Tensor out = GemvOrUndefined(x, weight, bias, kernel, warps_per_block);
  if (out.defined()) return out;
#else
  (void)kernel;
  (void)warps_per_block;
#endif
  return at::linear(x, weight, bias);
}

at::Tensor DecodeAttention(const at::Tensor& q, const at::Tensor& k_cache_layer, const at::Tensor& v_cache_layer,
                           const at::Tensor& allowed, int64_t kv_length) {
  CheckAttentionShapes(q, k_cache_layer, v_cache_layer, allowed, kv_length);
#ifdef SPECLAB_WITH_CUDA
  at::Tensor out = DecodeAttentionKernelOrUndefined(q, k_cache_layer, v_cache_layer, allowed, kv_length,
                                                    AttentionKernel::kAuto, 0, /*pinned=*/false);
  if (out.defined()) return out;
#endif
  return DecodeAttentionAten(q, k_cache_layer, v_cache_layer, allowed, kv_length);
}

namespace {

// The batch-invariant GEMV's rows per launch, warps splitting k, and attention chunk.
constexpr int64_t kInvariantRows = 16;
constexpr int kInvariantWarps = 4;
constexpr int64_t kInvariantChunkTiles = 4;

}  // namespace

at::Tensor LinearBatchInvariant(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  CheckLinearShapes(x, weight, bias);
  const int64_t k = weight.size(1);
  const at::Tensor rows = x.reshape({-1, k});
  const int64_t m = rows.size(0);
  if (m == 0) return at::linear(x, weight, bias);
  std::vector<at::Tensor> parts;
  for (int64_t i = 0; i < m; i += kInvariantRows)
    parts.push_back(LinearWithKernel(rows.narrow(0, i, std::min(kInvariantRows, m - i)), weight, bias,
                                     LinearKernel::kTensorCore, kInvariantWarps));
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return (parts.size() == 1 ? parts.front() : at::cat(parts)).view(sizes);
}

at::Tensor DecodeAttentionBatchInvariant(const at::Tensor& q, const at::Tensor& k_cache_layer,
                                         const at::Tensor& v_cache_layer, const at::Tensor& allowed,
                                         int64_t kv_length) {
  CheckAttentionShapes(q, k_cache_layer, v_cache_layer, allowed, kv_length);
#ifdef SPECLAB_WITH_CUDA
  at::Tensor out = OrderedAttentionOrUndefined(q, k_cache_layer, v_cache_layer, allowed, kv_length);
  if (out.defined()) return out;
#endif
  return DecodeAttentionWithChunks(q, k_cache_layer, v_cache_layer, allowed, kv_length, kInvariantChunkTiles);
}

at::Tensor DecodeAttentionWithChunks(const at::Tensor& q, const at::Tensor& k_cache_layer,
                                     const at::Tensor& v_cache_layer, const at::Tensor& allowed, int64_t kv_length,
                                     int64_t chunk_tiles) {
  CheckAttentionShapes(q, k_cache_layer, v_cache_layer, allowed, kv_length);
#ifdef SPECLAB_WITH_CUDA
  at::Tensor out = DecodeAttentionKernelOrUndefined(q, k_cache_layer, v_cache_layer, allowed, kv_length,
                                                    AttentionKernel::kTiled, std::max<int64_t>(chunk_tiles, 0),
                                                    /*pinned=*/true);
  if (out.defined()) return out;
#else
  (void)chunk_tiles;
#endif
  return DecodeAttentionAten(q, k_cache_layer, v_cache_layer, allowed, kv_length);
}

at::Tensor DecodeAttentionWithKernel(const at::Tensor& q, const at::Tensor& k_cache_layer,
                                     const at::Tensor& v_cache_layer, const at::Tensor& allowed, int64_t kv_length,
                                     AttentionKernel kernel, int64_t blocks) {
  if (kernel == AttentionKernel::kAuto) return DecodeAttention(q, k_cache_layer, v_cache_layer, allowed, kv_length);
  CheckAttentionShapes(q, k_cache_layer, v_cache_layer, allowed, kv_length);
#ifdef SPECLAB_WITH_CUDA
  at::Tensor out = DecodeAttentionKernelOrUndefined(q, k_cache_layer, v_cache_layer, allowed, kv_length, kernel,
                                                    std::max<int64_t>(blocks, 0), /*pinned=*/true);
  if (out.defined()) return out;
#else
  (void)blocks;
#endif
  return DecodeAttentionAten(q, k_cache_layer, v_cache_layer, allowed, kv_length);
}

at::Tensor GroupedAttentionAten(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const at::Tensor& allowed, const at::Tensor& grouped, const at::Tensor& blocked,
                                int64_t group) {
#if TORCH_VERSION_MAJOR >= 2
  if (grouped.defined()) return at::scaled_dot_product_attention(q, k, v, grouped);
#endif
  const int64_t n = allowed.size(0);
  const int64_t s = k.size(-2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).to(at::kFloat) * scale;
  const std::vector<int64_t> full = scores.sizes().vec();
  std::vector<int64_t> by_group(full.begin(), full.end() - 2);
  by_group.insert(by_group.end(), {group, n, s});
  // A finite fill keeps rows without any visible key NaN-free.
  const at::Tensor masked = scores.view(by_group)
                                .masked_fill(blocked.defined() ? blocked : allowed.logical_not(),
                                             std::numeric_limits<float>::lowest())
                                .view(full);
  return at::matmul(at::softmax(masked, -1).to(q.scalar_type()), v);
}

at::Tensor ArgmaxRows(const at::Tensor& x, const at::Tensor& divisor) {
  TORCH_CHECK(x.dim() == 2, "ArgmaxRows: x must be [rows, cols], got ", x.sizes());
  TORCH_CHECK(!divisor.defined() || divisor.sizes() == x.sizes(), "ArgmaxRows: divisor ", divisor.sizes(),
              " does not match x ", x.sizes());
#ifdef SPECLAB_WITH_CUDA
  if (kernel_launch::FloatRows(x) &&
      (!divisor.defined() || (kernel_launch::FloatRows(divisor) && divisor.device() == x.device()))) {
    const c10::cuda::CUDAGuard guard(x.device());
    const int64_t rows = x.size(0), cols = x.size(1);
    at::Tensor out = at::empty({rows}, x.options().dtype(at::kLong));
    const at::Tensor workspace = RowWorkspace(rows, cols, 1, x.options().dtype(at::kLong));
    CheckLaunch(row_kernels::LaunchArgmaxRows(x.data_ptr<float>(),
                                              divisor.defined() ? divisor.data_ptr<float>() : nullptr,
                                              out.data_ptr<int64_t>(),
                                              reinterpret_cast<uint64_t*>(WorkspacePointer<int64_t>(workspace)),
                                              rows, cols, CurrentStream(x)),
                "ArgmaxRows");
    return out;
  }
#endif
  return divisor.defined() ? at::div(x, divisor.clamp_min(FLT_MIN)).argmax(-1) : x.argmax(-1);
}

at::Tensor SoftmaxRows(const at::Tensor& x, double temperature) {
  TORCH_CHECK(x.dim() == 2, "SoftmaxRows: x must be [rows, cols], got ", x.sizes());
  TORCH_CHECK(temperature > 0, "SoftmaxRows: temperature must be positive, got ", temperature);
#ifdef SPECLAB_WITH_CUDA
  if (kernel_launch::FloatRows(x)) {
    const c10::cuda::CUDAGuard guard(x.device());
    const int64_t rows = x.size(0), cols = x.size(1);
    at::Tensor out = at::empty_like(x);
    const at::Tensor workspace = RowWorkspace(rows, cols, 2, x.options());
    CheckLaunch(row_kernels::LaunchSoftmaxRows(x.data_ptr<float>(), out.data_ptr<float>(),
                                               WorkspacePointer<float>(workspace), rows, cols,
                                               static_cast<float>(temperature), CurrentStream(x)),
                "SoftmaxRows");
    return out;
  }
#endif
  return (temperature == 1.0 ? x : x / temperature).softmax(-1);
}

at::Tensor DraftFactsRows(const at::Tensor& logits, const at::Tensor& q, const at::Tensor& tokens) {
  TORCH_CHECK(logits.dim() == 2, "DraftFactsRows: logits must be [rows, cols], got ", logits.sizes());
  const int64_t rows = logits.size(0), cols = logits.size(1);
  TORCH_CHECK(!q.defined() || q.sizes() == logits.sizes(), "DraftFactsRows: q must be shaped as logits ",
              logits.sizes(), ", got ", q.sizes());
  TORCH_CHECK(!q.defined() || (tokens.defined() && tokens.numel() == rows && tokens.scalar_type() == at::kLong),
              "DraftFactsRows: a defined q needs int64 tokens, one a row");
#ifdef SPECLAB_WITH_CUDA
  if (kernel_launch::FloatRows(logits) && (!q.defined() || kernel_launch::FloatRows(q))) {
    const c10::cuda::CUDAGuard guard(logits.device());
    at::Tensor out = at::empty({rows, 3}, logits.options());
    const at::Tensor workspace = RowWorkspace(rows, cols, 3, logits.options());
    const at::Tensor picked = q.defined() ? tokens.contiguous() : at::Tensor();
    CheckLaunch(row_kernels::LaunchDraftFactsRows(
                    logits.data_ptr<float>(), q.defined() ? q.data_ptr<float>() : nullptr,
                    q.defined() ? picked.data_ptr<int64_t>() : nullptr, out.data_ptr<float>(),
                    WorkspacePointer<float>(workspace), rows, cols, CurrentStream(logits)),
                "DraftFactsRows");
    return out;
  }
#endif
  const at::Tensor p = logits.softmax(-1);
  const at::Tensor entropy = -(p * p.clamp_min(1e-30).log()).sum(-1, /*keepdim=*/true);
  const at::Tensor probability =
      q.defined() ? q.gather(1, tokens.reshape({rows, 1})) : at::ones({rows, 1}, logits.options());
  return at::cat({probability, entropy, p.amax(-1, /*keepdim=*/true)}, 1);
}

namespace {

// The first k columns of a stable descending sort of every row of `keys`
// (NaN above every number, ties to the smaller index), as int64 [rows, k].
// On the CPU a partial sort per row: ATen's full stable sort of an 8000-wide
// row took about 0.6 ms, which made each host-grown tree level cost more
// than the drafter's forward. Elsewhere (double keys, other devices) the sort.
at::Tensor FirstOfStableDescendingSort(const at::Tensor& keys, int64_t k) {
  if (!keys.is_cpu() || keys.scalar_type() != at::kFloat)
    return std::get<1>(keys.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true)).narrow(-1, 0, k).contiguous();
  const at::Tensor rows_in = keys.contiguous();
  const int64_t rows = rows_in.size(0), cols = rows_in.size(1);
  at::Tensor out = at::empty({rows, k}, rows_in.options().dtype(at::kLong));
  int64_t* chosen = out.data_ptr<int64_t>();
  std::vector<int64_t> order(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = rows_in.data_ptr<float>() + r * cols;
    for (int64_t c = 0; c < cols; ++c) order[c] = c;
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [row](int64_t a, int64_t b) {
      const float x = row[a], y = row[b];
      const bool x_nan = std::isnan(x), y_nan = std::isnan(y);
      if (x_nan != y_nan) return x_nan;
      if (!x_nan && x != y) return x > y;
      return a < b;
    });
    std::copy(order.begin(), order.begin() + k, chosen + r * k);
  }
  return out;
}

}  // namespace

std::pair<at::Tensor, at::Tensor> TopKRows(const at::Tensor& x, const at::Tensor& divisor, int64_t k) {
  TORCH_CHECK(x.dim() == 2, "TopKRows: x must be [rows, cols], got ", x.sizes());
  TORCH_CHECK(!divisor.defined() || divisor.sizes() == x.sizes(), "TopKRows: divisor ", divisor.sizes(),
              " is not x's ", x.sizes());
  TORCH_CHECK(k >= 1 && k <= x.size(1), "TopKRows: k = ", k, " outside [1, ", x.size(1), "]");
#ifdef SPECLAB_WITH_CUDA
  if (kernel_launch::FloatRows(x) && (!divisor.defined() || kernel_launch::FloatRows(divisor)) && k <= 32) {
    const c10::cuda::CUDAGuard guard(x.device());
    const int64_t rows = x.size(0);
    at::Tensor values = at::empty({rows, k}, x.options());
    at::Tensor indices = at::empty({rows, k}, x.options().dtype(at::kLong));
    CheckLaunch(row_kernels::LaunchTopKRows(x.data_ptr<float>(), divisor.defined() ? divisor.data_ptr<float>() : nullptr,
                                            values.data_ptr<float>(), indices.data_ptr<int64_t>(), rows, x.size(1),
                                            static_cast<int>(k), CurrentStream(x)),
                "TopKRows");
    return {values, indices};
  }
#endif
  const at::Tensor keys = divisor.defined() ? x / divisor.clamp_min(FLT_MIN) : x;
  const at::Tensor order = FirstOfStableDescendingSort(keys, k);
  return {keys.gather(-1, order), order};
}

at::Tensor TopKSoftmaxRows(const at::Tensor& x, double temperature, int64_t k) {
  TORCH_CHECK(x.dim() == 2, "TopKSoftmaxRows: x must be [rows, cols], got ", x.sizes());
  TORCH_CHECK(temperature > 0, "TopKSoftmaxRows: temperature must be positive, got ", temperature);
  TORCH_CHECK(k >= 1 && k <= x.size(1), "TopKSoftmaxRows: k = ", k, " outside [1, ", x.size(1), "]");
#ifdef SPECLAB_WITH_CUDA
  if (kernel_launch::FloatRows(x)) {
    const c10::cuda::CUDAGuard guard(x.device());
    at::Tensor out = at::empty_like(x);
    CheckLaunch(row_kernels::LaunchTopKSoftmaxRows(x.data_ptr<float>(), out.data_ptr<float>(), x.size(0), x.size(1),
                                                   k, static_cast<float>(temperature), CurrentStream(x)),
                "TopKSoftmaxRows");
    return out;
  }
#endif
  // Keep every entry scoring at least the k-th best (ties kept, as in HF).
  const at::Tensor y = x / temperature;
  const at::Tensor kth = std::get<0>(y.topk(k, -1)).narrow(-1, k - 1, 1);
  return SoftmaxRows(y.masked_fill(y < kth, -std::numeric_limits<float>::infinity()));
}

at::Tensor TopKSoftmaxRace(const at::Tensor& x, const at::Tensor& rows, double temperature, int64_t k,
                           const at::Tensor& noise, const at::Tensor& out, int64_t ranks) {
  TORCH_CHECK(x.dim() == 2, "TopKSoftmaxRace: x must be [rows, cols], got ", x.sizes());
  const int64_t n = rows.defined() ? rows.size(0) : x.size(0), cols = x.size(1);
  TORCH_CHECK(!rows.defined() || (rows.dim() == 1 && rows.scalar_type() == at::kLong),
              "TopKSoftmaxRace: rows must be int64 [n]");
  TORCH_CHECK(out.sizes() == at::IntArrayRef({n, cols}) && noise.sizes() == out.sizes(), "TopKSoftmaxRace: out ",
              out.sizes(), " and noise ", noise.sizes(), " must be [", n, ", ", cols, "]");
  TORCH_CHECK(temperature > 0, "TopKSoftmaxRace: temperature must be positive, got ", temperature);
  TORCH_CHECK(k >= 1, "TopKSoftmaxRace: k = ", k, " must be at least 1");
  TORCH_CHECK(ranks >= 1 && ranks <= cols, "TopKSoftmaxRace: ranks = ", ranks, " outside [1, ", cols, "]");
#ifdef SPECLAB_WITH_CUDA
  if (kernel_launch::FloatRows(x) && kernel_launch::FloatRows(out) && kernel_launch::FloatRows(noise) && ranks <= 32 &&
      (!rows.defined() || (rows.is_contiguous() && rows.device() == x.device())) && out.device() == x.device() &&
      noise.device() == x.device()) {
    const c10::cuda::CUDAGuard guard(x.device());
    at::Tensor tokens = at::empty({n, ranks}, x.options().dtype(at::kLong));
    CheckLaunch(row_kernels::LaunchTopKSoftmaxRace(x.data_ptr<float>(), rows.defined() ? rows.data_ptr<int64_t>() : nullptr,
                                                   noise.data_ptr<float>(), out.data_ptr<float>(),
                                                   tokens.data_ptr<int64_t>(), n, cols, k,
                                                   static_cast<float>(temperature), static_cast<int>(ranks),
                                                   CurrentStream(x)),
                "TopKSoftmaxRace");
    return tokens;
  }
#endif
  const at::Tensor gathered = rows.defined() ? x.index_select(0, rows) : x;
  out.copy_(k >= cols ? SoftmaxRows(gathered, temperature) : TopKSoftmaxRows(gathered, temperature, k));
  return ranks == 1 ? ArgmaxRows(out, noise).unsqueeze(1) : TopKRows(out, noise, ranks).second;
}

std::pair<at::Tensor, at::Tensor> TopKLogSoftmax(const at::Tensor& x, int64_t k) {
  TORCH_CHECK(x.dim() == 2, "TopKLogSoftmax: x must be [rows, cols], got ", x.sizes());
  TORCH_CHECK(k >= 1 && k <= x.size(1), "TopKLogSoftmax: k = ", k, " outside [1, ", x.size(1), "]");
#ifdef SPECLAB_WITH_CUDA
  if (kernel_launch::FloatRows(x) && k <= 32) {
    const c10::cuda::CUDAGuard guard(x.device());
    const int64_t rows = x.size(0);
    at::Tensor values = at::empty({rows, k}, x.options());
    at::Tensor indices = at::empty({rows, k}, x.options().dtype(at::kLong));
    const int64_t splits = row_kernels::TopKLogSoftmaxSplits(x.size(1), static_cast<int>(k));
    at::Tensor keys = at::empty({rows * splits * k}, x.options().dtype(at::kLong));
    at::Tensor parts = at::empty({rows * splits * 2}, x.options());
    CheckLaunch(row_kernels::LaunchTopKLogSoftmax(
                    x.data_ptr<float>(), values.data_ptr<float>(), indices.data_ptr<int64_t>(),
                    reinterpret_cast<uint64_t*>(keys.data_ptr<int64_t>()), parts.data_ptr<float>(), rows, x.size(1),
                    static_cast<int>(k), CurrentStream(x)),
                "TopKLogSoftmax");
    return {values, indices};
  }
#endif
  const at::Tensor indices = FirstOfStableDescendingSort(x, k);
  return {x.log_softmax(-1).gather(-1, indices), indices};
}

std::pair<at::Tensor, at::Tensor> TreeMask(const at::Tensor& parents) {
  TORCH_CHECK(parents.dim() == 1 && parents.size(0) >= 1 && parents.scalar_type() == at::kLong,
              "TreeMask: parents must be int64 [n >= 1], got ", parents.sizes(), " ", parents.scalar_type());
  const int64_t n = parents.size(0);
#ifdef SPECLAB_WITH_CUDA
  if (parents.is_cuda() && n <= tree_kernels::kMaxTreeItems) {
    const c10::cuda::CUDAGuard guard(parents.device());
    const at::Tensor in = parents.contiguous();
    at::Tensor mask = at::empty({n, n}, parents.options().dtype(at::kBool));
    at::Tensor depths = at::empty({n}, parents.options());
    CheckLaunch(tree_kernels::LaunchTreeMask(in.data_ptr<int64_t>(), mask.data_ptr<bool>(),
                                             depths.data_ptr<int64_t>(), n, CurrentStream(in)),
                "TreeMask");
    return {mask, depths};
  }
#endif
  const at::Tensor host = parents.to(at::kCPU).contiguous();
  const int64_t* up = host.data_ptr<int64_t>();
  at::Tensor mask = at::zeros({n, n}, at::TensorOptions().dtype(at::kBool));
  at::Tensor depths = at::zeros({n}, at::TensorOptions().dtype(at::kLong));
  bool* m = mask.data_ptr<bool>();
  int64_t* d = depths.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t node = i;
    m[i * n + node] = true;
    for (; node > 0 && up[node] >= 0 && up[node] < node; node = up[node]) {
      m[i * n + up[node]] = true;
      ++d[i];
    }
  }
  return {mask.to(parents.device()), depths.to(parents.device())};
}

void TreeAtInputs(const at::Tensor& start, const at::Tensor& tokens, const at::Tensor& depths, const at::Tensor& mask,
                  const at::Tensor& token_buffer, const at::Tensor& write_slots, const at::Tensor& positions,
                  const at::Tensor& allowed) {
  const int64_t n = tokens.size(0), bucket = write_slots.size(0), kv_length = allowed.size(1);
  TORCH_CHECK(start.numel() == 1 && depths.size(0) == n && mask.size(0) == n && mask.size(1) == n && n <= bucket &&
                  positions.size(0) == bucket && token_buffer.size(0) >= n && allowed.size(0) == bucket,
              "TreeAtInputs: shapes disagree");
#ifdef SPECLAB_WITH_CUDA
  if (start.is_cuda() && bucket <= tree_kernels::kMaxTreeItems && allowed.stride(1) == 1 &&
      write_slots.is_contiguous() && positions.is_contiguous() && token_buffer.is_contiguous()) {
    const c10::cuda::CUDAGuard guard(start.device());
    const at::Tensor ids = tokens.contiguous(), levels = depths.contiguous(), rows = mask.contiguous();
    CheckLaunch(tree_kernels::LaunchTreeAtInputs(start.data_ptr<int64_t>(), ids.data_ptr<int64_t>(),
                                                 levels.data_ptr<int64_t>(), rows.data_ptr<bool>(), n, bucket,
                                                 kv_length, allowed.stride(0), token_buffer.data_ptr<int64_t>(),
                                                 write_slots.data_ptr<int64_t>(), positions.data_ptr<int64_t>(),
                                                 allowed.data_ptr<bool>(), CurrentStream(start)),
                "TreeAtInputs");
    return;
  }
#endif
  at::Tensor slots = write_slots, at_positions = positions, visible = allowed;
  token_buffer.narrow(0, 0, n).copy_(tokens);
  at::add_out(slots, at::arange(bucket, write_slots.options()), start);
  at_positions.copy_(start.expand({bucket}));
  at_positions.narrow(0, 0, n).add_(depths);
  at::lt_out(visible, at::arange(kv_length, write_slots.options()).expand({bucket, kv_length}), start);
  visible.narrow(0, 0, n).index_copy_(1, slots.narrow(0, 0, n), mask);
  if (bucket > n) visible.narrow(0, n, bucket - n).index_fill_(1, start, true);
}

void MovePathEntries(const at::Tensor& k_cache, const at::Tensor& v_cache, const at::Tensor& start,
                     const at::Tensor& nodes) {
  TORCH_CHECK(k_cache.dim() == 4 && k_cache.sizes() == v_cache.sizes() && nodes.dim() == 1 && nodes.size(0) >= 1 &&
                  start.numel() == 1,
              "MovePathEntries: caches must be [layers, heads, slots, head_dim] alike, nodes [m], start [1]");
  const int64_t m = nodes.size(0);
#ifdef SPECLAB_WITH_CUDA
  const int64_t row_bytes = k_cache.size(3) * k_cache.element_size();
  if (start.is_cuda() && m <= tree_kernels::kMaxTreeItems && k_cache.is_contiguous() && v_cache.is_contiguous() &&
      row_bytes % 4 == 0 && k_cache.size(0) * k_cache.size(1) <= 65535) {
    const c10::cuda::CUDAGuard guard(start.device());
    const at::Tensor path = nodes.contiguous();
    CheckLaunch(tree_kernels::LaunchMovePathEntries(static_cast<uint32_t*>(k_cache.data_ptr()),
                                                    static_cast<uint32_t*>(v_cache.data_ptr()),
                                                    start.data_ptr<int64_t>(), path.data_ptr<int64_t>(), m,
                                                    k_cache.size(0) * k_cache.size(1), k_cache.size(2),
                                                    row_bytes / 4, CurrentStream(start)),
                "MovePathEntries");
    return;
  }
#endif
  // index_select copies first, so overlapping sources and destinations are safe.
  const at::Tensor source = nodes + start.reshape({1});
  const at::Tensor destination = at::arange(1, m + 1, nodes.options()) + start.reshape({1});
  for (const at::Tensor* cache : {&k_cache, &v_cache}) {
    at::Tensor plane = *cache;
    plane.index_copy_(2, destination, plane.index_select(2, source));
  }
}

void AdvanceStop(const at::Tensor& go, const at::Tensor& kept, const at::Tensor& stop,
                 std::optional<uint64_t> condition) {
  TORCH_CHECK(go.numel() == 1 && kept.numel() == 1 && stop.numel() == 1 && go.scalar_type() == at::kBool &&
                  stop.scalar_type() == at::kBool && kept.scalar_type() == at::kLong,
              "AdvanceStop: go and stop must be one bool, kept one int64");
#ifdef SPECLAB_WITH_CUDA
  if (go.is_cuda() && go.is_contiguous() && kept.is_contiguous()) {
    const c10::cuda::CUDAGuard guard(go.device());
    const at::Tensor stopped = stop.contiguous();
    CheckLaunch(tree_kernels::LaunchAdvanceStop(go.data_ptr<bool>(), kept.data_ptr<int64_t>(),
                                                stopped.data_ptr<bool>(), condition.has_value(),
                                                condition.value_or(0), CurrentStream(go)),
                "AdvanceStop");
    return;
  }
#endif
  TORCH_CHECK(!condition.has_value(), "AdvanceStop: only its CUDA kernel sets a graph's condition");
  at::Tensor counted = kept, going = go;
  counted.add_(go);
  going.logical_and_(stop.logical_not());
}

void AdvanceRound(const at::Tensor& picks, const at::Tensor& guesses, const at::Tensor& block, const at::Tensor& state,
                  const at::Tensor& tokens, const at::Tensor& sequence, const at::Tensor& rows, int64_t prefix,
                  int64_t steps, bool later, std::optional<uint64_t> condition) {
  const int64_t g = guesses.numel();
  TORCH_CHECK(g >= 1 && picks.numel() == g + 1 && state.numel() == 6 + g && picks.scalar_type() == at::kLong &&
                  guesses.scalar_type() == at::kLong && state.scalar_type() == at::kLong &&
                  rows.defined() == block.defined() &&
                  (!rows.defined() || (block.dim() == 2 && block.size(0) == g + 1 && rows.dim() == 2 &&
                                       rows.size(1) == block.size(1) && rows.size(0) >= steps + g + 1)),
              "AdvanceRound: picks must be [g + 1], guesses [g], state [6 + g] int64, block [g + 1, w] and rows "
              "[>= steps + g + 1, w] (both or neither); got ", picks.sizes(), ", ", guesses.sizes(), ", ",
              state.sizes());
#ifdef SPECLAB_WITH_CUDA
  if (kernel_launch::Longs(state) && kernel_launch::Longs(tokens) && kernel_launch::Longs(sequence) &&
      (!rows.defined() || (kernel_launch::FloatRows(rows) && rows.scalar_type() == at::kFloat))) {
    const c10::cuda::CUDAGuard guard(state.device());
    const at::Tensor picked = picks.contiguous(), guessed = guesses.contiguous();
    if (rows.defined()) {
      const at::Tensor from = block.to(at::kFloat).contiguous();
      CheckLaunch(tree_kernels::LaunchRoundRows(from.data_ptr<float>(), g, from.size(1), state.data_ptr<int64_t>(),
                                                rows.data_ptr<float>(), CurrentStream(state)),
                  "RoundRows");
    }
    CheckLaunch(tree_kernels::LaunchAdvanceRound(picked.data_ptr<int64_t>(), guessed.data_ptr<int64_t>(), g,
                                                 state.data_ptr<int64_t>(), tokens.data_ptr<int64_t>(),
                                                 sequence.data_ptr<int64_t>(), prefix, steps, later,
                                                 condition.has_value(), condition.value_or(0), CurrentStream(state)),
                "AdvanceRound");
    return;
  }
#endif
  TORCH_CHECK(!condition.has_value(), "AdvanceRound: only its CUDA kernel sets a graph's condition");
  const auto longs = state.options();
  const at::Tensor p = state.narrow(0, 0, 1).clone(), root = state.narrow(0, 4, 1).clone();
  const at::Tensor ahead = at::arange(g + 1, longs);
  const at::Tensor picked = picks.reshape({g + 1});
  tokens.index_copy_(0, p + prefix + ahead, picked);
  sequence.index_copy_(0, root + 1 + ahead, picked);
  if (rows.defined()) rows.index_copy_(0, p + ahead, block.to(rows.scalar_type()));
  const at::Tensor matched =
      at::cumprod(at::eq(picked.narrow(0, 0, g), guesses.reshape({g})).to(at::kLong), 0).sum();
  const at::Tensor kept = at::clamp_min(at::minimum(matched.view({1}) + 1, steps - p), 0);
  if (later) state.narrow(0, 1, 1).add_(at::lt(p, steps).to(at::kLong));
  const at::Tensor q = p + kept;
  state.narrow(0, 0, 1).copy_(q);
  state.narrow(0, 2, 1).copy_(
      at::where(at::gt(kept, 0), picked.index_select(0, at::clamp_min(kept - 1, 0)), state.narrow(0, 2, 1)));
  state.narrow(0, 3, 1).copy_(q + (prefix - 1));
  state.narrow(0, 4, 1).copy_(root + kept);
  state.narrow(0, 5, g + 1).copy_(at::clamp_max(q + ahead, steps - 1));
}

at::Tensor FirstRoundState(const at::Tensor& tokens, int64_t prefix, const at::Tensor& position, int64_t steps,
                           int64_t guesses) {
  const auto longs = tokens.options().dtype(at::kLong);
  const at::Tensor offset = at::full({1}, prefix - 1, longs);
  return at::cat({at::zeros({2}, longs), tokens.narrow(0, prefix - 1, 1).to(at::kLong), offset,
                  position.to(at::kLong).reshape({1}) + offset,
                  at::clamp_max(at::arange(guesses + 1, longs), steps - 1)});
}

at::Tensor CutChainAnswer(const at::Tensor& answer, const at::Tensor& kept, const at::Tensor& rows,
                          const at::Tensor& noise) {
  TORCH_CHECK(answer.numel() == 2 && kept.numel() == 1 && rows.dim() == 2 &&
                  (!noise.defined() || noise.numel() == rows.size(1)),
              "CutChainAnswer: answer must be [2], kept [1], rows [gamma + 1, vocab] and noise [1, vocab], got ",
              answer.sizes(), ", ", kept.sizes(), ", ", rows.sizes(), ", ",
              noise.defined() ? noise.sizes() : at::IntArrayRef{});
#ifdef SPECLAB_WITH_CUDA
  if (kernel_launch::Longs(answer) && kernel_launch::Longs(kept) && kernel_launch::FloatRows(rows) &&
      kept.device() == rows.device() && answer.device() == rows.device() &&
      (!noise.defined() || (noise.is_contiguous() && noise.scalar_type() == at::kFloat &&
                            noise.device() == rows.device()))) {
    const c10::cuda::CUDAGuard guard(rows.device());
    at::Tensor out = at::empty({2}, answer.options());
    CheckLaunch(row_kernels::LaunchCutChainAnswer(answer.data_ptr<int64_t>(), kept.data_ptr<int64_t>(),
                                                  rows.data_ptr<float>(), rows.size(0), rows.size(1),
                                                  noise.defined() ? noise.data_ptr<float>() : nullptr,
                                                  out.data_ptr<int64_t>(), CurrentStream(rows)),
                "CutChainAnswer");
    return out;
  }
#endif
  const at::Tensor row = rows.index_select(0, kept.reshape({1})).to(at::kFloat);
  const at::Tensor drawn = ArgmaxRows(row, noise.defined() ? noise.reshape({1, -1}) : at::Tensor());
  const at::Tensor accepted = answer.reshape({2}).narrow(0, 0, 1);
  return at::cat({at::minimum(accepted, kept.reshape({1})),
                  at::where(accepted < kept.reshape({1}), answer.reshape({2}).narrow(0, 1, 1), drawn)});
}

ChainRootAdvance AdvanceChainRoot(const at::Tensor& answer, const at::Tensor& tokens, const at::Tensor& kept,
                                  const at::Tensor& positions, const at::Tensor& context) {
  const int64_t g = tokens.size(0) - 1;
  TORCH_CHECK(g >= 1 && answer.numel() == 2 && positions.numel() == 2 && (!kept.defined() || kept.numel() == 1),
              "AdvanceChainRoot: tokens must be [g + 1 >= 2], answer and positions [2], kept [1]");
  ChainRootAdvance out;
#ifdef SPECLAB_WITH_CUDA
  if (kernel_launch::Longs(answer) && kernel_launch::Longs(tokens) && kernel_launch::Longs(positions) &&
      kernel_launch::Longs(context) && (!kept.defined() || kernel_launch::Longs(kept)) &&
      g < tree_kernels::kMaxTreeItems) {
    const c10::cuda::CUDAGuard guard(answer.device());
    out.positions = at::empty({2}, answer.options());
    out.last_two = at::empty({2}, answer.options());
    out.record = at::empty({g + 5}, answer.options());
    CheckLaunch(tree_kernels::LaunchAdvanceChainRoot(
                    answer.data_ptr<int64_t>(), tokens.data_ptr<int64_t>(), g,
                    kept.defined() ? kept.data_ptr<int64_t>() : nullptr, positions.data_ptr<int64_t>(),
                    context.data_ptr<int64_t>(), out.positions.data_ptr<int64_t>(), out.last_two.data_ptr<int64_t>(),
                    out.record.data_ptr<int64_t>(), CurrentStream(answer)),
                "AdvanceChainRoot");
    return out;
  }
#endif
  at::Tensor written = context;
  const at::Tensor accepted = answer.narrow(0, 0, 1);
  const at::Tensor root = positions.narrow(0, 1, 1);
  written.index_copy_(0, root + at::arange(1, g + 1, answer.options()), tokens.narrow(0, 1, g));
  written.index_copy_(0, root + accepted + 1, answer.narrow(0, 1, 1));
  out.positions = positions + accepted + 1;
  out.last_two = at::cat({tokens.index_select(0, accepted), answer.narrow(0, 1, 1)});
  out.record = at::cat({at::full({1}, g, answer.options()), tokens, answer,
                        kept.defined() ? kept : at::full({1}, g, answer.options())});
  return out;
}

TreeRootAdvance AdvanceTreeRoot(const at::Tensor& walk, const at::Tensor& tokens, const at::Tensor& parents,
                                const at::Tensor& positions, const at::Tensor& context) {
  const int64_t n = tokens.size(0);
  TORCH_CHECK(n >= 1 && walk.dim() == 1 && walk.size(0) == n + 1 && parents.size(0) == n && positions.numel() == 2,
              "AdvanceTreeRoot: walk must be [n + 1] for tokens and parents [n], positions [2]");
  TreeRootAdvance out;
#ifdef SPECLAB_WITH_CUDA
  if (walk.is_cuda() && n <= tree_kernels::kMaxTreeItems && context.is_contiguous()) {
    const c10::cuda::CUDAGuard guard(walk.device());
    const at::Tensor w = walk.contiguous(), ids = tokens.contiguous(), up = parents.contiguous(),
                     at_positions = positions.contiguous();
    out.positions = at::empty({2}, walk.options());
    out.last_two = at::empty({2}, walk.options());
    out.record = at::empty({3 * n + 1}, walk.options());
    CheckLaunch(tree_kernels::LaunchAdvanceTreeRoot(w.data_ptr<int64_t>(), ids.data_ptr<int64_t>(),
                                                    up.data_ptr<int64_t>(), n, at_positions.data_ptr<int64_t>(),
                                                    context.data_ptr<int64_t>(), out.positions.data_ptr<int64_t>(),
                                                    out.last_two.data_ptr<int64_t>(), out.record.data_ptr<int64_t>(),
                                                    CurrentStream(w)),
                "AdvanceTreeRoot");
    return out;
  }
#endif
  at::Tensor written = context;
  const at::Tensor root = positions.narrow(0, 1, 1);
  if (n > 1) {
    written.index_copy_(0, at::arange(1, n, walk.options()) + root,
                        tokens.index_select(0, walk.narrow(0, 1, n - 1)));
  }
  out.positions = positions + walk.narrow(0, 0, 1) + 1;
  written.index_copy_(0, out.positions.narrow(0, 1, 1), walk.narrow(0, n, 1));
  out.last_two = written.index_select(0, out.positions);
  out.record = at::cat({tokens, parents, walk});
  return out;
}

}  // namespace fused
}  // namespace speclab

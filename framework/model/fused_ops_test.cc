// Fused ops against the ATen compositions llama_model.cc runs (HF order).
//
// CPU: the fallback must equal the reference bit for bit (same formula; this
// pins shapes and layout conventions). CUDA (SPECLAB_TEST_DEVICE=cuda): the
// kernels against the reference run on the same CUDA inputs, within a bound
// derived per op from its arithmetic (the storage type's unit roundoff, the
// float32 operations and reductions on each side;
// framework/core/float_bounds.h); the worst ratio to the bound is printed.
// Linear (the GEMV kernel) is checked against at::linear in float64 on the
// upcast inputs, within the float32 accumulation's gamma(k) bound plus the
// output's rounding. DecodeAttention (flash-decoding kernel) is checked against
// attention in float64 within the bound of its reductions, no less accurate
// than SDPA on the same inputs (up to one rounding of the output), exact where
// one slot is visible, and blind to NaN in slots no token sees; on the CPU and
// for inputs the kernel does not take it must equal Attend()'s ATen formula bit
// for bit.
#include "framework/model/fused_ops.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "framework/core/float_bounds.h"
#include "framework/model/cuda_graph.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/float_tolerance.h"

namespace speclab {
namespace {

using float_bounds::Gamma;
using float_bounds::kFloat32Roundoff;
using testing::BoundRatio;
using testing::UnitRoundoff;

// --- References, written as llama_model.cc writes them ------------------------

at::Tensor RefRmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor variance = xf.pow(2).mean(-1, /*keepdim=*/true);
  return weight * (xf * at::rsqrt(variance + eps)).to(x.scalar_type());
}

at::Tensor RefRotateHalf(const at::Tensor& x) {
  const auto halves = x.chunk(2, -1);
  return at::cat({-halves[1], halves[0]}, -1);
}

// x: [..., tokens, heads, head_dim]; cos/sin: [tokens, head_dim].
at::Tensor RefApplyRope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return x * cos.unsqueeze(-2) + RefRotateHalf(x) * sin.unsqueeze(-2);
}

struct RopeOutputs {
  at::Tensor q_grouped;  // [kv_heads, group * n, head_dim]
  at::Tensor k_cache;    // [kv_heads, S, head_dim]
  at::Tensor v_cache;
};

// Layer()'s attention prologue at batch 1 on copies of the caches.
RopeOutputs RefRopeQkvToCache(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t heads,
                              int64_t kv_heads, int64_t hd, const at::Tensor& write_slots, const at::Tensor& k_cache,
                              const at::Tensor& v_cache) {
  const int64_t n = write_slots.numel();
  const int64_t group = heads / kv_heads;
  const at::Tensor x = qkv.reshape({1, n, (heads + 2 * kv_heads) * hd});
  at::Tensor qk = x.narrow(-1, 0, (heads + kv_heads) * hd);
  at::Tensor v = x.narrow(-1, (heads + kv_heads) * hd, kv_heads * hd);
  qk = RefApplyRope(qk.reshape({1, n, heads + kv_heads, hd}), cos, sin);
  const at::Tensor q = qk.narrow(2, 0, heads);
  const at::Tensor k = qk.narrow(2, heads, kv_heads).transpose(1, 2);
  v = v.reshape({1, n, kv_heads, hd}).transpose(1, 2);
  RopeOutputs out;
  out.k_cache = k_cache.clone();
  out.v_cache = v_cache.clone();
  out.k_cache.index_copy_(1, write_slots, k[0]);
  out.v_cache.index_copy_(1, write_slots, v[0]);
  out.q_grouped = q.reshape({1, n, kv_heads, group, hd}).permute({0, 2, 3, 1, 4}).reshape({1, kv_heads, group * n, hd})[0];
  return out;
}

// --- Helpers -----------------------------------------------------------------

#define SKIP_UNLESS_CUDA()                                                                               \
  do {                                                                                                   \
    SPECLAB_SKIP_UNLESS_CUDA();                                                                          \
    ASSERT_TRUE(fused::HasCudaKernels()) << "LibTorch has CUDA but speclab was built without kernels"; \
  } while (0)

// Random normal values (never all zeros), made in float32 on the CPU for
// reproducibility, then cast and moved.
at::Tensor Random(at::IntArrayRef sizes, at::ScalarType dtype, const c10::Device& device) {
  return at::randn(sizes, at::TensorOptions().dtype(at::kFloat)).to(device, dtype);
}

// A contiguous tensor whose data starts one element past a 16-byte boundary,
// so that the kernels must take their scalar path.
at::Tensor Misaligned(const at::Tensor& t) {
  at::Tensor buffer = at::empty({t.numel() + 1}, t.options());
  at::Tensor view = buffer.narrow(0, 1, t.numel()).view(t.sizes());
  view.copy_(t);
  return view;
}

// Distinct, shuffled cache slots for n tokens out of `slots`.
at::Tensor WriteSlots(int64_t n, int64_t slots, const c10::Device& device) {
  return at::randperm(slots, at::TensorOptions().dtype(at::kLong)).narrow(0, 0, n).to(device);
}

std::string DTypeName(at::ScalarType t) { return c10::toString(t); }

// Largest |a - b| / |b| (both compared in float64; |b| floored at 1e-6).
double MaxRelError(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor ad = a.to(at::kCPU, at::kDouble), bd = b.to(at::kCPU, at::kDouble);
  return ((ad - bd).abs() / bd.abs().clamp_min(1e-6)).max().item<double>();
}

int64_t Mismatches(const at::Tensor& a, const at::Tensor& b) {
  return a.to(at::kCPU).ne(b.to(at::kCPU)).sum().item<int64_t>();
}

// How closely a result must match its reference on `device` in `dtype`, and
// the worst case seen, printed by the test: |got - want| <= tolerance * scale
// elementwise, where scale is |want| unless the op's terms can cancel (then
// the sum of their magnitudes) and tolerance is derived per op below.
struct Tally {
  std::string label;
  double tolerance = 0.0;
  double worst = 0.0;  // largest |got - want| / (tolerance * scale)
  int64_t mismatches = 0;
  int64_t elements = 0;

  void Check(const at::Tensor& got, const at::Tensor& want, const std::string& where,
             const at::Tensor& scale = at::Tensor()) {
    ASSERT_EQ(got.sizes(), want.sizes()) << where;
    ASSERT_EQ(got.scalar_type(), want.scalar_type()) << where;
    ASSERT_TRUE(got.is_contiguous()) << where;
    if (got.is_cpu()) {
      // Fallback == reference: same ATen formula.
      EXPECT_TRUE(at::equal(got, want)) << where << ": max rel error " << MaxRelError(got, want);
      return;
    }
    const at::Tensor magnitude = (scale.defined() ? scale : want).to(at::kCPU, at::kDouble).abs();
    const double ratio = BoundRatio(got, want, tolerance * magnitude);
    EXPECT_LE(ratio, 1.0) << where << " (tolerance " << tolerance << " relative)";
    const int64_t differing = Mismatches(got, want);
    // Sum-order flips are rare at bf16/f16 precision; a systematic rounding
    // difference (e.g. a missed intermediate rounding) would be common.
    // (Half, with 3 more mantissa bits than bfloat16, flips about 8x as often:
    // up to 0.15% of a 4096-wide row was seen.)
    if (got.scalar_type() != at::kFloat) EXPECT_LE(differing, 8 + got.numel() / 200) << where;
    worst = std::max(worst, ratio);
    mismatches += differing;
    elements += got.numel();
  }

  ~Tally() {
    if (elements > 0) {
      std::printf(
          "[fused] %s: worst error %.3g of the bound %.3g, %lld of "
          "%lld elements not bit-equal\n",
          label.c_str(), worst, tolerance, static_cast<long long>(mismatches), static_cast<long long>(elements));
    }
  }
};

// Per-op tolerances: the kernel and the ATen reference each round to the
// storage type (unit roundoff u) some number of times and run float32
// arithmetic of the errors below; their results differ by at most the sum.
//  - RMSNorm of width n: each side sums n squares (gamma(n) relative, halved
//    by the reciprocal square root), then about 6 float32 roundings (mean, eps,
//    rsqrt's 2 ulps, the product with x) and 2 to the storage type (the
//    normalised value, its product with the weight).
double RmsNormTolerance(at::ScalarType dtype, int64_t width) {
  return Gamma(width, kFloat32Roundoff) + 12 * kFloat32Roundoff + 4 * UnitRoundoff(dtype);
}
//  - x + delta: one rounding each, relative to |x| + |delta|.
double SumTolerance(at::ScalarType dtype) { return 2 * UnitRoundoff(dtype); }
//  - silu(g) * u: ATen rounds silu to storage, then the product (2); the
//    kernel once; about 7 float32 roundings a side (expf's 2 ulps, add, divide,
//    multiply).
double SiluMulTolerance(at::ScalarType dtype) { return 3 * UnitRoundoff(dtype) + 14 * kFloat32Roundoff; }
//  - RoPE x cos + rotate(x) sin, relative to |x cos| + |rotate(x) sin|: ATen
//    rounds both products and the sum to storage (3), the kernel at least
//    once; 3 float32 roundings a side.
double RopeTolerance(at::ScalarType dtype) { return 4 * UnitRoundoff(dtype) + 6 * kFloat32Roundoff; }

// |x cos| + |rotate(x) sin| for q in its grouped layout: the scale of RoPE's
// terms.
at::Tensor RopeScale(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t heads,
                     int64_t kv_heads, int64_t hd, const at::Tensor& write_slots, const at::Tensor& k_cache,
                     const at::Tensor& v_cache, bool keys) {
  const at::Tensor a = qkv.to(at::kCPU, at::kDouble).abs();
  const at::Tensor c = cos.to(at::kCPU, at::kDouble).abs(), s = sin.to(at::kCPU, at::kDouble).abs();
  // |rotate_half(x)| is |x| with its halves swapped; the "rope" of magnitudes
  // x * cos + swap(x) * sin is then exactly the sum of the terms' magnitudes.
  auto swap_halves = [](const at::Tensor& x) {
    const auto halves = x.chunk(2, -1);
    return at::cat({halves[1], halves[0]}, -1);
  };
  const int64_t n = write_slots.numel();
  const at::Tensor x = a.reshape({n, heads + 2 * kv_heads, hd});
  const at::Tensor terms = x * c.unsqueeze(1) + swap_halves(x) * s.unsqueeze(1);
  const at::Tensor flat = at::cat({terms.narrow(1, 0, heads + kv_heads), x.narrow(1, heads + kv_heads, kv_heads)}, 1)
                              .reshape({n, (heads + 2 * kv_heads) * hd});
  const RopeOutputs placed =
      RefRopeQkvToCache(flat, at::ones_like(c), at::zeros_like(s), heads, kv_heads, hd, write_slots.cpu(),
                        k_cache.to(at::kCPU, at::kDouble).abs(), v_cache.to(at::kCPU, at::kDouble).abs());
  return keys ? placed.k_cache : placed.q_grouped;
}

const std::vector<int64_t> kTokens = {1, 3, 16, 33};

// --- Per-op checks on one device and dtype -----------------------------------

void CheckRmsNorm(const c10::Device& device, at::ScalarType dtype) {
  Tally tally{"RmsNorm " + DTypeName(dtype) + " on " + device.str(), RmsNormTolerance(dtype, 8192)};
  for (int64_t hidden : {256, 4096, 8192, 100}) {
    for (int64_t n : kTokens) {
      for (bool misaligned : {false, true}) {
        const std::string where = "hidden " + std::to_string(hidden) + ", n " + std::to_string(n) +
                                  (misaligned ? ", misaligned" : "");
        at::Tensor x = Random({1, n, hidden}, dtype, device);
        if (misaligned) x = Misaligned(x);
        const at::Tensor w = Random({hidden}, dtype, device);
        tally.Check(fused::RmsNorm(x, w, 1e-5), RefRmsNorm(x, w, 1e-5), where);
      }
    }
  }
}

void CheckAddRmsNorm(const c10::Device& device, at::ScalarType dtype) {
  Tally sums{"AddRmsNorm sum " + DTypeName(dtype) + " on " + device.str(), SumTolerance(dtype)};
  // The norm of a sum that one side may hold unrounded: the sum's rounding
  // carries into the norm (relative to the terms' magnitudes) on top of
  // RMSNorm's.
  Tally norms{"AddRmsNorm norm " + DTypeName(dtype) + " on " + device.str(),
              RmsNormTolerance(dtype, 8192) + 2 * SumTolerance(dtype)};
  for (int64_t hidden : {256, 4096, 8192, 100}) {
    for (int64_t n : kTokens) {
      for (bool misaligned : {false, true}) {
        const std::string where = "hidden " + std::to_string(hidden) + ", n " + std::to_string(n) +
                                  (misaligned ? ", misaligned" : "");
        const at::Tensor x = Random({n, hidden}, dtype, device);
        at::Tensor delta = Random({n, hidden}, dtype, device);
        if (misaligned) delta = Misaligned(delta);
        const at::Tensor w = Random({hidden}, dtype, device);
        const auto [sum, norm] = fused::AddRmsNorm(x, delta, w, 1e-6);
        const at::Tensor want_sum = x + delta;
        const at::Tensor terms = x.to(at::kDouble).abs() + delta.to(at::kDouble).abs();
        sums.Check(sum, want_sum, where, terms);
        const at::Tensor sum_d = want_sum.to(at::kDouble);
        const at::Tensor norm_scale = w.to(at::kDouble).abs() * terms * sum_d.pow(2).mean(-1, true).add(1e-6).rsqrt();
        norms.Check(norm, RefRmsNorm(want_sum, w, 1e-6), where, norm_scale);
      }
    }
  }
}

void CheckSiluMul(const c10::Device& device, at::ScalarType dtype) {
  Tally tally{"SiluMul " + DTypeName(dtype) + " on " + device.str(), SiluMulTolerance(dtype)};
  for (int64_t inter : {256, 4096, 100}) {
    for (int64_t n : kTokens) {
      for (bool misaligned : {false, true}) {
        const std::string where = "intermediate " + std::to_string(inter) + ", n " + std::to_string(n) +
                                  (misaligned ? ", misaligned" : "");
        at::Tensor gate_up = Random({1, n, 2 * inter}, dtype, device) * 3;  // reach silu's tails
        if (misaligned) gate_up = Misaligned(gate_up);
        const at::Tensor want = at::silu(gate_up.narrow(-1, 0, inter)) * gate_up.narrow(-1, inter, inter);
        tally.Check(fused::SiluMul(gate_up, inter), want, where);
      }
    }
  }
}

void CheckRope(const c10::Device& device, at::ScalarType dtype) {
  Tally q_tally{"RopeQkvToCache q " + DTypeName(dtype) + " on " + device.str(), RopeTolerance(dtype)};
  Tally k_tally{"RopeQkvToCache k cache " + DTypeName(dtype) + " on " + device.str(), RopeTolerance(dtype)};
  Tally v_tally{"RopeQkvToCache v cache " + DTypeName(dtype) + " on " + device.str(), 0.0};  // a copy: exact
  constexpr int64_t kSlots = 80;
  for (int64_t hd : {64, 128}) {
    for (int64_t group : {1, 4}) {
      const int64_t kv_heads = 2;
      const int64_t heads = kv_heads * group;
      for (int64_t n : kTokens) {
        for (bool misaligned : {false, true}) {
          const std::string where = "head_dim " + std::to_string(hd) + ", group " + std::to_string(group) + ", n " +
                                    std::to_string(n) + (misaligned ? ", misaligned" : "");
          at::Tensor qkv = Random({n, (heads + 2 * kv_heads) * hd}, dtype, device);
          if (misaligned) qkv = Misaligned(qkv);
          // Real RoPE tables are cos/sin of angles; random values exercise the
          // arithmetic just as well and never repeat.
          const at::Tensor cos = Random({n, hd}, dtype, device);
          const at::Tensor sin = Random({n, hd}, dtype, device);
          const at::Tensor slots = WriteSlots(n, kSlots, device);
          at::Tensor k_cache = Random({kv_heads, kSlots, hd}, dtype, device);
          at::Tensor v_cache = Random({kv_heads, kSlots, hd}, dtype, device);
          const RopeOutputs want = RefRopeQkvToCache(qkv, cos, sin, heads, kv_heads, hd, slots, k_cache, v_cache);
          auto scale = [&](bool keys) {
            return RopeScale(qkv, cos, sin, heads, kv_heads, hd, slots, k_cache, v_cache, keys);
          };
          const at::Tensor q = fused::RopeQkvToCache(qkv, cos, sin, heads, kv_heads, hd, slots, k_cache, v_cache);
          q_tally.Check(q, want.q_grouped, where, scale(false));
          k_tally.Check(k_cache, want.k_cache, where, scale(true));
          v_tally.Check(v_cache, want.v_cache, where);
        }
      }
    }
  }
}

// --- Linear ----------------------------------------------------------------------

// at::linear in float64 on the CPU on the upcast inputs.
at::Tensor RefLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  auto up = [](const at::Tensor& t) { return t.defined() ? t.to(at::kCPU, at::kDouble) : t; };
  return at::linear(up(x), up(w), up(b));
}

// How far x w^T + b computed with float32 accumulation and stored in `dtype`
// may be from the float64 reference, elementwise: the products of storage
// values are exact in float32, the sum of k + 1 terms is within
// gamma(k + 1) * sum |terms| in any order, and the output's rounding adds u
// |y|.
at::Tensor LinearBound(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, at::ScalarType dtype) {
  const at::Tensor ax = x.to(at::kCPU, at::kDouble).abs(), aw = w.to(at::kCPU, at::kDouble).abs();
  const at::Tensor terms = at::linear(ax, aw, b.defined() ? b.to(at::kCPU, at::kDouble).abs() : at::Tensor());
  const double u = UnitRoundoff(dtype);
  return Gamma(x.size(-1) + 1, kFloat32Roundoff) * (1 + u) * terms + u * RefLinear(x, w, b).abs();
}

// Largest error of `got` over its bound (at most 1 passes).
double LinearBoundRatio(const at::Tensor& got, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return BoundRatio(got, RefLinear(x, w, b), LinearBound(x, w, b, got.scalar_type()));
}

// Fills a freed block of `like`'s size with NaN, so that a kernel output the
// caching allocator hands out next starts as NaN rather than as an earlier
// (possibly identical) result: elements a kernel fails to write then fail.
void PoisonNextOutput(const at::Tensor& like) {
  if (like.is_cuda()) (void)at::full(like.sizes(), NAN, like.options());
}

struct LinearShape {
  int64_t n, k;
};

// n = 16x, 4x and neither; k with and without a partial 32-wide step or
// 256-wide chunk; k shorter than one step per warp.
const std::vector<LinearShape> kLinearShapes = {{256, 512}, {100, 264}, {37, 72}, {1000, 2056}, {2048, 4096}};
// One and two 8-row MMA tiles, full and partial, and every SIMT instantiation.
const std::vector<int64_t> kLinearRows = {1, 2, 3, 8, 9, 16};

struct LinearConfig {
  fused::LinearKernel kernel;
  int warps;
  std::string name;
};

// Kernel x warps splitting k: the automatic choice, one warp, an odd count
// (uneven k slices) and the most (more warps than k steps at small k).
const std::vector<LinearConfig> kLinearConfigs = {
    {fused::LinearKernel::kAuto, 0, "auto"},
    {fused::LinearKernel::kTensorCore, 1, "tensor-core/1"},
    {fused::LinearKernel::kTensorCore, 3, "tensor-core/3"},
    {fused::LinearKernel::kTensorCore, 16, "tensor-core/16"},
    {fused::LinearKernel::kSimt, 1, "simt/1"},
    {fused::LinearKernel::kSimt, 3, "simt/3"},
    {fused::LinearKernel::kSimt, 16, "simt/16"},
};

void CheckLinear(const c10::Device& device, at::ScalarType dtype) {
  double worst_fused = 0.0, worst_aten = 0.0;
  for (const LinearShape& shape : kLinearShapes) {
    if (device.is_cpu() && shape.n * shape.k > 1000000) continue;  // the CPU path is at::linear: keep it quick
    for (int64_t m : kLinearRows) {
      for (bool with_bias : {false, true}) {
        const std::string where = "n " + std::to_string(shape.n) + ", k " + std::to_string(shape.k) + ", m " +
                                  std::to_string(m) + (with_bias ? ", bias" : "");
        // x as [1, m, k]: Linear flattens the leading dimensions.
        const at::Tensor x = Random({1, m, shape.k}, dtype, device);
        const at::Tensor w = Random({shape.n, shape.k}, dtype, device);
        const at::Tensor b = with_bias ? Random({shape.n}, dtype, device) : at::Tensor();
        const at::Tensor aten = at::linear(x, w, b);
        if (device.is_cpu()) {
          const at::Tensor got = fused::Linear(x, w, b);
          EXPECT_TRUE(at::equal(got, aten)) << where;
          continue;
        }
        const at::Tensor ref = RefLinear(x, w, b);
        const at::Tensor bound = LinearBound(x, w, b, dtype);
        worst_aten = std::max(worst_aten, BoundRatio(aten, ref, bound));
        for (const LinearConfig& config : kLinearConfigs) {
          if (config.kernel == fused::LinearKernel::kSimt && m > 4) continue;
          PoisonNextOutput(aten);
          const at::Tensor got = fused::LinearWithKernel(x, w, b, config.kernel, config.warps);
          ASSERT_EQ(got.sizes(), aten.sizes()) << where;
          ASSERT_EQ(got.scalar_type(), dtype) << where;
          const double ratio = BoundRatio(got, ref, bound);
          EXPECT_LE(ratio, 1.0) << where << ", " << config.name;
          worst_fused = std::max(worst_fused, ratio);
        }
      }
    }
  }
  if (device.is_cuda()) {
    std::printf(
        "[fused] Linear %s on %s: worst error vs float64 %.3g of the "
        "bound (at::linear: %.3g)\n",
        DTypeName(dtype).c_str(), device.str().c_str(), worst_fused, worst_aten);
  }
}

// --- DecodeAttention -------------------------------------------------------------

// Llama's Attend() (llama_model.cc) on the grouped layout: SDPA with the mask
// repeated per query head of a group on CUDA (PyTorch 2), else matmul-softmax
// in fp32 with a finite fill. The fallback must be this, bit for bit.
at::Tensor RefAttend(const at::Tensor& q, const at::Tensor& k_layer, const at::Tensor& v_layer,
                     const at::Tensor& allowed, int64_t kv_length) {
  const int64_t n = allowed.size(0);
  const int64_t group = q.size(1) / n;
  const at::Tensor k = k_layer.narrow(1, 0, kv_length).unsqueeze(0);
  const at::Tensor v = v_layer.narrow(1, 0, kv_length).unsqueeze(0);
#if TORCH_VERSION_MAJOR >= 2
  if (q.is_cuda()) {
    const at::Tensor grouped = group > 1 ? allowed.repeat({group, 1}) : allowed;
    return at::scaled_dot_product_attention(q.unsqueeze(0), k, v, grouped)[0].contiguous();
  }
#endif
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const at::Tensor scores = at::matmul(q.unsqueeze(0), k.transpose(-2, -1)).to(at::kFloat) * scale;
  const at::Tensor masked = scores.view({1, q.size(0), group, n, kv_length})
                                .masked_fill(allowed.logical_not(), std::numeric_limits<float>::lowest())
                                .view(scores.sizes());
  return at::matmul(at::softmax(masked, -1).to(q.scalar_type()), v)[0].contiguous();
}

// The exact attention in float64 on the CPU (masked scores at -inf).
at::Tensor RefAttentionFloat64(const at::Tensor& q, const at::Tensor& k_layer, const at::Tensor& v_layer,
                               const at::Tensor& allowed, int64_t kv_length) {
  const int64_t group = q.size(1) / allowed.size(0);
  const at::Tensor qd = q.to(at::kCPU, at::kDouble);
  const at::Tensor kd = k_layer.narrow(1, 0, kv_length).to(at::kCPU, at::kDouble);
  const at::Tensor vd = v_layer.narrow(1, 0, kv_length).to(at::kCPU, at::kDouble);
  const at::Tensor blocked = allowed.to(at::kCPU).repeat({group, 1}).logical_not();
  const at::Tensor scores = at::matmul(qd, kd.transpose(1, 2)) / std::sqrt(static_cast<double>(q.size(-1)));
  return at::matmul(at::softmax(scores.masked_fill(blocked, -std::numeric_limits<double>::infinity()), -1), vd);
}

// Errors of an attention output against the float64 reference: the relative
// 2-norm error ||got - ref|| / ||ref|| (stable from run to run: it averages
// the roundings) and the largest |got - ref| over rms(ref) (catches a wrong
// row or column). NaN in got makes both NaN, which fails every bound.
struct AttentionErrors {
  double rel = 0.0;
  double max = 0.0;
};

AttentionErrors AttentionError(const at::Tensor& got, const at::Tensor& ref) {
  const at::Tensor diff = got.to(at::kCPU, at::kDouble) - ref;
  const double ref_norm = ref.norm().item<double>();
  const double rms = ref_norm / std::sqrt(static_cast<double>(std::max<int64_t>(ref.numel(), 1)));
  AttentionErrors e;
  e.rel = diff.norm().item<double>() / ref_norm;
  e.max = diff.abs().max().item<double>() / rms;
  return e;
}

// Elementwise bound on |attention computed in float32 with storage type of
// unit roundoff u - exact attention| (masked slots excluded; `allowed` [n, L]
// on the CPU), by the steps' errors:
//  - each score q.k / sqrt(D) of D exact products (storage values multiply
//    exactly in float32): gamma(D + 1) * sum |q_d k_d| / sqrt(D), plus u times
//    the score where q is scaled in storage; E is the row's largest;
//  - a softmax weight then moves by at most 2E relatively (numerator and
//    normaliser), plus gamma(L) for the normaliser's sum, 8 float32 roundings
//    (exp's ulps, the online softmax's rescales) and u where P is rounded to
//    storage for the second product;
//  - the weighted sum of V of L terms: gamma(L) * sum_s w_s |v_s|;
//  - the output's rounding: u |out|.
// With A = sum_s w_s |v_s|: (2E + 2 gamma(L) + 8 u32 + u) A + u |out|.
at::Tensor AttentionBound(const at::Tensor& q, const at::Tensor& k_layer, const at::Tensor& v_layer,
                          const at::Tensor& allowed, int64_t kv_length, double u) {
  const int64_t group = q.size(1) / allowed.size(0);
  const double root_d = std::sqrt(static_cast<double>(q.size(-1)));
  const at::Tensor qd = q.to(at::kCPU, at::kDouble);
  const at::Tensor kd = k_layer.narrow(1, 0, kv_length).to(at::kCPU, at::kDouble);
  const at::Tensor vd = v_layer.narrow(1, 0, kv_length).to(at::kCPU, at::kDouble);
  const at::Tensor visible = allowed.to(at::kCPU).repeat({group, 1});  // [rows, L]
  const at::Tensor scores = at::matmul(qd, kd.transpose(1, 2)) / root_d;
  const at::Tensor magnitudes = at::matmul(qd.abs(), kd.abs().transpose(1, 2)) / root_d;
  const at::Tensor per_score = Gamma(q.size(-1) + 1, kFloat32Roundoff) * magnitudes + u * scores.abs();
  const at::Tensor e = per_score.masked_fill(visible.logical_not(), 0).amax(-1, /*keepdim=*/true);  // [kv, rows, 1]
  const at::Tensor weights =
      at::softmax(scores.masked_fill(visible.logical_not(), -std::numeric_limits<double>::infinity()), -1);
  const at::Tensor a = at::matmul(weights, vd.abs());
  const at::Tensor out = at::matmul(weights, vd).abs();
  const double sums = 2 * Gamma(kv_length, kFloat32Roundoff) + 8 * kFloat32Roundoff + u;
  return (2 * e + sums) * a + u * out;
}

enum class MaskKind { kRandom, kTree, kCausal, kOneHot, kSparse };

const char* MaskName(MaskKind kind) {
  switch (kind) {
    case MaskKind::kRandom:
      return "random";
    case MaskKind::kTree:
      return "tree";
    case MaskKind::kCausal:
      return "causal";
    case MaskKind::kOneHot:
      return "one-hot";
    case MaskKind::kSparse:
      return "sparse";
  }
  return "?";
}

// allowed [n, L] on the CPU, every row with at least one true.
//  - random: each slot with probability 0.6; sparse: 0.03;
//  - tree: a prefix all true, then token t at slot P + t seeing itself and its
//    ancestors in a random tree, then a dead tail of up to L / 5 slots (as a
//    KV bucket past the real length), so whole tiles nobody sees appear;
//  - causal: token t sees slots [0, L - n + t];
//  - one-hot: one random slot per token (the output is that V row exactly).
at::Tensor MakeMask(MaskKind kind, int64_t n, int64_t kv_length, std::mt19937& rng) {
  at::Tensor allowed = at::zeros({n, kv_length}, at::TensorOptions().dtype(at::kBool));
  auto a = allowed.accessor<bool, 2>();
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  auto slot = [&](int64_t bound) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(bound)); };
  switch (kind) {
    case MaskKind::kRandom:
    case MaskKind::kSparse: {
      const double p = kind == MaskKind::kRandom ? 0.6 : 0.03;
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t s = 0; s < kv_length; ++s) a[t][s] = uniform(rng) < p;
        a[t][slot(kv_length)] = true;
      }
      break;
    }
    case MaskKind::kTree: {
      const int64_t pad = std::min(kv_length - n, kv_length / 5);
      const int64_t prefix = kv_length - n - pad;
      std::vector<int64_t> parent(n);
      for (int64_t t = 0; t < n; ++t) {
        parent[t] = t == 0 ? -1 : slot(t + 1) - 1;  // -1: hangs off the prefix
        for (int64_t s = 0; s < prefix; ++s) a[t][s] = true;
        for (int64_t u = t; u >= 0; u = parent[u]) a[t][prefix + u] = true;
      }
      break;
    }
    case MaskKind::kCausal:
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t s = 0; s <= kv_length - n + t; ++s) a[t][s] = true;
      }
      break;
    case MaskKind::kOneHot:
      for (int64_t t = 0; t < n; ++t) a[t][slot(kv_length)] = true;
      break;
  }
  return allowed;
}

// `mask` on `device`: contiguous (row_stride 0) or, as the model passes it, a
// narrow() view of a [128, row_stride] buffer whose other bytes are random.
at::Tensor PlaceMask(const at::Tensor& mask, int64_t row_stride, const c10::Device& device) {
  if (row_stride == 0) return mask.to(device);
  const int64_t rows = std::max<int64_t>(128, mask.size(0));
  at::Tensor buffer = at::rand({rows, row_stride}).lt(0.5).to(device);
  at::Tensor view = buffer.narrow(0, 0, mask.size(0)).narrow(1, 0, mask.size(1));
  view.copy_(mask);
  return view;
}

struct AttentionCase {
  int64_t kv_heads, group, n, head_dim, kv_length;
  bool cuda_only = false;  // nothing new for the CPU fallback
};

// The brief's shapes, then edges: one slot, partial tiles, the largest n, a
// single tile, many tiles on one head, partial m-tiles, 16 row blocks. Then
// the split kernel's (rows <= 16): every head_dim, 16 rows of 16 tokens, one
// block of 2 warps, 2..8 steps per warp (odd counts, a partial last step),
// the longest kv_length it takes.
const std::vector<AttentionCase> kAttentionCases = {
    {8, 4, 1, 128, 256}, {8, 4, 16, 128, 1024}, {4, 2, 5, 64, 300},  {1, 8, 3, 64, 1152},
    {2, 1, 1, 128, 1},   {2, 3, 7, 80, 129},    {2, 2, 33, 96, 500}, {2, 4, 128, 128, 512},
    {1, 1, 1, 64, 4100}, {3, 8, 16, 64, 777},   {1, 5, 10, 128, 200}, {1, 8, 128, 64, 160},
    {2, 1, 17, 128, 64},
    {8, 4, 4, 128, 1024, true},   {2, 3, 5, 80, 129, true},    {3, 2, 8, 96, 1000, true},
    {1, 1, 16, 64, 2000, true},   {1, 4, 1, 128, 17, true},    {2, 4, 2, 128, 4100, true},
    {2, 4, 4, 128, 8192, true},
};

// Split-kernel blocks per KV head pinned on CUDA (rows <= 16): its own choice,
// one block (no cluster), three, eight (the largest cluster).
const std::vector<int64_t> kSplitBlocks = {0, 1, 3, 8};

const std::vector<MaskKind> kMaskKinds = {MaskKind::kRandom, MaskKind::kTree, MaskKind::kCausal, MaskKind::kOneHot,
                                          MaskKind::kSparse};

// Chunkings pinned on CUDA: the kernel's own, one tile per chunk (most
// chunks), three, and one chunk (no merge pass).
const std::vector<int64_t> kChunkTiles = {0, 1, 3, int64_t{1} << 20};

struct AttentionInputs {
  at::Tensor q, k, v, allowed, mask_cpu;
  int64_t kv_length = 0;
};

// Inputs of one case: caches with extra slots past kv_length (random values
// the kernel must not read), the mask contiguous or a strided view.
AttentionInputs MakeAttentionInputs(const AttentionCase& c, MaskKind kind, int variant, at::ScalarType dtype,
                                    const c10::Device& device, std::mt19937& rng) {
  AttentionInputs in;
  in.kv_length = c.kv_length;
  const int64_t extra_slots[] = {0, 37, 64};
  const int64_t slots = c.kv_length + extra_slots[(variant / 3) % 3];
  in.q = Random({c.kv_heads, c.group * c.n, c.head_dim}, dtype, device);
  in.k = Random({c.kv_heads, slots, c.head_dim}, dtype, device);
  in.v = Random({c.kv_heads, slots, c.head_dim}, dtype, device);
  in.mask_cpu = MakeMask(kind, c.n, c.kv_length, rng);
  // Contiguous, an odd row stride (byte loads), a stride of a multiple of 4.
  const int64_t strides[] = {0, c.kv_length + 13, c.kv_length + 64};
  in.allowed = PlaceMask(in.mask_cpu, strides[variant % 3], device);
  return in;
}

std::string CaseName(const AttentionCase& c) {
  return "kv_heads " + std::to_string(c.kv_heads) + ", group " + std::to_string(c.group) + ", n " +
         std::to_string(c.n) + ", D " + std::to_string(c.head_dim) + ", L " + std::to_string(c.kv_length);
}

void CheckDecodeAttention(const c10::Device& device, at::ScalarType dtype) {
  std::mt19937 rng(1234);
  const bool kernel_expected = device.is_cuda() && dtype != at::kFloat;
  const double unit = UnitRoundoff(dtype);
  double worst_ratio = 0.0;  // largest error over AttentionBound
  AttentionErrors worst_kernel, worst_aten;
  int variant = 0;
  for (const AttentionCase& c : kAttentionCases) {
    if (device.is_cpu() &&
        (c.cuda_only || c.kv_heads * c.group * c.n * c.kv_length * c.head_dim > (int64_t{1} << 24))) {
      continue;
    }
    AttentionErrors case_kernel, case_aten;
    for (MaskKind kind : kMaskKinds) {
      if (c.kv_length < c.n && (kind == MaskKind::kTree || kind == MaskKind::kCausal)) continue;
      const AttentionInputs in = MakeAttentionInputs(c, kind, variant++, dtype, device, rng);
      const std::string where = CaseName(c) + ", mask " + MaskName(kind) + ", allowed row stride " +
                                std::to_string(in.allowed.stride(0)) + ", slots " + std::to_string(in.k.size(1));
      const at::Tensor aten = RefAttend(in.q, in.k, in.v, in.allowed, in.kv_length);
      const at::Tensor ref = RefAttentionFloat64(in.q, in.k, in.v, in.mask_cpu, in.kv_length);
      const AttentionErrors aten_error = AttentionError(aten, ref);
      case_aten.rel = std::max(case_aten.rel, aten_error.rel);
      case_aten.max = std::max(case_aten.max, aten_error.max);
      const at::Tensor got = fused::DecodeAttention(in.q, in.k, in.v, in.allowed, in.kv_length);
      ASSERT_EQ(got.sizes(), in.q.sizes()) << where;
      ASSERT_EQ(got.scalar_type(), dtype) << where;
      ASSERT_TRUE(got.is_contiguous()) << where;
      const at::Tensor bound = AttentionBound(in.q, in.k, in.v, in.mask_cpu, in.kv_length, unit);
      if (!kernel_expected) {
        // The fallback is Attend()'s formula, bit for bit. In float32 that
        // formula is attention within the bound of its arithmetic; in bfloat16
        // its accuracy is that of ATen's CPU matmul, whose accumulation type
        // is ATen's choice (and differs between processors), so only the
        // equality is speclab's to check there.
        EXPECT_TRUE(at::equal(got, aten)) << where;
        if (dtype == at::kFloat) {
          const double ratio = BoundRatio(got, ref, bound);
          EXPECT_LE(ratio, 1.0) << where;
          worst_ratio = std::max(worst_ratio, ratio);
        }
        continue;
      }
      // Within the bound of the kernel's arithmetic, and no less accurate than
      // SDPA on the same inputs (both run the same flash algorithm in float32;
      // they may differ by one rounding of the output).
      auto check = [&](const at::Tensor& out, const std::string& label) {
        const AttentionErrors e = AttentionError(out, ref);
        const double ratio = BoundRatio(out, ref, bound);
        EXPECT_LE(ratio, 1.0) << where << ", " << label;
        worst_ratio = std::max(worst_ratio, ratio);
        EXPECT_LE(e.rel, aten_error.rel + unit) << where << ", " << label << " (SDPA: " << aten_error.rel << ")";
        // One visible slot per row: softmax weight 1, the V row exactly (for
        // the kernel; "auto" may be SDPA where the kernel is not preferred).
        if (kind == MaskKind::kOneHot && label != "auto") EXPECT_EQ(e.max, 0.0) << where << ", " << label;
        case_kernel.rel = std::max(case_kernel.rel, e.rel);
        case_kernel.max = std::max(case_kernel.max, e.max);
      };
      check(got, "auto");
      for (int64_t chunk_tiles : kChunkTiles) {
        PoisonNextOutput(got);
        check(fused::DecodeAttentionWithChunks(in.q, in.k, in.v, in.allowed, in.kv_length, chunk_tiles),
              "chunk_tiles " + std::to_string(chunk_tiles));
      }
      if (c.group * c.n <= 16) {
        for (int64_t blocks : kSplitBlocks) {
          PoisonNextOutput(got);
          check(fused::DecodeAttentionWithKernel(in.q, in.k, in.v, in.allowed, in.kv_length,
                                                 fused::AttentionKernel::kSplit, blocks),
                "split blocks " + std::to_string(blocks));
        }
      }
    }
    if (kernel_expected) {
      std::printf("[fused] DecodeAttention %s %s: vs float64 rel/max kernel %.2e/%.2e, SDPA %.2e/%.2e\n",
                  DTypeName(dtype).c_str(), CaseName(c).c_str(), case_kernel.rel, case_kernel.max, case_aten.rel,
                  case_aten.max);
    }
    worst_kernel.rel = std::max(worst_kernel.rel, case_kernel.rel);
    worst_kernel.max = std::max(worst_kernel.max, case_kernel.max);
    worst_aten.rel = std::max(worst_aten.rel, case_aten.rel);
    worst_aten.max = std::max(worst_aten.max, case_aten.max);
  }
  std::printf(
      "[fused] DecodeAttention %s on %s: vs float64 rel/max %s "
      "%.2e/%.2e, ATen %.2e/%.2e; "
      "worst error %.3g of the bound\n",
      DTypeName(dtype).c_str(), device.str().c_str(), kernel_expected ? "kernel" : "(fallback)", worst_kernel.rel,
      worst_kernel.max, worst_aten.rel, worst_aten.max, worst_ratio);
}

// --- CPU: the fallback ----------------------------------------------------------

class FusedOpsCpu : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(FusedOpsCpu, RmsNorm) { CheckRmsNorm(c10::Device(c10::kCPU), GetParam()); }
TEST_P(FusedOpsCpu, AddRmsNorm) { CheckAddRmsNorm(c10::Device(c10::kCPU), GetParam()); }
TEST_P(FusedOpsCpu, SiluMul) { CheckSiluMul(c10::Device(c10::kCPU), GetParam()); }
TEST_P(FusedOpsCpu, RopeQkvToCache) { CheckRope(c10::Device(c10::kCPU), GetParam()); }
TEST_P(FusedOpsCpu, Linear) { CheckLinear(c10::Device(c10::kCPU), GetParam()); }
TEST_P(FusedOpsCpu, DecodeAttention) { CheckDecodeAttention(c10::Device(c10::kCPU), GetParam()); }

INSTANTIATE_TEST_SUITE_P(FusedOps, FusedOpsCpu, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const ::testing::TestParamInfo<at::ScalarType>& info) { return DTypeName(info.param); });

// The documented q layout, element by element, independent of any reshape
// trick: q_grouped[kv][j * n + t] = rope(q)[t][kv * group + j], and the
// caches hold rope(k) and v at each token's slot.
TEST(FusedOps, RopeLayoutByIndex) {
  c10::InferenceMode guard;
  const int64_t n = 3, kv_heads = 2, group = 3, heads = 6, hd = 8, slots_total = 7;
  const at::Tensor qkv = at::randn({n, (heads + 2 * kv_heads) * hd});
  const at::Tensor cos = at::randn({n, hd});
  const at::Tensor sin = at::randn({n, hd});
  const at::Tensor slots = at::tensor(std::vector<int64_t>{5, 0, 3});
  at::Tensor k_cache = at::randn({kv_heads, slots_total, hd});
  at::Tensor v_cache = at::randn({kv_heads, slots_total, hd});
  const at::Tensor k_before = k_cache.clone();
  const at::Tensor q = fused::RopeQkvToCache(qkv, cos, sin, heads, kv_heads, hd, slots, k_cache, v_cache);
  ASSERT_EQ(q.sizes(), (std::vector<int64_t>{kv_heads, group * n, hd}));

  auto rope = [&](int64_t t, int64_t head) {  // one head of one token, scalar arithmetic
    const at::Tensor x = qkv[t].narrow(0, head * hd, hd);
    std::vector<float> out(hd);
    for (int64_t d = 0; d < hd; ++d) {
      const float rotated = d < hd / 2 ? -x[d + hd / 2].item<float>() : x[d - hd / 2].item<float>();
      out[d] = x[d].item<float>() * cos[t][d].item<float>() + rotated * sin[t][d].item<float>();
    }
    return out;
  };
  // Two float32 evaluations of x cos + r sin (one may fuse a product into the
  // add) differ by at most 2 gamma(2) (|x cos| + |r sin|).
  auto RopeLayoutTolerance = [&](int64_t t, int64_t head, int64_t d) {
    const double x = qkv[t][head * hd + d].item<double>();
    const double r = qkv[t][head * hd + (d < hd / 2 ? d + hd / 2 : d - hd / 2)].item<double>();
    return 2 * Gamma(2, kFloat32Roundoff) *
           (std::abs(x * cos[t][d].item<double>()) + std::abs(r * sin[t][d].item<double>()));
  };
  const int64_t slot_of[] = {5, 0, 3};
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t kv = 0; kv < kv_heads; ++kv) {
      for (int64_t j = 0; j < group; ++j) {
        const std::vector<float> want = rope(t, kv * group + j);
        for (int64_t d = 0; d < hd; ++d)
          EXPECT_NEAR(q[kv][j * n + t][d].item<float>(), want[d], RopeLayoutTolerance(t, kv * group + j, d));
      }
      const std::vector<float> want_k = rope(t, heads + kv);
      for (int64_t d = 0; d < hd; ++d) {
        EXPECT_NEAR(k_cache[kv][slot_of[t]][d].item<float>(), want_k[d], RopeLayoutTolerance(t, heads + kv, d));
        EXPECT_EQ(v_cache[kv][slot_of[t]][d].item<float>(), qkv[t][(heads + kv_heads + kv) * hd + d].item<float>());
      }
    }
  }
  // Untouched slots keep their contents.
  for (int64_t s : {1, 2, 4, 6}) EXPECT_TRUE(at::equal(k_cache.select(1, s), k_before.select(1, s)));
}

TEST(FusedOps, RopeAnglesOnTheCpuIsTheFormula) {
  const at::Tensor positions = at::tensor(std::vector<int64_t>{0, 3, 900}, at::kLong);
  const at::Tensor inv_freq = at::pow(10000.0, -at::arange(0, 8, 2, at::kFloat) / 8.0);
  auto [cos, sin] = fused::RopeAngles(positions, inv_freq, at::kFloat);
  const at::Tensor angles = at::outer(positions.to(at::kFloat), inv_freq);
  EXPECT_TRUE(at::equal(cos, at::cat({angles, angles}, -1).cos()));
  EXPECT_TRUE(at::equal(sin, at::cat({angles, angles}, -1).sin()));
  EXPECT_THROW(fused::RopeAngles(positions.to(at::kFloat), inv_freq, at::kFloat), c10::Error);
  EXPECT_THROW(fused::RopeAngles(positions, inv_freq.to(at::kDouble), at::kFloat), c10::Error);
}

TEST(FusedOps, ShapeErrorsThrow) {
  const at::Tensor x = at::randn({2, 8});
  EXPECT_THROW(fused::RmsNorm(x, at::randn({7}), 1e-5), c10::Error);
  EXPECT_THROW(fused::AddRmsNorm(x, at::randn({2, 7}), at::randn({8}), 1e-5), c10::Error);
  EXPECT_THROW(fused::SiluMul(x, 3), c10::Error);
  at::Tensor k = at::randn({1, 4, 4}), v = at::randn({1, 4, 4});
  EXPECT_THROW(fused::RopeQkvToCache(at::randn({2, 12}), at::randn({2, 3}), at::randn({2, 3}), 1, 1, 4,
                                     at::tensor(std::vector<int64_t>{0, 1}), k, v),
               c10::Error);  // cos/sin not [n, head_dim]
  EXPECT_THROW(fused::RopeQkvToCache(at::randn({2, 12}), at::randn({2, 4}), at::randn({2, 4}), 1, 1, 4,
                                     at::tensor(std::vector<int64_t>{0, 1, 2}), k, v),
               c10::Error);  // one slot per token
  EXPECT_THROW(fused::RopeQkvToCache(at::randn({2, 12}), at::randn({2, 4}), at::randn({2, 4}), 1, 1, 3,
                                     at::tensor(std::vector<int64_t>{0, 1}), k, v),
               c10::Error);  // odd head_dim
  EXPECT_THROW(fused::Linear(x, at::randn({4, 7}), at::Tensor()), c10::Error);         // k differs
  EXPECT_THROW(fused::Linear(x, at::randn({4, 8}), at::randn({5})), c10::Error);       // bias is not [n]
  EXPECT_THROW(fused::Linear(x, at::randn({2, 4, 8}), at::Tensor()), c10::Error);      // weight is not 2-D
  const at::Tensor q = at::randn({2, 6, 8}), kc = at::randn({2, 10, 8}), vc = at::randn({2, 10, 8});
  const at::Tensor allowed = at::ones({3, 10}, at::TensorOptions().dtype(at::kBool));
  EXPECT_NO_THROW(fused::DecodeAttention(q, kc, vc, allowed, 10));
  EXPECT_THROW(fused::DecodeAttention(q, kc, vc, allowed.to(at::kFloat), 10), c10::Error);  // mask not bool
  EXPECT_THROW(fused::DecodeAttention(q, kc, vc, at::ones({3, 11}, allowed.options()), 11),
               c10::Error);  // kv_length past the cache
  EXPECT_THROW(fused::DecodeAttention(q, kc, vc, allowed.narrow(1, 0, 9), 10), c10::Error);  // mask not [n, L]
  EXPECT_THROW(fused::DecodeAttention(q, kc, vc, at::ones({4, 10}, allowed.options()), 10),
               c10::Error);  // 6 rows are not group * 4
  EXPECT_THROW(fused::DecodeAttention(q, at::randn({2, 10, 4}), at::randn({2, 10, 4}), allowed, 10),
               c10::Error);  // head_dim differs
  EXPECT_THROW(fused::DecodeAttention(q, kc, at::randn({2, 9, 8}), allowed.narrow(1, 0, 9), 9),
               c10::Error);  // k and v differ
  EXPECT_THROW(fused::DecodeAttention(q, kc, vc.to(at::kDouble), allowed, 10), c10::Error);  // dtypes differ
}

// --- CUDA: the kernels -----------------------------------------------------------

class FusedOpsCuda : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(FusedOpsCuda, RmsNorm) {
  SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  CheckRmsNorm(c10::Device(c10::kCUDA), GetParam());
}
TEST_P(FusedOpsCuda, AddRmsNorm) {
  SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  CheckAddRmsNorm(c10::Device(c10::kCUDA), GetParam());
}
TEST_P(FusedOpsCuda, SiluMul) {
  SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  CheckSiluMul(c10::Device(c10::kCUDA), GetParam());
}
TEST_P(FusedOpsCuda, RopeQkvToCache) {
  SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  CheckRope(c10::Device(c10::kCUDA), GetParam());
}

// RoPE angles in one kernel against the ATen formula on the same device, for
// positions up to a million (large angles are where cosf/sinf work hardest).
TEST_P(FusedOpsCuda, RopeAngles) {
  SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  const at::ScalarType dtype = GetParam();
  const at::Tensor positions = at::tensor(std::vector<int64_t>{0, 1, 7, 255, 4095, 131071, 1000000}, at::kLong).cuda();
  const at::Tensor inv_freq = at::pow(500000.0, -at::arange(0, 64, 2, at::kFloat) / 64.0).cuda();
  auto [cos, sin] = fused::RopeAngles(positions, inv_freq, dtype);
  const at::Tensor angles = at::outer(positions.to(at::kFloat), inv_freq);
  const at::Tensor emb = at::cat({angles, angles}, -1);
  ASSERT_EQ(cos.sizes(), emb.sizes());
  ASSERT_EQ(cos.scalar_type(), dtype);
  // At most one ulp of the dtype apart (cosf/sinf may differ in their last
  // float bit): an ulp of a value of magnitude at most 1 is at most 2u.
  const double ulp = 2 * UnitRoundoff(dtype);
  EXPECT_LE((cos.to(at::kFloat) - emb.cos().to(dtype).to(at::kFloat)).abs().max().item<double>(), ulp);
  EXPECT_LE((sin.to(at::kFloat) - emb.sin().to(dtype).to(at::kFloat)).abs().max().item<double>(), ulp);
}

TEST_P(FusedOpsCuda, Linear) {
  SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  CheckLinear(c10::Device(c10::kCUDA), GetParam());
}

TEST_P(FusedOpsCuda, DecodeAttention) {
  SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  CheckDecodeAttention(c10::Device(c10::kCUDA), GetParam());
}

INSTANTIATE_TEST_SUITE_P(FusedOps, FusedOpsCuda, ::testing::Values(at::kFloat, at::kBFloat16, at::kHalf),
                         [](const ::testing::TestParamInfo<at::ScalarType>& info) { return DTypeName(info.param); });

// All four ops inside one captured CUDA graph: replays on new inputs written
// in place must give what eager ATen gives on them.
TEST(FusedOps, CudaGraphReplay) {
  SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  const c10::Device device(c10::kCUDA);
  const at::ScalarType dtype = at::kBFloat16;
  const int64_t n = 3, hidden = 256, inter = 512, kv_heads = 2, heads = 8, hd = 64, slots_total = 16;
  const at::Tensor x = Random({n, hidden}, dtype, device), delta = Random({n, hidden}, dtype, device);
  const at::Tensor w = Random({hidden}, dtype, device);
  const at::Tensor gate_up = Random({n, 2 * inter}, dtype, device);
  const at::Tensor qkv = Random({n, (heads + 2 * kv_heads) * hd}, dtype, device);
  const at::Tensor cos = Random({n, hd}, dtype, device), sin = Random({n, hd}, dtype, device);
  const at::Tensor slots = WriteSlots(n, slots_total, device);
  at::Tensor k_cache = Random({kv_heads, slots_total, hd}, dtype, device);
  at::Tensor v_cache = Random({kv_heads, slots_total, hd}, dtype, device);
  at::Tensor norm_out, sum_out, add_norm_out, silu_out, q_out;
  auto graph = CudaGraph::Capture(device, nullptr, [&] {
    norm_out = fused::RmsNorm(x, w, 1e-5);
    std::tie(sum_out, add_norm_out) = fused::AddRmsNorm(x, delta, w, 1e-5);
    silu_out = fused::SiluMul(gate_up, inter);
    q_out = fused::RopeQkvToCache(qkv, cos, sin, heads, kv_heads, hd, slots, k_cache, v_cache);
  });
  ASSERT_TRUE(graph.ok()) << graph.status();

  for (int round = 0; round < 2; ++round) {
    for (const at::Tensor& t : {x, delta, w, gate_up, qkv, cos, sin}) t.copy_(Random(t.sizes(), dtype, device));
    slots.copy_(WriteSlots(n, slots_total, device));
    k_cache.copy_(Random(k_cache.sizes(), dtype, device));
    v_cache.copy_(Random(v_cache.sizes(), dtype, device));
    const RopeOutputs want = RefRopeQkvToCache(qkv, cos, sin, heads, kv_heads, hd, slots, k_cache, v_cache);
    (*graph)->Replay();
    const std::string suffix = " graph replay bf16 round " + std::to_string(round);
    const at::Tensor terms = x.to(at::kDouble).abs() + delta.to(at::kDouble).abs();
    const at::Tensor norm_scale =
        w.to(at::kDouble).abs() * terms * (x + delta).to(at::kDouble).pow(2).mean(-1, true).add(1e-5).rsqrt();
    Tally{"RmsNorm" + suffix, RmsNormTolerance(dtype, hidden)}.Check(norm_out, RefRmsNorm(x, w, 1e-5), "RmsNorm");
    Tally{"AddRmsNorm sum" + suffix, SumTolerance(dtype)}.Check(sum_out, x + delta, "AddRmsNorm sum", terms);
    Tally{"AddRmsNorm norm" + suffix, RmsNormTolerance(dtype, hidden) + 2 * SumTolerance(dtype)}.Check(
        add_norm_out, RefRmsNorm(x + delta, w, 1e-5), "AddRmsNorm norm", norm_scale);
    Tally{"SiluMul" + suffix, SiluMulTolerance(dtype)}.Check(
        silu_out, at::silu(gate_up.narrow(-1, 0, inter)) * gate_up.narrow(-1, inter, inter), "SiluMul");
    Tally{"q" + suffix, RopeTolerance(dtype)}.Check(
        q_out, want.q_grouped, "q", RopeScale(qkv, cos, sin, heads, kv_heads, hd, slots, k_cache, v_cache, false));
    Tally{"k cache" + suffix, RopeTolerance(dtype)}.Check(
        k_cache, want.k_cache, "k cache", RopeScale(qkv, cos, sin, heads, kv_heads, hd, slots, k_cache, v_cache, true));
    Tally{"v cache" + suffix, 0.0}.Check(v_cache, want.v_cache, "v cache");
  }
}

// Inputs the GEMV kernel does not take go to at::linear: same call, same bits.
TEST(FusedOps, LinearFallbackOnCuda) {
  SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  const c10::Device device(c10::kCUDA);
  const at::ScalarType bf16 = at::kBFloat16;
  struct Case {
    std::string name;
    at::Tensor x, w, b;
  };
  const at::Tensor w = Random({64, 128}, bf16, device);
  const std::vector<Case> cases = {
      {"17 rows", Random({17, 128}, bf16, device), w, at::Tensor()},
      {"k % 8 != 0", Random({2, 100}, bf16, device), Random({64, 100}, bf16, device), at::Tensor()},
      {"transposed weight", Random({2, 128}, bf16, device), Random({128, 64}, bf16, device).t(), at::Tensor()},
      {"misaligned x", Misaligned(Random({2, 128}, bf16, device)), w, at::Tensor()},
      {"float32", Random({2, 128}, at::kFloat, device), Random({64, 128}, at::kFloat, device),
       Random({64}, at::kFloat, device)},
      {"empty x", Random({0, 128}, bf16, device), w, Random({64}, bf16, device)},
  };
  for (const Case& c : cases) {
    const at::Tensor got = fused::Linear(c.x, c.w, c.b);
    const at::Tensor want = at::linear(c.x, c.w, c.b);
    ASSERT_EQ(got.sizes(), want.sizes()) << c.name;
    EXPECT_TRUE(at::equal(got, want)) << c.name;
  }
}

// Linear inside a captured CUDA graph: replays on new x, weight and bias
// written in place must match the float64 reference on them.
TEST(FusedOps, CudaGraphReplayLinear) {
  SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  const c10::Device device(c10::kCUDA);
  const at::ScalarType dtype = at::kBFloat16;
  const int64_t n = 1000, k = 2048;
  const at::Tensor x1 = Random({1, 1, k}, dtype, device), x5 = Random({5, k}, dtype, device);
  const at::Tensor w = Random({n, k}, dtype, device), b = Random({n}, dtype, device);
  at::Tensor y1, y5;
  auto graph = CudaGraph::Capture(device, nullptr, [&] {
    y1 = fused::Linear(x1, w, b);
    y5 = fused::Linear(x5, w, at::Tensor());
  });
  ASSERT_TRUE(graph.ok()) << graph.status();
  for (int round = 0; round < 2; ++round) {
    for (const at::Tensor& t : {x1, x5, w, b}) t.copy_(Random(t.sizes(), dtype, device));
    (*graph)->Replay();
    EXPECT_LE(LinearBoundRatio(y1, x1, w, b), 1.0) << "m 1, round " << round;
    EXPECT_LE(LinearBoundRatio(y5, x5, w, at::Tensor()), 1.0) << "m 5, round " << round;
  }
}

// Slots no query token sees are never read: NaN there (in K and V, below and
// past kv_length) leaves the output finite and bit-equal to the output with
// finite values there, for every chunking. (The ATen path would not pass
// this: softmax weight 0 times NaN in V is NaN.)
TEST(FusedOps, DecodeAttentionIgnoresMaskedNaN) {
  SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  const c10::Device device(c10::kCUDA);
  std::mt19937 rng(99);
  for (const AttentionCase& c : {AttentionCase{8, 4, 16, 128, 1024}, AttentionCase{1, 8, 3, 64, 1152},
                                 AttentionCase{2, 2, 5, 96, 200}, AttentionCase{2, 4, 4, 128, 1024},
                                 AttentionCase{1, 2, 1, 64, 2500}}) {
    for (at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
      const std::string where = CaseName(c) + ", " + DTypeName(dtype);
      const int64_t slots = c.kv_length + 40;
      at::Tensor mask = MakeMask(MaskKind::kTree, c.n, c.kv_length, rng);
      mask.select(1, 5).fill_(false);  // a slot nobody sees inside the visible prefix
      const at::Tensor allowed = PlaceMask(mask, c.kv_length + 13, device);
      at::Tensor dead = at::ones({slots}, at::TensorOptions().dtype(at::kBool));
      dead.narrow(0, 0, c.kv_length).copy_(mask.any(0).logical_not());
      ASSERT_GT(dead.narrow(0, 0, c.kv_length).sum().item<int64_t>(), 1) << where;
      const at::Tensor dead_rows = dead.view({1, slots, 1}).to(device);
      const at::Tensor q = Random({c.kv_heads, c.group * c.n, c.head_dim}, dtype, device);
      const at::Tensor k = Random({c.kv_heads, slots, c.head_dim}, dtype, device);
      const at::Tensor v = Random({c.kv_heads, slots, c.head_dim}, dtype, device);
      const at::Tensor k_nan = k.masked_fill(dead_rows, NAN);
      const at::Tensor v_nan = v.masked_fill(dead_rows, NAN);
      for (int64_t chunk_tiles : kChunkTiles) {
        const at::Tensor clean = fused::DecodeAttentionWithChunks(q, k, v, allowed, c.kv_length, chunk_tiles);
        const at::Tensor dirty = fused::DecodeAttentionWithChunks(q, k_nan, v_nan, allowed, c.kv_length, chunk_tiles);
        EXPECT_TRUE(at::isfinite(dirty).all().item<bool>()) << where << ", chunk_tiles " << chunk_tiles;
        EXPECT_TRUE(at::equal(dirty, clean)) << where << ", chunk_tiles " << chunk_tiles;
      }
      for (int64_t blocks : kSplitBlocks) {
        const at::Tensor clean = fused::DecodeAttentionWithKernel(q, k, v, allowed, c.kv_length,
                                                                  fused::AttentionKernel::kSplit, blocks);
        const at::Tensor dirty = fused::DecodeAttentionWithKernel(q, k_nan, v_nan, allowed, c.kv_length,
                                                                  fused::AttentionKernel::kSplit, blocks);
        EXPECT_TRUE(at::isfinite(dirty).all().item<bool>()) << where << ", split blocks " << blocks;
        EXPECT_TRUE(at::equal(dirty, clean)) << where << ", split blocks " << blocks;
      }
      const at::Tensor dirty = fused::DecodeAttention(q, k_nan, v_nan, allowed, c.kv_length);
      EXPECT_TRUE(at::isfinite(dirty).all().item<bool>()) << where << ", auto";
    }
  }
}

// DecodeAttention inside a captured CUDA graph (its workspace allocated during
// capture): replays on new q, caches and mask written in place give what eager
// calls give on them, bit for bit.
TEST(FusedOps, CudaGraphReplayDecodeAttention) {
  SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  const c10::Device device(c10::kCUDA);
  const at::ScalarType dtype = at::kBFloat16;
  const AttentionCase c{8, 4, 4, 128, 1024};
  const int64_t slots = c.kv_length + 128;
  std::mt19937 rng(7);
  const at::Tensor q = Random({c.kv_heads, c.group * c.n, c.head_dim}, dtype, device);
  const at::Tensor k = Random({c.kv_heads, slots, c.head_dim}, dtype, device);
  const at::Tensor v = Random({c.kv_heads, slots, c.head_dim}, dtype, device);
  const at::Tensor buffer = at::zeros({128, slots}, at::TensorOptions().dtype(at::kBool).device(device));
  const at::Tensor allowed = buffer.narrow(0, 0, c.n).narrow(1, 0, c.kv_length);
  allowed.copy_(MakeMask(MaskKind::kCausal, c.n, c.kv_length, rng));
  at::Tensor out_auto, out_split, out_whole, out_tiled, out_cluster, out_block;
  const auto split = [&](int64_t blocks) {
    return fused::DecodeAttentionWithKernel(q, k, v, allowed, c.kv_length, fused::AttentionKernel::kSplit, blocks);
  };
  auto graph = CudaGraph::Capture(device, nullptr, [&] {
    out_auto = fused::DecodeAttention(q, k, v, allowed, c.kv_length);
    out_split = fused::DecodeAttentionWithChunks(q, k, v, allowed, c.kv_length, 1);
    out_whole = fused::DecodeAttentionWithChunks(q, k, v, allowed, c.kv_length, int64_t{1} << 20);
    out_tiled = fused::DecodeAttentionWithChunks(q, k, v, allowed, c.kv_length, 0);
    out_cluster = split(0);
    out_block = split(1);
  });
  ASSERT_TRUE(graph.ok()) << graph.status();
  for (int round = 0; round < 2; ++round) {
    for (const at::Tensor& t : {q, k, v}) t.copy_(Random(t.sizes(), dtype, device));
    const at::Tensor mask = MakeMask(round == 0 ? MaskKind::kTree : MaskKind::kRandom, c.n, c.kv_length, rng);
    allowed.copy_(mask);
    (*graph)->Replay();
    const at::Tensor ref = RefAttentionFloat64(q, k, v, mask, c.kv_length);
    EXPECT_TRUE(at::equal(out_auto, fused::DecodeAttention(q, k, v, allowed, c.kv_length))) << "round " << round;
    EXPECT_TRUE(at::equal(out_split, fused::DecodeAttentionWithChunks(q, k, v, allowed, c.kv_length, 1)))
        << "round " << round;
    EXPECT_TRUE(at::equal(out_whole, fused::DecodeAttentionWithChunks(q, k, v, allowed, c.kv_length, 1 << 20)))
        << "round " << round;
    EXPECT_TRUE(at::equal(out_tiled, fused::DecodeAttentionWithChunks(q, k, v, allowed, c.kv_length, 0)))
        << "round " << round;
    EXPECT_TRUE(at::equal(out_cluster, split(0))) << "round " << round;
    EXPECT_TRUE(at::equal(out_block, split(1))) << "round " << round;
    const at::Tensor bound = AttentionBound(q, k, v, mask, c.kv_length, UnitRoundoff(dtype));
    for (const at::Tensor* out : {&out_auto, &out_split, &out_whole, &out_tiled, &out_cluster, &out_block}) {
      EXPECT_LE(BoundRatio(*out, ref, bound), 1.0) << "round " << round;
    }
  }
}

// Inputs the kernel does not take go to Attend()'s formula: same bits.
TEST(FusedOps, DecodeAttentionFallbackOnCuda) {
  SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  const c10::Device device(c10::kCUDA);
  const at::ScalarType bf16 = at::kBFloat16;
  std::mt19937 rng(3);
  const int64_t kv_heads = 2, group = 2, n = 3, hd = 64, length = 100, slots = 120;
  const at::Tensor mask = PlaceMask(MakeMask(MaskKind::kRandom, n, length, rng), 0, device);
  const at::Tensor q = Random({kv_heads, group * n, hd}, bf16, device);
  const at::Tensor k = Random({kv_heads, slots, hd}, bf16, device);
  const at::Tensor v = Random({kv_heads, slots, hd}, bf16, device);
  struct Case {
    std::string name;
    at::Tensor q, k, v, allowed;
  };
  const at::Tensor wide_mask = PlaceMask(MakeMask(MaskKind::kRandom, 129, length, rng), 0, device);
  const at::Tensor column_strided =
      at::zeros({n, 2 * length}, at::TensorOptions().dtype(at::kBool).device(device)).slice(1, 0, 2 * length, 2);
  column_strided.copy_(mask);
  const std::vector<Case> cases = {
      {"float32", q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat), mask},
      {"head_dim 256", Random({kv_heads, group * n, 256}, bf16, device), Random({kv_heads, slots, 256}, bf16, device),
       Random({kv_heads, slots, 256}, bf16, device), mask},
      {"129 tokens", Random({kv_heads, 129, hd}, bf16, device), k, v, wide_mask},
      {"transposed q", Random({kv_heads, hd, group * n}, bf16, device).transpose(1, 2), k, v, mask},
      {"misaligned k", q, Misaligned(k), v, mask},
      {"column-strided allowed", q, k, v, column_strided},
  };
  for (const Case& c : cases) {
    const at::Tensor got = fused::DecodeAttention(c.q, c.k, c.v, c.allowed, length);
    EXPECT_TRUE(at::equal(got, RefAttend(c.q, c.k, c.v, c.allowed, length))) << c.name;
    EXPECT_TRUE(got.is_contiguous()) << c.name;
  }
  fused::SetCudaKernelsEnabled(false);
  const at::Tensor got = fused::DecodeAttention(q, k, v, mask, length);
  fused::SetCudaKernelsEnabled(true);
  EXPECT_TRUE(at::equal(got, RefAttend(q, k, v, mask, length))) << "kernels disabled";
}

}  // namespace
}  // namespace speclab

// Fused ops against the ATen compositions llama_model.cc runs (HF order).
//
// CPU: the fallback must equal the reference bit for bit (same formula; this
// pins shapes and layout conventions). CUDA (SPECLAB_TEST_DEVICE=cuda): the
// kernels against the reference run on the same CUDA inputs, float32 within
// 1e-5 relative, bfloat16/float16 within 1e-2 relative (expected: bit-exact
// but for RMSNorm's sum order, which may move its rounded normalised value by
// one ulp and its output by two: 2^-6 relative there); the errors are printed.
// Linear (the GEMV kernel) is checked against at::linear in float64 on the
// upcast inputs: its fp32 sum runs in another order than cuBLAS's, so it is
// not bit-equal to at::linear, only within the output's rounding (< 1e-2).
#include "framework/model/fused_ops.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "framework/model/cuda_graph.h"

namespace speclab {
namespace {

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

bool CudaRequested() {
  const char* device = std::getenv("SPECLAB_TEST_DEVICE");
  return device != nullptr && std::string(device) == "cuda";
}

#define SKIP_UNLESS_CUDA()                                                                       \
  do {                                                                                           \
    if (!CudaRequested()) GTEST_SKIP() << "CUDA checks run with SPECLAB_TEST_DEVICE=cuda";       \
    if (!at::hasCUDA()) GTEST_SKIP() << "SPECLAB_TEST_DEVICE=cuda but no CUDA";                  \
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

// Relative error of one bfloat16 ulp at worst (a value just above a power of two).
constexpr double kBf16Ulp = 1.0 / 128;

// How closely a result must match its reference on `device` in `dtype`, and
// the worst case seen, printed by the test.
struct Tally {
  std::string label;
  // Bound for bfloat16/float16 on CUDA. RMSNorm passes 2 ulps: its fp32 sum
  // runs in another order than ATen's, which can move the rounded normalised
  // value by one ulp, and the product with the weight, rounded again, then
  // differs by up to two.
  double low_precision_tolerance = 1e-2;
  double max_rel = 0.0;
  int64_t mismatches = 0;
  int64_t elements = 0;

  void Check(const at::Tensor& got, const at::Tensor& want, const std::string& where) {
    ASSERT_EQ(got.sizes(), want.sizes()) << where;
    ASSERT_EQ(got.scalar_type(), want.scalar_type()) << where;
    ASSERT_TRUE(got.is_contiguous()) << where;
    if (got.is_cpu()) {
      // Fallback == reference: same ATen formula.
      EXPECT_TRUE(at::equal(got, want)) << where << ": max rel error " << MaxRelError(got, want);
      return;
    }
    const double rel = MaxRelError(got, want);
    const bool low_precision = got.scalar_type() != at::kFloat;
    EXPECT_LT(rel, low_precision ? low_precision_tolerance : 1e-5) << where;
    const int64_t differing = Mismatches(got, want);
    // Sum-order flips are rare at bf16/f16 precision; a systematic rounding
    // difference (e.g. a missed intermediate rounding) would be common.
    if (low_precision) EXPECT_LE(differing, 1 + got.numel() / 1000) << where;
    max_rel = std::max(max_rel, rel);
    mismatches += differing;
    elements += got.numel();
  }

  ~Tally() {
    if (elements > 0) {
      std::printf("[fused] %s: max rel error %.3g, %lld of %lld elements not bit-equal\n", label.c_str(), max_rel,
                  static_cast<long long>(mismatches), static_cast<long long>(elements));
    }
  }
};

const std::vector<int64_t> kTokens = {1, 3, 16, 33};

// --- Per-op checks on one device and dtype -----------------------------------

void CheckRmsNorm(const c10::Device& device, at::ScalarType dtype) {
  Tally tally{"RmsNorm " + DTypeName(dtype) + " on " + device.str(), 2 * kBf16Ulp};
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
  Tally sums{"AddRmsNorm sum " + DTypeName(dtype) + " on " + device.str()};
  Tally norms{"AddRmsNorm norm " + DTypeName(dtype) + " on " + device.str(), 2 * kBf16Ulp};
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
        sums.Check(sum, want_sum, where);
        norms.Check(norm, RefRmsNorm(want_sum, w, 1e-6), where);
      }
    }
  }
}

void CheckSiluMul(const c10::Device& device, at::ScalarType dtype) {
  Tally tally{"SiluMul " + DTypeName(dtype) + " on " + device.str()};
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
  Tally q_tally{"RopeQkvToCache q " + DTypeName(dtype) + " on " + device.str()};
  Tally k_tally{"RopeQkvToCache k cache " + DTypeName(dtype) + " on " + device.str()};
  Tally v_tally{"RopeQkvToCache v cache " + DTypeName(dtype) + " on " + device.str()};
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
          const at::Tensor q = fused::RopeQkvToCache(qkv, cos, sin, heads, kv_heads, hd, slots, k_cache, v_cache);
          q_tally.Check(q, want.q_grouped, where);
          k_tally.Check(k_cache, want.k_cache, where);
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

// Largest |got - ref| / |ref| with |ref| floored at 1e-3 of ref's RMS: an
// output that cancels to almost zero would otherwise turn the fp32 sum-order
// noise of any correct kernel (~1e-7 of the RMS) into a large relative error.
double LinearRelError(const at::Tensor& got, const at::Tensor& ref) {
  const at::Tensor g = got.to(at::kCPU, at::kDouble);
  const double rms = ref.pow(2).mean().sqrt().item<double>();
  return ((g - ref).abs() / ref.abs().clamp_min(1e-3 * rms)).max().item<double>();
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
        worst_aten = std::max(worst_aten, LinearRelError(aten, ref));
        for (const LinearConfig& config : kLinearConfigs) {
          if (config.kernel == fused::LinearKernel::kSimt && m > 4) continue;
          PoisonNextOutput(aten);
          const at::Tensor got = fused::LinearWithKernel(x, w, b, config.kernel, config.warps);
          ASSERT_EQ(got.sizes(), aten.sizes()) << where;
          ASSERT_EQ(got.scalar_type(), dtype) << where;
          const double rel = LinearRelError(got, ref);
          EXPECT_LT(rel, 1e-2) << where << ", " << config.name;
          worst_fused = std::max(worst_fused, rel);
        }
      }
    }
  }
  if (device.is_cuda()) {
    std::printf("[fused] Linear %s on %s: max rel error vs float64 %.3g (at::linear: %.3g)\n", DTypeName(dtype).c_str(),
                device.str().c_str(), worst_fused, worst_aten);
  }
}

// --- CPU: the fallback ----------------------------------------------------------

class FusedOpsCpu : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(FusedOpsCpu, RmsNorm) { CheckRmsNorm(c10::Device(c10::kCPU), GetParam()); }
TEST_P(FusedOpsCpu, AddRmsNorm) { CheckAddRmsNorm(c10::Device(c10::kCPU), GetParam()); }
TEST_P(FusedOpsCpu, SiluMul) { CheckSiluMul(c10::Device(c10::kCPU), GetParam()); }
TEST_P(FusedOpsCpu, RopeQkvToCache) { CheckRope(c10::Device(c10::kCPU), GetParam()); }
TEST_P(FusedOpsCpu, Linear) { CheckLinear(c10::Device(c10::kCPU), GetParam()); }

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
  const int64_t slot_of[] = {5, 0, 3};
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t kv = 0; kv < kv_heads; ++kv) {
      for (int64_t j = 0; j < group; ++j) {
        const std::vector<float> want = rope(t, kv * group + j);
        for (int64_t d = 0; d < hd; ++d) EXPECT_NEAR(q[kv][j * n + t][d].item<float>(), want[d], 1e-5);
      }
      const std::vector<float> want_k = rope(t, heads + kv);
      for (int64_t d = 0; d < hd; ++d) {
        EXPECT_NEAR(k_cache[kv][slot_of[t]][d].item<float>(), want_k[d], 1e-5);
        EXPECT_EQ(v_cache[kv][slot_of[t]][d].item<float>(), qkv[t][(heads + kv_heads + kv) * hd + d].item<float>());
      }
    }
  }
  // Untouched slots keep their contents.
  for (int64_t s : {1, 2, 4, 6}) EXPECT_TRUE(at::equal(k_cache.select(1, s), k_before.select(1, s)));
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

TEST_P(FusedOpsCuda, Linear) {
  SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  CheckLinear(c10::Device(c10::kCUDA), GetParam());
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
    Tally tally{"graph replay bf16 round " + std::to_string(round), 2 * kBf16Ulp};
    tally.Check(norm_out, RefRmsNorm(x, w, 1e-5), "RmsNorm");
    tally.Check(sum_out, x + delta, "AddRmsNorm sum");
    tally.Check(add_norm_out, RefRmsNorm(x + delta, w, 1e-5), "AddRmsNorm norm");
    tally.Check(silu_out, at::silu(gate_up.narrow(-1, 0, inter)) * gate_up.narrow(-1, inter, inter), "SiluMul");
    tally.Check(q_out, want.q_grouped, "q");
    tally.Check(k_cache, want.k_cache, "k cache");
    tally.Check(v_cache, want.v_cache, "v cache");
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
    EXPECT_LT(LinearRelError(y1, RefLinear(x1, w, b)), 1e-2) << "m 1, round " << round;
    EXPECT_LT(LinearRelError(y5, RefLinear(x5, w, at::Tensor())), 1e-2) << "m 5, round " << round;
  }
}

}  // namespace
}  // namespace speclab

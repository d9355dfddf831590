#include "algorithms/length_policies/common/acceptance_head.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/model/fused_ops.h"
#include "framework/model/safetensors.h"

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "algorithms/length_policies/common/cuda/acceptance_head_kernel.h"
#endif

namespace speclab::acceptance_head {

absl::StatusOr<Features> ParseFeatures(const std::string& name) {
  if (name == "log_probs") return Features::kLogProbs;
  if (name == "summary") return Features::kSummary;
  if (name == "summary_index") return Features::kSummaryIndex;
  if (name == "hidden") return Features::kHidden;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown feature set '", name, "': expected hidden, log_probs, summary or summary_index"));
}

const char* FeaturesName(Features features) {
  switch (features) {
    case Features::kLogProbs:
      return "log_probs";
    case Features::kSummary:
      return "summary";
    case Features::kSummaryIndex:
      return "summary_index";
    case Features::kHidden:
      return "hidden";
  }
  return "?";
}

int64_t FeatureCount(Features features, int64_t vocab_size, int64_t hidden_size) {
  if (features == Features::kHidden) return hidden_size;
  return (features == Features::kLogProbs ? vocab_size : 0) + kSummaryTopK + 1 + (ReadsIndex(features) ? 1 : 0);
}

DraftRow RowOf(const AcceptanceHead& head) {
  return head.features == Features::kHidden ? DraftRow::kHidden : DraftRow::kLogProbs;
}

int64_t RowWidth(const AcceptanceHead& head) {
  return head.features == Features::kHidden ? head.hidden_size : head.vocab_size;
}

namespace {

// The k largest probabilities of log-probability rows, in float64, best
// first. float32 rows take the one-launch top-k (fused::TopKRows: at::topk's
// select costs about 27 us on an 8000-token row on CUDA); the values are the
// same: exp of each entry widened.
at::Tensor TopProbabilities(const at::Tensor& log_probs, int64_t k) {
  if (log_probs.scalar_type() == at::kFloat && log_probs.dim() == 2)
    return fused::TopKRows(log_probs.contiguous(), at::Tensor(), k).first.to(at::kDouble).exp();
  return std::get<0>(log_probs.to(at::kDouble).exp().topk(k, /*dim=*/1));
}

// The kSummaryTopK largest probabilities (zeros past the vocabulary) and the
// entropy of log-probability rows (`lp`: them in float64).
at::Tensor Summary(const at::Tensor& log_probs, const at::Tensor& lp) {
  const at::Tensor p = lp.exp();
  const int64_t k = std::min<int64_t>(kSummaryTopK, lp.size(1));
  at::Tensor top = TopProbabilities(log_probs, k);
  if (k < kSummaryTopK) top = at::cat({top, at::zeros({lp.size(0), kSummaryTopK - k}, top.options())}, 1);
  // p log p is 0 where p is (lp = -inf).
  const at::Tensor entropy = -at::where(p > 0, p * lp, at::zeros_like(p)).sum(1, /*keepdim=*/true);
  return at::cat({top, entropy}, 1);
}

}  // namespace

at::Tensor FeaturesOf(Features features, const at::Tensor& rows, const at::Tensor& depths) {
  if (features == Features::kHidden) return rows.to(at::kDouble);  // the state itself
  const at::Tensor& log_probs = rows;
  const at::Tensor lp = log_probs.to(at::kDouble);
  switch (features) {
    case Features::kLogProbs:
      return at::cat({lp.clamp_min(kLogProbFloor) / -kLogProbFloor, Summary(log_probs, lp)}, 1);
    case Features::kSummary:
      return Summary(log_probs, lp);
    case Features::kSummaryIndex:
      return at::cat({Summary(log_probs, lp), depths.to(lp.options()).reshape({-1, 1})}, 1);
    case Features::kHidden:
      break;  // returned above
  }
  return at::Tensor();
}

AcceptanceHead NewHead(Features features, int64_t vocab_size, int64_t width, uint64_t seed, double prior_logit,
                       int64_t hidden_size) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  const int64_t f = FeatureCount(features, vocab_size, hidden_size);
  const auto options = at::TensorOptions().dtype(at::kDouble);
  auto uniform = [&](std::vector<int64_t> shape, int64_t fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    return at::rand(shape, generator, options).mul_(2 * bound).sub_(bound);
  };
  return {.features = features, .vocab_size = vocab_size,
          .hidden_size = features == Features::kHidden ? hidden_size : 0, .w1 = uniform({f, width}, f),
          .b1 = uniform({width}, f), .w2 = uniform({width}, width), .b2 = at::full({1}, prior_logit, options)};
}

at::Tensor PredictFromFeatures(const at::Tensor& x, const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                               const at::Tensor& b2) {
  return at::sigmoid(at::silu(at::addmm(b1, x, w1)).matmul(w2) + b2);
}

at::Tensor AcceptanceLoss(const at::Tensor& predicted, const at::Tensor& labels, double reject_weight) {
  const at::Tensor p = predicted.clamp(1e-6, 1 - 1e-6);
  const at::Tensor rejected = (1 - labels) * reject_weight;
  return (rejected * -at::log1p(-p) + labels * -at::log(p)).sum() / (rejected + labels).sum();
}

at::Tensor HeadOnDevice::Predict(const DeviceDraftFacts& facts) const {
  const at::Tensor& rows_in = RowOf(head_) == DraftRow::kHidden ? facts.hidden : facts.log_probs;
#ifdef SPECLAB_WITH_CUDA
  // One launch for every row (cuda/acceptance_head_kernel.h); two for the
  // log_probs features, whose first layer over the row is split over the
  // vocabulary first.
  if (rows_in.is_cuda() && rows_in.scalar_type() == at::kFloat && rows_in.dim() == 2 &&
      head_.w1.size(1) <= kFusedMaxHidden) {
    const at::Tensor rows = rows_in.stride(1) == 1 ? rows_in : rows_in.contiguous();
    const AcceptanceHead& w = WeightsOn(rows.device());
    TORCH_CHECK(w.w1.size(0) == FeatureCount(head_.features, rows.size(1), rows.size(1)),
                "acceptance head: rows of width ", rows.size(1), " for a head of ", w.w1.size(0), " inputs");
    const HeadWeights weights{.w1 = w.w1.data_ptr<double>(), .b1 = w.b1.data_ptr<double>(),
                              .w2 = w.w2.data_ptr<double>(), .b2 = w.b2.data_ptr<double>(),
                              .hidden = static_cast<int>(w.w1.size(1))};
    at::Tensor out = at::empty({rows.size(0)}, rows.options().dtype(at::kDouble));
    const at::Tensor scratch =
        head_.features == Features::kLogProbs
            ? at::empty({LogProbScratchSize(rows.size(0), rows.size(1), weights.hidden)}, out.options())
            : at::Tensor();
    const c10::cuda::CUDAGuard guard(rows.device());
    void* stream = c10::cuda::getCurrentCUDAStream(rows.device().index()).stream();
    const int error =
        head_.features == Features::kHidden
            ? LaunchPredictHiddenRows(rows.data_ptr<float>(), rows.size(0), rows.stride(0), rows.size(1), weights,
                                      out.data_ptr<double>(), stream)
            : LaunchPredictRows(rows.data_ptr<float>(), rows.size(0), rows.stride(0), rows.size(1),
                                static_cast<int>(head_.features), /*first_depth=*/1.0, weights,
                                scratch.defined() ? scratch.data_ptr<double>() : nullptr, out.data_ptr<double>(),
                                stream);
    TORCH_CHECK(error == 0, "acceptance head: kernel launch failed (", error, ")");
    return out;
  }
#endif
  return PredictAt(rows_in, at::arange(1, rows_in.size(0) + 1, rows_in.options().dtype(at::kDouble)));
}

const AcceptanceHead& HeadOnDevice::WeightsOn(c10::Device device) const {
  if (!on_device_.w1.defined() || on_device_.w1.device() != device) {
    on_device_ = head_;
    on_device_.w1 = head_.w1.to(device).contiguous();
    on_device_.b1 = head_.b1.to(device).contiguous();
    on_device_.w2 = head_.w2.to(device).contiguous();
    on_device_.b2 = head_.b2.to(device).contiguous();
  }
  return on_device_;
}

at::Tensor HeadOnDevice::PredictAt(const at::Tensor& rows, const at::Tensor& depths) const {
  WeightsOn(rows.device());
  return PredictFromFeatures(FeaturesOf(head_.features, rows, depths), on_device_.w1, on_device_.b1, on_device_.w2,
                             on_device_.b2);
}

double HeadOnDevice::Predict(const DraftProgress& progress) const {
  const absl::Span<const float> span = RowOf(head_) == DraftRow::kHidden ? progress.hidden : progress.log_probs;
  const at::Tensor row =
      at::from_blob(const_cast<float*>(span.data()), {1, static_cast<int64_t>(span.size())}, at::kFloat);
  return PredictAt(row, at::full({1}, static_cast<double>(progress.depth), at::kDouble)).item<double>();
}

absl::StatusOr<AcceptanceHead> LoadAcceptanceHead(const std::string& path) {
  auto tensors = ReadSafetensors(path);
  if (!tensors.ok()) return tensors.status();
  auto get = [&](const std::string& name) -> absl::StatusOr<at::Tensor> {
    auto it = tensors->find(name);
    if (it == tensors->end())
      return absl::InvalidArgumentError(absl::StrCat(path, ": no tensor '", name, "' (not an acceptance head?)"));
    return it->second;
  };
  auto scalar = [&](const std::string& name) -> absl::StatusOr<int64_t> {
    auto t = get(name);
    if (!t.ok()) return t.status();
    if (t->scalar_type() != at::kLong || t->numel() != 1)
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", name, "' must be one I64 value"));
    return t->item<int64_t>();
  };
  auto features = scalar("features");
  if (!features.ok()) return features.status();
  if (*features < 0 || *features > 3)
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": tensor 'features' is ", *features,
        ", expected 0 (log_probs), 1 (summary), 2 (summary_index) or 3 (hidden)"));
  auto vocab = scalar("vocab_size");
  if (!vocab.ok()) return vocab.status();
  if (*vocab < 1) return absl::InvalidArgumentError(absl::StrCat(path, ": tensor 'vocab_size' must be positive"));
  AcceptanceHead head{.features = static_cast<Features>(*features), .vocab_size = *vocab};
  if (head.features == Features::kHidden) {
    auto hidden_size = scalar("hidden_size");
    if (!hidden_size.ok()) return hidden_size.status();
    if (*hidden_size < 1)
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor 'hidden_size' must be positive"));
    head.hidden_size = *hidden_size;
  }
  const int64_t f = FeatureCount(head.features, head.vocab_size, head.hidden_size);
  auto matrix = [&](const std::string& name, std::vector<int64_t> shape) -> absl::StatusOr<at::Tensor> {
    auto t = get(name);
    if (!t.ok()) return t.status();
    if (!t->is_floating_point() || t->sizes() != at::IntArrayRef(shape))
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", name, "' has shape [",
                                                     absl::StrJoin(t->sizes(), ", "), "], expected [",
                                                     absl::StrJoin(shape, ", "), "] of floats"));
    return t->to(at::kDouble);
  };
  auto w1 = get("w1");
  if (!w1.ok()) return w1.status();
  const int64_t hidden = w1->dim() == 2 ? w1->size(1) : -1;
  if (hidden < 1)
    return absl::InvalidArgumentError(absl::StrCat(path, ": tensor 'w1' must be [", f, ", hidden]"));
  for (auto [name, shape, out] : {std::make_tuple("w1", std::vector<int64_t>{f, hidden}, &head.w1),
                                  std::make_tuple("b1", std::vector<int64_t>{hidden}, &head.b1),
                                  std::make_tuple("w2", std::vector<int64_t>{hidden}, &head.w2),
                                  std::make_tuple("b2", std::vector<int64_t>{1}, &head.b2)}) {
    auto t = matrix(name, shape);
    if (!t.ok()) return t.status();
    *out = *std::move(t);
  }
  return head;
}

absl::Status SaveAcceptanceHead(const std::string& path, const AcceptanceHead& head) {
  const auto longs = at::TensorOptions().dtype(at::kLong);
  std::map<std::string, at::Tensor> tensors = {
      {"features", at::full({1}, static_cast<int64_t>(head.features), longs)},
      {"vocab_size", at::full({1}, head.vocab_size, longs)},
      {"w1", head.w1.to(at::kFloat)},
      {"b1", head.b1.to(at::kFloat)},
      {"w2", head.w2.to(at::kFloat)},
      {"b2", head.b2.to(at::kFloat)}};
  if (head.features == Features::kHidden) tensors["hidden_size"] = at::full({1}, head.hidden_size, longs);
  return WriteSafetensors(path, tensors);
}

absl::StatusOr<AcceptanceHead> ReadHeadOption(Options& options, std::initializer_list<Features> accepted) {
  auto path = options.GetString("head");
  if (!path.ok()) return path.status();
  auto head = LoadAcceptanceHead(options.ResolvePath(*path));
  if (!head.ok()) return options.Error("head", std::string(head.status().message()));
  for (Features features : accepted)
    if (head->features == features) return head;
  std::vector<std::string> names;
  for (Features features : accepted) names.push_back(absl::StrCat("'", FeaturesName(features), "'"));
  return options.Error("head", absl::StrCat(*path, " reads the '", FeaturesName(head->features),
                                            "' features; this policy's head reads ", absl::StrJoin(names, " or "),
                                            " (train it with acceptance_head.features: ",
                                            FeaturesName(*accepted.begin()), ")"));
}

}  // namespace speclab::acceptance_head

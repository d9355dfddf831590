// `retrieval`: REST (docs/algorithms.md §4.6): continuations of the longest
// context suffix found in a datastore, as a tree of the most frequent
// prefixes (with the `trie` builder) or as the chain of most frequent next
// tokens (with `chain`). Gives tokens only: verify with greedy or point_mass.
//
//   drafter: {type: retrieval, datastore: results/train.splds}
//   tree_builder: {type: trie, budget: 64, max_candidates: 64}
//
// Options: datastore (a file `speclab datastore` wrote; required),
// max_suffix (16), min_suffix (2), max_matches (5000), continuation_tokens (10).
// The datastore's ids must lie in the target's vocabulary.
//
// Pipelined chains and tries draft on the device (device_rest_lookup.h: one
// launch a step on CUDA), the datastore copied there at the first such step.
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "drafters/retrieval/datastore.h"
#include "drafters/retrieval/device_rest_lookup.h"
#include "drafters/retrieval/rest_lookup.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_drafter.h"
#include "framework/drafter.h"

namespace speclab {
namespace {

using retrieval::Datastore;
using retrieval::RestOptions;

class RetrievalDrafter final : public Drafter, public DeviceDrafter {
 public:
  RetrievalDrafter(std::shared_ptr<const Datastore> store, RestOptions options)
      : store_(std::move(store)), options_(options) {}

  DrafterKind kind() const override { return DrafterKind::kTokensOnly; }
  absl::Status Reset(absl::Span<const int32_t>, const TargetFeatures&) override { return absl::OkStatus(); }
  absl::Status BeginStep(absl::Span<const int32_t> context) override {
    context_.assign(context.begin(), context.end());
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<int32_t>> Continuation(const TokenTree& tree, int node, int max_tokens) override {
    return retrieval::MostFrequentPath(Count(tree, node, max_tokens));
  }
  absl::StatusOr<std::vector<std::vector<int32_t>>> Continuations(const TokenTree& tree, int node, int max_tokens,
                                                                  int max_candidates) override {
    return retrieval::MostFrequentPrefixes(Count(tree, node, max_tokens), max_candidates);
  }
  absl::Status EndStep(const TokenTree&, absl::Span<const int>, const TargetFeatures&) override {
    return absl::OkStatus();
  }

  // The chain of Continuation(), filled to `length` (ToFixedLength), from
  // the sequence the step hands over on the device.
  absl::StatusOr<at::Tensor> ContinuationAt(const DeviceRoot& root, int length) override {
    if (length > options_.continuation_tokens)  // the engine then steps on the host, where it caps each draft
      return absl::UnimplementedError(absl::StrCat("retrieval: the length policy asks for ", length,
                                                   " tokens a step, continuation_tokens allows ",
                                                   options_.continuation_tokens));
    ASSIGN_OR_RETURN(const retrieval::DeviceRestLookup* lookup, DeviceLookup(root));
    return lookup->Draft(root.context, root.last_two, root.position.start, length);
  }

  // Continuations() of the sequence the step hands over on the device.
  absl::StatusOr<DeviceContinuations> ContinuationsAt(const DeviceRoot& root, int max_tokens,
                                                      int max_candidates) override {
    ASSIGN_OR_RETURN(const retrieval::DeviceRestLookup* lookup, DeviceLookup(root));
    return lookup->Candidates(root.context, root.last_two, root.position.start, max_tokens, max_candidates);
  }

 private:
  // Made at the first pipelined step, on the context's device.
  absl::StatusOr<const retrieval::DeviceRestLookup*> DeviceLookup(const DeviceRoot& root) {
    if (!root.context.defined())
      return absl::UnimplementedError("retrieval: the step handed over no context on the device");
    RETURN_IF_ERROR(retrieval::DeviceRestLookup::Takes(options_));
    if (!device_lookup_) device_lookup_.emplace(store_, options_, root.context.device());
    return &*device_lookup_;
  }

  retrieval::PrefixCounts Count(const TokenTree& tree, int node, int max_tokens) const {
    return retrieval::CountContinuations(*store_, SequenceThrough(context_, tree, node), options_, max_tokens);
  }

  std::shared_ptr<const Datastore> store_;
  RestOptions options_;
  std::vector<int32_t> context_;
  std::optional<retrieval::DeviceRestLookup> device_lookup_;  // made at the first pipelined step
};

absl::StatusOr<std::unique_ptr<Drafter>> Create(Options& options, const DrafterEnvironment& env) {
  RestOptions o;
  ASSIGN_OR_RETURN(std::string file, options.GetString("datastore"));
  ASSIGN_OR_RETURN(int64_t max_suffix, options.GetInt("max_suffix", o.max_suffix));
  ASSIGN_OR_RETURN(int64_t min_suffix, options.GetInt("min_suffix", o.min_suffix));
  ASSIGN_OR_RETURN(o.max_matches, options.GetInt("max_matches", o.max_matches));
  ASSIGN_OR_RETURN(int64_t tokens, options.GetInt("continuation_tokens", o.continuation_tokens));
  if (max_suffix < 1 || max_suffix > 1024) return options.Error("max_suffix", "expected an integer in [1, 1024]");
  if (min_suffix < 1 || min_suffix > max_suffix)
    return options.Error("min_suffix", absl::StrCat("expected an integer in [1, max_suffix = ", max_suffix, "]"));
  if (o.max_matches < 1) return options.Error("max_matches", "expected an integer >= 1");
  if (tokens < 1 || tokens > 1024) return options.Error("continuation_tokens", "expected an integer in [1, 1024]");
  o.max_suffix = static_cast<int>(max_suffix);
  o.min_suffix = static_cast<int>(min_suffix);
  o.continuation_tokens = static_cast<int>(tokens);
  auto store = retrieval::ReadDatastore(options.ResolvePath(file));
  if (!store.ok()) return options.Error("datastore", std::string(store.status().message()));
  if (env.target != nullptr && store->vocab_size > env.target->config().vocab_size)
    return options.Error("datastore", absl::StrCat(file, " holds ids of a vocabulary of ", store->vocab_size,
                                                   " tokens, but the target's has ", env.target->config().vocab_size,
                                                   ": build it with the target's tokenizer"));
  return std::unique_ptr<Drafter>(
      std::make_unique<RetrievalDrafter>(std::make_shared<const Datastore>(*std::move(store)), o));
}

const bool kRegistered = DrafterRegistry::Add({
    .name = "retrieval",
    .description = "REST: continuations of the longest context suffix in a datastore (`speclab datastore`); the "
                   "most frequent prefixes as a tree with the trie builder; gives tokens only",
    .lossless = "-",
    .create = Create,
});

}  // namespace
}  // namespace speclab

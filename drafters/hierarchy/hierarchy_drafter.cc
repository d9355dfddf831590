// `hierarchy`: Hierarchy Drafting (docs/algorithms.md §4.11): drafts from
// three n-gram databases queried in order of temporal locality, the most
// local first, moving to the next only while fewer than the drafts asked for
// have been found:
//   1. this generation: the prompt and the tokens generated so far;
//   2. earlier generations: the outputs of the prompts this drafter served
//      before (a generation's output joins them when the next prompt starts);
//   3. a static corpus: a datastore `speclab datastore` wrote (optional).
// Levels 1 and 2 are suffix tries (drafters/suffix_tree/suffix_trie.h: the
// best-scored speculation of their longest matches), level 3 REST's lookup
// (drafters/retrieval/rest_lookup.h: the most frequent continuations of the
// longest matching suffix). Gives tokens only: verify with greedy or
// point_mass; the `trie` builder takes the merged drafts as a tree, `chain`
// the most local level's path. Chains and tries have a device form (levels
// 1 and 2 by drafters/suffix_tree/device_suffix_speculation.h, level 3 by
// REST's device lookup, the tree's levels merged by merge_device.h) and run
// pipelined on CUDA.
//
//   drafter: {type: hierarchy, datastore: results/corpus.splds}
//   tree_builder: {type: trie, budget: 16, max_candidates: 16}
//
// Options: max_depth (32: the longest n-gram the tries count), min_token_prob
// (0.1: continuations estimated less likely are dropped), datastore (none),
// max_suffix (16) and min_suffix (2) for the datastore's lookup,
// continuation_tokens (10).
#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "drafters/common/device_chain.h"
#include "drafters/merge/merge_device.h"
#include "drafters/retrieval/datastore.h"
#include "drafters/retrieval/device_rest_lookup.h"
#include "drafters/retrieval/rest_lookup.h"
#include "drafters/suffix_tree/device_suffix_speculation.h"
#include "drafters/suffix_tree/pipelined_tries.h"
#include "drafters/suffix_tree/suffix_trie.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_drafter.h"
#include "framework/device/side_streams.h"
#include "framework/drafter.h"

namespace speclab {
namespace {

using retrieval::Datastore;
using retrieval::RestOptions;
using suffix_decoding::DeviceSuffixSpeculation;
using suffix_decoding::Draft;
using suffix_decoding::PipelinedTries;
using suffix_decoding::SpeculationLimits;
using suffix_decoding::SuffixTrie;
using suffix_decoding::TextChoice;

struct HierarchyOptions {
  int max_depth = 32;
  double min_token_prob = 0.1;
  RestOptions corpus;
};

// Drafts gathered level by level: each new path once, parents before
// children (so that the `trie` builder adds one node a path).
class DraftPaths {
 public:
  explicit DraftPaths(int max_candidates) : max_candidates_(max_candidates) {}
  bool full() const { return static_cast<int>(paths_.size()) >= max_candidates_; }
  void Add(std::vector<int32_t> path) {
    if (!full() && seen_.insert(path).second) paths_.push_back(std::move(path));
  }
  // A speculation's nodes, each as its path.
  void AddDraft(const Draft& draft) {
    for (std::vector<int32_t>& path : suffix_decoding::DraftPaths(draft)) Add(std::move(path));
  }
  std::vector<std::vector<int32_t>> Take() && { return std::move(paths_); }

 private:
  const int max_candidates_;
  std::vector<std::vector<int32_t>> paths_;
  std::set<std::vector<int32_t>> seen_;
};

class HierarchyDrafter final : public Drafter, public DeviceDrafter {
 public:
  HierarchyDrafter(HierarchyOptions o, std::shared_ptr<const Datastore> corpus, c10::Device device)
      : o_(o), corpus_(std::move(corpus)), device_(device),
        tries_(o.max_depth, /*keep_earlier=*/true, device, "hierarchy") {}

  DrafterKind kind() const override { return DrafterKind::kTokensOnly; }

  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures&) override {
    return tries_.Reset(prompt);
  }

  absl::Status BeginStep(absl::Span<const int32_t> context) override { return tries_.BeginStep(context); }

  absl::StatusOr<std::vector<int32_t>> Continuation(const TokenTree& tree, int node, int max_tokens) override {
    return Path(SequenceThrough(tries_.host().context(), tree, node), max_tokens);
  }

  absl::StatusOr<std::vector<std::vector<int32_t>>> Continuations(const TokenTree& tree, int node, int max_tokens,
                                                                  int max_candidates) override {
    return Paths(SequenceThrough(tries_.host().context(), tree, node), max_tokens, max_candidates);
  }

  absl::Status EndStep(const TokenTree&, absl::Span<const int>, const TargetFeatures&) override {
    return absl::OkStatus();
  }

  // Continuation() of the root's sequence as `length` tokens
  // (ToFixedLength): on CUDA the two levels' speculation, and the corpus's
  // chain where neither drafts; the host's levels elsewhere.
  absl::StatusOr<at::Tensor> ContinuationAt(const DeviceRoot& root, int length) override {
    if (DeviceSuffixSpeculation* device = tries_.device()) {
      // The two lookups side by side on the device.
      DeviceSuffixSpeculation::Chain chain;
      at::Tensor corpus;
      std::vector<SideWork> lookups = {[&](std::vector<at::Tensor>& made) -> absl::Status {
        ASSIGN_OR_RETURN(chain, device->ChainOf(root, ChainLimits(length), TextChoice::kEach, length));
        made = {chain.tokens, chain.found};
        return absl::OkStatus();
      }};
      if (corpus_ != nullptr) {
        lookups.push_back([&](std::vector<at::Tensor>& made) -> absl::Status {
          ASSIGN_OR_RETURN(const retrieval::DeviceRestLookup* lookup, CorpusLookup(root));
          ASSIGN_OR_RETURN(corpus, lookup->Draft(root.context, root.last_two, root.position.start, length));
          made = {corpus};
          return absl::OkStatus();
        });
      }
      RETURN_IF_ERROR(RunSideBySide(root.context.device(), lookups));
      if (corpus_ == nullptr) return chain.tokens;
      return at::where(chain.found.to(at::kBool), chain.tokens, corpus);
    }
    ASSIGN_OR_RETURN(const std::vector<int32_t> sequence, tries_.LearnRoot(root));
    return ToDeviceChain(sequence.back(), Path(sequence, length), length, device_);
  }

  // Continuations() of the root's sequence: on CUDA the two levels' drafts
  // and the corpus's prefixes, merged in that order on the device.
  absl::StatusOr<DeviceContinuations> ContinuationsAt(const DeviceRoot& root, int max_tokens,
                                                      int max_candidates) override {
    if (DeviceSuffixSpeculation* device = tries_.device()) {
      // The two lookups side by side on the device, then their drafts merged.
      DeviceContinuations levels, prefixes;
      std::vector<SideWork> lookups = {[&](std::vector<at::Tensor>& made) -> absl::Status {
        ASSIGN_OR_RETURN(levels, device->Candidates(root, Limits(max_tokens, max_candidates), TextChoice::kEach,
                                                    max_candidates, max_tokens));
        made = {levels.tokens, levels.lengths};
        return absl::OkStatus();
      }};
      if (corpus_ != nullptr) {
        lookups.push_back([&](std::vector<at::Tensor>& made) -> absl::Status {
          ASSIGN_OR_RETURN(const retrieval::DeviceRestLookup* lookup, CorpusLookup(root));
          ASSIGN_OR_RETURN(prefixes, lookup->Candidates(root.context, root.last_two, root.position.start, max_tokens,
                                                        max_candidates));
          made = {prefixes.tokens, prefixes.lengths};
          return absl::OkStatus();
        });
      }
      RETURN_IF_ERROR(RunSideBySide(root.context.device(), lookups));
      std::vector<DeviceContinuations> parts;
      for (int level = 0; level < 2; ++level)
        parts.push_back({.tokens = levels.tokens.narrow(0, level * max_candidates, max_candidates),
                         .lengths = levels.lengths.narrow(0, level * max_candidates, max_candidates)});
      if (corpus_ != nullptr) parts.push_back(std::move(prefixes));
      return merge::MergeOnDevice(parts, /*interleave=*/false, max_candidates, root.last_two.narrow(0, 1, 1));
    }
    ASSIGN_OR_RETURN(const std::vector<int32_t> sequence, tries_.LearnRoot(root));
    return ToDeviceContinuations(Paths(sequence, max_tokens, max_candidates), max_candidates, max_tokens,
                                 sequence.back(), device_);
  }

 private:
  // The most local level's path that drafts anything.
  std::vector<int32_t> Path(absl::Span<const int32_t> sequence, int max_tokens) const {
    const auto& tries = tries_.host();
    for (const SuffixTrie* level : {&tries.generation(), &tries.earlier()}) {
      // The cursor is earlier()'s; Speculate takes it only there.
      Draft draft = level->Speculate(sequence, ChainLimits(max_tokens), &tries.earlier_cursor());
      if (!draft.tokens.empty()) return std::move(draft.tokens);
    }
    if (corpus_ == nullptr) return {};
    return retrieval::MostFrequentPath(retrieval::CountContinuations(*corpus_, sequence, o_.corpus, max_tokens));
  }

  // The levels' drafts, the most local first.
  std::vector<std::vector<int32_t>> Paths(absl::Span<const int32_t> sequence, int max_tokens,
                                          int max_candidates) const {
    const auto& tries = tries_.host();
    DraftPaths paths(max_candidates);
    for (const SuffixTrie* level : {&tries.generation(), &tries.earlier()}) {
      if (paths.full()) break;
      paths.AddDraft(level->Speculate(sequence, Limits(max_tokens, max_candidates), &tries.earlier_cursor()));
    }
    if (corpus_ != nullptr && !paths.full()) {
      const retrieval::PrefixCounts counts = retrieval::CountContinuations(*corpus_, sequence, o_.corpus, max_tokens);
      for (std::vector<int32_t>& path : retrieval::MostFrequentPrefixes(counts, max_candidates)) {
        // A prefix already drafted by a more local level is kept once; the
        // lookup lists each prefix before its extensions, so none is orphaned.
        paths.Add(std::move(path));
      }
    }
    return std::move(paths).Take();
  }

  SpeculationLimits Limits(int max_path, int max_tokens) const {
    SpeculationLimits limits;
    limits.max_tokens = max_tokens;
    limits.max_path = max_path;
    // A level drafts as much as it finds: the hierarchy, not the match
    // length, decides how far to look.
    limits.max_spec_factor = 0.0;
    limits.max_spec_offset = max_tokens;
    limits.min_token_prob = o_.min_token_prob;
    return limits;
  }

  SpeculationLimits ChainLimits(int length) const {
    SpeculationLimits limits = Limits(length, length);
    limits.tree = false;
    return limits;
  }

  // REST's device lookup of the corpus, made at the first pipelined step.
  absl::StatusOr<const retrieval::DeviceRestLookup*> CorpusLookup(const DeviceRoot& root) {
    RETURN_IF_ERROR(retrieval::DeviceRestLookup::Takes(o_.corpus));
    if (!corpus_lookup_) corpus_lookup_.emplace(corpus_, o_.corpus, root.context.device());
    return &*corpus_lookup_;
  }

  HierarchyOptions o_;
  std::shared_ptr<const Datastore> corpus_;  // null: no third level
  c10::Device device_;
  PipelinedTries tries_;  // levels 1 and 2
  std::optional<retrieval::DeviceRestLookup> corpus_lookup_;
};

absl::StatusOr<std::unique_ptr<Drafter>> Create(Options& options, const DrafterEnvironment& env) {
  HierarchyOptions o;
  ASSIGN_OR_RETURN(int64_t depth, options.GetIntIn("max_depth", o.max_depth, 1, 1024));
  o.max_depth = static_cast<int>(depth);
  ASSIGN_OR_RETURN(o.min_token_prob, options.GetDouble("min_token_prob", o.min_token_prob));
  if (!(o.min_token_prob >= 0 && o.min_token_prob <= 1))
    return options.Error("min_token_prob", "expected a probability in [0, 1]");
  ASSIGN_OR_RETURN(std::string file, options.GetString("datastore", ""));
  ASSIGN_OR_RETURN(int64_t max_suffix, options.GetInt("max_suffix", o.corpus.max_suffix));
  ASSIGN_OR_RETURN(int64_t min_suffix, options.GetInt("min_suffix", o.corpus.min_suffix));
  ASSIGN_OR_RETURN(int64_t tokens, options.GetInt("continuation_tokens", o.corpus.continuation_tokens));
  if (max_suffix < 1 || max_suffix > 1024) return options.Error("max_suffix", "expected an integer in [1, 1024]");
  if (min_suffix < 1 || min_suffix > max_suffix)
    return options.Error("min_suffix", absl::StrCat("expected an integer in [1, max_suffix = ", max_suffix, "]"));
  if (tokens < 1 || tokens > 1024) return options.Error("continuation_tokens", "expected an integer in [1, 1024]");
  o.corpus.max_suffix = static_cast<int>(max_suffix);
  o.corpus.min_suffix = static_cast<int>(min_suffix);
  o.corpus.continuation_tokens = static_cast<int>(tokens);
  std::shared_ptr<const Datastore> corpus;
  if (!file.empty()) {
    auto store = retrieval::ReadDatastore(options.ResolvePath(file));
    if (!store.ok()) return options.Error("datastore", std::string(store.status().message()));
    if (env.target != nullptr && store->vocab_size > env.target->config().vocab_size)
      return options.Error("datastore", absl::StrCat(file, " holds ids of a vocabulary of ", store->vocab_size,
                                                     " tokens, but the target's has ",
                                                     env.target->config().vocab_size,
                                                     ": build it with the target's tokenizer"));
    corpus = std::make_shared<const Datastore>(*std::move(store));
  }
  return std::unique_ptr<Drafter>(std::make_unique<HierarchyDrafter>(o, std::move(corpus), env.device));
}

const bool kRegistered = DrafterRegistry::Add({
    .name = "hierarchy",
    .description = "Hierarchy Drafting: n-gram databases queried from the most local down (this generation, "
                   "earlier generations, a `speclab datastore` corpus) until enough drafts are found; gives tokens "
                   "only (trie builder for trees); chains and tries pipelined on the device",
    .lossless = "-",
    .create = Create,
});

}  // namespace
}  // namespace speclab

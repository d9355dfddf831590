// NgramCacheDrafter: Cacheback decoding (docs/algorithms.md §4.10): drafts
// from nothing but an LRU cache of token n-grams learned from the text as it
// goes (drafters/common/lru_ngram_table.h). Gives tokens without
// distributions.
#ifndef SPECLAB_DRAFTERS_NGRAM_CACHE_NGRAM_CACHE_DRAFTER_H_
#define SPECLAB_DRAFTERS_NGRAM_CACHE_NGRAM_CACHE_DRAFTER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "drafters/common/lru_ngram_table.h"
#include "drafters/ngram_cache/device_ngram_table.h"
#include "framework/device/device_drafter.h"
#include "framework/drafter.h"

namespace speclab::ngram_cache {

struct CacheOptions {
  NgramTableShape shape;
  bool recursive = true;   // look the drafts' own last tokens up again
  bool transient = false;  // start each prompt with an empty table
};

// Up to `max_tokens` tokens: the most recent follower of the sequence's last
// leader; with `recursive`, then that of the sequence extended by it, and so
// on, until a leader is not cached.
std::vector<int32_t> CachedContinuation(const LruNgramTable& table, std::vector<int32_t> sequence, int max_tokens,
                                        bool recursive);

// Exactly `length` tokens: CachedContinuation(), then its last token (the
// sequence's last where it gave none) repeated.
std::vector<int32_t> FixedLengthCachedContinuation(const LruNgramTable& table, const std::vector<int32_t>& sequence,
                                                   int length, bool recursive);

// Up to `max_candidates` continuations of up to `max_tokens` tokens, breadth
// first from the sequence: the most recent follower of its last leader
// first, each token of a follower a candidate of its own (those already
// listed skipped); with `recursive`, each grown follower's path is looked up
// again in turn. Merged into a trie, they are the cache's tree of drafts.
std::vector<std::vector<int32_t>> CachedContinuations(const LruNgramTable& table, const std::vector<int32_t>& sequence,
                                                      int max_tokens, int max_candidates, bool recursive);

// The Drafter interface, and its device form (framework/device/device_drafter.h):
// the table lives on the host or, once pipelined steps draft, on the device
// (DeviceNgramTable), and moves back where the host drafts again.
class NgramCacheDrafter final : public Drafter, public DeviceDrafter {
 public:
  NgramCacheDrafter(CacheOptions options, c10::Device device)
      : o_(options), device_(device), table_(options.shape) {}

  DrafterKind kind() const override { return DrafterKind::kTokensOnly; }
  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures& target) override;
  absl::Status BeginStep(absl::Span<const int32_t> context) override;
  // CachedContinuation() of the path's sequence.
  absl::StatusOr<std::vector<int32_t>> Continuation(const TokenTree& tree, int node, int max_tokens) override;
  // CachedContinuations() of the path's sequence.
  absl::StatusOr<std::vector<std::vector<int32_t>>> Continuations(const TokenTree& tree, int node, int max_tokens,
                                                                  int max_candidates) override;
  absl::Status EndStep(const TokenTree&, absl::Span<const int>, const TargetFeatures&) override {
    return absl::OkStatus();
  }

  // The table learns the generation up to the root (root.context, then
  // root.last_two) and drafts FixedLengthCachedContinuation() of it, in one
  // launch on CUDA.
  absl::StatusOr<at::Tensor> ContinuationAt(const DeviceRoot& root, int length) override;
  // Learns likewise and gives CachedContinuations() of it, in one launch on
  // CUDA (at most kMaxCandidates there; more step on the host).
  absl::StatusOr<DeviceContinuations> ContinuationsAt(const DeviceRoot& root, int max_tokens,
                                                      int max_candidates) override;

 private:
  // The host's table, and the text it learned, onto the device, where the
  // host learned last; Unimplemented where the step handed over no context.
  absl::Status PutTableOnDevice(const DeviceRoot& root);
  // The device table's rows into the host's, where the device learned last.
  void TakeDeviceTable();

  const CacheOptions o_;
  const c10::Device device_;
  LruNgramTable table_;
  std::vector<int32_t> context_;  // the text the host table has learned
  // Where pipelined steps keep the table: current while `on_device_`.
  std::optional<DeviceNgramTable> device_table_;
  bool on_device_ = false;
};

}  // namespace speclab::ngram_cache

#endif  // SPECLAB_DRAFTERS_NGRAM_CACHE_NGRAM_CACHE_DRAFTER_H_

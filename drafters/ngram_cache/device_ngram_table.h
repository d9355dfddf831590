// DeviceNgramTable: the ngram_cache drafter's LRU table
// (drafters/common/lru_ngram_table.h) kept on a device, so that a pipelined
// step learns the accepted text and drafts from it without the host
// (DeviceDrafter::ContinuationAt).
//
// Recency is a stamp per row and per follower (0: empty; larger: more
// recent), given from one clock as windows are learned: most recent first is
// largest stamp first, and the least recent, evicted where full, is the
// smallest. The table so holds what the host's lists hold, in their order
// (Rows() gives them back). One launch a step on CUDA
// (cuda/ngram_cache_kernel.h); the same loops on the CPU.
#ifndef SPECLAB_DRAFTERS_NGRAM_CACHE_DEVICE_NGRAM_TABLE_H_
#define SPECLAB_DRAFTERS_NGRAM_CACHE_DEVICE_NGRAM_TABLE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "drafters/common/lru_ngram_table.h"
#include "framework/device/device_drafter.h"

namespace speclab::ngram_cache {

struct TablePointers;  // cuda/ngram_cache_kernel.h

class DeviceNgramTable {
 public:
  // An empty table on `device`.
  DeviceNgramTable(NgramTableShape shape, c10::Device device);

  // Takes the host table's rows, its text learned up to position `learned`
  // of the generation.
  void Load(const LruNgramTable& table, int64_t learned);
  // The rows as the host table keeps them (one read).
  std::vector<LruNgramTable::Row> Rows() const;
  // The position up to which the generation's text was learned (one read).
  int64_t learned() const;

  // The sequence is context[0..s) then last_two (s = start[0], the root at s
  // + 1): learns every window that ends before the root's successor and was
  // not learned, then drafts. Returns [length + 1] int64 on the device, the
  // root first, then FixedLengthCachedContinuation() of the sequence.
  absl::StatusOr<at::Tensor> LearnAndDraft(const at::Tensor& context, const at::Tensor& last_two,
                                           const at::Tensor& start, int length, bool recursive);
  // Learns likewise, then gives CachedContinuations() of the sequence
  // (ngram_cache_drafter.h), the entries past each candidate the root's.
  // Unimplemented on CUDA past kMaxCandidates (cuda/ngram_cache_kernel.h).
  absl::StatusOr<DeviceContinuations> LearnAndBranch(const at::Tensor& context, const at::Tensor& last_two,
                                                     const at::Tensor& start, int max_tokens, int max_candidates,
                                                     bool recursive);

 private:
  TablePointers Pointers();  // for the kernels (CUDA builds)
  // The CPU's form of the kernel: the row keyed by key[0..leader) (-1:
  // none) and the least recent row; learning up to the root; drafting.
  int ScanOnCpu(const int64_t* key, int* oldest) const;
  void LearnOnCpu(const at::Tensor& context, const at::Tensor& last_two, int64_t s);
  void LearnAndDraftOnCpu(const at::Tensor& context, const at::Tensor& last_two, int64_t s, int length,
                          bool recursive, at::Tensor& out);

  NgramTableShape shape_;
  // int64: keys [rows, leader], row_stamps [rows], followers [rows, columns,
  // follower], follower_stamps [rows, columns], clock [1], learned [1].
  at::Tensor keys_, row_stamps_, followers_, follower_stamps_, clock_, learned_;
};

}  // namespace speclab::ngram_cache

#endif  // SPECLAB_DRAFTERS_NGRAM_CACHE_DEVICE_NGRAM_TABLE_H_

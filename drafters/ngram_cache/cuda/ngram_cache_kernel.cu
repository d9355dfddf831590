// The LRU table's step in one block; see ngram_cache_kernel.h. The threads
// scan the rows together (a key's row, or the least recent row to evict);
// thread 0 updates the row and its few followers, as the host's lists would.
#include "drafters/ngram_cache/cuda/ngram_cache_kernel.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace speclab {
namespace ngram_cache {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxLeader = 16;  // the drafter's bound on `leader`
constexpr int kRowBits = 25;    // rows <= 2^24: (stamp, row) packs into 64 bits

struct Sequence {
  const int64_t* context;
  const int64_t* last_two;
  int64_t start;
  const int64_t* drafts;  // out + 1: the drafts follow the root
  __device__ int64_t operator[](int64_t p) const {
    const int64_t n = start + 2;
    return p < start ? context[p] : p < n ? last_two[p - start] : drafts[p - n];
  }
};

// The row whose key is `key` (-1 where none), and the least recent row (an
// empty one first), over the block. Every thread gets both.
__device__ void ScanRows(const TablePointers& t, const int64_t* key, int* found, unsigned long long* oldest) {
  __shared__ int found_row;
  __shared__ unsigned long long oldest_row;
  if (threadIdx.x == 0) {
    found_row = -1;
    oldest_row = ~0ull;
  }
  __syncthreads();
  unsigned long long mine = ~0ull;
  for (int r = threadIdx.x; r < t.rows; r += kThreads) {
    const int64_t stamp = t.row_stamps[r];
    const unsigned long long packed = (static_cast<unsigned long long>(stamp) << kRowBits) | r;
    if (packed < mine) mine = packed;
    if (stamp == 0) continue;
    bool same = true;
    for (int i = 0; i < t.leader && same; ++i) same = t.keys[static_cast<int64_t>(r) * t.leader + i] == key[i];
    if (same) found_row = r;  // keys are unique: at most one writer
  }
  // The warp's least first, then one shared atomic a warp (256 on one address serialise).
  for (int offset = 16; offset > 0; offset /= 2) {
    const unsigned long long other = __shfl_down_sync(0xffffffffu, mine, offset);
    if (other < mine) mine = other;
  }
  if (threadIdx.x % 32 == 0) atomicMin(&oldest_row, mine);
  __syncthreads();
  *found = found_row;
  *oldest = oldest_row;
  __syncthreads();  // before the next scan resets them
}

__device__ bool SameFollower(const TablePointers& t, int64_t slot, const Sequence& seq, int64_t from) {
  for (int i = 0; i < t.follower; ++i)
    if (t.followers[slot * t.follower + i] != seq[from + i]) return false;
  return true;
}

// Thread 0: remembers the follower at seq[from..] in row `row` (found, or
// evicted and taken for `key`), as LruNgramTable::Remember does.
__device__ void Remember(const TablePointers& t, int row, bool found, const int64_t* key, const Sequence& seq,
                         int64_t from) {
  const int64_t stamp = ++*t.clock;
  if (!found) {
    for (int i = 0; i < t.leader; ++i) t.keys[static_cast<int64_t>(row) * t.leader + i] = key[i];
    for (int c = 0; c < t.columns; ++c) t.follower_stamps[static_cast<int64_t>(row) * t.columns + c] = 0;
  }
  t.row_stamps[row] = stamp;
  int same = -1, oldest = 0;
  for (int c = 0; c < t.columns; ++c) {
    const int64_t slot = static_cast<int64_t>(row) * t.columns + c;
    const int64_t s = t.follower_stamps[slot];
    if (s > 0 && same < 0 && SameFollower(t, slot, seq, from)) same = c;
    if (s < t.follower_stamps[static_cast<int64_t>(row) * t.columns + oldest]) oldest = c;
  }
  const int c = same >= 0 ? same : oldest;
  const int64_t slot = static_cast<int64_t>(row) * t.columns + c;
  if (same < 0)
    for (int i = 0; i < t.follower; ++i) t.followers[slot * t.follower + i] = seq[from + i];
  t.follower_stamps[slot] = stamp;
}

// Every window of the sequence that ends before the root's successor and was
// not learned, in order (LruNgramTable::Learn); then *learned = the
// sequence's length. `key`: the block's shared [kMaxLeader].
__device__ void Learn(const TablePointers& t, const Sequence& seq, int64_t* key) {
  const int64_t n = seq.start + 2;
  const int window = t.leader + t.follower;
  int found;
  unsigned long long oldest;
  const int64_t first_end = *t.learned > window - 1 ? *t.learned : window - 1;
  __syncthreads();  // every thread has read `learned` before thread 0 moves it
  for (int64_t end = first_end; end < n; ++end) {
    const int64_t from = end - window + 1;
    if (threadIdx.x < t.leader) key[threadIdx.x] = seq[from + threadIdx.x];
    __syncthreads();
    ScanRows(t, key, &found, &oldest);
    if (threadIdx.x == 0)
      Remember(t, found >= 0 ? found : static_cast<int>(oldest & ((1ull << kRowBits) - 1)), found >= 0, key, seq,
               from + t.leader);
    __syncthreads();
  }
  if (threadIdx.x == 0) *t.learned = n;
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads)
    LearnAndDraft(TablePointers t, const int64_t* __restrict__ context, const int64_t* __restrict__ last_two,
                  const int64_t* __restrict__ start, int length, bool recursive, int64_t* __restrict__ out) {
  __shared__ int64_t key[kMaxLeader];
  __shared__ int drafted;
  const Sequence seq{context, last_two, *start, out + 1};
  const int64_t n = seq.start + 2;
  int found;
  unsigned long long oldest;
  Learn(t, seq, key);
  if (threadIdx.x == 0) {
    out[0] = seq[n - 1];
    drafted = 0;
  }
  __syncthreads();
  while (drafted < length && n + drafted >= t.leader) {
    const int64_t end = n + drafted;  // the sequence's length so far
    if (threadIdx.x < t.leader) key[threadIdx.x] = seq[end - t.leader + threadIdx.x];
    __syncthreads();
    ScanRows(t, key, &found, &oldest);
    if (found < 0) break;
    if (threadIdx.x == 0) {
      int newest = 0;  // a cached row has a follower
      for (int c = 1; c < t.columns; ++c) {
        const int64_t row = static_cast<int64_t>(found) * t.columns;
        if (t.follower_stamps[row + c] > t.follower_stamps[row + newest]) newest = c;
      }
      const int64_t slot = static_cast<int64_t>(found) * t.columns + newest;
      for (int i = 0; i < t.follower && drafted < length; ++i) out[1 + drafted++] = t.followers[slot * t.follower + i];
    }
    __syncthreads();
    if (!recursive) break;
  }
  if (threadIdx.x == 0)
    for (int j = drafted; j < length; ++j) out[1 + j] = out[j];  // the last token (the root where none) repeated
}


// A trie's candidates, breadth first as CachedContinuations(): frontier
// entries are candidates (-1: the root) whose followers are still to list.
// The rows of every entry not yet looked up are found together (a thread a
// (entry, row) pair); thread 0 then merges each entry's followers, most
// recent first, into the candidates, one token at a time: candidate c is its
// parent's tokens and one more, so "already a candidate" is a (parent, token)
// pair.
struct Candidates {
  int64_t* tokens;   // [max, width]
  int64_t* lengths;  // [max]
  int width, max;
};

// The row keyed by the last `leader` tokens of the sequence then candidate
// `from`'s tokens (-1: none, or too short a sequence), for every frontier
// entry in [first, end).
__device__ void FindRows(const TablePointers& t, const Sequence& seq, const Candidates& out, const int* frontier,
                         int first, int end, int* rows) {
  const int64_t n = seq.start + 2;
  for (int j = first + threadIdx.x; j < end; j += kThreads) rows[j] = -1;
  __syncthreads();
  const int64_t pairs = static_cast<int64_t>(end - first) * t.rows;
  for (int64_t pair = threadIdx.x; pair < pairs; pair += kThreads) {
    const int j = first + static_cast<int>(pair / t.rows);
    const int r = static_cast<int>(pair % t.rows);
    const int from = frontier[j];
    const int64_t length = n + (from < 0 ? 0 : out.lengths[from]);
    if (t.row_stamps[r] == 0 || length < t.leader) continue;
    bool same = true;
    for (int i = 0; i < t.leader && same; ++i) {
      const int64_t p = length - t.leader + i;
      same = t.keys[static_cast<int64_t>(r) * t.leader + i] ==
             (p < n ? seq[p] : out.tokens[static_cast<int64_t>(from) * out.width + (p - n)]);
    }
    if (same) rows[j] = r;  // keys are unique: at most one writer
  }
  __syncthreads();
}

// Thread 0: entry `from`'s followers in `row` into the candidates (false once
// they are full, as the host stops); those that grew join the frontier.
__device__ bool MergeFollowers(const TablePointers& t, int from, int row, bool recursive, Candidates& out,
                               int* parent, int* count, int* frontier, int* size) {
  const int64_t* stamps = t.follower_stamps + static_cast<int64_t>(row) * t.columns;
  const int from_length = from < 0 ? 0 : static_cast<int>(out.lengths[from]);
  for (int64_t last = INT64_MAX;;) {  // stamps are distinct: most recent first
    int column = -1;
    for (int c = 0; c < t.columns; ++c)
      if (stamps[c] > 0 && stamps[c] < last && (column < 0 || stamps[c] > stamps[column])) column = c;
    if (column < 0) return true;
    last = stamps[column];
    const int64_t* follower = t.followers + (static_cast<int64_t>(row) * t.columns + column) * t.follower;
    int node = from, length = from_length;
    bool grew = false;
    for (int i = 0; i < t.follower && length < out.width; ++i, ++length) {
      int child = -1;
      for (int k = 0; k < *count && child < 0; ++k)
        if (parent[k] == node && out.tokens[static_cast<int64_t>(k) * out.width + length] == follower[i]) child = k;
      if (child < 0) {
        if (*count >= out.max) return false;
        child = (*count)++;
        parent[child] = node;
        int64_t* tokens = out.tokens + static_cast<int64_t>(child) * out.width;
        for (int p = 0; p < length; ++p) tokens[p] = out.tokens[static_cast<int64_t>(node) * out.width + p];
        tokens[length] = follower[i];
        out.lengths[child] = length + 1;
        grew = true;
      }
      node = child;
    }
    if (grew && recursive) frontier[(*size)++] = node;
  }
}

__global__ void __launch_bounds__(kThreads)
    LearnAndBranch(TablePointers t, const int64_t* __restrict__ context, const int64_t* __restrict__ last_two,
                   const int64_t* __restrict__ start, bool recursive, Candidates out) {
  __shared__ int64_t key[kMaxLeader];
  __shared__ int frontier[kMaxCandidates + 1], rows[kMaxCandidates + 1], parent[kMaxCandidates];
  __shared__ int count, size, next, looked_up;
  __shared__ bool full;
  const Sequence seq{context, last_two, *start, nullptr};
  Learn(t, seq, key);
  const int64_t root = seq[seq.start + 1];
  for (int64_t i = threadIdx.x; i < static_cast<int64_t>(out.max) * out.width; i += kThreads) out.tokens[i] = root;
  for (int c = threadIdx.x; c < out.max; c += kThreads) out.lengths[c] = 0;
  if (threadIdx.x == 0) {
    frontier[0] = -1;
    size = 1;
    count = next = looked_up = 0;
    full = false;
  }
  __syncthreads();
  for (;;) {
    const bool more = !full && next < size, look_up = looked_up == next;
    __syncthreads();  // read by every thread before thread 0 moves them
    if (!more) break;
    if (look_up) {  // the whole pending frontier at once
      FindRows(t, seq, out, frontier, next, size, rows);
      if (threadIdx.x == 0) looked_up = size;
    }
    if (threadIdx.x == 0) {
      const int from = frontier[next];
      if ((from < 0 || out.lengths[from] < out.width) && rows[next] >= 0)
        full = !MergeFollowers(t, from, rows[next], recursive, out, parent, &count, frontier, &size);
      next = recursive ? next + 1 : size;  // without recursion only the root's followers
    }
    __syncthreads();
  }
}
}  // namespace

int LaunchLearnAndDraft(TablePointers table, const int64_t* context, const int64_t* last_two, const int64_t* start,
                        int length, bool recursive, int64_t* out, void* stream) {
  if (table.leader < 1 || table.leader > kMaxLeader || table.follower < 1 || table.rows < 1 ||
      table.rows > (1 << 24) || table.columns < 1 || length < 0)
    return cudaErrorInvalidValue;
  LearnAndDraft<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(table, context, last_two, start, length,
                                                                       recursive, out);
  return cudaGetLastError();
}

int LaunchLearnAndBranch(TablePointers table, const int64_t* context, const int64_t* last_two, const int64_t* start,
                         int max_tokens, int max_candidates, bool recursive, int64_t* tokens, int64_t* lengths,
                         void* stream) {
  if (table.leader < 1 || table.leader > kMaxLeader || table.follower < 1 || table.rows < 1 ||
      table.rows > (1 << 24) || table.columns < 1 || max_tokens < 1 || max_candidates < 1 ||
      max_candidates > kMaxCandidates)
    return cudaErrorInvalidValue;
  LearnAndBranch<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      table, context, last_two, start, recursive, Candidates{tokens, lengths, max_tokens, max_candidates});
  return cudaGetLastError();
}

}  // namespace ngram_cache
}  // namespace speclab

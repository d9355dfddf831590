// SuffixDecoding's speculation in three launches; suffix_kernel.h says why
// the occurrences' continuations are the trie's subtree, and why keeping
// each level's best nodes loses none that the host's queue pops.
#include "drafters/suffix_tree/cuda/suffix_kernel.h"

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <type_traits>

namespace speclab {
namespace suffix_decoding {
namespace {

constexpr int kThreads = 256;
constexpr int kTexts = 2;  // the sequence's, the earlier outputs'
constexpr int kBlocks = kTexts * kKernelMaxDepth;
constexpr int kTable = 2048;    // (node, token) groups a round holds
constexpr int kProbes = 64;     // slots a key probes before it waits for the next round
constexpr int kCounted = 128;   // an occurrence's state: counted in this round's table
constexpr int kDropped = -1;    // ... its continuation left the kept nodes or ended
constexpr int64_t kFree = -1;

// The workspace, carved from one buffer (SpeculationWorkspaceBytes).
struct Workspace {
  int32_t* lengths;      // [kTexts][stride]: tokens each position ends in common with the sequence
  int32_t* occurrences;  // [kBlocks][stride]: a block's positions ending its match
  int32_t* states;       // [kBlocks][stride]: their node at the level before (or kDropped)
  int32_t* level_count;  // [kBlocks][max_tokens levels][max_tokens]: each level's kept nodes
  int32_t* level_parent;
  int64_t* level_token;
  double* scores;        // [kBlocks]: a block's draft's score
  int32_t* drafted;      // [kBlocks]: its tokens; -1: no node of that match
  int64_t* draft_tokens;  // [kBlocks][max_tokens]: its tokens in the order popped
  int32_t* draft_parents;
};

int64_t Align(int64_t bytes) { return (bytes + 15) / 16 * 16; }

// Carves `base` (null: only counts) and returns the bytes used.
int64_t Carve(char* base, int64_t stride, int max_tokens, Workspace* w) {
  int64_t used = 0;
  auto take = [&](auto** field, int64_t count) {
    using T = std::remove_pointer_t<std::remove_reference_t<decltype(*field)>>;
    if (base != nullptr) *field = reinterpret_cast<T*>(base + used);
    used += Align(count * static_cast<int64_t>(sizeof(T)));
  };
  const int64_t levels = static_cast<int64_t>(kBlocks) * max_tokens * max_tokens;
  take(&w->lengths, kTexts * stride);
  take(&w->occurrences, kBlocks * stride);
  take(&w->states, kBlocks * stride);
  take(&w->level_count, levels);
  take(&w->level_parent, levels);
  take(&w->level_token, levels);
  take(&w->scores, kBlocks);
  take(&w->drafted, kBlocks);
  take(&w->draft_tokens, static_cast<int64_t>(kBlocks) * max_tokens);
  take(&w->draft_parents, static_cast<int64_t>(kBlocks) * max_tokens);
  return used;
}

// One of the two texts: the sequence (context, then last_two) or the
// earlier outputs.
struct Text {
  const int64_t* context;
  const int64_t* last_two;
  int64_t s;
  const int64_t* tokens;  // null: the sequence
  int64_t size;
  __device__ int64_t At(int64_t i) const {
    if (tokens != nullptr) return tokens[i];
    return i < s ? context[i] : last_two[i - s];
  }
};

__device__ Text TextOf(const SuffixTexts& texts, int t) {
  const int64_t s = *texts.start;
  if (t == 0) return {texts.context, texts.last_two, s, nullptr, s + 2};
  return {texts.context, texts.last_two, s, texts.earlier, texts.earlier == nullptr ? 0 : texts.earlier_size};
}

// The longest match a position takes: min(max_depth, |sequence| - 1), as the
// host's speculation asks m < |context|.
__device__ int LongestMatch(const SuffixTexts& texts, const SpeculationShape& shape) {
  const int64_t n = *texts.start + 2;
  return static_cast<int>(n - 1 < shape.max_depth ? n - 1 : shape.max_depth);
}

// lengths[t][e]: how many tokens the text ends at e in common with the
// sequence's end (at most LongestMatch). A thread a position.
__global__ void __launch_bounds__(kThreads)
MatchLengths(SuffixTexts texts, SpeculationShape shape, Workspace w, int64_t stride) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int t = g < stride ? 0 : 1;
  const int64_t e = g - t * stride;
  const Text text = TextOf(texts, t);
  const Text sequence = TextOf(texts, 0);
  if (e >= text.size) return;
  const int longest = LongestMatch(texts, shape);
  int k = 0;
  while (k < longest && e - k >= 0 && text.At(e - k) == sequence.At(sequence.size - 1 - k)) ++k;
  w.lengths[t * stride + e] = k;
}

struct Kept {  // a level's nodes in best-first order
  int32_t count[kKernelMaxTokens], parent[kKernelMaxTokens], first[kKernelMaxTokens];
  int64_t token[kKernelMaxTokens];
};

// Whether node a pops before node b: the larger count, then the parent
// popped first, then the child the trie made first (its first occurrence).
__device__ bool PopsBefore(int32_t count_a, int32_t parent_a, int32_t first_a, int32_t count_b, int32_t parent_b,
                           int32_t first_b) {
  if (count_a != count_b) return count_a > count_b;
  if (parent_a != parent_b) return parent_a < parent_b;
  return first_a < first_b;
}

// Block (m - 1, t): the draft of the match of the sequence's last m tokens
// in text t, as SuffixTrie::Grow gives it.
__global__ void __launch_bounds__(kThreads)
GrowMatch(SuffixTexts texts, SpeculationShape shape, Workspace w, int64_t stride) {
  // The hash table while levels grow; then the kept levels' counts and
  // parents, which the queue reads over and over.
  __shared__ union {
    struct {
      int64_t keys[kTable];
      int32_t counts[kTable], firsts[kTable];
    } table;
    struct {
      int32_t count[kKernelMaxTokens * kKernelMaxTokens];
      int8_t parent[kKernelMaxTokens * kKernelMaxTokens];
    } levels;
  } pool;
  int64_t* const keys = pool.table.keys;
  int32_t* const counts = pool.table.counts;
  int32_t* const firsts = pool.table.firsts;
  __shared__ int16_t qualified[kTable];
  __shared__ Kept kept, next;
  __shared__ int occurrences_found, qualified_found, deferred, kept_size;
  __shared__ int level_size[kKernelMaxTokens];
  __shared__ int slot_level[kKernelMaxTokens + 1], slot_index[kKernelMaxTokens + 1], slot_pop[kKernelMaxTokens + 1],
      slot_next[kKernelMaxTokens + 1];

  const int m = blockIdx.x + 1, t = blockIdx.y, block = t * kKernelMaxDepth + blockIdx.x;
  const Text text = TextOf(texts, t);
  if (m > LongestMatch(texts, shape) || text.size == 0) {
    if (threadIdx.x == 0) w.drafted[block] = -1;
    return;
  }
  int32_t* occurrences = w.occurrences + block * stride;
  int32_t* states = w.states + block * stride;
  if (threadIdx.x == 0) occurrences_found = 0;
  __syncthreads();
  for (int64_t e = threadIdx.x; e < text.size; e += kThreads) {
    if (w.lengths[t * stride + e] >= m) {
      const int at = atomicAdd(&occurrences_found, 1);
      occurrences[at] = static_cast<int32_t>(e);
      states[at] = 0;  // under the match's node
    }
  }
  __syncthreads();
  const int found = occurrences_found;
  if (found == 0) {  // no node: the host's loop stops here
    if (threadIdx.x == 0) w.drafted[block] = -1;
    return;
  }
  const double matched = static_cast<double>(found);
  const int budget = shape.budgets[m];
  int depth_limit = shape.max_path < shape.max_depth - m ? shape.max_path : shape.max_depth - m;
  if (budget < depth_limit) depth_limit = budget;
  const int per_level = shape.tree ? budget : 1;
  const int T = shape.max_tokens;
  int32_t* level_count = w.level_count + static_cast<int64_t>(block) * T * T;
  int32_t* level_parent = w.level_parent + static_cast<int64_t>(block) * T * T;
  int64_t* level_token = w.level_token + static_cast<int64_t>(block) * T * T;

  int levels = 0;  // levels with kept nodes
  for (int d = 1; d <= depth_limit; ++d) {
    if (threadIdx.x == 0) kept_size = 0;
    bool more = true;
    while (more) {
      for (int i = threadIdx.x; i < kTable; i += kThreads) {
        keys[i] = kFree;
        counts[i] = 0;
        firsts[i] = INT_MAX;
      }
      if (threadIdx.x == 0) deferred = qualified_found = 0;
      __syncthreads();
      // Each occurrence still on a kept node joins its (node, next token)
      // group, unless the probes find no slot: then it waits for a round
      // with an empty table. A key's probes visit the same slots in the same
      // order and a claimed slot never changes, so all of a key's
      // occurrences join in one round.
      for (int i = threadIdx.x; i < found; i += kThreads) {
        const int state = states[i];
        if (state == kDropped || (state & kCounted)) continue;
        const int64_t at = static_cast<int64_t>(occurrences[i]) + d;
        const int64_t token = at < text.size ? text.At(at) : -1;
        if (token < 0) {  // the text or the output ended
          states[i] = kDropped;
          continue;
        }
        const int64_t key = token * kKernelMaxTokens + state;
        uint64_t h = static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ull;
        int slot = static_cast<int>(h >> 53) & (kTable - 1);
        bool joined = false;
        for (int probe = 0; probe < kProbes && !joined; ++probe, slot = (slot + 1) & (kTable - 1)) {
          const int64_t held = static_cast<int64_t>(atomicCAS(reinterpret_cast<unsigned long long*>(&keys[slot]),
                                                               static_cast<unsigned long long>(kFree),
                                                               static_cast<unsigned long long>(key)));
          if (held == kFree || held == key) {
            atomicAdd(&counts[slot], 1);
            atomicMin(&firsts[slot], occurrences[i]);
            states[i] = state | kCounted;
            joined = true;
          }
        }
        if (!joined) deferred = 1;
      }
      __syncthreads();
      // The round's groups likely enough join the level's best so far.
      for (int i = threadIdx.x; i < kTable; i += kThreads) {
        if (keys[i] != kFree && static_cast<double>(counts[i]) / matched >= shape.min_token_prob)
          qualified[atomicAdd(&qualified_found, 1)] = static_cast<int16_t>(i);
      }
      __syncthreads();
      const int old_size = kept_size, total = old_size + qualified_found;
      for (int c = threadIdx.x; c < total; c += kThreads) {
        int32_t cc, cp, cf;
        int64_t ct;
        if (c < old_size) {
          cc = kept.count[c], cp = kept.parent[c], cf = kept.first[c], ct = kept.token[c];
        } else {
          const int slot = qualified[c - old_size];
          cc = counts[slot], cp = static_cast<int32_t>(keys[slot] % kKernelMaxTokens), cf = firsts[slot];
          ct = keys[slot] / kKernelMaxTokens;
        }
        int rank = 0;  // keys differ, so ranks do
        for (int o = 0; o < total && rank < per_level; ++o) {
          if (o == c) continue;
          int32_t oc, op, of;
          if (o < old_size) {
            oc = kept.count[o], op = kept.parent[o], of = kept.first[o];
          } else {
            const int slot = qualified[o - old_size];
            oc = counts[slot], op = static_cast<int32_t>(keys[slot] % kKernelMaxTokens), of = firsts[slot];
          }
          rank += PopsBefore(oc, op, of, cc, cp, cf);
        }
        if (rank < per_level) {
          next.count[rank] = cc, next.parent[rank] = cp, next.first[rank] = cf, next.token[rank] = ct;
        }
      }
      __syncthreads();
      const int size = total < per_level ? total : per_level;
      for (int c = threadIdx.x; c < size; c += kThreads) {
        kept.count[c] = next.count[c], kept.parent[c] = next.parent[c], kept.first[c] = next.first[c];
        kept.token[c] = next.token[c];
      }
      more = deferred != 0;
      __syncthreads();
      if (threadIdx.x == 0) kept_size = size;
      __syncthreads();
    }
    const int size = kept_size;
    // Each occurrence moves to its kept node at this level, or drops out.
    for (int i = threadIdx.x; i < found; i += kThreads) {
      const int state = states[i];
      if (state == kDropped) continue;
      const int parent = state & ~kCounted;
      const int64_t token = text.At(static_cast<int64_t>(occurrences[i]) + d);
      int to = kDropped;
      for (int c = 0; c < size && to == kDropped; ++c)
        if (kept.parent[c] == parent && kept.token[c] == token) to = c;
      states[i] = to;
    }
    for (int c = threadIdx.x; c < size; c += kThreads) {
      level_count[(d - 1) * T + c] = kept.count[c];
      level_parent[(d - 1) * T + c] = kept.parent[c];
      level_token[(d - 1) * T + c] = kept.token[c];
    }
    if (threadIdx.x == 0) level_size[d - 1] = size;
    __syncthreads();
    if (size == 0) break;
    levels = d;
  }

  // The host's queue over the kept nodes: each popped node (and the match's
  // node, slot 0) offers its best child not yet popped; the largest count
  // pops, ties to the offer of the node popped first.
  for (int d = 0; d < levels; ++d) {
    for (int c = threadIdx.x; c < level_size[d]; c += kThreads) {
      pool.levels.count[d * T + c] = level_count[d * T + c];
      pool.levels.parent[d * T + c] = static_cast<int8_t>(level_parent[d * T + c]);
    }
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  const int32_t* const kept_count = pool.levels.count;
  const int8_t* const kept_parent = pool.levels.parent;
  int slots = 1, drafted = 0;
  slot_level[0] = 0, slot_index[0] = 0, slot_pop[0] = -1, slot_next[0] = 0;
  double score = 0;
  while (drafted < budget) {
    int best = -1, best_count = 0;
    for (int sl = 0; sl < slots; ++sl) {
      const int level = slot_level[sl];  // its children are on level + 1
      if (level >= levels) continue;
      int next_child = slot_next[sl];
      while (next_child < level_size[level] && kept_parent[level * T + next_child] != slot_index[sl]) ++next_child;
      slot_next[sl] = next_child;
      if (next_child < level_size[level] && kept_count[level * T + next_child] > best_count) {
        best = sl;
        best_count = kept_count[level * T + next_child];
      }
    }
    if (best < 0) break;
    const int level = slot_level[best], index = slot_next[best];
    const double probability = static_cast<double>(best_count) / matched;
    score += probability;
    w.draft_tokens[block * T + drafted] = level_token[level * T + index];
    w.draft_parents[block * T + drafted] = slot_pop[best];
    slot_next[best] = index + 1;
    slot_level[slots] = level + 1, slot_index[slots] = index, slot_pop[slots] = drafted, slot_next[slots] = 0;
    ++slots;
    ++drafted;
  }
  w.scores[block] = score;
  w.drafted[block] = drafted;
}

// Candidate rows [first_row, first_row + out.max_candidates): each node
// `block` drafted as its path, the root past it.
__device__ void WriteCandidates(const Workspace& w, int T, int block, int first_row, int64_t root,
                                const SpeculationOutput& out) {
  const int drafted = block < 0 ? 0 : w.drafted[block];
  const int64_t* tokens = w.draft_tokens + static_cast<int64_t>(block < 0 ? 0 : block) * T;
  const int32_t* parents = w.draft_parents + static_cast<int64_t>(block < 0 ? 0 : block) * T;
  for (int c = threadIdx.x; c < out.max_candidates; c += kThreads) {
    int64_t* row = out.candidates + static_cast<int64_t>(first_row + c) * out.path_tokens;
    int length = 0;
    if (c < drafted) {
      for (int node = c; node >= 0; node = parents[node]) ++length;
      int k = length;
      for (int node = c; node >= 0; node = parents[node]) row[--k] = tokens[node];
    }
    for (int k = length; k < out.path_tokens; ++k) row[k] = root;
    out.lengths[first_row + c] = length;
  }
}

// The root, then the path `block` drafted (a chain: popped in order), its
// last token repeated to chain_length.
__device__ void WriteChain(const Workspace& w, int T, int block, int64_t root, const SpeculationOutput& out) {
  const int drafted = block < 0 ? 0 : w.drafted[block];
  const int64_t* tokens = w.draft_tokens + static_cast<int64_t>(block < 0 ? 0 : block) * T;
  for (int k = threadIdx.x; k <= out.chain_length; k += kThreads) {
    const int j = k - 1;
    out.chain[k] = k == 0 || drafted == 0 ? root : tokens[j < drafted ? j : drafted - 1];
  }
}

// The best m of each text (the larger score, ties to the longer match, as
// the host's loop keeps it); then the better text (ties: the sequence's),
// or each, written as `out` asks.
__global__ void __launch_bounds__(kThreads)
ChooseDraft(SuffixTexts texts, SpeculationShape shape, Workspace w, SpeculationOutput out) {
  __shared__ int best_of[kTexts], chosen;
  __shared__ int drafted_by[kBlocks];
  __shared__ double score_of[kBlocks];
  const Text sequence = TextOf(texts, 0);
  const int64_t root = sequence.At(sequence.size - 1);
  for (int block = threadIdx.x; block < kBlocks; block += kThreads) {
    drafted_by[block] = block % kKernelMaxDepth < shape.max_depth ? w.drafted[block] : -1;
    score_of[block] = drafted_by[block] < 0 ? 0 : w.scores[block];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double best_score[kTexts] = {0, 0};
    for (int t = 0; t < kTexts; ++t) {
      best_of[t] = -1;
      for (int m = 1; m <= shape.max_depth; ++m) {
        const int block = t * kKernelMaxDepth + m - 1;
        if (drafted_by[block] < 0) break;
        if (score_of[block] >= best_score[t]) {
          best_of[t] = block;
          best_score[t] = score_of[block];
        }
      }
    }
    if (out.choice == TextChoice::kBetter) {
      chosen = best_of[1] >= 0 && (best_of[0] < 0 || best_score[1] > best_score[0]) ? best_of[1] : best_of[0];
    } else {  // the first text that drafts anything
      chosen = best_of[0] >= 0 && drafted_by[best_of[0]] > 0   ? best_of[0]
               : best_of[1] >= 0 && drafted_by[best_of[1]] > 0 ? best_of[1]
                                                                : -1;
      if (out.found != nullptr) out.found[0] = chosen >= 0;
    }
    if (out.seen != nullptr) {
      out.seen[0] = texts.last_two[0];
      out.seen[1] = texts.last_two[1];
      out.seen[2] = *texts.start;
    }
  }
  __syncthreads();
  const int T = shape.max_tokens;
  if (out.candidates != nullptr) {
    if (out.choice == TextChoice::kBetter) {
      WriteCandidates(w, T, chosen, 0, root, out);
    } else {
      for (int t = 0; t < kTexts; ++t) WriteCandidates(w, T, best_of[t], t * out.max_candidates, root, out);
    }
  }
  if (out.chain != nullptr) WriteChain(w, T, chosen, root, out);
}

}  // namespace

int64_t SpeculationWorkspaceBytes(int64_t stride, int max_tokens) {
  Workspace w;
  return Carve(nullptr, stride, max_tokens, &w);
}

int LaunchSuffixSpeculation(SuffixTexts texts, SpeculationShape shape, SpeculationOutput out, void* workspace,
                            int64_t stride, void* stream) {
  Workspace w;
  Carve(static_cast<char*>(workspace), stride, shape.max_tokens, &w);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int64_t positions = kTexts * stride;
  MatchLengths<<<static_cast<unsigned>((positions + kThreads - 1) / kThreads), kThreads, 0, s>>>(texts, shape, w,
                                                                                                 stride);
  GrowMatch<<<dim3(kKernelMaxDepth, kTexts), kThreads, 0, s>>>(texts, shape, w, stride);
  ChooseDraft<<<1, kThreads, 0, s>>>(texts, shape, w, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace suffix_decoding
}  // namespace speclab

// SentencePieceTokenizer: SentencePiece 0.1.97's encoder and decoder, ported.
//
// Every step below follows a function of sentencepiece 0.1.97 (named in its
// comment); the behaviour, tie-breaks and float arithmetic are upstream's, so
// that ids equal `spm_encode --output_format=id` (scripts/
// sentencepiece_reference.sh and sentencepiece_tokenizer_test.cc check that).
#include "framework/tokenizers/sentencepiece_tokenizer.h"

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "framework/tokenizers/proto/sentencepiece_model.pb.h"
#include "framework/core/status_macros.h"

namespace speclab {
namespace {

namespace spm = ::speclab::spm;

constexpr std::string_view kSpaceSymbol = "\xe2\x96\x81";         // U+2581 "▁"
constexpr std::string_view kReplacementChar = "\xef\xbf\xbd";     // U+FFFD
constexpr uint32_t kUnicodeError = 0xFFFD;
constexpr float kUnkPenalty = 10.0;  // unigram_model.cc

enum PieceType : uint8_t {
  kNormal = spm::ModelProto::SentencePiece::NORMAL,
  kUnknown = spm::ModelProto::SentencePiece::UNKNOWN,
  kControl = spm::ModelProto::SentencePiece::CONTROL,
  kUserDefined = spm::ModelProto::SentencePiece::USER_DEFINED,
  kUnused = spm::ModelProto::SentencePiece::UNUSED,
  kByte = spm::ModelProto::SentencePiece::BYTE,
};

struct StringViewHash {
  size_t operator()(std::string_view s) const {
    return absl::Hash<absl::string_view>{}(absl::string_view(s.data(), s.size()));
  }
};
// Debian's Abseil has its own absl::string_view, which StrCat wants.
inline absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

template <typename V>
using StringViewMap = absl::flat_hash_map<std::string_view, V, StringViewHash>;

// --- util.h / util.cc -------------------------------------------------------

// string_util::OneCharLen: the length of the UTF-8 character from its lead
// byte alone (1 for stray continuation bytes).
inline size_t OneCharLen(const char* s) {
  return "\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[(*s & 0xFF) >> 4];
}

inline bool IsTrailByte(char c) { return (c & 0xC0) == 0x80; }

inline bool IsValidCodepoint(uint32_t c) {
  return c < 0xD800 || (c >= 0xE000 && c <= 0x10FFFF);
}

// string_util::DecodeUTF8.
uint32_t DecodeUtf8(const char* begin, const char* end, size_t* mblen) {
  const size_t len = end - begin;
  if (static_cast<unsigned char>(begin[0]) < 0x80) {
    *mblen = 1;
    return static_cast<unsigned char>(begin[0]);
  } else if (len >= 2 && (begin[0] & 0xE0) == 0xC0) {
    const uint32_t cp = (((begin[0] & 0x1F) << 6) | ((begin[1] & 0x3F)));
    if (IsTrailByte(begin[1]) && cp >= 0x0080 && IsValidCodepoint(cp)) {
      *mblen = 2;
      return cp;
    }
  } else if (len >= 3 && (begin[0] & 0xF0) == 0xE0) {
    const uint32_t cp = (((begin[0] & 0x0F) << 12) | ((begin[1] & 0x3F) << 6) |
                         ((begin[2] & 0x3F)));
    if (IsTrailByte(begin[1]) && IsTrailByte(begin[2]) && cp >= 0x0800 &&
        IsValidCodepoint(cp)) {
      *mblen = 3;
      return cp;
    }
  } else if (len >= 4 && (begin[0] & 0xf8) == 0xF0) {
    const uint32_t cp = (((begin[0] & 0x07) << 18) | ((begin[1] & 0x3F) << 12) |
                         ((begin[2] & 0x3F) << 6) | ((begin[3] & 0x3F)));
    if (IsTrailByte(begin[1]) && IsTrailByte(begin[2]) && IsTrailByte(begin[3]) &&
        cp >= 0x10000 && IsValidCodepoint(cp)) {
      *mblen = 4;
      return cp;
    }
  }
  *mblen = 1;
  return kUnicodeError;
}

// string_util::IsValidDecodeUTF8 (a literal U+FFFD is valid).
inline bool IsValidDecodeUtf8(std::string_view input, size_t* mblen) {
  const uint32_t c = DecodeUtf8(input.data(), input.data() + input.size(), mblen);
  return c != kUnicodeError || *mblen == 3;
}

inline bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// model_interface.cc ByteToPiece / PieceToByte.
std::string ByteToPiece(unsigned char c) { return absl::StrFormat("<0x%02X>", c); }

int PieceToByte(std::string_view piece) {
  static const auto* const kMap = [] {
    auto* m = new StringViewMap<int>();
    static std::string names[256];
    for (int i = 0; i < 256; ++i) {
      names[i] = ByteToPiece(static_cast<unsigned char>(i));
      (*m)[names[i]] = i;
    }
    return m;
  }();
  const auto it = kMap->find(piece);
  return it == kMap->end() ? -1 : it->second;
}

// --- third_party/darts_clone: the read-only half of Darts::DoubleArray -------

class DoubleArray {
 public:
  DoubleArray() = default;
  explicit DoubleArray(std::vector<uint32_t> units) : units_(std::move(units)) {}

  bool empty() const { return units_.empty(); }

  // commonPrefixSearch reduced to its longest hit: the length of the longest
  // key that is a prefix of `key` (0 if none), and its value.
  size_t LongestPrefix(std::string_view key, uint32_t* value) const {
    size_t longest = 0;
    if (units_.empty()) return 0;
    size_t node_pos = Offset(units_[0]);
    for (size_t i = 0; i < key.size(); ++i) {
      const uint32_t label = static_cast<unsigned char>(key[i]);
      node_pos ^= label;
      if (node_pos >= units_.size()) return longest;
      const uint32_t unit = units_[node_pos];
      if (Label(unit) != label) return longest;
      node_pos ^= Offset(unit);
      if (HasLeaf(unit)) {
        if (node_pos >= units_.size()) return longest;
        longest = i + 1;
        *value = Value(units_[node_pos]);
      }
    }
    return longest;
  }

 private:
  static bool HasLeaf(uint32_t unit) { return ((unit >> 8) & 1) == 1; }
  static uint32_t Value(uint32_t unit) { return unit & ((1U << 31) - 1); }
  static uint32_t Label(uint32_t unit) { return unit & ((1U << 31) | 0xFF); }
  static size_t Offset(uint32_t unit) {
    return (unit >> 10) << ((unit & (1U << 9)) >> 6);
  }

  std::vector<uint32_t> units_;
};

// --- normalizer.cc PrefixMatcher: the user-defined symbols ------------------

class PrefixMatcher {
 public:
  PrefixMatcher() = default;
  explicit PrefixMatcher(const std::vector<std::string_view>& symbols) {
    for (std::string_view s : symbols) {
      // Darts keys are C strings: a symbol ends at its first NUL.
      s = s.substr(0, std::min(s.size(), s.find('\0')));
      if (s.empty()) continue;
      symbols_.insert(s);
      first_bytes_[static_cast<unsigned char>(s[0])] = true;
      if (std::find(lengths_.begin(), lengths_.end(), s.size()) == lengths_.end()) {
        lengths_.push_back(s.size());
      }
    }
    std::sort(lengths_.rbegin(), lengths_.rend());
  }

  bool empty() const { return symbols_.empty(); }

  // PrefixMatcher::PrefixMatch: the longest user-defined symbol at the start
  // of `w` (`*found` = true), else one UTF-8 character.
  size_t PrefixMatch(std::string_view w, bool* found) const {
    if (!symbols_.empty() && first_bytes_[static_cast<unsigned char>(w[0])]) {
      for (const size_t length : lengths_) {
        if (length <= w.size() && symbols_.contains(w.substr(0, length))) {
          *found = true;
          return length;
        }
      }
    }
    *found = false;
    return std::min(w.size(), OneCharLen(w.data()));
  }

 private:
  absl::flat_hash_set<std::string_view, StringViewHash> symbols_;
  std::vector<size_t> lengths_;  // distinct lengths, longest first
  bool first_bytes_[256] = {};
};

// --- normalizer.cc Normalizer ----------------------------------------------

class Normalizer {
 public:
  struct Options {
    bool add_dummy_prefix = true;
    bool remove_extra_whitespaces = true;
    bool escape_whitespaces = true;
    bool treat_whitespace_as_suffix = false;
  };

  Normalizer() = default;
  Normalizer(Options options, DoubleArray trie, std::string normalized,
             const PrefixMatcher* matcher)
      : options_(options),
        trie_(std::move(trie)),
        normalized_(std::move(normalized)),
        matcher_(matcher != nullptr && !matcher->empty() ? matcher : nullptr) {}

  // Normalizer::Normalize without the alignment.
  void Normalize(std::string_view input, std::string* normalized) const {
    normalized->clear();
    if (input.empty()) return;

    // Ignores heading space.
    if (options_.remove_extra_whitespaces) {
      while (!input.empty()) {
        const auto p = NormalizePrefix(input);
        if (p.first != " ") break;
        input.remove_prefix(p.second);
      }
    }
    if (input.empty()) return;

    normalized->reserve(input.size() * 3);
    const bool escape = options_.escape_whitespaces;
    auto add_ws = [&] {
      if (escape) {
        normalized->append(kSpaceSymbol);
      } else {
        normalized->push_back(' ');
      }
    };
    if (!options_.treat_whitespace_as_suffix && options_.add_dummy_prefix) add_ws();

    bool is_prev_space = options_.remove_extra_whitespaces;
    while (!input.empty()) {
      const auto p = NormalizePrefix(input);
      std::string_view sp = p.first;
      // Removes heading spaces of this piece after a whitespace.
      while (is_prev_space && !sp.empty() && sp[0] == ' ') sp.remove_prefix(1);
      if (!sp.empty()) {
        for (const char c : sp) {
          if (escape && c == ' ') {
            normalized->append(kSpaceSymbol);
          } else {
            normalized->push_back(c);
          }
        }
        is_prev_space = sp.back() == ' ';
      }
      input.remove_prefix(p.second);
      if (!options_.remove_extra_whitespaces) is_prev_space = false;
    }

    // Ignores tailing space.
    if (options_.remove_extra_whitespaces) {
      const std::string_view space = escape ? kSpaceSymbol : std::string_view(" ");
      while (EndsWith(*normalized, space)) {
        normalized->resize(normalized->size() - space.size());
      }
    }
    if (options_.treat_whitespace_as_suffix && options_.add_dummy_prefix) add_ws();
  }

 private:
  // Normalizer::NormalizePrefix: the normalized form of the first character
  // (or rule match) of `input`, and how many bytes of `input` it consumed.
  std::pair<std::string_view, size_t> NormalizePrefix(std::string_view input) const {
    if (matcher_ != nullptr) {
      bool found = false;
      const size_t mblen = matcher_->PrefixMatch(input, &found);
      if (found) return {input.substr(0, mblen), mblen};
    }
    if (!trie_.empty()) {
      uint32_t value = 0;
      const size_t length = trie_.LongestPrefix(input, &value);
      if (length > 0) {
        // The replacement is the NUL-terminated string at `value`.
        if (value >= normalized_.size()) return {std::string_view(), length};
        const size_t end = normalized_.find('\0', value);
        return {std::string_view(normalized_).substr(
                    value, (end == std::string::npos ? normalized_.size() : end) - value),
                length};
      }
    }
    if (static_cast<unsigned char>(input[0]) < 0x80) return {input.substr(0, 1), 1};
    size_t length = 0;
    if (!IsValidDecodeUtf8(input, &length)) {
      // A malformed byte becomes U+FFFD, consuming one byte.
      return {kReplacementChar, 1};
    }
    return {input.substr(0, length), length};
  }

  Options options_;
  DoubleArray trie_;
  std::string normalized_;
  const PrefixMatcher* matcher_ = nullptr;
};

// normalizer.cc DecodePrecompiledCharsMap: <trie size (4 bytes, little
// endian)><double array><NUL-separated replacement strings>.
absl::Status DecodeCharsMap(std::string_view blob, DoubleArray* trie,
                            std::string* normalized) {
  uint32_t trie_size = 0;
  if (blob.size() <= sizeof(trie_size)) {
    return absl::InvalidArgumentError("its precompiled_charsmap is broken (too short)");
  }
  const auto* b = reinterpret_cast<const unsigned char*>(blob.data());
  trie_size = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  if (trie_size >= blob.size()) {
    return absl::InvalidArgumentError(
        "its precompiled_charsmap is broken (trie larger than the blob)");
  }
  blob.remove_prefix(sizeof(trie_size));
  std::vector<uint32_t> units(trie_size / 4);
  for (size_t i = 0; i < units.size(); ++i) {
    const auto* u = reinterpret_cast<const unsigned char*>(blob.data()) + 4 * i;
    units[i] = u[0] | (u[1] << 8) | (u[2] << 16) | (static_cast<uint32_t>(u[3]) << 24);
  }
  blob.remove_prefix(trie_size);
  *trie = DoubleArray(std::move(units));
  normalized->assign(blob.data(), blob.size());
  return absl::OkStatus();
}

}  // namespace

// --- The model --------------------------------------------------------------

struct SentencePieceTokenizer::Model {
  spm::TrainerSpec::ModelType model_type = spm::TrainerSpec::UNIGRAM;
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<uint8_t> types;  // PieceType
  // ModelInterface::pieces_: NORMAL, USER_DEFINED and UNUSED pieces.
  StringViewMap<int32_t> normal;
  // ModelInterface::PieceToId: CONTROL, UNKNOWN and BYTE pieces first, then
  // the normal ones.
  StringViewMap<int32_t> piece_to_id;
  int32_t unk_id = -1;  // the UNKNOWN piece (ModelInterface::unk_id_)
  bool byte_fallback = false;
  bool has_unused = false;
  int32_t byte_to_id[256] = {};
  std::vector<int16_t> id_to_byte;  // -1: not a byte piece
  PrefixMatcher matcher;
  Normalizer normalizer;

  // BPE: characters that occur in a mergeable piece of two or more
  // characters. A character outside this set is never merged with anything,
  // so the text splits around it into independent BPE runs (see EncodeBpe).
  std::vector<bool> merged_chars;
  bool split_at_lone_chars = false;

  // Unigram: every prefix of a normal piece -> its id, or -1 if the prefix is
  // not a piece itself (the trie walk of Model::EncodeOptimized).
  StringViewMap<int32_t> prefixes;
  float min_score = FLT_MAX;
  float max_score = FLT_MIN;

  // Decode.
  std::vector<int32_t> decode_id;  // PieceToId(IdToPiece(id))
  std::string unk_surface;
  bool strip_bos_ws = false;  // add_dummy_prefix || remove_extra_whitespaces
  bool remove_extra_whitespaces = false;

  int32_t PieceToId(std::string_view piece) const {
    const auto it = piece_to_id.find(piece);
    return it == piece_to_id.end() ? unk_id : it->second;
  }
  bool Is(int32_t id, PieceType type) const { return types[id] == type; }
};

namespace {

using Model = SentencePieceTokenizer::Model;

// SentencePieceProcessor::PopulateSentencePieceText, ids (and pieces) only:
// unknown pieces become byte pieces with byte fallback, or else runs of them
// merge into one unknown piece.
class Output {
 public:
  Output(const Model& model, std::vector<int32_t>* ids, std::vector<std::string>* pieces)
      : model_(model), ids_(ids), pieces_(pieces) {}

  void Add(std::string_view w, int32_t id) {
    const bool is_unk = model_.Is(id, kUnknown);
    if (model_.Is(id, kControl)) {
      // Upstream gives control pieces no surface and then fails its
      // "all normalized characters are consumed" check.
      if (error_.empty()) {
        error_ = absl::StrCat("the text holds control piece '", Av(w), "' (id ", id, ")");
      }
    } else if (is_unk && model_.byte_fallback) {
      for (const char c : w) {
        const auto b = static_cast<unsigned char>(c);
        ids_->push_back(model_.byte_to_id[b]);
        if (pieces_ != nullptr) pieces_->push_back(ByteToPiece(b));
      }
    } else if (is_prev_unk_ && is_unk) {
      if (pieces_ != nullptr) pieces_->back().append(w);
    } else {
      ids_->push_back(id);
      if (pieces_ != nullptr) pieces_->emplace_back(w);
    }
    is_prev_unk_ = is_unk;
  }

  const std::string& error() const { return error_; }

 private:
  const Model& model_;
  std::vector<int32_t>* ids_;
  std::vector<std::string>* pieces_;
  bool is_prev_unk_ = false;
  std::string error_;
};

// bpe_model.cc Model::SampleEncode with alpha = 0.
class BpeEncoder {
 public:
  BpeEncoder(const Model& model, std::string_view normalized, Output* out)
      : model_(model), text_(normalized), out_(out) {}

  void Run() {
    if (text_.empty()) return;
    size_t pos = 0;
    while (pos < text_.size()) {
      bool freeze = false;
      const size_t mblen = model_.matcher.PrefixMatch(text_.substr(pos), &freeze);
      if (model_.split_at_lone_chars && IsLone(pos, mblen, freeze)) {
        // Nothing merges across this symbol: finish the run before it, and
        // the symbol is a piece of its own.
        RunMerges();
        Emit(text_.substr(pos, mblen));
      } else {
        symbols_.push_back(Symbol{-1, -1, static_cast<uint32_t>(pos),
                                  static_cast<uint32_t>(mblen), freeze});
      }
      pos += mblen;
    }
    RunMerges();
  }

 private:
  struct Symbol {
    int32_t prev;  // -1 for the first symbol of the run
    int32_t next;  // -1 for the last
    uint32_t begin;
    uint32_t size;  // 0 once merged into its left neighbour
    bool freeze;    // user-defined symbols are never merged
  };
  struct SymbolPair {
    float score;
    int32_t left;
    int32_t right;
    uint32_t size;
  };
  // SymbolPairComparator: the highest score first, then the leftmost.
  struct Lower {
    bool operator()(const SymbolPair& h1, const SymbolPair& h2) const {
      return h1.score < h2.score || (h1.score == h2.score && h1.left > h2.left);
    }
  };

  bool IsLone(size_t pos, size_t mblen, bool freeze) const {
    if (freeze) return true;
    size_t length = 0;
    const uint32_t c = DecodeUtf8(text_.data() + pos, text_.data() + text_.size(), &length);
    if (length != mblen || (c == kUnicodeError && length != 3)) return false;
    return !model_.merged_chars[c];
  }

  std::string_view Piece(const Symbol& s) const { return text_.substr(s.begin, s.size); }

  void MaybeAddNewSymbolPair(int32_t left, int32_t right) {
    if (left == -1 || right == -1 || symbols_[left].freeze || symbols_[right].freeze) {
      return;
    }
    const std::string_view piece =
        text_.substr(symbols_[left].begin, symbols_[left].size + symbols_[right].size);
    const auto it = model_.normal.find(piece);
    if (it == model_.normal.end()) return;
    agenda_.push_back(SymbolPair{model_.scores[it->second], left, right,
                                 static_cast<uint32_t>(piece.size())});
    std::push_heap(agenda_.begin(), agenda_.end(), Lower());
    if (model_.Is(it->second, kUnused)) {
      rev_merge_[piece] = {Piece(symbols_[left]), Piece(symbols_[right])};
    }
  }

  // The BPE merges over `symbols_`, then their pieces to `out_`.
  void RunMerges() {
    if (symbols_.empty()) return;
    const int32_t n = static_cast<int32_t>(symbols_.size());
    for (int32_t i = 0; i < n; ++i) {
      symbols_[i].prev = i - 1;
      symbols_[i].next = i + 1 < n ? i + 1 : -1;
    }
    agenda_.clear();
    for (int32_t i = 1; i < n; ++i) MaybeAddNewSymbolPair(i - 1, i);

    while (!agenda_.empty()) {
      std::pop_heap(agenda_.begin(), agenda_.end(), Lower());
      const SymbolPair top = agenda_.back();
      agenda_.pop_back();
      Symbol& left = symbols_[top.left];
      Symbol& right = symbols_[top.right];
      // `top` is no longer available.
      if (left.size == 0 || right.size == 0 || left.size + right.size != top.size) {
        continue;
      }
      left.size += right.size;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = top.left;
      right.size = 0;
      MaybeAddNewSymbolPair(left.prev, top.left);
      MaybeAddNewSymbolPair(top.left, symbols_[top.left].next);
    }

    for (int32_t index = 0; index != -1; index = symbols_[index].next) {
      Emit(Piece(symbols_[index]));
    }
    symbols_.clear();
  }

  // The `resegment` lambda: UNUSED pieces split back into the pair that made
  // them (`rev_merge` keeps the last such pair seen, as upstream's does).
  void Emit(std::string_view w) {
    const int32_t id = model_.PieceToId(w);
    if (!model_.has_unused || !model_.Is(id, kUnused)) {
      out_->Add(w, id);
      return;
    }
    const auto p = rev_merge_.find(w);
    if (p == rev_merge_.end()) {
      out_->Add(w, id);
      return;
    }
    const auto [first, second] = p->second;
    Emit(first);
    Emit(second);
  }

  const Model& model_;
  const std::string_view text_;
  Output* out_;
  std::vector<Symbol> symbols_;
  std::vector<SymbolPair> agenda_;
  StringViewMap<std::pair<std::string_view, std::string_view>> rev_merge_;
};

// unigram_model.cc Model::EncodeOptimized (the default encoder of 0.1.97),
// types and float/double arithmetic included.
void EncodeUnigram(const Model& model, std::string_view normalized, Output* out) {
  if (normalized.empty()) return;
  struct BestPathNode {
    int id = -1;
    float best_path_score = 0;
    int starts_at = -1;
  };
  const int size = static_cast<int>(normalized.size());
  const float unk_score = model.min_score - kUnkPenalty;
  std::vector<BestPathNode> best_path_ends_at(size + 1);
  int starts_at = 0;
  while (starts_at < size) {
    const auto best_path_score_till_here = best_path_ends_at[starts_at].best_path_score;
    bool has_single_node = false;
    const int mblen =
        std::min<int>(OneCharLen(normalized.data() + starts_at), size - starts_at);
    for (std::size_t key_pos = starts_at + 1; key_pos <= static_cast<size_t>(size);
         ++key_pos) {
      const auto it = model.prefixes.find(normalized.substr(starts_at, key_pos - starts_at));
      if (it == model.prefixes.end()) break;
      const int ret = it->second;
      if (ret < 0 || model.Is(ret, kUnused)) continue;
      auto& target_node = best_path_ends_at[key_pos];
      const auto length = (key_pos - starts_at);
      // User defined symbol receives extra bonus to always be selected.
      const auto score = model.Is(ret, kUserDefined)
                             ? (length * model.max_score - 0.1)
                             : model.scores[ret];
      const auto candidate_best_path_score = score + best_path_score_till_here;
      if (target_node.starts_at == -1 ||
          candidate_best_path_score > target_node.best_path_score) {
        target_node.best_path_score = candidate_best_path_score;
        target_node.starts_at = starts_at;
        target_node.id = ret;
      }
      if (!has_single_node && length == static_cast<size_t>(mblen)) {
        has_single_node = true;
      }
    }
    if (!has_single_node) {
      auto& target_node = best_path_ends_at[starts_at + mblen];
      const auto candidate_best_path_score = unk_score + best_path_score_till_here;
      if (target_node.starts_at == -1 ||
          candidate_best_path_score > target_node.best_path_score) {
        target_node.best_path_score = candidate_best_path_score;
        target_node.starts_at = starts_at;
        target_node.id = model.unk_id;
      }
    }
    starts_at += mblen;
  }
  std::vector<std::pair<std::string_view, int>> results;
  int ends_at = size;
  while (ends_at > 0) {
    const auto& node = best_path_ends_at[ends_at];
    results.emplace_back(normalized.substr(node.starts_at, ends_at - node.starts_at),
                         node.id);
    ends_at = node.starts_at;
  }
  for (auto it = results.rbegin(); it != results.rend(); ++it) out->Add(it->first, it->second);
}

// word_model.cc: SplitIntoWords(normalized) (a word starts at every "▁").
void EncodeWords(const Model& model, std::string_view normalized, Output* out) {
  size_t begin = 0;
  size_t pos = 0;
  while (pos < normalized.size()) {
    const size_t mblen = std::min(OneCharLen(normalized.data() + pos), normalized.size() - pos);
    if (pos > 0 && normalized.substr(pos, mblen) == kSpaceSymbol) {
      const std::string_view w = normalized.substr(begin, pos - begin);
      out->Add(w, model.PieceToId(w));
      begin = pos;
    }
    pos += mblen;
  }
  if (pos > begin) {
    const std::string_view w = normalized.substr(begin, pos - begin);
    out->Add(w, model.PieceToId(w));
  }
}

// char_model.cc.
void EncodeChars(const Model& model, std::string_view normalized, Output* out) {
  while (!normalized.empty()) {
    bool found = false;
    const size_t mblen = model.matcher.PrefixMatch(normalized, &found);
    const std::string_view w = normalized.substr(0, mblen);
    out->Add(w, model.PieceToId(w));
    normalized.remove_prefix(mblen);
  }
}

// SentencePieceProcessor::Encode (without the alignment).
std::string EncodeInto(const Model& model, std::string_view text, std::vector<int32_t>* ids,
                       std::vector<std::string>* pieces) {
  std::string normalized;
  model.normalizer.Normalize(text, &normalized);
  ids->reserve(normalized.size() / 3 + 1);
  Output out(model, ids, pieces);
  switch (model.model_type) {
    case spm::TrainerSpec::BPE:
      BpeEncoder(model, normalized, &out).Run();
      break;
    case spm::TrainerSpec::UNIGRAM:
      EncodeUnigram(model, normalized, &out);
      break;
    case spm::TrainerSpec::WORD:
      EncodeWords(model, normalized, &out);
      break;
    case spm::TrainerSpec::CHAR:
      EncodeChars(model, normalized, &out);
      break;
  }
  return out.error();
}

absl::StatusOr<std::string> ReadModelFile(const std::string& path) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) {
    return absl::NotFoundError(absl::StrCat("SentencePiece model not found: '", path, "'"));
  }
  if (!std::filesystem::is_regular_file(status)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SentencePiece model is not a regular file: '", path, "'"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  if (!in.good() && !in.eof()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read SentencePiece model '", path, "'"));
  }
  return std::move(contents).str();
}

// The model's own checks (ModelInterface::InitializePieces, the model
// constructors, Normalizer::Init) and speclab's copy of what Encode and
// Decode need. Errors are the message after "SentencePiece model 'path' ".
absl::Status BuildModel(const spm::ModelProto& proto, Model* model) {
  const spm::TrainerSpec& trainer = proto.trainer_spec();
  const spm::NormalizerSpec& norm = proto.normalizer_spec();
  const int n = proto.pieces_size();
  model->model_type = trainer.model_type();
  model->byte_fallback = trainer.byte_fallback();
  model->pieces.reserve(n);
  model->scores.reserve(n);
  model->types.reserve(n);
  for (const auto& sp : proto.pieces()) {
    model->pieces.push_back(sp.piece());
    model->scores.push_back(sp.score());
    model->types.push_back(static_cast<uint8_t>(sp.type()));
  }

  StringViewMap<int32_t> reserved;
  std::vector<std::string_view> user_defined;
  bool byte_found[256] = {};
  model->id_to_byte.assign(n, -1);
  for (int32_t i = 0; i < n; ++i) {
    const std::string_view piece = model->pieces[i];
    const uint8_t type = model->types[i];
    if (piece.empty()) return absl::InvalidArgumentError(absl::StrCat("has an empty piece (id ", i, ")"));
    const bool is_normal = type == kNormal || type == kUserDefined || type == kUnused;
    if (!(is_normal ? model->normal : reserved).emplace(piece, i).second) {
      return absl::InvalidArgumentError(absl::StrCat("defines piece '", Av(piece), "' twice"));
    }
    if (type == kUserDefined) user_defined.push_back(piece);
    if (type == kUnused) model->has_unused = true;
    if (type == kUnknown) {
      if (model->unk_id >= 0) return absl::InvalidArgumentError("defines <unk> twice");
      model->unk_id = i;
    }
    if (type == kByte) {
      if (!trainer.byte_fallback()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "has byte piece '", Av(piece), "' although byte_fallback is false"));
      }
      const int byte = PieceToByte(piece);
      if (byte < 0) {
        return absl::InvalidArgumentError(absl::StrCat("has invalid byte piece '", Av(piece), "'"));
      }
      byte_found[byte] = true;
      model->id_to_byte[i] = static_cast<int16_t>(byte);
    }
  }
  if (model->unk_id == -1) return absl::InvalidArgumentError("defines no <unk> piece");
  if (trainer.byte_fallback() &&
      std::find(std::begin(byte_found), std::end(byte_found), false) != std::end(byte_found)) {
    return absl::InvalidArgumentError("has byte_fallback but not all 256 byte pieces");
  }
  model->piece_to_id = model->normal;
  for (const auto& [piece, id] : reserved) model->piece_to_id[piece] = id;
  for (int b = 0; b < 256; ++b) {
    model->byte_to_id[b] = model->PieceToId(ByteToPiece(static_cast<unsigned char>(b)));
  }
  model->matcher = PrefixMatcher(user_defined);

  // The normalizer: what it does is all in its precompiled charsmap (the
  // name is only a label), plus the three flags.
  DoubleArray trie;
  std::string replacements;
  if (!norm.precompiled_charsmap().empty()) {
    const absl::Status decoded = DecodeCharsMap(norm.precompiled_charsmap(), &trie, &replacements);
    if (!decoded.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("normalizer '", norm.name(), "': ", decoded.message()));
    }
  }
  Normalizer::Options options;
  options.add_dummy_prefix = norm.add_dummy_prefix();
  options.remove_extra_whitespaces = norm.remove_extra_whitespaces();
  options.escape_whitespaces = norm.escape_whitespaces();
  options.treat_whitespace_as_suffix = trainer.treat_whitespace_as_suffix();
  model->normalizer = Normalizer(options, std::move(trie), std::move(replacements), &model->matcher);
  if (proto.has_denormalizer_spec() &&
      !proto.denormalizer_spec().precompiled_charsmap().empty()) {
    return absl::UnimplementedError(absl::StrCat(
        "has a denormalizer ('", proto.denormalizer_spec().name(),
        "', spm_train --denormalization_rule_tsv), which speclab does not support"));
  }

  switch (model->model_type) {
    case spm::TrainerSpec::BPE: {
      // Characters of mergeable pieces of two or more characters. A piece
      // that is not valid UTF-8 turns the shortcut off.
      model->merged_chars.assign(0x110000, false);
      bool valid = true;
      for (const auto& [piece, id] : model->normal) {
        if (std::min(piece.size(), OneCharLen(piece.data())) == piece.size()) continue;
        for (size_t pos = 0; pos < piece.size();) {
          size_t length = 0;
          const uint32_t c = DecodeUtf8(piece.data() + pos, piece.data() + piece.size(), &length);
          if (length != std::min(piece.size() - pos, OneCharLen(piece.data() + pos)) ||
              (c == kUnicodeError && length != 3)) {
            valid = false;
            break;
          }
          model->merged_chars[c] = true;
          pos += length;
        }
      }
      // With UNUSED pieces, `rev_merge` depends on the order of every pair
      // of the text: then BPE runs over the whole text, as upstream's does.
      model->split_at_lone_chars = valid && !model->has_unused;
      break;
    }
    case spm::TrainerSpec::UNIGRAM: {
      for (int32_t i = 0; i < n; ++i) {
        if (model->types[i] == kNormal) {
          model->min_score = std::min(model->min_score, model->scores[i]);
          model->max_score = std::max(model->max_score, model->scores[i]);
        }
      }
      if (model->normal.empty()) return absl::InvalidArgumentError("has no normal pieces");
      // Darts keys are C strings: a piece ends at its first NUL.
      for (const auto& [piece, id] : model->normal) {
        const std::string_view key = piece.substr(0, std::min(piece.size(), piece.find('\0')));
        for (size_t length = 1; length < key.size(); ++length) {
          model->prefixes.try_emplace(key.substr(0, length), -1);
        }
        if (!key.empty()) model->prefixes[key] = id;
      }
      break;
    }
    case spm::TrainerSpec::WORD:
    case spm::TrainerSpec::CHAR:
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("has unknown model_type ", static_cast<int>(model->model_type)));
  }

  // Decode.
  model->decode_id.resize(n);
  for (int32_t i = 0; i < n; ++i) model->decode_id[i] = model->PieceToId(model->pieces[i]);
  model->unk_surface = trainer.unk_surface().c_str();
  model->strip_bos_ws = norm.add_dummy_prefix() || norm.remove_extra_whitespaces();
  model->remove_extra_whitespaces = norm.remove_extra_whitespaces();
  return absl::OkStatus();
}

// ModelInterface::unk_piece() etc.: the trainer's piece, or the default if empty.
std::string_view NamedPiece(const std::string& piece, std::string_view fallback) {
  const std::string_view name = piece.c_str();
  return name.empty() ? fallback : name;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>>
SentencePieceTokenizer::Load(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string serialized, ReadModelFile(path));
  spm::ModelProto proto;
  // Upstream accepts any ModelProto; every model spm_train (or a converter)
  // writes has pieces and a trainer_spec, and one without them is a truncated
  // file or another format.
  if (serialized.empty() || !proto.ParseFromString(serialized) || proto.pieces_size() == 0 ||
      !proto.has_trainer_spec()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' is not a SentencePiece model (",
        serialized.empty() ? "empty file"
                           : "not a ModelProto with pieces and a trainer_spec; truncated?",
        ")"));
  }
  auto model = std::make_unique<Model>();
  const absl::Status built = BuildModel(proto, model.get());
  if (!built.ok()) {
    return absl::Status(built.code(),
                        absl::StrCat("SentencePiece model '", path, "' ", built.message()));
  }

  // SentencePieceProcessor::Load: the model's self-test.
  for (const auto& sample : proto.self_test_data().samples()) {
    std::vector<int32_t> ids;
    std::vector<std::string> pieces;
    const std::string error = EncodeInto(*model, sample.input(), &ids, &pieces);
    std::string got = absl::StrJoin(pieces, " ");
    if (!error.empty() || got != sample.expected()) {
      return absl::InternalError(absl::StrCat(
          "SentencePiece model '", path, "' fails its self-test: '", sample.input(),
          "' encodes to '", got, "', expected '", sample.expected(), "'", error));
    }
  }

  auto tokenizer = std::unique_ptr<SentencePieceTokenizer>(
      new SentencePieceTokenizer(path, std::move(model)));
  const Model& m = *tokenizer->model_;
  const spm::TrainerSpec& trainer = proto.trainer_spec();
  // SentencePieceProcessor::unk_id() etc.
  auto id_of = [&m](std::string_view piece, PieceType type) {
    const int32_t id = m.PieceToId(piece);
    return m.Is(id, type) ? id : -1;
  };
  tokenizer->vocab_size_ = static_cast<int32_t>(m.pieces.size());
  tokenizer->unk_id_ = id_of(NamedPiece(trainer.unk_piece(), "<unk>"), kUnknown);
  tokenizer->bos_id_ = id_of(NamedPiece(trainer.bos_piece(), "<s>"), kControl);
  tokenizer->eos_id_ = id_of(NamedPiece(trainer.eos_piece(), "</s>"), kControl);
  tokenizer->pad_id_ = id_of(NamedPiece(trainer.pad_piece(), "<pad>"), kControl);
  return tokenizer;
}

SentencePieceTokenizer::SentencePieceTokenizer(std::string path,
                                               std::unique_ptr<const Model> model)
    : path_(std::move(path)), model_(std::move(model)) {}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

absl::StatusOr<std::vector<int32_t>> SentencePieceTokenizer::Encode(
    std::string_view text) const {
  std::vector<int32_t> ids;
  const std::string error = EncodeInto(*model_, text, &ids, nullptr);
  if (!error.empty()) {
    return absl::InternalError(
        absl::StrCat("cannot encode text (SentencePiece model '", path_, "'): ", error));
  }
  return ids;
}

absl::Status SentencePieceTokenizer::CheckId(int32_t id) const {
  if (id < 0 || id >= vocab_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", id, " is outside [0, ", vocab_size_,
                     ") of SentencePiece model '", path_, "'"));
  }
  return absl::OkStatus();
}

// SentencePieceProcessor::Decode(ids): pieces by id, then each piece by
// PieceToId; runs of byte pieces become UTF-8 (U+FFFD per malformed byte).
absl::StatusOr<std::string> SentencePieceTokenizer::Decode(
    absl::Span<const int32_t> ids) const {
  for (const int32_t id : ids) RETURN_IF_ERROR(CheckId(id));
  const Model& m = *model_;
  std::string text;
  std::string bytes;
  auto process_byte_pieces = [&](size_t begin, size_t end) {
    if (begin >= end) return;
    bytes.clear();
    for (size_t i = begin; i < end; ++i) {
      bytes.push_back(static_cast<char>(m.id_to_byte[m.decode_id[ids[i]]]));
    }
    size_t offset = 0;
    while (offset < bytes.size()) {
      size_t consumed = 0;
      const std::string_view rest = std::string_view(bytes).substr(offset);
      if (!IsValidDecodeUtf8(rest, &consumed)) {
        text.append(kReplacementChar);
      } else {
        text.append(rest.substr(0, consumed));
      }
      offset += consumed;
    }
  };

  size_t byte_start = 0;
  bool is_bos_ws = true;  // whether a leading "▁" may still be dropped
  bool bos_ws_seen = false;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = m.decode_id[ids[i]];
    if (m.Is(id, kByte)) continue;
    process_byte_pieces(byte_start, i);
    if (bos_ws_seen || !text.empty()) is_bos_ws = false;
    byte_start = i + 1;
    std::string_view piece = m.pieces[ids[i]];
    bos_ws_seen = false;
    if (m.Is(id, kControl)) continue;  // <s>, </s>, <pad>: invisible
    if (m.Is(id, kUnknown)) {
      if (m.pieces[id] == piece) {
        text.append(m.unk_surface);
      } else {
        text.append(piece);
      }
      continue;
    }
    if (is_bos_ws && m.strip_bos_ws) {
      if (piece.substr(0, kSpaceSymbol.size()) == kSpaceSymbol) {
        piece.remove_prefix(kSpaceSymbol.size());
        bos_ws_seen = true;
      }
      if (m.remove_extra_whitespaces) bos_ws_seen = false;
    }
    // StrReplaceAll(piece, {{"▁", " "}}).
    while (!piece.empty()) {
      const size_t at = piece.find(kSpaceSymbol);
      if (at == std::string_view::npos) {
        text.append(piece);
        break;
      }
      text.append(piece.substr(0, at));
      text.push_back(' ');
      piece.remove_prefix(at + kSpaceSymbol.size());
    }
  }
  process_byte_pieces(byte_start, ids.size());
  return text;
}

absl::StatusOr<std::string> SentencePieceTokenizer::IdToPiece(int32_t id) const {
  RETURN_IF_ERROR(CheckId(id));
  return model_->pieces[id];
}

}  // namespace speclab

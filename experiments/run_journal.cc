#include "experiments/run_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "framework/core/json.h"
#include "framework/core/status_macros.h"

namespace speclab {
namespace {

// Doubles as %.17g read back bit for bit, so that a resumed run's summary is
// computed from exactly the numbers the killed run measured.
std::string Number(double value) { return absl::StrFormat("%.17g", value); }

std::string Counts(const std::map<int64_t, int64_t>& counts) {
  std::vector<std::string> pairs;
  for (const auto& [tokens, count] : counts) pairs.push_back(absl::StrCat("[", tokens, ", ", count, "]"));
  return absl::StrCat("[", absl::StrJoin(pairs, ", "), "]");
}

std::string KeyedCounts(const std::map<std::string, int64_t>& counts) {
  std::vector<std::string> pairs;
  for (const auto& [key, count] : counts) pairs.push_back(absl::StrCat("[\"", JsonEscape(key), "\", ", count, "]"));
  return absl::StrCat("[", absl::StrJoin(pairs, ", "), "]");
}

std::string RecordToJson(const RunRecord& r) {
  const Generation& g = r.generation;
  std::vector<std::string> steps;
  for (const StepStats& s : g.steps)
    steps.push_back(absl::StrCat("[", s.tree_nodes, ", ", s.longest_path, ", ", s.accepted, ", ",
                                 Number(s.draft_seconds), ", ", Number(s.verify_seconds), ", ",
                                 Number(s.other_seconds), "]"));
  return absl::StrCat("{\"method\": \"", JsonEscape(r.method), "\", \"task\": \"", JsonEscape(r.task),
                      "\", \"greedy_match\": ", r.greedy_match, ", \"engine_form\": \"", JsonEscape(g.engine_form),
                      "\", \"prefill_seconds\": ", Number(g.prefill_seconds), ", \"decode_seconds\": ",
                      Number(g.decode_seconds), ", \"target_forwards\": ", Counts(g.target_forwards),
                      ", \"draft_forwards\": ", Counts(g.draft_forwards), ", \"draft_forwards_by_model\": [",
                      absl::StrJoin(g.draft_forwards_by_model, ", ",
                                    [](std::string* out, const std::map<int64_t, int64_t>& counts) {
                                      out->append(Counts(counts));
                                    }),
                      "], \"draft_graph_runs\": ",
                      KeyedCounts(g.draft_graph_runs), ", \"tokens\": [",
                      absl::StrJoin(g.tokens, ", "), "], \"steps\": [", absl::StrJoin(steps, ", "), "]}");
}

// Reads what RecordToJson wrote; `where` names the line.
class RecordReader {
 public:
  explicit RecordReader(std::string where) : where_(std::move(where)) {}

  absl::StatusOr<const JsonValue*> Member(const JsonValue& object, const char* key, JsonValue::Type type) const {
    const JsonValue* value = object.Find(key);
    if (value == nullptr || value->type() != type)
      return absl::DataLossError(absl::StrCat(where_, ": key '", key, "': expected ", JsonValue::TypeName(type)));
    return value;
  }
  absl::StatusOr<int64_t> Int(const JsonValue& value, const char* key) const {
    int64_t out;
    if (!value.GetInt64(&out)) return absl::DataLossError(absl::StrCat(where_, ": key '", key, "': expected an integer"));
    return out;
  }
  absl::StatusOr<double> NumberAt(const JsonValue& object, const char* key) const {
    ASSIGN_OR_RETURN(const JsonValue* value, Member(object, key, JsonValue::Type::kNumber));
    return value->number_value();
  }
  absl::StatusOr<std::string> StringAt(const JsonValue& object, const char* key) const {
    ASSIGN_OR_RETURN(const JsonValue* value, Member(object, key, JsonValue::Type::kString));
    return value->string_value();
  }
  // A list of rows of `width` numbers.
  absl::StatusOr<std::vector<std::vector<double>>> RowsAt(const JsonValue& object, const char* key,
                                                          size_t width) const {
    ASSIGN_OR_RETURN(const JsonValue* list, Member(object, key, JsonValue::Type::kArray));
    return RowsIn(*list, key, width);
  }
  // The rows of `list` (an array, found under `key`).
  absl::StatusOr<std::vector<std::vector<double>>> RowsIn(const JsonValue& list, const char* key,
                                                          size_t width) const {
    std::vector<std::vector<double>> rows;
    for (const JsonValue& row : list.array()) {
      if (!row.is_array() || row.array().size() != width)
        return absl::DataLossError(absl::StrCat(where_, ": key '", key, "': expected rows of ", width, " numbers"));
      std::vector<double>& out = rows.emplace_back();
      for (const JsonValue& cell : row.array()) {
        if (!cell.is_number()) return absl::DataLossError(absl::StrCat(where_, ": key '", key, "': expected numbers"));
        out.push_back(cell.number_value());
      }
    }
    return rows;
  }
  absl::StatusOr<std::map<int64_t, int64_t>> CountsAt(const JsonValue& object, const char* key) const {
    ASSIGN_OR_RETURN(const JsonValue* list, Member(object, key, JsonValue::Type::kArray));
    return CountsIn(*list, key);
  }
  absl::StatusOr<std::map<int64_t, int64_t>> CountsIn(const JsonValue& list, const char* key) const {
    ASSIGN_OR_RETURN(auto rows, RowsIn(list, key, 2));
    std::map<int64_t, int64_t> counts;
    for (const auto& row : rows) counts[static_cast<int64_t>(row[0])] = static_cast<int64_t>(row[1]);
    return counts;
  }

  // [[[tokens, count], ...], ...]: CountsAt's lists, one a model; journals
  // written before the key existed have none.
  absl::StatusOr<std::vector<std::map<int64_t, int64_t>>> CountsListAt(const JsonValue& object,
                                                                      const char* key) const {
    std::vector<std::map<int64_t, int64_t>> lists;
    if (object.Find(key) == nullptr) return lists;
    ASSIGN_OR_RETURN(const JsonValue* list, Member(object, key, JsonValue::Type::kArray));
    for (const JsonValue& counts : list->array()) {
      if (!counts.is_array()) return absl::DataLossError(absl::StrCat(where_, ": key '", key, "': expected lists"));
      ASSIGN_OR_RETURN(lists.emplace_back(), CountsIn(counts, key));
    }
    return lists;
  }

  // [[key, count], ...]; journals written before the key existed have none.
  absl::StatusOr<std::map<std::string, int64_t>> KeyedCountsAt(const JsonValue& object, const char* key) const {
    std::map<std::string, int64_t> counts;
    if (object.Find(key) == nullptr) return counts;
    ASSIGN_OR_RETURN(const JsonValue* list, Member(object, key, JsonValue::Type::kArray));
    for (const JsonValue& pair : list->array()) {
      if (!pair.is_array() || pair.array().size() != 2 || !pair.array()[0].is_string())
        return absl::DataLossError(absl::StrCat(where_, ": key '", key, "': expected [name, count] pairs"));
      ASSIGN_OR_RETURN(counts[pair.array()[0].string_value()], Int(pair.array()[1], key));
    }
    return counts;
  }

  absl::StatusOr<RunRecord> Record(const JsonValue& object, double temperature, const std::string& prompt_id) const {
    if (!object.is_object()) return absl::DataLossError(absl::StrCat(where_, ": expected a record object"));
    RunRecord r;
    r.temperature = temperature;
    r.prompt_id = prompt_id;
    ASSIGN_OR_RETURN(r.method, StringAt(object, "method"));
    ASSIGN_OR_RETURN(r.task, StringAt(object, "task"));
    ASSIGN_OR_RETURN(const JsonValue* match, Member(object, "greedy_match", JsonValue::Type::kNumber));
    ASSIGN_OR_RETURN(int64_t greedy_match, Int(*match, "greedy_match"));
    r.greedy_match = static_cast<int>(greedy_match);
    Generation& g = r.generation;
    ASSIGN_OR_RETURN(g.engine_form, StringAt(object, "engine_form"));
    ASSIGN_OR_RETURN(g.prefill_seconds, NumberAt(object, "prefill_seconds"));
    ASSIGN_OR_RETURN(g.decode_seconds, NumberAt(object, "decode_seconds"));
    ASSIGN_OR_RETURN(g.target_forwards, CountsAt(object, "target_forwards"));
    ASSIGN_OR_RETURN(g.draft_forwards, CountsAt(object, "draft_forwards"));
    ASSIGN_OR_RETURN(g.draft_forwards_by_model, CountsListAt(object, "draft_forwards_by_model"));
    ASSIGN_OR_RETURN(g.draft_graph_runs, KeyedCountsAt(object, "draft_graph_runs"));
    ASSIGN_OR_RETURN(const JsonValue* tokens, Member(object, "tokens", JsonValue::Type::kArray));
    for (const JsonValue& token : tokens->array()) {
      ASSIGN_OR_RETURN(int64_t id, Int(token, "tokens"));
      g.tokens.push_back(static_cast<int32_t>(id));
    }
    ASSIGN_OR_RETURN(auto steps, RowsAt(object, "steps", 6));
    for (const auto& s : steps)
      g.steps.push_back({.tree_nodes = static_cast<int>(s[0]), .longest_path = static_cast<int>(s[1]),
                         .accepted = static_cast<int>(s[2]), .draft_seconds = s[3], .verify_seconds = s[4],
                         .other_seconds = s[5]});
    return r;
  }

 private:
  std::string where_;
};

}  // namespace

absl::StatusOr<RunJournal> RunJournal::Open(const std::string& dir, bool resume) {
  const std::string path = (std::filesystem::path(dir) / kFileName).string();
  std::map<std::tuple<double, std::string, std::string>, RunRecord> records;
  uint64_t good_bytes = 0;  // the end of the last whole, readable line
  if (resume) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const std::string all = text.str();
    size_t begin = 0;
    for (int number = 1; begin < all.size(); ++number) {
      const size_t end = all.find('\n', begin);
      const std::string where = absl::StrCat(path, ":", number);
      if (end == std::string::npos) break;  // torn: the kill came before its newline
      auto line = ParseJson(std::string_view(all).substr(begin, end - begin), where);
      if (!line.ok()) {
        // Only the last line may be torn; anything else is a damaged file.
        if (end + 1 == all.size()) break;
        return absl::DataLossError(absl::StrCat(line.status().message(), " (a damaged journal: remove ", path,
                                                " or pass --overwrite)"));
      }
      RecordReader reader(where);
      if (!line->is_object()) return absl::DataLossError(absl::StrCat(where, ": expected a generation object"));
      ASSIGN_OR_RETURN(double temperature, reader.NumberAt(*line, "temperature"));
      ASSIGN_OR_RETURN(std::string prompt_id, reader.StringAt(*line, "prompt_id"));
      ASSIGN_OR_RETURN(const JsonValue* object, reader.Member(*line, "record", JsonValue::Type::kObject));
      ASSIGN_OR_RETURN(RunRecord record, reader.Record(*object, temperature, prompt_id));
      records[{temperature, prompt_id, record.method}] = std::move(record);
      good_bytes = end + 1;
      begin = end + 1;
    }
  }
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (resume ? 0 : O_TRUNC);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  RunJournal journal(path, fd);
  // Cut a torn tail off, so that the next unit starts on a line of its own.
  if (resume && ::ftruncate(fd, static_cast<off_t>(good_bytes)) != 0)
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot truncate: ", std::strerror(errno)));
  if (::lseek(fd, 0, SEEK_END) < 0)
    return absl::InternalError(absl::StrCat(path, ": cannot seek: ", std::strerror(errno)));
  journal.records_ = std::move(records);
  return journal;
}

RunJournal::RunJournal(RunJournal&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), records_(std::move(other.records_)) {
  other.fd_ = -1;
}

RunJournal& RunJournal::operator=(RunJournal&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    records_ = std::move(other.records_);
    other.fd_ = -1;
  }
  return *this;
}

RunJournal::~RunJournal() {
  if (fd_ >= 0) ::close(fd_);
}

const RunRecord* RunJournal::Find(double temperature, const std::string& prompt_id, const std::string& method) const {
  auto it = records_.find({temperature, prompt_id, method});
  return it == records_.end() ? nullptr : &it->second;
}

absl::Status RunJournal::Append(const RunRecord& record) {
  const std::string line = absl::StrCat("{\"temperature\": ", Number(record.temperature), ", \"prompt_id\": \"",
                                        JsonEscape(record.prompt_id), "\", \"record\": ", RecordToJson(record), "}\n");
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::DataLossError(absl::StrCat(path_, ": write failed: ", std::strerror(errno)));
    written += static_cast<size_t>(n);
  }
  if (::fdatasync(fd_) != 0) return absl::DataLossError(absl::StrCat(path_, ": sync failed: ", std::strerror(errno)));
  records_[{record.temperature, record.prompt_id, record.method}] = record;
  return absl::OkStatus();
}

}  // namespace speclab

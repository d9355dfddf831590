#include "experiments/csv_table.h"

#include "absl/strings/str_cat.h"

namespace speclab {

int CsvTable::Column(const std::string& name) const {
  for (size_t i = 0; i < columns.size(); ++i)
    if (columns[i] == name) return static_cast<int>(i);
  return -1;
}

absl::StatusOr<CsvTable> ParseCsv(const std::string& text, const std::string& file) {
  std::vector<std::vector<std::string>> records;
  std::vector<int> record_lines;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false, field_started = false;
  int line = 1, record_line = 1;
  auto end_field = [&] {
    record.push_back(std::move(field));
    field.clear();
    field_started = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"' && !field_started) {
      quoted = field_started = true;
    } else if (c == ',') {
      end_field();
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      end_field();
      records.push_back(std::move(record));
      record_lines.push_back(record_line);
      record.clear();
      record_line = ++line;
    } else {
      field += c;
      field_started = true;
    }
  }
  if (quoted) return absl::InvalidArgumentError(absl::StrCat(file, ":", record_line, ": a quoted field never ends"));
  if (field_started || !record.empty()) {
    end_field();
    records.push_back(std::move(record));
    record_lines.push_back(record_line);
  }
  if (records.empty()) return absl::InvalidArgumentError(absl::StrCat(file, ": empty; expected a header line"));
  CsvTable table;
  table.columns = std::move(records[0]);
  for (size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != table.columns.size())
      return absl::InvalidArgumentError(absl::StrCat(file, ":", record_lines[r], ": ", records[r].size(),
                                                     " fields, expected ", table.columns.size(),
                                                     " as in the header"));
    table.rows.push_back(std::move(records[r]));
  }
  return table;
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace speclab

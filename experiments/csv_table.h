// CsvTable: a CSV file as text cells (RFC 4180 quoting), for reading back
// the summaries speclab writes (summary.csv, a sweep's merged summary.csv).
#ifndef SPECLAB_EXPERIMENTS_CSV_TABLE_H_
#define SPECLAB_EXPERIMENTS_CSV_TABLE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace speclab {

struct CsvTable {
  std::vector<std::string> columns;            // the header
  std::vector<std::vector<std::string>> rows;  // each as wide as the header

  // The index of column `name`, or -1.
  int Column(const std::string& name) const;
};

// Parses `text`; errors name `file`, the line and what was expected (a row
// wider or narrower than the header, an unterminated quote, no header).
absl::StatusOr<CsvTable> ParseCsv(const std::string& text, const std::string& file);

// A field quoted where it holds a comma, a quote or a line break.
std::string CsvField(const std::string& text);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_CSV_TABLE_H_

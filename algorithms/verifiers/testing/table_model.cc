#include "algorithms/verifiers/testing/table_model.h"

#include <algorithm>
#include <random>

namespace speclab {
namespace enumeration {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

TableModel::TableModel(TableModelSpec spec) : spec_(std::move(spec)) {
  if (!spec_.constant_row.empty()) spec_.vocab = static_cast<int>(spec_.constant_row.size());
}

const std::vector<double>& TableModel::Row(const std::vector<int32_t>& context, int salt) const {
  auto key = std::make_pair(salt, context);
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(std::move(key), MakeRow(context, salt)).first;
  return it->second;
}

std::vector<double> TableModel::MakeRow(const std::vector<int32_t>& context, int salt) const {
  if (!spec_.constant_row.empty()) return spec_.constant_row;
  // Table generation is not verifier randomness: a private engine is fine here.
  uint64_t h = SplitMix64(spec_.seed ^ SplitMix64(static_cast<uint64_t>(salt) + 0x51ed));
  for (int32_t token : context) h = SplitMix64(h ^ static_cast<uint64_t>(token + 1));
  std::mt19937_64 engine(h);
  std::gamma_distribution<double> gamma(spec_.concentration, 1.0);
  std::vector<double> row(spec_.vocab);
  double total = 0;
  for (double& v : row) {
    v = gamma(engine) + 1e-12;  // strictly positive: every token stays possible
    total += v;
  }
  for (double& v : row) v /= total;
  if (spec_.one_hot) {
    const auto argmax = std::max_element(row.begin(), row.end()) - row.begin();
    std::fill(row.begin(), row.end(), 0.0);
    row[argmax] = 1.0;
  }
  if (spec_.float32)
    for (double& v : row) v = static_cast<double>(static_cast<float>(v));
  return row;
}

}  // namespace enumeration
}  // namespace speclab

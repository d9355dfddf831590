#include "algorithms/tree_builders/best_first/best_first_growth.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "tests/support/cuda_tests.h"

namespace speclab::best_first {
namespace {

// The level rule on plain vectors, as the builder's host loop states it:
// what GrowLevel must do on every device (on CUDA, the kernel).
class Reference {
 public:
  explicit Reference(const Rule& rule) : r_(rule) {}

  // One level; returns the feed (tokens, parents, depths) or the draft (tokens, parents).
  std::vector<std::vector<int64_t>> Level(const std::vector<std::vector<int64_t>>& tokens,
                                          const std::vector<std::vector<float>>& logq, int64_t level) {
    const bool root = level == 0;
    std::vector<int64_t> fresh_parent, fresh_token;
    std::vector<double> fresh_score;
    bool any = false;
    double best_new = -INFINITY;
    for (size_t row = 0; row < tokens.size(); ++row) {
      const int64_t parent = root ? -1 : beams_[row];
      const bool real = root || parent >= 0;
      for (size_t j = 0; j < tokens[row].size(); ++j) {
        const double score = (root ? 0.0 : real ? score_[parent] : -INFINITY) + r_.log_decay + double{logq[row][j]};
        const bool passes = !stopped_ && ((real && score >= r_.min_log_prob) || (root && row == 0 && j == 0));
        if (!passes) continue;
        any = true;
        best_new = std::max(best_new, score);
        fresh_parent.push_back(parent);
        fresh_token.push_back(tokens[row][j]);
        fresh_score.push_back(score);
      }
    }
    const int64_t count = static_cast<int64_t>(score_.size());
    stopped_ = stopped_ || !any || (count >= r_.budget && best_new <= score_[Best(score_, r_.budget).back()]);
    if (!stopped_) {
      std::vector<double> both = score_;
      both.insert(both.end(), fresh_score.begin(), fresh_score.end());
      std::vector<char> top(both.size(), 0);
      for (int64_t i : Best(both, r_.budget)) top[i] = 1;
      for (size_t f = 0; f < fresh_score.size(); ++f) {
        if (!top[count + f]) continue;
        token_.push_back(fresh_token[f]);
        parent_.push_back(fresh_parent[f]);
        score_.push_back(fresh_score[f]);
        depth_.push_back(fresh_parent[f] < 0 ? 1 : depth_[fresh_parent[f]] + 1);
        fed_.push_back(-1);
      }
    }
    if (level + 1 < r_.iterations) {
      std::vector<double> open(score_.size(), -INFINITY);
      for (size_t e = 0; e < score_.size(); ++e)
        if (!stopped_ && fed_[e] < 0) open[e] = score_[e];
      std::vector<int64_t> chosen;
      for (int64_t e : Best(open, r_.beams))
        if (!std::isinf(open[e])) chosen.push_back(e);
      std::sort(chosen.begin(), chosen.end());
      std::vector<std::vector<int64_t>> feed(3, std::vector<int64_t>(r_.beams));
      beams_.assign(r_.beams, -1);
      for (int64_t slot = 0; slot < r_.beams; ++slot) {
        if (slot >= static_cast<int64_t>(chosen.size())) {
          feed[0][slot] = token_[0], feed[1][slot] = 0, feed[2][slot] = 1;
          continue;
        }
        const int64_t e = chosen[slot];
        beams_[slot] = e;
        fed_[e] = 1 + level * r_.beams + slot;
        feed[0][slot] = token_[e];
        feed[1][slot] = parent_[e] < 0 ? 0 : fed_[parent_[e]];
        feed[2][slot] = depth_[e];
      }
      return feed;
    }
    return Draft();
  }

  // The draft so far: the B best entries in entry order, topped up with copies of entry 0.
  std::vector<std::vector<int64_t>> Draft() const {
    std::vector<int64_t> kept = Best(score_, r_.budget);
    std::sort(kept.begin(), kept.end());
    std::vector<int64_t> node_of(score_.size(), -1);
    std::vector<std::vector<int64_t>> draft{{}, {-1}};
    for (int64_t e : kept) {
      node_of[e] = static_cast<int64_t>(draft[0].size()) + 1;
      draft[0].push_back(token_[e]);
      draft[1].push_back(parent_[e] < 0 ? 0 : node_of[parent_[e]]);
    }
    while (static_cast<int64_t>(draft[0].size()) < r_.budget) {
      draft[0].push_back(token_[0]);
      draft[1].push_back(0);
    }
    return draft;
  }

  int64_t count() const { return static_cast<int64_t>(score_.size()); }
  bool stopped() const { return stopped_; }
  const std::vector<double>& scores() const { return score_; }

 private:
  // The indices of the k best (score descending, index ascending), best first.
  static std::vector<int64_t> Best(const std::vector<double>& scores, int64_t k) {
    std::vector<int64_t> order(scores.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
    order.resize(std::min<size_t>(k, order.size()));
    return order;
  }

  Rule r_;
  std::vector<int64_t> token_, parent_, depth_, fed_, beams_;
  std::vector<double> score_;
  bool stopped_ = false;
};

std::vector<int64_t> ToVector(const at::Tensor& t) {
  const at::Tensor host = t.to(at::kCPU, at::kLong).contiguous();
  return {host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel()};
}

// Random levels (log q quantized so that scores tie) through GrowLevel on
// the test device and through the reference: the same feeds, pools and
// drafts, scores bit for bit.
TEST(BestFirstGrowthTest, GrowLevelFollowsTheRuleOnTheTestDevice) {
  const c10::Device device = testing::TestDevice();
  if (device.is_cuda() && !at::hasCUDA()) GTEST_SKIP() << "SPECLAB_TEST_DEVICE=cuda but no CUDA";
  struct Case {
    Rule rule;
    double step;  // log q's grid: coarse grids make ties
  };
  const Case cases[] = {
      {{.budget = 6, .beams = 6, .iterations = 3, .branch = 4, .log_decay = std::log(0.95), .min_log_prob = -10}, 0},
      {{.budget = 12, .beams = 3, .iterations = 6, .branch = 3, .log_decay = std::log(0.95), .min_log_prob = -10}, 0.5},
      {{.budget = 15, .beams = 15, .iterations = 8, .branch = 16, .log_decay = std::log(0.95), .min_log_prob = -10}, 0},
      {{.budget = 10, .beams = 10, .iterations = 5, .branch = 5, .log_decay = 0, .min_log_prob = -3}, 0.25},
      {{.budget = 40, .beams = 32, .iterations = 4, .branch = 2, .log_decay = std::log(0.9), .min_log_prob = -2}, 0},
      {{.budget = 8, .beams = 8, .iterations = 4, .branch = 16, .log_decay = 0, .min_log_prob = -0.01}, 1},
  };
  int stops = 0, short_pools = 0;
  for (const Case& c : cases) {
    for (uint64_t seed = 0; seed < 6; ++seed) {
      SCOPED_TRACE(::testing::Message() << "budget " << c.rule.budget << " seed " << seed);
      std::mt19937_64 random(seed);
      std::exponential_distribution<float> gap(1.0f);
      Reference reference(c.rule);
      Growth growth = StartGrowth(c.rule, device);
      for (int64_t level = 0; level < c.rule.iterations; ++level) {
        const int64_t rows = level == 0 ? 1 : c.rule.beams;
        std::vector<std::vector<int64_t>> tokens(rows);
        std::vector<std::vector<float>> logq(rows);
        for (int64_t row = 0; row < rows; ++row) {
          float value = 0;
          for (int64_t j = 0; j < c.rule.branch; ++j) {
            value -= gap(random);
            logq[row].push_back(c.step > 0 ? static_cast<float>(std::floor(value / c.step) * c.step) : value);
            tokens[row].push_back(static_cast<int64_t>(random() % 1000));
          }
        }
        const auto longs = at::TensorOptions().dtype(at::kLong);
        at::Tensor top_tokens = at::empty({rows, c.rule.branch}, longs), top_logq = at::empty({rows, c.rule.branch});
        for (int64_t row = 0; row < rows; ++row)
          for (int64_t j = 0; j < c.rule.branch; ++j) {
            top_tokens[row][j] = tokens[row][j];
            top_logq[row][j] = logq[row][j];
          }
        const Level grown = GrowLevel(c.rule, growth, top_tokens.to(device), top_logq.to(device), level);
        const std::vector<std::vector<int64_t>> expected = reference.Level(tokens, logq, level);
        if (level + 1 < c.rule.iterations) {
          EXPECT_EQ(ToVector(grown.feed.tokens), expected[0]) << "level " << level;
          EXPECT_EQ(ToVector(grown.feed.parents), expected[1]) << "level " << level;
          EXPECT_EQ(ToVector(grown.feed.depths), expected[2]) << "level " << level;
        }
        const std::vector<std::vector<int64_t>> draft = reference.Draft();  // at every level
        EXPECT_EQ(ToVector(grown.kept.tokens), draft[0]) << "level " << level;
        EXPECT_EQ(ToVector(grown.kept.parents), draft[1]) << "level " << level;
        ASSERT_EQ(ToVector(growth.count), std::vector<int64_t>{reference.count()}) << "level " << level;
        EXPECT_EQ(growth.stopped.to(at::kCPU).item<bool>(), reference.stopped()) << "level " << level;
        const at::Tensor scores = growth.scores.narrow(0, 0, reference.count()).to(at::kCPU).contiguous();
        EXPECT_EQ(std::vector<double>(scores.data_ptr<double>(), scores.data_ptr<double>() + scores.numel()),
                  reference.scores());
      }
      stops += reference.stopped();
      short_pools += reference.count() < c.rule.budget;
    }
  }
  EXPECT_GT(stops, 6);        // the stop rules ran
  EXPECT_GT(short_pools, 3);  // and the draft was topped up
}

}  // namespace
}  // namespace speclab::best_first

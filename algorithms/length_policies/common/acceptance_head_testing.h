// Head files for the acceptance-head policies' tests.
#ifndef SPECLAB_ALGORITHMS_LENGTH_POLICIES_COMMON_ACCEPTANCE_HEAD_TESTING_H_
#define SPECLAB_ALGORITHMS_LENGTH_POLICIES_COMMON_ACCEPTANCE_HEAD_TESTING_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <cmath>
#include <string>

#include "algorithms/length_policies/common/acceptance_head.h"

namespace speclab::acceptance_head::testing {

// Writes `head` to a fresh file under the test's temporary folder; returns its path.
inline std::string WriteHead(const AcceptanceHead& head, const std::string& name) {
  const std::string path = ::testing::TempDir() + "/acceptance_head_" + std::to_string(::getpid()) + "_" + name +
                           ".safetensors";
  const absl::Status status = SaveAcceptanceHead(path, head);
  EXPECT_TRUE(status.ok()) << status;
  return path;
}

// A head that predicts `acceptance` whatever it reads.
inline AcceptanceHead ConstantHead(Features features, int64_t vocab, double acceptance) {
  AcceptanceHead head = NewHead(features, vocab, /*hidden=*/4, /*seed=*/1, std::log(acceptance / (1 - acceptance)));
  head.w2.zero_();
  return head;
}

// A log_probs head whose prediction is above 1/2 exactly where the row's mean
// log-probability (entries floored at kLogProbFloor) is above -`offset`: a
// flat row (mean -log V) scores high, a peaked one low.
inline AcceptanceHead MeanLogProbHead(int64_t vocab, double offset) {
  AcceptanceHead head = NewHead(Features::kLogProbs, vocab, /*hidden=*/1, /*seed=*/1, /*prior_logit=*/0.0);
  head.w1.zero_();
  head.w1.narrow(0, 0, vocab).fill_(-kLogProbFloor / static_cast<double>(vocab));  // the row's scale undone
  head.b1.fill_(offset);
  head.w2.fill_(4.0);
  return head;
}

// A summary head whose score is above 1/2 exactly where the drafter's top
// probability is above `top`: the confidence rule, learned form.
inline AcceptanceHead TopProbabilityHead(int64_t vocab, double top) {
  AcceptanceHead head = NewHead(Features::kSummary, vocab, /*hidden=*/1, /*seed=*/1, /*prior_logit=*/0.0);
  head.w1.zero_();
  head.w1[0][0] = 8.0;
  head.b1.fill_(-8.0 * top);
  head.w2.fill_(4.0);
  return head;
}

// A summary_index head whose score is above 1/2 exactly where the drafter's
// top probability is above `top` + `per_draft` * (depth - 1): DISCO's
// classifier reading the index, stricter with each draft.
inline AcceptanceHead IndexedTopProbabilityHead(int64_t vocab, double top, double per_draft) {
  AcceptanceHead head = NewHead(Features::kSummaryIndex, vocab, /*hidden=*/1, /*seed=*/1, /*prior_logit=*/0.0);
  head.w1.zero_();
  head.w1[0][0] = 8.0;
  head.w1[kSummaryTopK + 1][0] = -8.0 * per_draft;  // the index, after the summary
  head.b1.fill_(-8.0 * (top - per_draft));
  head.w2.fill_(4.0);
  return head;
}

// A hidden head whose score is sigmoid(4 silu(u . h + offset)) for a random
// direction u (seeded) of the drafter's hidden states h, `hidden_size` wide:
// SpecDec++'s input, its predictions moving with the drafter's state.
inline AcceptanceHead ProjectionHead(int64_t hidden_size, double offset, uint64_t seed) {
  AcceptanceHead head = NewHead(Features::kHidden, /*vocab_size=*/16, /*width=*/1, seed, /*prior_logit=*/0.0,
                                hidden_size);
  head.b1.fill_(offset);
  head.w2.fill_(4.0);
  return head;
}

}  // namespace speclab::acceptance_head::testing

#endif  // SPECLAB_ALGORITHMS_LENGTH_POLICIES_COMMON_ACCEPTANCE_HEAD_TESTING_H_

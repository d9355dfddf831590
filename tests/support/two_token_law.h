// The exact law of the first two generated tokens, and a chi-square test of
// samples against it: the statistical check of a decoding method at T > 0.
#ifndef SPECLAB_TESTS_SUPPORT_TWO_TOKEN_LAW_H_
#define SPECLAB_TESTS_SUPPORT_TWO_TOKEN_LAW_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/method.h"
#include "framework/model/llama_model.h"

namespace speclab::testing {

using TwoTokenLaw = std::map<std::pair<int, int>, double>;
using TwoTokenCounts = std::map<std::pair<int, int>, int>;

// P(first two new tokens = (a, b) | prompt) under the target's processed law,
// enumerated with target forwards (small vocabularies only).
TwoTokenLaw ExactTwoTokenLaw(LlamaModel& target, const std::vector<int32_t>& prompt, double temperature);

struct ChiSquareResult {
  double statistic = 0;
  int degrees_of_freedom = 0;
  double critical = 0;  // 1e-4 upper quantile of chi-square(dof), Wilson-Hilferty
};

// The first two tokens of `runs` generations of `method` at temperature 1
// (seeds first_seed, first_seed + 1, ...), the drafts they accepted and the
// steps whose draft branched (more nodes than its longest path); `pipeline`
// as DecodeOptions::pipeline.
struct TwoTokenSample {
  TwoTokenCounts counts;
  int accepted = 0;
  int branching = 0;
};
TwoTokenSample SampleTwoTokens(LlamaModel& target, Method& method, const std::vector<int32_t>& prompt, int runs,
                               uint64_t first_seed, bool pipeline = true);

// Pearson chi-square of `runs` samples against `law`, cells of expected count
// below 5 pooled into one.
ChiSquareResult ChiSquareTest(const TwoTokenCounts& counts, const TwoTokenLaw& law, int runs);

// Samples `method` pipelined and step by step (SampleTwoTokens, seeds from
// 1000) and expects each sample to pass ChiSquareTest against `law` and to
// have accepted drafts in more than one run in 40, so that both branches of
// the rule are exercised; `label` names the method in failures.
void ExpectTheLawPipelinedAndStepByStep(LlamaModel& target, Method& method, const std::vector<int32_t>& prompt,
                                        const TwoTokenLaw& law, int runs, const std::string& label);

}  // namespace speclab::testing

#endif  // SPECLAB_TESTS_SUPPORT_TWO_TOKEN_LAW_H_

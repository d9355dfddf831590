// Predicted times price the work done (experiments/forward_costs.h): in every
// engine form, the forwards a model counts (LanguageModel::forward_counts,
// which a run prices at measured costs) are the passes it ran
// (LlamaModel::executed_passes), with the bodies of its graph forms run
// eagerly on the CPU. A form that ran a whole tree's levels but counted one
// forward, or counted levels it never ran, would misprice every run of it.
#include <gtest/gtest.h>

#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "drafters/model/model_drafter.h"
#include "framework/model/llama_model.h"
#include "framework/speculative_decoder.h"
#include "tests/support/tiny_models.h"

namespace speclab {
namespace {

using ::speclab::testing::ModelDrafterMethod;
using ::speclab::testing::TinyModel;

const std::vector<int32_t> kPrompt = {1, 5, 3, 7, 2, 5, 3, 6, 2};

std::map<int64_t, int64_t> Minus(std::map<int64_t, int64_t> after, const std::map<int64_t, int64_t>& before) {
  for (const auto& [tokens, count] : before) after[tokens] -= count;
  for (auto it = after.begin(); it != after.end();) it = it->second == 0 ? after.erase(it) : std::next(it);
  return after;
}

int64_t Passes(const std::map<int64_t, int64_t>& histogram) {
  int64_t passes = 0;
  for (const auto& [tokens, count] : histogram) passes += count;
  return passes;
}

int64_t Tokens(const std::map<int64_t, int64_t>& histogram) {
  int64_t tokens = 0;
  for (const auto& [n, count] : histogram) tokens += n * count;
  return tokens;
}

// The forwards `model` counted during `run` against the passes it ran, but
// the prompt's prefill (all of it but its last token: decoding time, which
// runs price, excludes it, and so do the counts): equal with dynamic shapes;
// with static shapes a forward may run padded to its bucket, so as many
// passes and at least as many tokens.
template <typename Run>
void ExpectCountsArePasses(LlamaModel& model, bool static_shapes, const std::string& what, Run run) {
  const auto counted_before = model.forward_counts();
  const auto ran_before = model.executed_passes();
  run();
  const auto counted = Minus(model.forward_counts(), counted_before);
  const auto ran = Minus(model.executed_passes(),
                         [&] {
                           auto with_prefill = ran_before;
                           ++with_prefill[static_cast<int64_t>(kPrompt.size()) - 1];
                           return with_prefill;
                         }());
  EXPECT_GT(Passes(ran), 0) << what;
  if (static_shapes) {
    EXPECT_EQ(Passes(counted), Passes(ran)) << what;
    EXPECT_LE(Tokens(counted), Tokens(ran)) << what;
  } else {
    EXPECT_EQ(counted, ran) << what;
  }
}

TEST(ForwardPricingTest, EveryEngineFormCountsTheForwardsItRuns) {
  struct Form {
    std::string builder, verifier;
    bool pipeline;
    std::string expected_form;  // how the generation says its steps ran
  };
  const std::vector<Form> forms = {
      {"{type: chain}", "{type: rejection}", false, "step by step"},
      {"{type: chain}", "{type: rejection}", true, "pipelined chain"},
      {"{type: dynamic_topk, top_k: 3, depth: 3, total_tokens: 10}", "{type: point_mass}", false, "step by step"},
      {"{type: dynamic_topk, top_k: 3, depth: 3, total_tokens: 10}", "{type: point_mass}", true, "pipelined tree"},
      {"{type: best_first, budget: 8, max_beam_len: 4}", "{type: point_mass}", true, "pipelined tree"},
      {"{type: static, sampling: true, choices: [[0], [1], [0, 0], [0, 1]]}", "{type: rrs_wor}", true,
       "pipelined tree"},
      {"{type: multi_sample, k: 2}", "{type: specinfer}", true, "pipelined tree"},
      {"{type: opt_tree, nodes: 4, max_depth: 3}", "{type: point_mass}", true, "pipelined tree"},
      {"{type: opt_tree, nodes: 4, max_depth: 3, latency_profile: {budgets: [1, 5], target_ms: [1, 1.3], draft_ms: "
       "0.1}}",
       "{type: point_mass}", true, "step by step"},
  };
  for (bool static_shapes : {false, true}) {
    for (const Form& form : forms) {
      const std::string what = form.builder + " + " + form.verifier + (form.pipeline ? ", pipelined" : "") +
                               (static_shapes ? ", static shapes" : "");
      SCOPED_TRACE(what);
      std::unique_ptr<LlamaModel> target = TinyModel(1);
      target->EnableCudaGraphs(static_shapes);
      std::unique_ptr<LlamaModel> drafter_model = TinyModel(2);
      drafter_model->EnableCudaGraphs(static_shapes);
      LlamaModel& drafter = *drafter_model;
      Method method = ModelDrafterMethod(std::move(drafter_model), form.builder, form.verifier, 3);
      DecodeOptions options{.sampling = {.temperature = 1}, .max_new_tokens = 20, .seed = 3, .time_phases = false};
      options.pipeline = form.pipeline;
      Generation generation;
      ExpectCountsArePasses(drafter, static_shapes, what + " (drafter)", [&] {
        ExpectCountsArePasses(*target, static_shapes, what + " (target)", [&] {
          auto out = GenerateSpeculative(*target, method, kPrompt, options);
          ASSERT_TRUE(out.ok()) << out.status();
          generation = *std::move(out);
        });
      });
      EXPECT_EQ(generation.engine_form.rfind(form.expected_form, 0), 0u) << generation.engine_form;
    }
  }
}

}  // namespace
}  // namespace speclab

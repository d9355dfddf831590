// SampledTreeRule: the device form of a rule that walks a sampled tree given
// its random numbers (recursive rejection, traversal, spectr, khisti).
//
// What such forms share: a chain is a tree; at temperature 0 the rule is
// greedy matching (one-hot p accepts its argmax only); drafts must be sampled
// in a way the rule is exact for; the walk draws its uniforms and one Exp(1)
// noise row from the verify generator, and runs on p's device. A subclass
// says how it walks.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_COMMON_SAMPLED_TREE_RULE_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_COMMON_SAMPLED_TREE_RULE_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/device/device_verifier.h"

namespace speclab::verifiers {

class SampledTreeRule : public DeviceVerifier {
 public:
  // `rule` names the rule in errors; `exact_for`: the draft samplings it is
  // exact for (a chain is declared as the first); the walk takes
  // `uniforms_per_node` uniforms a node.
  SampledTreeRule(std::string rule, std::vector<DraftSampling> exact_for, int uniforms_per_node);

  absl::StatusOr<at::Tensor> Verify(const DeviceChainProblem& problem, at::Generator& generator) const final;
  bool verifies_trees() const final { return true; }
  absl::StatusOr<at::Tensor> VerifyTree(const DeviceTreeProblem& problem, at::Generator& generator) const final;

 protected:
  // Checks of the drafts beyond their sampling (khisti's bounds); OK here.
  virtual absl::Status CheckDrafts(const DeviceTreeProblem& problem) const;
  // The walk's answer, int64 [n + 1] (DeviceVerifier::VerifyTree's), from the
  // problem's parents, tokens and q on p's device, uniforms
  // [uniforms_per_node * n] and noise [vocab] float32 there. May throw.
  virtual at::Tensor Walk(const DeviceTreeProblem& problem, const at::Tensor& parents, const at::Tensor& tokens,
                          const at::Tensor& q, const at::Tensor& uniforms, const at::Tensor& noise) const = 0;

  const std::string& rule() const { return rule_; }

 private:
  std::string rule_;
  std::vector<DraftSampling> exact_for_;
  int uniforms_per_node_;
};

}  // namespace speclab::verifiers

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_COMMON_SAMPLED_TREE_RULE_H_

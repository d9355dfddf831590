// A plugin library that registers a verifier under a built-in's name
// (plugin_loader_test): the loader must refuse it.
#include <memory>

#include "framework/core/verifier_registry.h"
#include "framework/plugin.h"

SPECLAB_PLUGIN();

namespace {

class NeverCalled final : public speclab::Verifier {
 public:
  speclab::VerifierTraits traits() const override { return {}; }
  absl::StatusOr<speclab::Verdict> Verify(const speclab::VerificationProblem&, speclab::RandomSource&) const override {
    return absl::InternalError("never registered");
  }
};

const bool kRegistered = speclab::VerifierRegistry::Add(
    {.name = "rejection", .description = "a clash", .lossless = "lossy",
     .create = [](speclab::Options&) -> absl::StatusOr<std::unique_ptr<speclab::Verifier>> {
       return std::make_unique<NeverCalled>();
     }});

}  // namespace

// `host_only_rrs`: RRS's host rule registered without a device form, as a
// user's plugin may come, so that tests can see how the engine and the
// benchmarks name a rule that verifies on the host only (every built-in rule
// has a device form). Registered in the test binary only.
#include <memory>

#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab {
namespace {

const bool kRegistered = VerifierRegistry::Add(
    {.name = "host_only_rrs",
     .description = "RRS's host rule without a device form (tests only)",
     .lossless = "lossless",
     .create = [](Options&) -> absl::StatusOr<std::unique_ptr<Verifier>> {
       ASSIGN_OR_RETURN(Options spec, Options::FromString("{type: rrs}", "host_only_rrs"));
       return VerifierRegistry::Create(spec, "verifier");
     }});

}  // namespace
}  // namespace speclab

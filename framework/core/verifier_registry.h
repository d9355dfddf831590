// The registry of verifiers (see framework/core/registry.h).
#ifndef SPECLAB_FRAMEWORK_CORE_VERIFIER_REGISTRY_H_
#define SPECLAB_FRAMEWORK_CORE_VERIFIER_REGISTRY_H_

#include "framework/core/registry.h"
#include "framework/core/verifier.h"

namespace speclab {
using VerifierRegistry = Registry<Verifier>;
}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_CORE_VERIFIER_REGISTRY_H_

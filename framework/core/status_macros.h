// Status plumbing shared by every speclab module.
#ifndef SPECLAB_FRAMEWORK_CORE_STATUS_MACROS_H_
#define SPECLAB_FRAMEWORK_CORE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SPECLAB_CONCAT_INNER_(a, b) a##b
#define SPECLAB_CONCAT_(a, b) SPECLAB_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` yields a non-OK status.
#define RETURN_IF_ERROR(expr)                                  \
  do {                                                         \
    ::absl::Status speclab_status_ = (expr);                   \
    if (!speclab_status_.ok()) return speclab_status_;         \
  } while (false)

// `ASSIGN_OR_RETURN(auto x, F());` unwraps a StatusOr or returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(SPECLAB_CONCAT_(speclab_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                           \
  if (!statusor.ok()) return statusor.status();     \
  lhs = std::move(statusor).value()

#endif  // SPECLAB_FRAMEWORK_CORE_STATUS_MACROS_H_

#include "framework/error_text.h"

#include <c10/util/Exception.h>

namespace speclab {

std::string ErrorText(const std::exception& e) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&e)) return torch_error->what_without_backtrace();
  return e.what();
}

}  // namespace speclab

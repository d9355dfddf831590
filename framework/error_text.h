// The message of an exception caught at a module boundary, for an
// absl::Status: a LibTorch error's without the C++ stack trace LibTorch
// appends (users read these), any other's what().
#ifndef SPECLAB_FRAMEWORK_ERROR_TEXT_H_
#define SPECLAB_FRAMEWORK_ERROR_TEXT_H_

#include <exception>
#include <string>

namespace speclab {

std::string ErrorText(const std::exception& e);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_ERROR_TEXT_H_

// CUDA checks in the test suite run where SPECLAB_TEST_DEVICE=cuda
// (scripts/gpu_run.sh sets it) on a machine with CUDA; elsewhere they skip.
#ifndef SPECLAB_TESTS_SUPPORT_CUDA_TESTS_H_
#define SPECLAB_TESTS_SUPPORT_CUDA_TESTS_H_

#include <ATen/Context.h>
#include <c10/core/Device.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace speclab::testing {

inline bool CudaTestsRequested() {
  const char* device = std::getenv("SPECLAB_TEST_DEVICE");
  return device != nullptr && std::string(device) == "cuda";
}

// The device tests that run on either take: cuda:0 where CUDA tests are
// requested, the CPU otherwise.
inline c10::Device TestDevice() {
  return CudaTestsRequested() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
}

}  // namespace speclab::testing

#define SPECLAB_SKIP_UNLESS_CUDA()                                                                              \
  do {                                                                                                          \
    if (!::speclab::testing::CudaTestsRequested()) GTEST_SKIP() << "CUDA checks run with SPECLAB_TEST_DEVICE=cuda"; \
    if (!at::hasCUDA()) GTEST_SKIP() << "SPECLAB_TEST_DEVICE=cuda but no CUDA";                                  \
  } while (0)

#endif  // SPECLAB_TESTS_SUPPORT_CUDA_TESTS_H_

// Tiny random Llama models and methods for engine tests.
#ifndef SPECLAB_TESTS_SUPPORT_TINY_MODELS_H_
#define SPECLAB_TESTS_SUPPORT_TINY_MODELS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "framework/method.h"
#include "framework/model/llama_model.h"

namespace speclab::testing {

// A random fp32 CPU Llama with `vocab` tokens and hidden states `hidden`
// wide. `logit_scale` multiplies the output head so that distributions are
// far from uniform (random init alone gives near-uniform rows, which would
// make every test trivially pass).
std::unique_ptr<LlamaModel> TinyModel(uint64_t seed, int64_t vocab = 16, int64_t layers = 2, double logit_scale = 30,
                                      int64_t capacity = 256, int64_t hidden = 32);
// The same model on `device` (the same weights on every device: CreateRandom draws them on the CPU).
std::unique_ptr<LlamaModel> TinyModelOn(c10::Device device, uint64_t seed, int64_t vocab = 16, int64_t layers = 2,
                                        double logit_scale = 30, int64_t capacity = 256, int64_t hidden = 32);

// A random Llama of shapes the CUDA kernels take (head_dim 64, sizes that are
// multiples of 16; 512 tokens, 2 layers), for tests of the fused GPU path.
std::unique_ptr<LlamaModel> KernelSizedModel(c10::Device device, at::ScalarType dtype, uint64_t seed,
                                             int64_t capacity = 512);

// Builds a method from YAML text such as
//   "{name: m, drafter: {type: model, path: DIR}, verifier: {type: rejection}}".
absl::StatusOr<Method> MethodFromYaml(const std::string& yaml, LanguageModel* target);

// A method whose `model` drafter is the given model (no checkpoint on disk).
Method ModelDrafterMethod(std::unique_ptr<LanguageModel> drafter, const std::string& builder_yaml,
                          const std::string& verifier_yaml, int gamma);

}  // namespace speclab::testing

#endif  // SPECLAB_TESTS_SUPPORT_TINY_MODELS_H_

#include "tests/support/tiny_models.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include "drafters/model/model_drafter.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab::testing {

std::unique_ptr<LlamaModel> TinyModel(uint64_t seed, int64_t vocab, int64_t layers, double logit_scale,
                                      int64_t capacity, int64_t hidden) {
  return TinyModelOn(c10::Device(c10::kCPU), seed, vocab, layers, logit_scale, capacity, hidden);
}

std::unique_ptr<LlamaModel> TinyModelOn(c10::Device device, uint64_t seed, int64_t vocab, int64_t layers,
                                        double logit_scale, int64_t capacity, int64_t hidden) {
  ModelConfig config;
  config.vocab_size = vocab;
  config.hidden_size = hidden;
  config.intermediate_size = 64;
  config.num_hidden_layers = layers;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.head_dim = 8;
  config.max_position_embeddings = 512;
  config.tie_word_embeddings = false;
  auto model = LlamaModel::CreateRandom(config, device, at::kFloat, capacity, seed);
  EXPECT_TRUE(model.ok()) << model.status();
  c10::NoGradGuard no_grad;
  for (auto& [name, tensor] : (*model)->NamedParameters())
    if (name == "lm_head.weight") tensor.mul_(logit_scale);
  return *std::move(model);
}

std::unique_ptr<LlamaModel> KernelSizedModel(c10::Device device, at::ScalarType dtype, uint64_t seed,
                                             int64_t capacity) {
  ModelConfig config;
  config.vocab_size = 512;
  config.hidden_size = 256;
  config.intermediate_size = 512;
  config.num_hidden_layers = 2;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.head_dim = 64;
  config.max_position_embeddings = 1024;
  auto model = LlamaModel::CreateRandom(config, device, dtype, capacity, seed);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

absl::StatusOr<Method> MethodFromYaml(const std::string& yaml, LanguageModel* target) {
  ASSIGN_OR_RETURN(Options spec, Options::FromString(yaml, "test.yaml"));
  DrafterEnvironment environment{.target = target};
  if (target != nullptr) environment.device = target->device();
  return CreateMethod(spec, environment);
}

Method ModelDrafterMethod(std::unique_ptr<LanguageModel> drafter, const std::string& builder_yaml,
                          const std::string& verifier_yaml, int gamma) {
  Method method;
  method.name = "test";
  method.drafter = std::make_unique<ModelDrafter>(std::move(drafter));
  auto create = [](const std::string& yaml, auto tag) {
    using RegistryType = decltype(tag);
    Options spec = *Options::FromString(yaml, "test.yaml");
    auto plugin = RegistryType::Create(spec, "plugin");
    EXPECT_TRUE(plugin.ok()) << plugin.status();
    return *std::move(plugin);
  };
  method.tree_builder = create(builder_yaml, TreeBuilderRegistry{});
  method.verifier = create(verifier_yaml, VerifierRegistry{});
  method.policy = create("{type: fixed, gamma: " + std::to_string(gamma) + "}", LengthPolicyRegistry{});
  method.drafter_name = "model";
  method.tree_builder_name = *Options::FromString(builder_yaml, "test.yaml")->GetString("type");
  method.verifier_name = *Options::FromString(verifier_yaml, "test.yaml")->GetString("type");
  method.policy_name = "fixed";
  EXPECT_TRUE(method.CheckCompatible().ok()) << method.CheckCompatible();
  const absl::Status attached = AttachDeviceVerifier(method, *Options::FromString(verifier_yaml, "test.yaml"));
  EXPECT_TRUE(attached.ok()) << attached;
  return method;
}

}  // namespace speclab::testing

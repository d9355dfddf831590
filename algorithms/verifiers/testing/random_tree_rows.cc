#include "algorithms/verifiers/testing/random_tree_rows.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <vector>

namespace speclab::enumeration {

RandomTreeRows RandomTreeRows::Cuda() const {
  return {.parents = parents.cuda(), .tokens = tokens.cuda(), .p = p.cuda(), .q = q.cuda(),
          .uniforms = uniforms.cuda(), .noise = noise.cuda()};
}

RandomTreeRows MakeRandomTreeRows(int64_t n, int64_t vocab, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const auto f = at::TensorOptions().dtype(at::kFloat);
  std::vector<int64_t> parents{-1};
  for (int64_t i = 1; i < n; ++i) parents.push_back(at::randint(0, i / 2 + 1, {1}, gen).item<int64_t>());
  RandomTreeRows c{.parents = at::tensor(parents), .tokens = at::randint(0, std::min<int64_t>(vocab, 5), {n}, gen)};
  c.p = at::rand({n, vocab}, gen, f).pow_(4);
  c.p.div_(c.p.sum(1, true));
  c.q = at::rand({n, vocab}, gen, f).pow_(4);
  c.q.div_(c.q.sum(1, true));
  c.uniforms = at::rand({n}, gen, f);
  c.noise = at::empty({vocab}, f).exponential_(1.0, gen);
  return c;
}

}  // namespace speclab::enumeration

// ChainGuess: how a chain drafted in rounds guesses its next tokens on the
// device (DeviceModel::ForwardChainInRoundsAt; staged speculation's cascade).
//
// A round feeds the chain's last token and the guesses after it in one
// forward; the picks then go on through the guesses they match. A guess
// never decides a token, only how many forwards the chain takes, so any rule
// keeps the chain's law. Built as ChainPick is (device_model.h): from a
// function that captures nothing and its declared parameters, the key under
// which captured graphs are cached derived from both (pick_key.h).
#ifndef SPECLAB_FRAMEWORK_DEVICE_CHAIN_GUESS_H_
#define SPECLAB_FRAMEWORK_DEVICE_CHAIN_GUESS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "framework/device/pick_key.h"

namespace speclab {

class ChainGuess {
 public:
  // `function(params, sequence, root, count)` -> guesses [count] int64 on
  // the sequence's device: the tokens that may follow position `root` ([1]
  // int64) of `sequence` (int64 [L], the generation by position, valid
  // through root). Device work only, depending on nothing but its arguments
  // (no host reads, no RNG); it may write `sequence` past root, nowhere else.
  template <typename Function, typename... Params>
  static ChainGuess Of(int64_t count, Function function, std::tuple<Params...> params = {}) {
    using Pointer = at::Tensor (*)(const std::tuple<Params...>&, const at::Tensor&, const at::Tensor&, int64_t);
    static_assert(std::is_convertible_v<Function, Pointer>,
                  "a guess is a function of its declared parameters and arguments: it may capture nothing");
    const Pointer pointer = function;
    ChainGuess guess;
    guess.key_ = absl::StrCat(PickFunctionKey(pointer), PickKeyParts(params), "x", count);
    guess.count_ = count;
    guess.function_ = [pointer, params, count](const at::Tensor& sequence, const at::Tensor& root) {
      return pointer(params, sequence, root, count);
    };
    return guess;
  }

  at::Tensor operator()(const at::Tensor& sequence, const at::Tensor& root) const { return function_(sequence, root); }
  int64_t count() const { return count_; }  // guesses a round
  const std::string& key() const { return key_; }
  bool defined() const { return static_cast<bool>(function_); }

 private:
  std::string key_;
  int64_t count_ = 0;
  std::function<at::Tensor(const at::Tensor& sequence, const at::Tensor& root)> function_;
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_CHAIN_GUESS_H_

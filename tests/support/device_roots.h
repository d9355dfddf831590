// Token-only drafters' device forms in tests: a host sequence's root as a
// pipelined step hands it over (DeviceRoot), and their candidates
// (DeviceContinuations) checked against those the host finds.
#ifndef SPECLAB_TESTS_SUPPORT_DEVICE_ROOTS_H_
#define SPECLAB_TESTS_SUPPORT_DEVICE_ROOTS_H_

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "framework/device/device_drafter.h"

namespace speclab::testing {

// The root of `sequence` (its last token; at least two) on `device`: the
// sequence up to the token before the root as context, then `stale` entries
// of `stale_token` standing for what lies past the root (none: the sequence's
// last two tokens, as after a step that wrote them).
DeviceRoot RootOfSequence(const std::vector<int32_t>& sequence, c10::Device device, int stale = 0,
                          int64_t stale_token = 0);

// Every row of `got` is candidate c of `expected` (or empty past the last),
// its length and tokens, `root` past its end; failures name `where`.
void ExpectContinuations(const DeviceContinuations& got, const std::vector<std::vector<int32_t>>& expected,
                         int64_t root, const std::string& where);

// Pipelined steps of a token-only drafter (`drafter_yaml`, say "{type:
// suffix_tree}") made on `device` against one made on the CPU stepping on
// the host, over `prompts` in turn (each after the first copies the last
// two thirds of the output before it, which the drafters may have kept):
// every step's candidates (ContinuationsAt; every third step a chain,
// ContinuationAt) must be the host's Continuations() (or its Continuation()
// to the fixed length, ToFixedLength). The sequence grows by a few of the
// drafts and a token of `vocab`'s. Returns the drafted tokens compared.
int ExpectPipelinedDraftsOfTheHost(c10::Device device, const std::string& drafter_yaml,
                                   const std::vector<std::vector<int32_t>>& prompts, int steps, int max_tokens,
                                   int max_candidates, int vocab);

}  // namespace speclab::testing

#endif  // SPECLAB_TESTS_SUPPORT_DEVICE_ROOTS_H_

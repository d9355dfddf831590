// Independent device work side by side.
//
// A drafter whose device form runs several lookups a step (a merge's parts,
// Hierarchy Drafting's levels) queues each on a stream of its own, so that
// their kernels overlap instead of running one after another; the caller's
// stream then waits for them all. Nothing waits on the host.
#ifndef SPECLAB_FRAMEWORK_DEVICE_SIDE_STREAMS_H_
#define SPECLAB_FRAMEWORK_DEVICE_SIDE_STREAMS_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <vector>

#include "absl/status/status.h"

namespace speclab {

// One piece of work: queues device work on the current stream and lists in
// `made` the tensors it leaves for the caller.
using SideWork = std::function<absl::Status(std::vector<at::Tensor>& made)>;

// Calls each of `work` in turn. On CUDA (two pieces or more) each runs with a
// side stream of `device` current, its work starting after what the current
// stream had queued; the current stream's later work waits for all of it,
// and the tensors listed in `made` are marked as used there (so that the
// caching allocator keeps their memory until that later work has read it).
// Elsewhere, or with SPECLAB_SIDE_STREAMS=0 in the environment (to measure
// what the overlap gains), each runs on the current stream. Returns the first
// error (the work queued before it still joins the current stream).
absl::Status RunSideBySide(c10::Device device, const std::vector<SideWork>& work);

// Whether RunSideBySide uses side streams (SPECLAB_SIDE_STREAMS unset or not
// "0").
bool SideStreamsEnabled();

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_SIDE_STREAMS_H_

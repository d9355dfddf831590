// Timing the device's own work, without the host's.
//
// A forward queued from the host costs the device its kernels, and the host
// its launches. Where the host is slower than the device (small models,
// eager ops), timing forwards on the host's clock measures the launches and
// whatever else the host's processor was doing. Prices that predict what an
// overhead-free engine would take must be the device's time alone, so the
// device is held still while the host queues the work, then timed by its
// own events.
#ifndef SPECLAB_FRAMEWORK_DEVICE_DEVICE_TIMER_H_
#define SPECLAB_FRAMEWORK_DEVICE_DEVICE_TIMER_H_

#include <c10/core/Device.h>

#include <functional>

#include "absl/status/statusor.h"

namespace speclab {

// Seconds the device took for the work `queue` queues on the current stream.
// On CUDA the stream first waits in a spin kernel while `queue` runs, and
// the time is the device's from the spin's end to the work's; where the
// spin ended before the host had queued everything, the spin is lengthened
// (to twice the host's queuing time) and the work queued again, so that the
// time is the device's alone, the work's kernels back to back as in a
// pipelined decode. Work that waits for the device itself is refused
// (FailedPrecondition). On the CPU, the wall time of `queue`. The work must
// leave the models as it found them (it may be queued several times).
absl::StatusOr<double> DeviceSeconds(c10::Device device, const std::function<absl::Status()>& queue);

// DeviceSeconds of `queue` on an accelerator, the median of several timings
// (its clocks and its neighbours move single ones); one timing elsewhere.
absl::StatusOr<double> MedianDeviceSeconds(c10::Device device, const std::function<absl::Status()>& queue);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_DEVICE_TIMER_H_

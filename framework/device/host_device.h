// SPECLAB_HOST_DEVICE marks a function that a plugin writes once for both
// of its forms: its device form's CPU path calls it on host pointers, its CUDA
// kernel (cuda/*.cu) on device pointers. So the rule a kernel follows and the
// one the CPU tests check are the same code.
#ifndef SPECLAB_FRAMEWORK_DEVICE_HOST_DEVICE_H_
#define SPECLAB_FRAMEWORK_DEVICE_HOST_DEVICE_H_

#ifdef __CUDACC__
#define SPECLAB_HOST_DEVICE __host__ __device__
#else
#define SPECLAB_HOST_DEVICE
#endif

#endif  // SPECLAB_FRAMEWORK_DEVICE_HOST_DEVICE_H_

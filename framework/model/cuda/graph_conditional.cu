// IF nodes under stream capture; see graph_conditional.h.
#include "framework/model/cuda/graph_conditional.h"

#include <cuda_runtime.h>

namespace speclab {
namespace graph_conditional {

#if CUDART_VERSION >= 12040

namespace {

// Sets the IF's condition from the flag when the replay reaches it.
__global__ void SetConditionKernel(cudaGraphConditionalHandle handle, const bool* predicate) {
  cudaGraphSetConditional(handle, *predicate ? 1u : 0u);
}

}  // namespace

bool Supported() { return true; }

int NewCondition(void* stream_ptr, unsigned long long* condition) {
  const cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  cudaStreamCaptureStatus status{};
  cudaGraph_t graph{};
  cudaError_t error = cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph);
  if (error != cudaSuccess) return error;
  if (status != cudaStreamCaptureStatusActive) return cudaErrorStreamCaptureInvalidated;
  cudaGraphConditionalHandle handle{};
  error = cudaGraphConditionalHandleCreate(&handle, graph, /*defaultLaunchValue=*/0, /*flags=*/0);
  *condition = handle;
  return error;
}

int SetCondition(void* stream_ptr, unsigned long long condition, const bool* predicate) {
  SetConditionKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream_ptr)>>>(condition, predicate);
  return cudaGetLastError();
}

int AddIfNode(void* stream_ptr, unsigned long long condition, void** body) {
  const cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  cudaStreamCaptureStatus status{};
  cudaGraph_t graph{};
  // The IF node after the capture's current frontier (the launch that set the condition).
  const cudaGraphNode_t* dependencies = nullptr;
  const cudaGraphEdgeData* edges = nullptr;
  size_t count = 0;
#if CUDART_VERSION >= 13000
  cudaError_t error = cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph, &dependencies, &edges, &count);
#else
  cudaError_t error = cudaStreamGetCaptureInfo_v3(stream, &status, nullptr, &graph, &dependencies, &edges, &count);
#endif
  if (error != cudaSuccess) return error;
  if (status != cudaStreamCaptureStatusActive) return cudaErrorStreamCaptureInvalidated;
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = condition;
  params.conditional.type = cudaGraphCondTypeIf;
  params.conditional.size = 1;
  cudaGraphNode_t node{};
#if CUDART_VERSION >= 13000
  error = cudaGraphAddNode(&node, graph, dependencies, edges, count, &params);
#else
  error = cudaGraphAddNode_v2(&node, graph, dependencies, edges, count, &params);
#endif
  if (error != cudaSuccess) return error;
  *body = params.conditional.phGraph_out[0];
#if CUDART_VERSION >= 13000
  return cudaStreamUpdateCaptureDependencies(stream, &node, nullptr, 1, cudaStreamSetCaptureDependencies);
#else
  return cudaStreamUpdateCaptureDependencies_v2(stream, &node, nullptr, 1, cudaStreamSetCaptureDependencies);
#endif
}

int BeginBodyCapture(void* stream_ptr, void* body, unsigned long long* capture_id) {
  const cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  cudaError_t error = cudaStreamBeginCaptureToGraph(stream, static_cast<cudaGraph_t>(body), nullptr, nullptr, 0,
                                                    cudaStreamCaptureModeGlobal);
  if (error != cudaSuccess) return error;
  return CaptureId(stream_ptr, capture_id);
}

int EndBodyCapture(void* stream_ptr) {
  cudaGraph_t graph{};
  return cudaStreamEndCapture(static_cast<cudaStream_t>(stream_ptr), &graph);
}

#else  // CUDART_VERSION < 12040

bool Supported() { return false; }
int NewCondition(void*, unsigned long long*) { return cudaErrorNotSupported; }
int SetCondition(void*, unsigned long long, const bool*) { return cudaErrorNotSupported; }
int AddIfNode(void*, unsigned long long, void**) { return cudaErrorNotSupported; }
int BeginBodyCapture(void*, void*, unsigned long long*) { return cudaErrorNotSupported; }
int EndBodyCapture(void*) { return cudaErrorNotSupported; }

#endif

int CaptureId(void* stream_ptr, unsigned long long* capture_id) {
  cudaStreamCaptureStatus status{};
  *capture_id = 0;
  return cudaStreamGetCaptureInfo(static_cast<cudaStream_t>(stream_ptr), &status, capture_id);
}

}  // namespace graph_conditional
}  // namespace speclab

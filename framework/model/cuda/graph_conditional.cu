// IF nodes under stream capture; see graph_conditional.h.
#include "framework/model/cuda/graph_conditional.h"

#include <cuda_runtime.h>

namespace speclab {
namespace graph_conditional {

#if CUDART_VERSION >= 12040

namespace {

// Sets the IF's condition from the flag when the replay reaches it.
__global__ void SetCondition(cudaGraphConditionalHandle handle, const bool* predicate) {
  cudaGraphSetConditional(handle, *predicate ? 1u : 0u);
}

}  // namespace

bool Supported() { return true; }

int AddIfNode(void* stream_ptr, const bool* predicate, void** body) {
  const cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  cudaStreamCaptureStatus status{};
  cudaGraph_t graph{};
  cudaError_t error = cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph);
  if (error != cudaSuccess) return error;
  if (status != cudaStreamCaptureStatusActive) return cudaErrorStreamCaptureInvalidated;
  cudaGraphConditionalHandle handle{};
  error = cudaGraphConditionalHandleCreate(&handle, graph, /*defaultLaunchValue=*/0, /*flags=*/0);
  if (error != cudaSuccess) return error;
  SetCondition<<<1, 1, 0, stream>>>(handle, predicate);
  error = cudaGetLastError();
  if (error != cudaSuccess) return error;

  // The IF node after the capture's current frontier (the SetCondition launch).
  const cudaGraphNode_t* dependencies = nullptr;
  const cudaGraphEdgeData* edges = nullptr;
  size_t count = 0;
#if CUDART_VERSION >= 13000
  error = cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph, &dependencies, &edges, &count);
#else
  error = cudaStreamGetCaptureInfo_v3(stream, &status, nullptr, &graph, &dependencies, &edges, &count);
#endif
  if (error != cudaSuccess) return error;
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = handle;
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
int AddIfNode(void*, const bool*, void**) { return cudaErrorNotSupported; }
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

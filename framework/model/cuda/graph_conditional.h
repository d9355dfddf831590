// Conditional work in a CUDA graph under stream capture (CUDA 12.4 on): an
// IF node whose body runs, in each replay, only where a device flag holds.
// framework/model/cuda_graph.cc uses it for CudaGraph::BeginIf; it handles
// the streams and LibTorch's memory pool around it.
//
// Like row_kernels.h, this header knows nothing of torch or CUDA: streams
// and graphs are passed as void*, errors returned as a cudaError_t (0 ==
// cudaSuccess).
#ifndef SPECLAB_FRAMEWORK_MODEL_CUDA_GRAPH_CONDITIONAL_H_
#define SPECLAB_FRAMEWORK_MODEL_CUDA_GRAPH_CONDITIONAL_H_

namespace speclab {
namespace graph_conditional {

// Whether this build's CUDA has conditional nodes.
bool Supported();

// `stream` is capturing: *condition receives a new condition (a
// cudaGraphConditionalHandle) of the graph it captures into, for one IF node.
// A kernel captured before that node sets it each replay
// (cudaGraphSetConditional), as SetCondition's does.
int NewCondition(void* stream, unsigned long long* condition);

// Captures a launch on `stream` that sets `condition` to *predicate (a
// device bool) when a replay reaches it.
int SetCondition(void* stream, unsigned long long condition, const bool* predicate);

// `stream` is capturing: adds an IF node on `condition` after what it
// captured so far, and makes the capture continue after that node. *body
// receives the IF's body graph (a cudaGraph_t), for
// cudaStreamBeginCaptureToGraph.
int AddIfNode(void* stream, unsigned long long condition, void** body);

// Starts capturing `stream` into `body` (from AddIfNode); *capture_id
// receives the new capture's id. EndBodyCapture ends it.
int BeginBodyCapture(void* stream, void* body, unsigned long long* capture_id);
int EndBodyCapture(void* stream);

// The id of the capture `stream` is part of (0 where it is not capturing).
int CaptureId(void* stream, unsigned long long* capture_id);

}  // namespace graph_conditional
}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_CUDA_GRAPH_CONDITIONAL_H_

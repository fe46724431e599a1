// simgpu's CUDA graphs: stream capture and explicit construction of kernel graphs, whose launches
// must compute what the same kernels launched one by one compute, in dependency order and on the
// virtual clock; node types simgpu does not simulate are refused, never pretended.
#define __CUDA_API_VERSION_INTERNAL 1  // the raw exported names, as a driver-API job resolves them
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

namespace {

constexpr uint64_t kWords = 1 << 18;  // 1 MiB of uint32_t per buffer

class SimgpuGraph : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleLoad(&module_, SIMGPU_TEST_KERNELS), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&scale_add_, module_, "scale_add_u32"), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&timed_, module_, "timed"), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    for (CUdeviceptr& b : buffers_) {
      ASSERT_EQ(cuMemAllocManaged(&b, kWords * 4, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    }
    Fill();
  }
  void TearDown() override {
    for (CUdeviceptr b : buffers_) EXPECT_EQ(cuMemFree_v2(b), CUDA_SUCCESS);
    EXPECT_EQ(cuStreamDestroy(stream_), CUDA_SUCCESS);
    EXPECT_EQ(cuModuleUnload(module_), CUDA_SUCCESS);
    EXPECT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
  }
  uint32_t* Words(int i) { return reinterpret_cast<uint32_t*>(buffers_[i]); }
  void Fill() {
    for (int b = 0; b < 3; ++b) {
      for (uint64_t i = 0; i < kWords; ++i) Words(b)[i] = static_cast<uint32_t>(i * (b + 3) + 1);
    }
  }
  std::vector<uint32_t> Contents() {
    EXPECT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);
    std::vector<uint32_t> all;
    for (int b = 0; b < 3; ++b) all.insert(all.end(), Words(b), Words(b) + kWords);
    return all;
  }
  // The step: four scale-adds whose order matters, the first by `first_a`. On a capturing stream
  // they become nodes.
  void Step(uint32_t first_a = 3) {
    const int order[4][2] = {{0, 1}, {1, 2}, {2, 0}, {0, 2}};
    for (int k = 0; k < 4; ++k) {
      CUdeviceptr dst = buffers_[order[k][0]], src = buffers_[order[k][1]];
      uint32_t a = k == 0 ? first_a : 3 + k;
      uint64_t n = kWords;
      void* params[] = {&dst, &src, &a, &n};
      ASSERT_EQ(cuLaunchKernel(scale_add_, 4, 1, 1, 128, 1, 1, 0, stream_, params, nullptr),
                CUDA_SUCCESS);
    }
  }
  // One scale-add, dst = dst * a + src, launched or (with `graph`) added after `dep`.
  void ScaleAdd(int dst, int src, uint32_t a, CUgraph graph = nullptr, CUgraphNode dep = nullptr,
                CUgraphNode* node = nullptr) {
    CUdeviceptr d = buffers_[dst], s = buffers_[src];
    uint64_t n = kWords;
    void* params[] = {&d, &s, &a, &n};
    if (graph == nullptr) {
      ASSERT_EQ(cuLaunchKernel(scale_add_, 4, 1, 1, 128, 1, 1, 0, stream_, params, nullptr),
                CUDA_SUCCESS);
      return;
    }
    CUDA_KERNEL_NODE_PARAMS p = KernelParams(scale_add_, params);
    ASSERT_EQ(cuGraphAddKernelNode_v2(node, graph, &dep, dep != nullptr ? 1 : 0, &p), CUDA_SUCCESS);
  }
  CUgraph CapturedStep(uint32_t first_a = 3) {
    CUgraph graph = nullptr;
    EXPECT_EQ(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    Step(first_a);
    EXPECT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_SUCCESS);
    return graph;
  }
  CUDA_KERNEL_NODE_PARAMS KernelParams(CUfunction f, void** params) {
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = f;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 32;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = params;
    return p;
  }

  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction scale_add_ = nullptr, timed_ = nullptr;
  CUstream stream_ = nullptr;
  CUdeviceptr buffers_[3] = {};
};

TEST_F(SimgpuGraph, CapturedGraphComputesWhatDirectLaunchesCompute) {
  for (int i = 0; i < 3; ++i) Step();
  const std::vector<uint32_t> direct = Contents();
  Fill();
  const std::vector<uint32_t> filled = Contents();
  ASSERT_NE(filled, direct);

  ASSERT_EQ(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  Step();
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_SUCCESS);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(Contents(), filled) << "captured launches must not run";

  size_t count = 0;
  ASSERT_EQ(cuGraphGetNodes(graph, nullptr, &count), CUDA_SUCCESS);
  ASSERT_EQ(count, 4u);
  std::vector<CUgraphNode> nodes(count);
  ASSERT_EQ(cuGraphGetNodes(graph, nodes.data(), &count), CUDA_SUCCESS);
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
    ASSERT_EQ(cuGraphNodeGetType(node, &type), CUDA_SUCCESS);
    EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_KERNEL);
  }
  CUDA_KERNEL_NODE_PARAMS params{};
  ASSERT_EQ(cuGraphKernelNodeGetParams_v2(nodes[1], &params), CUDA_SUCCESS);
  EXPECT_EQ(params.func, scale_add_);
  EXPECT_EQ(params.gridDimX, 4u);
  EXPECT_EQ(params.blockDimX, 128u);
  ASSERT_NE(params.kernelParams, nullptr);
  EXPECT_EQ(*static_cast<CUdeviceptr*>(params.kernelParams[0]), buffers_[1]);
  EXPECT_EQ(*static_cast<CUdeviceptr*>(params.kernelParams[1]), buffers_[2]);
  EXPECT_EQ(*static_cast<uint32_t*>(params.kernelParams[2]), 4u);

  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  EXPECT_EQ(Contents(), direct);
  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);
}

TEST_F(SimgpuGraph, BuiltGraphRunsInDependencyOrderAndTakesNewParameters) {
  CUgraph graph = nullptr;
  ASSERT_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
  CUdeviceptr b0 = buffers_[0], b1 = buffers_[1], b2 = buffers_[2];
  uint32_t two = 2, five = 5;
  uint64_t n = kWords;
  void* first[] = {&b0, &b1, &two, &n};    // b0 = b0*2 + b1
  void* second[] = {&b2, &b0, &five, &n};  // b2 = b2*5 + b0 (needs the new b0)
  CUgraphNode root = nullptr, join = nullptr, last = nullptr;
  // Added in an order that is not the launch order of a plain walk: the empty node first.
  ASSERT_EQ(cuGraphAddEmptyNode(&root, graph, nullptr, 0), CUDA_SUCCESS);
  CUDA_KERNEL_NODE_PARAMS p = KernelParams(scale_add_, first);
  ASSERT_EQ(cuGraphAddKernelNode_v2(&join, graph, &root, 1, &p), CUDA_SUCCESS);
  p = KernelParams(scale_add_, second);
  ASSERT_EQ(cuGraphAddKernelNode_v2(&last, graph, &join, 1, &p), CUDA_SUCCESS);
  CUgraphNode bogus = reinterpret_cast<CUgraphNode>(&p);
  EXPECT_EQ(cuGraphAddKernelNode_v2(&bogus, graph, &bogus, 1, &p), CUDA_ERROR_INVALID_VALUE);

  CUgraphExec exec = nullptr;
  CUDA_GRAPH_INSTANTIATE_PARAMS ip{};
  ASSERT_EQ(cuGraphInstantiateWithParams(&exec, graph, &ip), CUDA_SUCCESS);
  EXPECT_EQ(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
  std::vector<uint32_t> expect = Contents();
  auto apply = [&](uint32_t a0, uint32_t a2) {
    for (uint64_t i = 0; i < kWords; ++i) {
      expect[i] = expect[i] * a0 + expect[kWords + i];
      expect[2 * kWords + i] = expect[2 * kWords + i] * a2 + expect[i];
    }
  };
  ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  apply(2, 5);
  EXPECT_EQ(Contents(), expect);

  // A changed node of the exec takes effect at the next launch; the graph itself is unchanged.
  uint32_t seven = 7;
  void* changed[] = {&b2, &b0, &seven, &n};
  p = KernelParams(scale_add_, changed);
  ASSERT_EQ(cuGraphExecKernelNodeSetParams_v2(exec, last, &p), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphExecKernelNodeSetParams_v2(exec, root, &p), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  apply(2, 7);
  EXPECT_EQ(Contents(), expect);

  // An update from a graph of the same shape takes that graph's parameters (5 again).
  CUgraphExecUpdateResultInfo info{};
  ASSERT_EQ(cuGraphExecUpdate_v2(exec, graph, &info), CUDA_SUCCESS);
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  apply(2, 5);
  EXPECT_EQ(Contents(), expect);

  // Another shape cannot update it.
  CUgraph other = nullptr;
  ASSERT_EQ(cuGraphCreate(&other, 0), CUDA_SUCCESS);
  CUgraphNode lone = nullptr;
  ASSERT_EQ(cuGraphAddEmptyNode(&lone, other, nullptr, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphExecUpdate_v2(exec, other, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);

  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(other), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);
}

TEST_F(SimgpuGraph, LaunchesRunOnTheVirtualClock) {
  CUgraph graph = nullptr;
  ASSERT_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
  double seconds = 1e-3;
  void* params[] = {&seconds};
  CUDA_KERNEL_NODE_PARAMS p = KernelParams(timed_, params);
  CUgraphNode previous = nullptr;
  for (int i = 0; i < 3; ++i) {
    CUgraphNode node = nullptr;
    ASSERT_EQ(
        cuGraphAddKernelNode_v2(&node, graph, previous ? &previous : nullptr, previous ? 1 : 0, &p),
        CUDA_SUCCESS);
    previous = node;
  }
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  CUevent start = nullptr, end = nullptr;
  ASSERT_EQ(cuEventCreate(&start, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&end, 0), CUDA_SUCCESS);
  // A fresh stream's clock starts behind the compute engine's: catch up with a 0 s kernel first.
  double none = 0;
  void* catch_up[] = {&none};
  ASSERT_EQ(cuLaunchKernel(timed_, 1, 1, 1, 1, 1, 1, 0, stream_, catch_up, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(start, stream_), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(end, stream_), CUDA_SUCCESS);
  ASSERT_EQ(cuEventSynchronize(end), CUDA_SUCCESS);
  float ms = 0;
  ASSERT_EQ(cuEventElapsedTime_v2(&ms, start, end), CUDA_SUCCESS);
  EXPECT_NEAR(ms, 6.0, 0.01);  // two launches of three 1 ms kernels
  EXPECT_EQ(cuEventDestroy_v2(start), CUDA_SUCCESS);
  EXPECT_EQ(cuEventDestroy_v2(end), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);
}

TEST_F(SimgpuGraph, UnsupportedNodesAndCapturedWorkAreRefused) {
  CUgraph graph = nullptr;
  ASSERT_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
  CUgraphNode node = nullptr;
  CUDA_MEMSET_NODE_PARAMS memset_params{};
  EXPECT_EQ(cuGraphAddMemsetNode(&node, graph, nullptr, 0, &memset_params, ctx_),
            CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cuGraphAddHostNode(&node, graph, nullptr, 0, nullptr), CUDA_ERROR_NOT_SUPPORTED);
  CUgraphNodeParams generic{};
  generic.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  EXPECT_EQ(cuGraphAddNode_v2(&node, graph, nullptr, nullptr, 0, &generic),
            CUDA_ERROR_NOT_SUPPORTED);
  CUgraphExec exec = nullptr;
  EXPECT_EQ(cuGraphInstantiateWithFlags(&exec, graph, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH),
            CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);

  // Work other than kernel launches cannot be captured: refused, and the capture is invalidated.
  ASSERT_EQ(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  Step();
  EXPECT_EQ(cuMemsetD32Async(buffers_[0], 0, kWords, stream_),
            CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph captured = reinterpret_cast<CUgraph>(&node);
  EXPECT_EQ(cuStreamEndCapture(stream_, &captured), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(captured, nullptr);
  EXPECT_EQ(cuStreamEndCapture(stream_, &captured), CUDA_ERROR_ILLEGAL_STATE);
  EXPECT_EQ(cuStreamBeginCapture_v2(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL),
            CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);  // the legacy stream
}

// A child-graph node runs a clone of its graph in its place: nested two deep, between two kernel
// nodes, with the graph it was cloned from destroyed before the launch. The embedded graph is
// the node's: readable, not destroyable apart from it.
TEST_F(SimgpuGraph, ChildGraphNodesRunTheirGraphInPlace) {
  for (int i = 0; i < 2; ++i) {
    ScaleAdd(1, 2, 7);
    Step();
    ScaleAdd(2, 0, 11);
  }
  const std::vector<uint32_t> direct = Contents();
  Fill();

  CUgraph step = CapturedStep();
  CUgraph middle = nullptr;  // holds the step as a child
  ASSERT_EQ(cuGraphCreate(&middle, 0), CUDA_SUCCESS);
  CUgraphNode inner = nullptr;
  ASSERT_EQ(cuGraphAddChildGraphNode(&inner, middle, nullptr, 0, step), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphDestroy(step), CUDA_SUCCESS);  // the node has its own copy

  CUgraph graph = nullptr;
  ASSERT_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
  CUgraphNode first = nullptr, child = nullptr, last = nullptr;
  ScaleAdd(1, 2, 7, graph, nullptr, &first);
  ASSERT_EQ(cuGraphAddChildGraphNode(&child, graph, &first, 1, middle), CUDA_SUCCESS);
  ScaleAdd(2, 0, 11, graph, child, &last);
  ASSERT_EQ(cuGraphDestroy(middle), CUDA_SUCCESS);

  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  ASSERT_EQ(cuGraphNodeGetType(child, &type), CUDA_SUCCESS);
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_GRAPH);
  CUgraph embedded = nullptr;
  ASSERT_EQ(cuGraphChildGraphNodeGetGraph(child, &embedded), CUDA_SUCCESS);
  size_t count = 0;
  ASSERT_EQ(cuGraphGetNodes(embedded, nullptr, &count), CUDA_SUCCESS);
  ASSERT_EQ(count, 1u);
  CUgraphNode nested = nullptr;
  ASSERT_EQ(cuGraphGetNodes(embedded, &nested, &count), CUDA_SUCCESS);
  CUgraph innermost = nullptr;
  ASSERT_EQ(cuGraphChildGraphNodeGetGraph(nested, &innermost), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphGetNodes(innermost, nullptr, &count), CUDA_SUCCESS);
  EXPECT_EQ(count, 4u);
  EXPECT_EQ(cuGraphDestroy(embedded), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphChildGraphNodeGetGraph(first, &embedded), CUDA_ERROR_INVALID_VALUE);

  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  EXPECT_EQ(Contents(), direct);
  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);  // and the graphs its nodes embed
  EXPECT_EQ(cuGraphGetNodes(innermost, nullptr, &count), CUDA_ERROR_INVALID_VALUE);
}

// cuGraphExecChildGraphNodeSetParams gives an exec's child graph the parameters of a graph of the
// same shape (changing the embedded graph changes only later instantiations); a graph moved into
// its node (cuGraphAddNode, CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) belongs to the parent.
TEST_F(SimgpuGraph, ChildGraphParametersAreSetOnTheExecAndMovedGraphsBelongToTheParent) {
  Step(9);
  const std::vector<uint32_t> with_nine = Contents();
  Fill();
  Step();
  const std::vector<uint32_t> with_three = Contents();
  Fill();

  CUgraph graph = nullptr;
  ASSERT_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
  CUgraph step = CapturedStep();
  CUgraphNodeParams moved{};
  moved.type = CU_GRAPH_NODE_TYPE_GRAPH;
  moved.graph.graph = step;
  moved.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
  CUgraphNode child = nullptr;
  ASSERT_EQ(cuGraphAddNode_v2(&child, graph, nullptr, nullptr, 0, &moved), CUDA_SUCCESS);
  CUgraphExec exec = nullptr;
  EXPECT_EQ(cuGraphInstantiateWithFlags(&exec, step, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphDestroy(step), CUDA_ERROR_INVALID_VALUE);
  CUgraphNode again = nullptr;
  EXPECT_EQ(cuGraphAddChildGraphNode(&again, graph, nullptr, 0, step), CUDA_ERROR_INVALID_VALUE);
  moved.graph.graph = graph;  // a graph cannot be moved into itself
  EXPECT_EQ(cuGraphAddNode_v2(&again, graph, nullptr, nullptr, 0, &moved),
            CUDA_ERROR_INVALID_VALUE);

  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  CUgraph nine = CapturedStep(9);
  ASSERT_EQ(cuGraphExecChildGraphNodeSetParams(exec, child, nine), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  EXPECT_EQ(Contents(), with_nine);
  Fill();
  ASSERT_EQ(cuGraphExecChildGraphNodeSetParams(exec, child, step), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  EXPECT_EQ(Contents(), with_three);

  // The same nodes nested differently are another topology: the parent's child holds the step
  // and nothing follows it; in `flat`, an empty child graph node precedes the step's kernels.
  CUgraph flat = nullptr, empty = nullptr;
  ASSERT_EQ(cuGraphCreate(&flat, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphCreate(&empty, 0), CUDA_SUCCESS);
  CUgraphNode empty_child = nullptr;
  ASSERT_EQ(cuGraphAddChildGraphNode(&empty_child, flat, nullptr, 0, empty), CUDA_SUCCESS);
  CUgraph flat_step = CapturedStep();
  size_t count = 0;
  ASSERT_EQ(cuGraphGetNodes(flat_step, nullptr, &count), CUDA_SUCCESS);
  std::vector<CUgraphNode> step_nodes(count);
  ASSERT_EQ(cuGraphGetNodes(flat_step, step_nodes.data(), &count), CUDA_SUCCESS);
  CUgraphNode previous = empty_child;
  for (CUgraphNode node : step_nodes) {
    CUDA_KERNEL_NODE_PARAMS p{};
    ASSERT_EQ(cuGraphKernelNodeGetParams_v2(node, &p), CUDA_SUCCESS);
    ASSERT_EQ(cuGraphAddKernelNode_v2(&previous, flat, &previous, 1, &p), CUDA_SUCCESS);
  }
  CUgraphExecUpdateResultInfo info{};
  EXPECT_EQ(cuGraphExecUpdate_v2(exec, flat, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  for (CUgraph g : {flat, empty, flat_step}) EXPECT_EQ(cuGraphDestroy(g), CUDA_SUCCESS);

  CUgraph other_shape = nullptr;
  ASSERT_EQ(cuGraphCreate(&other_shape, 0), CUDA_SUCCESS);
  CUgraphNode lone = nullptr;
  ScaleAdd(0, 1, 9, other_shape, nullptr, &lone);
  EXPECT_EQ(cuGraphExecChildGraphNodeSetParams(exec, child, other_shape), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGraphExecChildGraphNodeSetParams(exec, lone, nine), CUDA_ERROR_INVALID_VALUE);

  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  for (CUgraph g : {other_shape, nine, graph}) EXPECT_EQ(cuGraphDestroy(g), CUDA_SUCCESS);
}

// Stream-ordered allocation on a capturing stream is a memory node of the graph, as on the
// driver (CUDA 11.4 on): the capture survives, the address is usable by the graph's kernels, and
// its captured free is part of the graph; a free of memory the capture did not allocate cannot be
// captured.
TEST_F(SimgpuGraph, StreamOrderedAllocationInACaptureIsAMemoryNode) {
  ASSERT_EQ(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  CUdeviceptr scratch = 0;
  ASSERT_EQ(cuMemAllocAsync(&scratch, kWords * 4, stream_), CUDA_SUCCESS);
  EXPECT_NE(scratch, 0u);
  Step();
  EXPECT_EQ(cuMemFreeAsync(scratch, stream_), CUDA_SUCCESS);
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_SUCCESS);
  ASSERT_NE(graph, nullptr);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  // A graph with memory nodes can become a child graph only by moving it there, as on the driver.
  CUgraph parent = nullptr;
  ASSERT_EQ(cuGraphCreate(&parent, 0), CUDA_SUCCESS);
  CUgraphNode child = nullptr;
  EXPECT_EQ(cuGraphAddChildGraphNode(&child, parent, nullptr, 0, graph), CUDA_ERROR_INVALID_VALUE);
  CUgraphNodeParams moved{};
  moved.type = CU_GRAPH_NODE_TYPE_GRAPH;
  moved.graph.graph = graph;
  moved.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
  EXPECT_EQ(cuGraphAddNode_v2(&child, parent, nullptr, nullptr, 0, &moved), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(parent), CUDA_SUCCESS);  // and the graph moved into it

  CUdeviceptr outside = 0;
  ASSERT_EQ(cuMemAllocAsync(&outside, kWords * 4, stream_), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeAsync(outside, stream_), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(cuMemFreeAsync(outside, stream_), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);
}

// What `call` returns on another thread (made current on the fixture's context first).
template <typename Call>
CUresult OnOtherThread(CUcontext ctx, Call call) {
  CUresult result = CUDA_ERROR_UNKNOWN;
  std::thread([&] {
    if (cuCtxSetCurrent(ctx) == CUDA_SUCCESS) result = call();
  }).join();
  return result;
}

TEST_F(SimgpuGraph, GlobalCaptureForbidsUnsafeCallsFromEveryThread) {
  ASSERT_EQ(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  Step();
  // Safe calls from another thread leave the capture alone: a launch on another stream.
  CUstream other = nullptr;
  ASSERT_EQ(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr dst = buffers_[1], src = buffers_[2];
  uint32_t a = 1;
  uint64_t n = 16;
  void* params[] = {&dst, &src, &a, &n};
  EXPECT_EQ(
      OnOtherThread(
          ctx_,
          [&] { return cuLaunchKernel(scale_add_, 1, 1, 1, 32, 1, 1, 0, other, params, nullptr); }),
      CUDA_SUCCESS);
  // A thread that switched itself to relaxed mode may make unsafe calls.
  EXPECT_EQ(OnOtherThread(ctx_,
                          [&] {
                            CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
                            if (cuThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS ||
                                mode != CU_STREAM_CAPTURE_MODE_GLOBAL) {
                              return CUDA_ERROR_UNKNOWN;
                            }
                            return cuMemPrefetchAsync(buffers_[0], 4096, CU_DEVICE_CPU, other);
                          }),
            CUDA_SUCCESS);
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_SUCCESS);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);

  // Each unsafe call from another thread (in the default, global mode) is refused and invalidates
  // the capture.
  CUevent event = nullptr;
  ASSERT_EQ(cuEventCreate(&event, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(event, other), CUDA_SUCCESS);
  std::vector<uint32_t> host(16);
  const std::vector<std::pair<const char*, std::function<CUresult()>>> unsafe = {
      {"cuMemPrefetchAsync", [&] { return cuMemPrefetchAsync(buffers_[0], 4096, 0, other); }},
      {"cuMemAlloc",
       [&] {
         CUdeviceptr p = 0;
         return cuMemAlloc_v2(&p, 4096);
       }},
      {"cuMemAllocManaged",
       [&] {
         CUdeviceptr p = 0;
         return cuMemAllocManaged(&p, 4096, CU_MEM_ATTACH_GLOBAL);
       }},
      {"cuMemFree", [&] { return cuMemFree_v2(buffers_[2]); }},
      {"cuEventQuery", [&] { return cuEventQuery(event); }},
      {"cuEventSynchronize", [&] { return cuEventSynchronize(event); }},
      {"cuStreamQuery", [&] { return cuStreamQuery(other); }},
      {"cuStreamSynchronize", [&] { return cuStreamSynchronize(other); }},
      {"cuCtxSynchronize", [&] { return cuCtxSynchronize(); }},
      {"cuMemcpyDtoH", [&] { return cuMemcpyDtoH_v2(host.data(), buffers_[0], 64); }},
  };
  for (const auto& [name, call] : unsafe) {
    ASSERT_EQ(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    Step();
    EXPECT_EQ(OnOtherThread(ctx_, call), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) << name;
    graph = nullptr;
    EXPECT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) << name;
    EXPECT_EQ(graph, nullptr) << name;
  }
  // Without a capture they are allowed again (and the buffer above is still live).
  EXPECT_EQ(cuMemPrefetchAsync(buffers_[0], 4096, 0, other), CUDA_SUCCESS);
  EXPECT_EQ(cuEventDestroy_v2(event), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamDestroy(other), CUDA_SUCCESS);
}

TEST_F(SimgpuGraph, ThreadLocalCaptureForbidsUnsafeCallsOnlyOnItsThread) {
  ASSERT_EQ(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  Step();
  EXPECT_EQ(OnOtherThread(ctx_, [] { return cuCtxSynchronize(); }), CUDA_SUCCESS);
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_SUCCESS);
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_SUCCESS);

  // The capturing thread itself: refused, the capture invalidated.
  ASSERT_EQ(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  Step();
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc_v2(&p, 4096), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

  // ... unless it switched itself to relaxed mode; the exchange hands back the previous mode.
  ASSERT_EQ(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  Step();
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  ASSERT_EQ(cuThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
  EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
  ASSERT_EQ(cuMemAlloc_v2(&p, 4096), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
  // Thread-local mode: still held back by its own capture.
  mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
  ASSERT_EQ(cuThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
  EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_RELAXED);
  // Another thread in thread-local mode is not held back by this global capture.
  EXPECT_EQ(OnOtherThread(ctx_,
                          [] {
                            CUstreamCaptureMode local = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
                            if (cuThreadExchangeStreamCaptureMode(&local) != CUDA_SUCCESS) {
                              return CUDA_ERROR_UNKNOWN;
                            }
                            return cuCtxSynchronize();
                          }),
            CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc_v2(&p, 4096), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(cuStreamEndCapture(stream_, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  ASSERT_EQ(cuThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
  EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);

  mode = static_cast<CUstreamCaptureMode>(3);  // not a mode
  EXPECT_EQ(cuThreadExchangeStreamCaptureMode(&mode), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuThreadExchangeStreamCaptureMode(nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(SimgpuGraph, ProcAddressGivesTheCuda12Forms) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status;
  ASSERT_EQ(cuGetProcAddress_v2("cuGraphInstantiate", &fn, 12000, 0, &status), CUDA_SUCCESS);
  EXPECT_EQ(fn, reinterpret_cast<void*>(&cuGraphInstantiateWithFlags));
  ASSERT_EQ(cuGetProcAddress_v2("cuGraphInstantiate", &fn, 11000, 0, &status), CUDA_SUCCESS);
  EXPECT_EQ(fn, reinterpret_cast<void*>(&cuGraphInstantiate_v2));
  ASSERT_EQ(cuGetProcAddress_v2("cuGraphKernelNodeGetParams", &fn, 13000, 0, &status),
            CUDA_SUCCESS);
  EXPECT_EQ(fn, reinterpret_cast<void*>(&cuGraphKernelNodeGetParams_v2));
  ASSERT_EQ(cuGetProcAddress_v2("cuGraphInstantiateWithParams", &fn, 13000,
                                CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
            CUDA_SUCCESS);
  EXPECT_EQ(fn, reinterpret_cast<void*>(&cuGraphInstantiateWithParams_ptsz));
}

}  // namespace

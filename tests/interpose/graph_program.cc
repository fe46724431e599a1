// A driver-API job for graph_test: G groups of managed buffers, each worked on by a chain of K
// kernels; all groups together oversubscribe the device, one group fits. Each group's chain is
// captured into a CUDA graph (or, with `direct`, launched kernel by kernel), and the groups run
// in turn, `rounds` times. Prints a checksum of every buffer.
//
//   graph_program KERNELS MODE GROUPS KERNELS_PER_GROUP ROUNDS BUFFER_MIB
//   MODE: direct | graph | setparams (each exec's first node re-set: stale) | update (each exec
//         re-set, then cuGraphExecUpdate from its graph: known again) | procaddress (as graph,
//         with cuGraphInstantiate and cuGraphLaunch found through cuGetProcAddress, as cudart
//         finds them) | threaded (group 0 captured in global mode on this thread while another
//         thread launches the other groups' chains, ROUNDS times, on a stream of its own; then
//         group 0's graph launched ROUNDS times) | scratch (as graph, each capture also
//         allocating and freeing a scratch buffer stream-ordered, a memory node in the graph, as
//         PyTorch's CUDA graphs do with its cudaMallocAsync backend; the job's first call that
//         starts spillway's engine is then inside a global-mode capture) | child (as graph, each
//         captured graph embedded in a child-graph node of a graph of its own, behind an empty
//         node, and destroyed; the outer graph instantiated and launched, as XLA's nested command
//         buffers are) | childset (as child, each exec's child node re-set with
//         cuGraphExecChildGraphNodeSetParams from its own embedded graph)
#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define CHECK_CU(call)                                             \
  do {                                                             \
    const CUresult r_ = (call);                                    \
    if (r_ != CUDA_SUCCESS) {                                      \
      std::printf("%s failed: %d\n", #call, static_cast<int>(r_)); \
      std::exit(1);                                                \
    }                                                              \
  } while (0)

namespace {

CUfunction g_scale_add = nullptr;

// The chain of group g: dst = buffer j, src = buffer j + 1, for j < K.
void LaunchChain(const std::vector<CUdeviceptr>& group, uint64_t words, CUstream stream) {
  for (size_t j = 0; j + 1 < group.size(); ++j) {
    CUdeviceptr dst = group[j], src = group[j + 1];
    uint32_t a = static_cast<uint32_t>(3 + j);
    uint64_t n = words;
    void* params[] = {&dst, &src, &a, &n};
    CHECK_CU(cuLaunchKernel(g_scale_add, 8, 1, 1, 128, 1, 1, 0, stream, params, nullptr));
  }
}

// A graph whose only work is a child-graph node embedding `inner` behind an empty node; `inner`
// is destroyed (the node holds a copy). `*child` is the child-graph node.
CUgraph Nest(CUgraph inner, CUgraphNode* child) {
  CUgraph outer = nullptr;
  CHECK_CU(cuGraphCreate(&outer, 0));
  CUgraphNode root = nullptr;
  CHECK_CU(cuGraphAddEmptyNode(&root, outer, nullptr, 0));
  CHECK_CU(cuGraphAddChildGraphNode(child, outer, &root, 1, inner));
  CHECK_CU(cuGraphDestroy(inner));
  return outer;
}

// Sets the first kernel node of `exec` to the values it already has (the exec may have changed,
// as far as anyone outside the driver can tell).
void ResetFirstNode(CUgraphExec exec, CUgraph graph) {
  size_t count = 0;
  CHECK_CU(cuGraphGetNodes(graph, nullptr, &count));
  std::vector<CUgraphNode> nodes(count);
  CHECK_CU(cuGraphGetNodes(graph, nodes.data(), &count));
  CUDA_KERNEL_NODE_PARAMS params{};
  CHECK_CU(cuGraphKernelNodeGetParams(nodes[0], &params));
  CHECK_CU(cuGraphExecKernelNodeSetParams(exec, nodes[0], &params));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::printf("usage: %s KERNELS MODE GROUPS KERNELS_PER_GROUP ROUNDS BUFFER_MIB\n", argv[0]);
    return 1;
  }
  const std::string mode = argv[2];
  const int groups = std::atoi(argv[3]);
  const int chain = std::atoi(argv[4]);
  const int rounds = std::atoi(argv[5]);
  const uint64_t words = (std::strtoull(argv[6], nullptr, 10) << 20) / 4;
  CHECK_CU(cuInit(0));
  CUcontext context = nullptr;
  CHECK_CU(cuDevicePrimaryCtxRetain(&context, 0));
  CHECK_CU(cuCtxSetCurrent(context));
  CUmodule module = nullptr;
  CHECK_CU(cuModuleLoad(&module, argv[1]));
  CHECK_CU(cuModuleGetFunction(&g_scale_add, module, "scale_add"));
  CUstream stream = nullptr;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  // Managed memory allocated before any capture, filled by the host.
  std::vector<std::vector<CUdeviceptr>> buffers(groups, std::vector<CUdeviceptr>(chain + 1));
  uint32_t seed = 1;
  for (auto& group : buffers) {
    for (CUdeviceptr& buffer : group) {
      CHECK_CU(cuMemAllocManaged(&buffer, words * 4, CU_MEM_ATTACH_GLOBAL));
      auto* p = reinterpret_cast<uint32_t*>(buffer);
      for (uint64_t i = 0; i < words; ++i) p[i] = seed++ * 2654435761u;
    }
  }

  using InstantiateFn = CUresult (*)(CUgraphExec*, CUgraph, unsigned long long);
  using GraphLaunchFn = CUresult (*)(CUgraphExec, CUstream);
  InstantiateFn instantiate = &cuGraphInstantiate;
  GraphLaunchFn graph_launch = &cuGraphLaunch;
  if (mode == "procaddress") {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status;
    CHECK_CU(cuGetProcAddress("cuGraphInstantiate", &fn, 12000, 0, &status));
    instantiate = reinterpret_cast<InstantiateFn>(fn);
    CHECK_CU(cuGetProcAddress("cuGraphLaunch", &fn, 12000, 0, &status));
    graph_launch = reinterpret_cast<GraphLaunchFn>(fn);
  }

  int groups_captured = mode == "direct" ? 0 : groups;  // graphs and execs to destroy
  std::vector<CUgraph> graphs(groups, nullptr);
  std::vector<CUgraphExec> execs(groups, nullptr);
  if (mode == "threaded") {
    // The other thread's launches (which the engine would move data for) happen while this
    // thread's global-mode capture is open.
    CUstream other_stream = nullptr;
    CHECK_CU(cuStreamCreate(&other_stream, CU_STREAM_NON_BLOCKING));
    std::atomic<int> phase{0};  // 1: capture open; 2: the other thread's launches issued
    std::thread other([&] {
      CHECK_CU(cuCtxSetCurrent(context));
      while (phase.load() < 1) std::this_thread::yield();
      for (int r = 0; r < rounds; ++r) {
        for (int g = 1; g < groups; ++g) LaunchChain(buffers[g], words, other_stream);
      }
      phase.store(2);
    });
    CHECK_CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    phase.store(1);
    while (phase.load() < 2) std::this_thread::yield();
    LaunchChain(buffers[0], words, stream);
    CHECK_CU(cuStreamEndCapture(stream, &graphs[0]));
    other.join();
    CHECK_CU(instantiate(&execs[0], graphs[0], 0));
    for (int r = 0; r < rounds; ++r) CHECK_CU(graph_launch(execs[0], stream));
    CHECK_CU(cuStreamSynchronize(other_stream));
    CHECK_CU(cuStreamDestroy(other_stream));
    groups_captured = 1;
  } else if (mode != "direct") {
    for (int g = 0; g < groups; ++g) {
      CHECK_CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
      CUdeviceptr scratch = 0;
      if (mode == "scratch") CHECK_CU(cuMemAllocAsync(&scratch, words * 4, stream));
      LaunchChain(buffers[g], words, stream);
      if (mode == "scratch") CHECK_CU(cuMemFreeAsync(scratch, stream));
      CHECK_CU(cuStreamEndCapture(stream, &graphs[g]));
      CUgraphNode child = nullptr;
      if (mode == "child" || mode == "childset") graphs[g] = Nest(graphs[g], &child);
      CHECK_CU(instantiate(&execs[g], graphs[g], 0));
      if (mode == "childset") {
        CUgraph embedded = nullptr;
        CHECK_CU(cuGraphChildGraphNodeGetGraph(child, &embedded));
        CHECK_CU(cuGraphExecChildGraphNodeSetParams(execs[g], child, embedded));
      }
      if (mode == "setparams" || mode == "update") ResetFirstNode(execs[g], graphs[g]);
      if (mode == "update") {
        CUgraphExecUpdateResultInfo info{};
        CHECK_CU(cuGraphExecUpdate(execs[g], graphs[g], &info));
      }
    }
  }
  for (int r = 0; r < rounds && mode != "threaded"; ++r) {
    for (int g = 0; g < groups; ++g) {
      if (mode == "direct") {
        LaunchChain(buffers[g], words, stream);
      } else {
        CHECK_CU(graph_launch(execs[g], stream));
      }
    }
  }
  CHECK_CU(cuStreamSynchronize(stream));

  uint64_t checksum = 0;
  for (const auto& group : buffers) {
    for (CUdeviceptr buffer : group) {
      const auto* p = reinterpret_cast<const uint32_t*>(buffer);
      for (uint64_t i = 0; i < words; ++i) checksum = checksum * 1099511628211ull + p[i];
    }
  }
  std::printf("checksum=%llu\n", static_cast<unsigned long long>(checksum));
  for (int g = 0; g < groups_captured; ++g) {
    CHECK_CU(cuGraphExecDestroy(execs[g]));
    CHECK_CU(cuGraphDestroy(graphs[g]));
  }
  for (auto& group : buffers) {
    for (CUdeviceptr buffer : group) CHECK_CU(cuMemFree(buffer));
  }
  CHECK_CU(cuStreamDestroy(stream));
  CHECK_CU(cuModuleUnload(module));
  return 0;
}

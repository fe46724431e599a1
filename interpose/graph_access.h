// What spillway knows about each instantiated CUDA graph (CUgraphExec): the candidate pointer
// words of its kernel nodes, in node order, read when the graph was instantiated, so that a
// cuGraphLaunch can be given an access set like a kernel launch. An exec whose parameters may have
// changed since (cuGraphExecKernelNodeSetParams, cuGraphExecUpdate that could not be re-read) is
// *stale*: it gets no access set. Knows no CUDA types, so it is unit-tested directly.
#ifndef SPILLWAY_INTERPOSE_GRAPH_ACCESS_H_
#define SPILLWAY_INTERPOSE_GRAPH_ACCESS_H_

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace spillway::interpose {

// One kernel node of an instantiated graph.
struct GraphKernelNode {
  uint64_t function = 0;        // the CUfunction (or CUkernel, for a node given one)
  std::vector<uint64_t> words;  // its parameters' 8-byte words that pointed into allocations
};

class GraphAccessTable {
 public:
  enum class State { kUnknown, kKnown, kStale };

  // `exec` was instantiated (or updated) with these kernel nodes; replaces what was known.
  void Remember(uint64_t exec, std::vector<GraphKernelNode> nodes);
  // The parameters of `exec` may have changed in a way that cannot be read back. True the first
  // time for this exec (so the caller says it once).
  bool MarkStale(uint64_t exec);
  // `exec` was destroyed.
  void Forget(uint64_t exec);
  // kKnown: `words` gets the words of every kernel node of `exec`, in node order (merged), and
  // `kernel_nodes` their count. Otherwise both are left empty.
  State Words(uint64_t exec, std::vector<uint64_t>* words, size_t* kernel_nodes) const;
  size_t size() const;

 private:
  struct Entry {
    std::vector<GraphKernelNode> nodes;
    bool stale = false;
  };
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, Entry> execs_;  // guarded by mutex_
};

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_GRAPH_ACCESS_H_

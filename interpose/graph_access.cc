// GraphAccessTable: the kernel-node pointer words of each instantiated graph, by exec handle.
#include "interpose/graph_access.h"

#include <utility>

namespace spillway::interpose {

void GraphAccessTable::Remember(uint64_t exec, std::vector<GraphKernelNode> nodes) {
  std::lock_guard lock(mutex_);
  execs_[exec] = Entry{std::move(nodes), false};
}

bool GraphAccessTable::MarkStale(uint64_t exec) {
  std::lock_guard lock(mutex_);
  Entry& entry = execs_[exec];
  const bool first = !entry.stale;
  entry.stale = true;
  entry.nodes.clear();
  return first;
}

void GraphAccessTable::Forget(uint64_t exec) {
  std::lock_guard lock(mutex_);
  execs_.erase(exec);
}

GraphAccessTable::State GraphAccessTable::Words(uint64_t exec, std::vector<uint64_t>* words,
                                                size_t* kernel_nodes) const {
  words->clear();
  *kernel_nodes = 0;
  std::lock_guard lock(mutex_);
  const auto it = execs_.find(exec);
  if (it == execs_.end()) return State::kUnknown;
  if (it->second.stale) return State::kStale;
  for (const GraphKernelNode& node : it->second.nodes) {
    words->insert(words->end(), node.words.begin(), node.words.end());
  }
  *kernel_nodes = it->second.nodes.size();
  return State::kKnown;
}

size_t GraphAccessTable::size() const {
  std::lock_guard lock(mutex_);
  return execs_.size();
}

}  // namespace spillway::interpose

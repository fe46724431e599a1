// A random training step for the planner's tests: persistent and step-local allocations of 1 to
// `max_chunks` 2 MiB chunks (about half ending in a partial chunk, which takes only its 4 KiB
// pages), launches touching 1-3 random chunk ranges each; a step-local allocation is made just
// before its first launch and freed just after its last (one no launch touches, at the step's end).
#ifndef SPILLWAY_TESTS_POLICY_RANDOM_STEP_H_
#define SPILLWAY_TESTS_POLICY_RANDOM_STEP_H_

#include <cstdint>
#include <random>
#include <vector>

#include "policy/plan/workload_model.h"

namespace spillway::policy {

inline Workload RandomStep(std::mt19937& rng, int persistent, int local, int launches,
                           uint32_t max_chunks = 4) {
  Workload w;
  w.name = "random";
  const int total = persistent + local;
  for (int i = 0; i < total; ++i) {
    WorkloadAllocation a;
    a.id = static_cast<uint64_t>(i + 1);
    a.bytes = (1 + rng() % max_chunks) * kChunkBytes;
    if (rng() % 2 == 0) a.bytes -= 1 + rng() % (kChunkBytes - 1);  // a partial last chunk
    a.persistent = i < persistent;
    w.allocations.push_back(a);
  }
  std::vector<std::vector<ChunkRange>> accesses(launches);
  std::vector<int> first(total + 1, -1), last(total + 1, -1);
  for (int l = 0; l < launches; ++l) {
    const int ranges = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < ranges; ++k) {
      const uint64_t id = 1 + rng() % total;
      const uint32_t chunks = ChunksOf(w.allocation(id).bytes);
      const uint32_t start = rng() % chunks;
      accesses[l].push_back(
          ChunkRange{id, start, 1 + static_cast<uint32_t>(rng() % (chunks - start))});
      if (first[id] < 0) first[id] = l;
      last[id] = l;
    }
  }
  for (int l = 0; l < launches; ++l) {
    for (int id = persistent + 1; id <= total; ++id) {
      if (first[id] == l)
        w.step.push_back(StepEvent{StepEvent::Kind::kAlloc, static_cast<uint64_t>(id), {}});
    }
    StepEvent e;
    e.launch.kernel = "k";
    e.launch.accesses = accesses[l];
    w.step.push_back(e);
    for (int id = persistent + 1; id <= total; ++id) {
      if (last[id] == l)
        w.step.push_back(StepEvent{StepEvent::Kind::kFree, static_cast<uint64_t>(id), {}});
    }
  }
  for (int id = persistent + 1; id <= total; ++id) {
    if (first[id] >= 0) continue;
    w.step.push_back(StepEvent{StepEvent::Kind::kAlloc, static_cast<uint64_t>(id), {}});
    w.step.push_back(StepEvent{StepEvent::Kind::kFree, static_cast<uint64_t>(id), {}});
  }
  return w;
}

}  // namespace spillway::policy

#endif  // SPILLWAY_TESTS_POLICY_RANDOM_STEP_H_

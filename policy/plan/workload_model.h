// An in-memory model of a training workload, as the planner and the simulator see it: the
// allocations that live across steps (weights, gradients, optimizer state) and one training step
// as an ordered list of events (allocate, free, launch). A launch has a compute time and an access
// set: which 2 MiB chunks of which allocations it touches. Steps repeat identically. A chunk takes
// the device bytes nvidia-uvm backs it with: 2 MiB when the allocation fills it, its bytes rounded
// up to 4 KiB when it is an allocation's last, partial chunk (ChunkFootprint).
#ifndef SPILLWAY_POLICY_PLAN_WORKLOAD_MODEL_H_
#define SPILLWAY_POLICY_PLAN_WORKLOAD_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/cost_model.h"

namespace spillway::policy {

// The largest allocation a workload may have (1 TiB), and the most chunks all its allocations may
// span together (16 TiB): the simulator and the planner keep state per chunk and number chunks
// with 32 bits. ValidateWorkload checks both; so does reading a trace.
inline constexpr uint64_t kMaxAllocationBytes = uint64_t{1} << 40;
inline constexpr uint64_t kMaxWorkloadChunks = uint64_t{1} << 23;

// Chunks an allocation of `bytes` spans.
// REQUIRES: bytes <= kMaxAllocationBytes (so the count fits with room to spare).
inline uint32_t ChunksOf(uint64_t bytes) {
  return static_cast<uint32_t>((bytes + kChunkBytes - 1) / kChunkBytes);
}

// The device bytes chunk `k` of an allocation of `bytes` takes when resident: a whole chunk, or
// for the last, partial one its bytes rounded up to 4 KiB (BackedBytes, simgpu's Chunk.backed).
// REQUIRES: k < ChunksOf(bytes).
inline uint32_t ChunkFootprint(uint64_t bytes, uint32_t k) {
  const uint64_t from = uint64_t{k} * kChunkBytes;
  return static_cast<uint32_t>(
      BackedBytes(bytes - from < kChunkBytes ? bytes - from : kChunkBytes));
}

// The device bytes an allocation of `bytes` takes when all of it is resident.
inline uint64_t FootprintOf(uint64_t bytes) {
  return bytes / kChunkBytes * kChunkBytes + BackedBytes(bytes % kChunkBytes);
}

struct WorkloadAllocation {
  uint64_t id = 0;  // 1, 2, ...: index + 1 in Workload::allocations
  uint64_t bytes = 0;
  std::string name;       // what it holds ("layer3.mlp.fc1.weight"), for people
  std::string call_site;  // where it was allocated (CallSiteName of a trace's id, or a label)
  // The modules on its calling stack (paths, or file names), innermost first, each once.
  std::vector<std::string> modules;
  bool persistent = false;  // allocated before the first step and never freed
};

// Chunks [first_chunk, first_chunk + num_chunks) of one allocation.
struct ChunkRange {
  uint64_t alloc_id = 0;
  uint32_t first_chunk = 0;
  uint32_t num_chunks = 0;
};

struct Launch {
  std::string kernel;
  double compute_seconds = 0;
  std::vector<ChunkRange> accesses;
};

struct StepEvent {
  enum class Kind { kAlloc, kFree, kLaunch };
  Kind kind = Kind::kLaunch;
  uint64_t alloc_id = 0;  // kAlloc, kFree
  Launch launch;          // kLaunch
};

struct Workload {
  std::string name;
  std::string description;
  std::vector<WorkloadAllocation> allocations;  // allocations[i].id == i + 1
  std::vector<StepEvent> step;                  // one training step; repeats

  const WorkloadAllocation& allocation(uint64_t id) const { return allocations[id - 1]; }
  size_t num_launches() const;
  double compute_seconds() const;  // sum over one step
  uint64_t persistent_bytes() const;
  // Most bytes live at once (persistent + step-local allocations), as the device backs them
  // (FootprintOf).
  uint64_t peak_live_bytes() const;
  // The launch whose chunks take the most device bytes (each distinct chunk its ChunkFootprint):
  // `position` its index among the step's launches; all zero for a step without launches.
  struct LargestLaunch {
    size_t position = 0;
    std::string kernel;
    uint64_t bytes = 0;
  };
  LargestLaunch largest_launch() const;
};

// Checks ids, chunk ranges within their allocations, alloc/free pairing within the step (every
// step-local allocation is allocated before use and freed by the end of the step), and that
// persistent allocations are never allocated or freed in the step; and its sizes
// (CheckWorkloadSizes).
absl::Status ValidateWorkload(const Workload& w);
// No allocation is over kMaxAllocationBytes, and all span at most kMaxWorkloadChunks together.
absl::Status CheckWorkloadSizes(const Workload& w);

// The same workload with its allocations numbered the way policy files and the engine number
// them: persistent allocations first (in their current order), then the step's allocations in the
// order the step makes them. Ids only change; events, sizes and accesses stay.
Workload NumberCanonically(Workload w);

// Hash of the launch sequence (kernel names) and the allocation pattern (sizes, alloc/free order):
// the model fingerprint a policy file carries. Compute times do not enter it.
uint64_t WorkloadFingerprint(const Workload& w);

// How a trace's call-site id is written in a workload and a policy rule: 16 lowercase hex
// digits; "" for 0 (no stack).
std::string CallSiteName(uint64_t call_site);

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLAN_WORKLOAD_MODEL_H_

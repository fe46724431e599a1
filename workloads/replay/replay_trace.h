// A recorded training step as the replayer runs it: a trace (docs/trace-format.md) read into its
// steps (the stretches of records that end at each context synchronize), each a list of
// allocations, frees and ops. Every reference to an allocation names the step that made it and
// its place among that step's allocations, so a step can be run again with new allocations
// (replay_schedule.h). Each op's accesses are resolved to byte ranges inside their allocation,
// made disjoint (overlapping accesses of one op to one allocation are split, their modes joined),
// and timed by the op's kernel-time record.
#ifndef SPILLWAY_WORKLOADS_REPLAY_REPLAY_TRACE_H_
#define SPILLWAY_WORKLOADS_REPLAY_REPLAY_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace spillway::replay {

// An allocation: made by step `step` (an index into ReplayTrace::steps) as its `index`-th.
struct TensorRef {
  uint32_t step = 0;
  uint32_t index = 0;
  friend bool operator==(const TensorRef&, const TensorRef&) = default;
};

// The part of one allocation an op touches. bytes > 0; offset + bytes <= the allocation's size.
struct ReplayAccess {
  TensorRef tensor;
  uint64_t allocation_id = 0;  // the trace's id (for errors)
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint8_t mode = 3;  // 1 read, 2 write, 3 read-write (an unknown mode is read-write)
  friend bool operator==(const ReplayAccess&, const ReplayAccess&) = default;
};

struct ReplayEvent {
  enum class Kind : uint8_t { kAlloc, kFree, kLaunch };
  Kind kind = Kind::kAlloc;
  uint64_t record = 0;         // the record's number in the trace (the header is 1), for errors
  uint64_t allocation_id = 0;  // kAlloc, kFree: the trace's id
  TensorRef tensor;            // kAlloc: the allocation made; kFree: the one freed
  uint64_t bytes = 0;          // kAlloc
  uint32_t name = 0;           // kLaunch: index into ReplayTrace::names
  uint64_t time_ns = 0;        // kLaunch: end - start of its kernel-time record; 0 if none
  std::vector<ReplayAccess> accesses;  // kLaunch, disjoint
};

struct ReplayStep {
  std::vector<ReplayEvent> events;
  uint32_t allocations = 0;  // kAlloc events
  uint32_t launches = 0;
  uint64_t time_ns = 0;  // the sum of its ops' times
};

struct ReplayTrace {
  std::string path;
  std::vector<std::string> names;  // op names ("" = unnamed)
  // The stretches of records ending at each context synchronize, in order. The first one holds
  // whatever came before (the parameters' allocation); when it has no launch it is the prologue
  // and not a training step.
  std::vector<ReplayStep> steps;
  bool first_is_prologue = false;
  uint64_t peak_live_bytes = 0;  // the most bytes live at once over `steps`
  bool has_modes = false;        // some access had a mode (format 1.2); else all are read-write
  // What is read but not replayed.
  uint64_t untimed_launches = 0;  // launches with no kernel-time record (run for 0 ns)
  uint64_t ignored_records = 0;   // memcpy, memset, graph launch, non-context synchronize
  uint64_t trailing_events = 0;   // allocations, frees and launches after the last synchronize

  // Training steps in the trace (steps minus the prologue).
  int recorded_steps() const {
    return static_cast<int>(steps.size()) - (first_is_prologue ? 1 : 0);
  }
};

// Reads the trace at `path`. Errors are one line starting with the path: the reader's own, "no
// context synchronize ...", and an event that frees or touches an allocation that is not live
// (naming the record).
absl::StatusOr<ReplayTrace> ReadReplayTrace(const std::string& path);

// "" when steps `a` and `b` of `trace` (a < b) do the same thing in the same order, with
// references to what each made itself or what the step before it made at the same place, and
// the same references to anything older; else what differs first, in words.
std::string StepDifference(const ReplayTrace& trace, uint32_t a, uint32_t b);

}  // namespace spillway::replay

#endif  // SPILLWAY_WORKLOADS_REPLAY_REPLAY_TRACE_H_

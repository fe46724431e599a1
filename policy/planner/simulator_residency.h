// What the simulator's policy models share (policy/planner/simulator.cc,
// policy/planner/simulator_engine.cc): simgpu's residency state over 2 MiB chunks, each taking the
// device bytes that back it (resident chunks in the order they became resident, evicted oldest
// first), free device room by when it became free, and its engine timelines (compute, H2D, D2H,
// booked as BookEngine does).
#ifndef SPILLWAY_POLICY_PLANNER_SIMULATOR_RESIDENCY_H_
#define SPILLWAY_POLICY_PLANNER_SIMULATOR_RESIDENCY_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <utility>
#include <vector>

#include "common/cost_model.h"

namespace spillway::policy {

// What a kernel's access to `bytes` of chunks placed on the host costs it: read and written back
// over the link, in the kernel's own time (the access set does not say which bytes are only read).
inline double RemoteAccessSeconds(const CostModel& cost, uint64_t bytes) {
  return H2DSeconds(cost, bytes) + D2HSeconds(cost, bytes);
}

// Free device memory in pieces, each by the time (or launch position) it became free, earliest
// first. The room free from the start (time 0) is counted, not stored: a budget far beyond what
// the workload uses (--device-memory 1PiB) costs nothing, and the order is as if it were stored.
template <typename T>
class FreeRoom {
 public:
  explicit FreeRoom(uint64_t initially_free) : unused_(initially_free) {}
  uint64_t bytes() const { return unused_ + freed_bytes_; }
  // Takes up to `bytes` of room, earliest first; returns when the last piece of it became free
  // (T{} when it was all free from the start, or there was none). Times are never negative, so
  // room free from the start is never later.
  T Take(uint64_t bytes) {
    T when{};
    const uint64_t from_unused = std::min(bytes, unused_);
    unused_ -= from_unused;
    bytes -= from_unused;
    while (bytes > 0 && !freed_.empty()) {
      auto [at, piece] = freed_.top();
      freed_.pop();
      when = std::max(when, at);
      const uint64_t taken = std::min(bytes, piece);
      bytes -= taken;
      freed_bytes_ -= taken;
      if (piece > taken) freed_.push({at, piece - taken});
    }
    return when;
  }
  // `bytes` of room become free at `when`.
  void Give(T when, uint64_t bytes) {
    if (bytes == 0) return;
    freed_.push({when, bytes});
    freed_bytes_ += bytes;
  }

 private:
  uint64_t unused_;
  uint64_t freed_bytes_ = 0;
  std::priority_queue<std::pair<T, uint64_t>, std::vector<std::pair<T, uint64_t>>, std::greater<>>
      freed_;
};

// Resident chunks, oldest-resident first (nvidia-uvm's root-chunk order, simgpu's FIFO), and the
// device bytes they take (each chunk its ChunkFootprint, from `footprint`, which must outlive it).
class ChunkResidency {
 public:
  explicit ChunkResidency(const std::vector<uint32_t>& footprint)
      : footprint_(footprint),
        prev_(footprint.size(), -1),
        next_(footprint.size(), -1),
        in_(footprint.size()) {}
  bool resident(uint32_t c) const { return in_[c] != 0; }
  uint64_t bytes() const { return bytes_; }
  void Add(uint32_t c) {
    in_[c] = 1;
    prev_[c] = tail_;
    next_[c] = -1;
    if (tail_ >= 0)
      next_[tail_] = static_cast<int32_t>(c);
    else
      head_ = static_cast<int32_t>(c);
    tail_ = static_cast<int32_t>(c);
    bytes_ += footprint_[c];
  }
  void Remove(uint32_t c) {
    if (!in_[c]) return;
    in_[c] = 0;
    if (prev_[c] >= 0)
      next_[prev_[c]] = next_[c];
    else
      head_ = next_[c];
    if (next_[c] >= 0)
      prev_[next_[c]] = prev_[c];
    else
      tail_ = prev_[c];
    bytes_ -= footprint_[c];
  }
  // Evicts the oldest chunks until `incoming` more bytes fit under `cap` (simgpu's FIFO, like
  // nvidia-uvm's root-chunk order); returns the bytes that went.
  uint64_t EvictOldestFor(uint64_t cap, uint64_t incoming) {
    uint64_t evicted = 0;
    while (bytes_ + incoming > cap && head_ >= 0) {
      evicted += footprint_[head_];
      Remove(static_cast<uint32_t>(head_));
    }
    return evicted;
  }
  // The oldest resident chunk for which `ok` holds, or -1.
  int64_t Oldest(const std::function<bool(uint32_t)>& ok) const {
    for (int32_t c = head_; c >= 0; c = next_[c]) {
      if (ok(static_cast<uint32_t>(c))) return c;
    }
    return -1;
  }

 private:
  const std::vector<uint32_t>& footprint_;
  std::vector<int32_t> prev_, next_;
  std::vector<char> in_;
  int32_t head_ = -1, tail_ = -1;
  uint64_t bytes_ = 0;
};

struct Timelines {
  double compute = 0, h2d = 0, d2h = 0;
  int engines = 2;
  // Books `seconds` on the H2D or D2H engine from `earliest`; returns the end (simgpu's rule: one
  // shared engine when copy_engines < 2).
  double Book(bool in, double earliest, double seconds) {
    double& free = (in || engines < 2) ? h2d : d2h;
    const double start = std::max(earliest, free);
    free = start + seconds;
    return free;
  }
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLANNER_SIMULATOR_RESIDENCY_H_

// What the simulator's policy models share (policy/simulator.cc, policy/simulator_engine.cc):
// simgpu's residency state over 2 MiB chunks (resident chunks in the order they became resident,
// evicted oldest first) and its engine timelines (compute, H2D, D2H, booked as BookEngine does).
#ifndef SPILLWAY_POLICY_SIMULATOR_RESIDENCY_H_
#define SPILLWAY_POLICY_SIMULATOR_RESIDENCY_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "common/cost_model.h"

namespace spillway::policy {

// What a kernel's access to `chunks` chunks placed on the host costs it: read and written back
// over the link, in the kernel's own time (the access set does not say which bytes are only read).
inline double RemoteAccessSeconds(const CostModel& cost, uint64_t chunks) {
  return H2DSeconds(cost, chunks * kChunkBytes) + D2HSeconds(cost, chunks * kChunkBytes);
}

// Free device slots by the time (or launch position) each became free, earliest first. The slots
// free from the start (time 0) are counted, not stored: a budget far beyond what the workload uses
// (--device-memory 1PiB) costs nothing, and the order is as if each were stored.
template <typename T>
class FreeSlots {
 public:
  explicit FreeSlots(uint64_t initially_free) : unused_(initially_free) {}
  bool empty() const { return unused_ == 0 && freed_.empty(); }
  uint64_t size() const { return unused_ + freed_.size(); }
  // REQUIRES: !empty(). Times are never negative, so an unused slot is never later.
  T top() const { return unused_ > 0 ? T{} : freed_.top(); }
  void pop() {
    if (unused_ > 0) {
      --unused_;
    } else {
      freed_.pop();
    }
  }
  void push(T when) { freed_.push(when); }

 private:
  uint64_t unused_;
  std::priority_queue<T, std::vector<T>, std::greater<>> freed_;
};

// Resident chunks, oldest-resident first (nvidia-uvm's root-chunk order, simgpu's FIFO).
class ChunkResidency {
 public:
  explicit ChunkResidency(uint32_t chunks) : prev_(chunks, -1), next_(chunks, -1), in_(chunks) {}
  bool resident(uint32_t c) const { return in_[c] != 0; }
  uint64_t count() const { return count_; }
  void Add(uint32_t c) {
    in_[c] = 1;
    prev_[c] = tail_;
    next_[c] = -1;
    if (tail_ >= 0)
      next_[tail_] = static_cast<int32_t>(c);
    else
      head_ = static_cast<int32_t>(c);
    tail_ = static_cast<int32_t>(c);
    ++count_;
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
    --count_;
  }
  // Evicts the oldest chunks until one more fits under `cap` (simgpu's FIFO, like nvidia-uvm's
  // root-chunk order); returns how many went.
  uint64_t EvictOldestFor(uint64_t cap) {
    uint64_t evicted = 0;
    while (count_ + 1 > cap && head_ >= 0) {
      Remove(static_cast<uint32_t>(head_));
      ++evicted;
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
  std::vector<int32_t> prev_, next_;
  std::vector<char> in_;
  int32_t head_ = -1, tail_ = -1;
  uint64_t count_ = 0;
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

#endif  // SPILLWAY_POLICY_SIMULATOR_RESIDENCY_H_

// The residency engine's lookahead streams and batches: the two side streams the moves ahead go
// on (prefetches on the side stream, evictions on the evict stream), made once, and the batches
// of moves planned ahead, each with two events of a ring (after the launch stream's work when it
// was planned, and after its prefetches), so that a launch waits for the batch that brought its
// data in and the engine learns, without waiting, which batches have completed.
#ifndef SPILLWAY_POLICY_ENGINE_LOOKAHEAD_STREAMS_H_
#define SPILLWAY_POLICY_ENGINE_LOOKAHEAD_STREAMS_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "policy/engine/device.h"

namespace spillway::policy {

class LookaheadStreams {
 public:
  static constexpr size_t kEvents = 64;  // a ring of events, two per batch

  // @brief Creates the side streams and the events once (the evict stream is the side stream
  // where a second cannot be made); false when the device cannot. No lock held.
  bool Ready(Device* device);
  // @brief Whether Ready succeeded (side() and evict() are set then).
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  Stream side() const { return side_; }
  Stream evict() const { return evict_; }
  // @brief Event `which` (0: after the launch stream, 1: prefetches done) of batch `batch`.
  Event BatchEvent(uint64_t batch, size_t which) const {
    return events_[(2 * batch + which) % kEvents];
  }

  // Under the engine's lock:
  // @brief The number the next batch planned gets.
  uint64_t next_batch() const { return batches_ + 1; }
  // @brief Batch `batch` (next_batch()) was planned and will be issued.
  void Planned(uint64_t batch) {
    batches_ = batch;
    issued_.store(batch, std::memory_order_release);
  }
  // @brief Batches up to `batch` were seen complete (by Poll).
  void SeenDone(uint64_t batch) { done_ = std::max(done_, batch); }
  // @brief The newest batch up to which all were seen complete.
  uint64_t done() const { return done_; }

  // @brief Queries (without waiting) the prefetch events of the batches not yet seen complete,
  // oldest first; returns the newest batch up to which all are complete. No lock held.
  uint64_t Poll(Device* device);

 private:
  std::once_flag once_;
  std::atomic<bool> ready_{false};
  Stream side_ = nullptr;                // written once under once_
  Stream evict_ = nullptr;               // written once under once_
  std::array<Event, kEvents> events_{};  // written once under once_
  uint64_t batches_ = 0;                 // batches planned; guarded by the engine's lock
  uint64_t done_ = 0;  // batches up to this one were seen complete; guarded by the engine's lock
  std::atomic<uint64_t> issued_{0};  // batches_, read without the lock
  std::atomic<uint64_t> polled_{0};  // what Poll saw complete
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_LOOKAHEAD_STREAMS_H_

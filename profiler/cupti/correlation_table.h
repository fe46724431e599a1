// CorrelationTable: maps CUPTI's 32-bit correlation ids to the caller's 64-bit ids, written on the
// launch path (a CUPTI driver callback) and read on CUPTI's buffer thread. Lock-free and
// allocation-free after construction: a direct-mapped array indexed by the CUPTI id, so an entry
// is overwritten by the id `slots` later (CUPTI ids increase by one per driver call).
#ifndef SPILLWAY_PROFILER_CUPTI_CORRELATION_TABLE_H_
#define SPILLWAY_PROFILER_CUPTI_CORRELATION_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace spillway::cupti {

class CorrelationTable {
 public:
  // REQUIRES: `slots` is a power of two.
  explicit CorrelationTable(size_t slots) : mask_(slots - 1), slots_(new Slot[slots]) {}

  // Remembers that CUPTI's `cupti_id` belongs to the caller's `caller_id`. `cupti_id` 0 is
  // ignored (CUPTI never uses it).
  void Put(uint32_t cupti_id, uint64_t caller_id) {
    if (cupti_id == 0) return;
    Slot& slot = slots_[cupti_id & mask_];
    slot.key.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    slot.value.store(caller_id, std::memory_order_relaxed);
    slot.key.store(cupti_id, std::memory_order_release);
  }

  // The caller's id for `cupti_id`, or 0 when unknown (never put, or overwritten). `erase`
  // forgets it (pass false while more records may share the id, as a graph launch's kernels do).
  uint64_t Get(uint32_t cupti_id, bool erase) {
    if (cupti_id == 0) return 0;
    Slot& slot = slots_[cupti_id & mask_];
    if (slot.key.load(std::memory_order_acquire) != cupti_id) return 0;
    const uint64_t value = slot.value.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    uint32_t expected = cupti_id;
    if (erase) {
      if (!slot.key.compare_exchange_strong(expected, 0, std::memory_order_relaxed)) return 0;
    } else if (slot.key.load(std::memory_order_relaxed) != cupti_id) {
      return 0;
    }
    return value;
  }

  size_t slots() const { return mask_ + 1; }

 private:
  struct Slot {
    std::atomic<uint32_t> key{0};
    std::atomic<uint64_t> value{0};
  };
  size_t mask_;
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace spillway::cupti

#endif  // SPILLWAY_PROFILER_CUPTI_CORRELATION_TABLE_H_

// Process-wide state of the shim: configuration, per-function call counters, the registry of live
// allocations made through the hooks, recorded problems, fork handling and the exit summary.
// Everything here is safe to call from any thread and from inside hooks; the counters are fixed-
// size atomics so the launch path neither locks nor allocates.
#ifndef SPILLWAY_INTERPOSE_RUNTIME_H_
#define SPILLWAY_INTERPOSE_RUNTIME_H_

#include <atomic>
#include <cstdint>

#include "interpose/config.h"
#include "interpose/hook_table.h"

namespace spillway::interpose {

// True while this thread is inside a hook (or resolving the driver). A hook entered while it is
// set forwards straight to the real function. Saves and restores the previous value.
class ReentrancyGuard {
 public:
  ReentrancyGuard() : previous_(active_) { active_ = true; }
  ~ReentrancyGuard() { active_ = previous_; }
  ReentrancyGuard(const ReentrancyGuard&) = delete;
  ReentrancyGuard& operator=(const ReentrancyGuard&) = delete;

  static bool Active() { return active_; }

 private:
  static thread_local bool active_ __attribute__((tls_model("initial-exec")));
  bool previous_;
};

// Reads the environment once (later calls return at once), sets up logging and fork handlers.
void EnsureConfigured();

// The mode in effect. REQUIRES: EnsureConfigured() has run.
Mode CurrentMode();

struct alignas(64) CallCounter {
  std::atomic<uint64_t> value{0};
};
extern CallCounter g_call_counts[kNumHooks];

inline void CountCall(int index) {
  g_call_counts[index].value.fetch_add(1, std::memory_order_relaxed);
}

// Allocation registry. Called after the real call succeeded; never while holding anything the
// driver could need.
void OnAllocated(uint64_t address, uint64_t bytes, bool managed);
void OnFreed(uint64_t address);
void OnVmmCreated();

// Logs `format` at `level` and keeps the message for the summary's `errors` list.
void ReportProblem(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

// Writes the exit summary when SPILLWAY_SUMMARY is set. Makes no CUDA call.
void WriteSummaryAtExit();

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_RUNTIME_H_

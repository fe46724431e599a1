// Which stream captures are in progress, and whether the calling thread may make "potentially
// unsafe" driver calls now. CUDA forbids such calls (cuMemAlloc/cuMemFree, cuMemPrefetchAsync,
// cuEventQuery, synchronizations, ...) from a thread in the default (global) interaction mode while
// any thread has a global-mode capture open, or while the thread has its own global or
// thread-local capture open; a thread that switched itself to relaxed mode
// (cuThreadExchangeStreamCaptureMode) is never held back. Such a call fails and invalidates the
// capture, so the shim makes none of its own then: allocations stay plain device memory, the
// engine's moves and the recorder's events are skipped. The hooks report every successful
// cuStreamBeginCapture / cuStreamEndCapture and cuThreadExchangeStreamCaptureMode here. Knows no
// CUDA types, so it is unit-tested directly.
#ifndef SPILLWAY_INTERPOSE_CAPTURE_STATE_H_
#define SPILLWAY_INTERPOSE_CAPTURE_STATE_H_

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace spillway::interpose {

class CaptureTracker {
 public:
  // CUstreamCaptureMode values.
  static constexpr int kGlobal = 0;
  static constexpr int kThreadLocal = 1;
  static constexpr int kRelaxed = 2;

  // The calling thread began capturing `stream` in `mode`.
  void OnBegin(const void* stream, int mode);
  // The capture of `stream` ended (or was invalidated); unknown streams are ignored.
  void OnEnd(const void* stream);
  // The calling thread set its own interaction mode to `mode` (cuThreadExchangeStreamCaptureMode
  // succeeded). Per thread, for every tracker; kGlobal until a thread changes it.
  static void OnThreadModeSet(int mode);
  static int ThreadMode();
  // True when a potentially unsafe call by the calling thread would fail and invalidate a capture
  // in progress (see the top of this file). Lock-free (one atomic load) while no global or
  // thread-local capture is in progress.
  bool ActiveForThisThread() const;
  // True while a capture of `stream` (any mode) is in progress: work on it is recorded, not run,
  // so the engine must not move data for it. Lock-free while no capture is in progress.
  bool IsCapturing(const void* stream) const;
  // True while any capture (any mode, any thread) is in progress. Lock-free.
  bool AnyInProgress() const { return all_.load(std::memory_order_relaxed) != 0; }
  // ActiveForThisThread(), for a call the shim itself would make: when true, the caller skips
  // `what`; the skip is counted and the first one said (at info level).
  bool HoldsBack(const char* what);
  // The calls HoldsBack skipped so far (the summary's engine.capture_skips).
  uint64_t held_back() const { return held_back_.load(std::memory_order_relaxed); }

 private:
  struct Capture {
    int mode = kGlobal;
    pthread_t thread{};
  };
  mutable std::mutex mutex_;
  std::unordered_map<const void*, Capture> captures_;  // guarded by mutex_
  std::atomic<int> counted_{0};  // global + thread-local captures in captures_
  std::atomic<int> all_{0};      // every capture in captures_
  std::atomic<uint64_t> held_back_{0};
  std::atomic<bool> said_{false};
};

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_CAPTURE_STATE_H_

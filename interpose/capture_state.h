// Which stream captures are in progress, as far as allocation backing cares. The driver tells a
// stream's capture status but not whether "this thread is capturing": an allocation the calling
// thread makes while a global-mode capture (any thread's) or a thread-local-mode capture it began
// is in progress would be captured or refused, so it stays plain device memory. The hooks report
// every successful cuStreamBeginCapture / cuStreamEndCapture here. Relaxed-mode captures do not
// affect other calls and are not counted. Knows no CUDA types, so it is unit-tested directly.
#ifndef SPILLWAY_INTERPOSE_CAPTURE_STATE_H_
#define SPILLWAY_INTERPOSE_CAPTURE_STATE_H_

#include <pthread.h>

#include <atomic>
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
  // True when an allocation by the calling thread happens during a capture that would capture or
  // forbid it. Lock-free (one atomic load) while no capture is in progress.
  bool ActiveForThisThread() const;
  // True while a capture of `stream` (any mode) is in progress: work on it is recorded, not run,
  // so the engine must not move data for it. Lock-free while no capture is in progress.
  bool IsCapturing(const void* stream) const;

 private:
  struct Capture {
    int mode = kGlobal;
    pthread_t thread{};
  };
  mutable std::mutex mutex_;
  std::unordered_map<const void*, Capture> captures_;  // guarded by mutex_
  std::atomic<int> counted_{0};  // global + thread-local captures in captures_
  std::atomic<int> all_{0};      // every capture in captures_
};

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_CAPTURE_STATE_H_

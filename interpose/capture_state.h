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
//
// A check and the calls it allows must not be split by a capture another thread begins between
// them: the shim makes its own calls inside a NoCaptureScope, and the hooks begin captures through
// Begin(), which waits until no admitted scope is open. Only the shim's own, non-blocking calls go
// inside a scope (never the job's call, never a wait for the device that could wait for that
// thread; the legacy stand-in's fallback synchronization, driver_device.cc, is the exception).
#ifndef SPILLWAY_INTERPOSE_CAPTURE_STATE_H_
#define SPILLWAY_INTERPOSE_CAPTURE_STATE_H_

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace spillway::interpose {

class CaptureTracker {
 public:
  // CUstreamCaptureMode values.
  static constexpr int kGlobal = 0;
  static constexpr int kThreadLocal = 1;
  static constexpr int kRelaxed = 2;

  // Captures do not begin while an admitted one is open: the checks made in it (AnyInProgress,
  // ActiveForThisThread, IsCapturing) hold for the calls made in it. Captures may end meanwhile.
  // A scope opened while a capture is beginning is not admitted: its caller makes none of its
  // calls, as while a capture is in progress. Opening one never waits (it is an atomic increment
  // of one of several counters, the thread's shard, and a load), so no thread waits for another's
  // scope but a beginning capture. Scopes nest on one thread (an inner one counts nothing and is
  // admitted as the outermost was).
  class [[nodiscard]] NoCaptureScope {
   public:
    explicit NoCaptureScope(CaptureTracker& tracker);
    ~NoCaptureScope();
    NoCaptureScope(const NoCaptureScope&) = delete;
    NoCaptureScope& operator=(const NoCaptureScope&) = delete;

    bool admitted() const { return admitted_; }

   private:
    std::atomic<int>* readers_ = nullptr;  // the shard counting this scope; null when nested
    bool admitted_ = false;
  };

  // Runs `begin` (the real cuStreamBeginCapture, then OnBegin when it succeeded) once no admitted
  // NoCaptureScope is open, none admitted until it returns (so a stream of launches cannot starve
  // it); begins run one at a time. `begin` runs as inside an admitted scope: what it reaches of
  // the shim (a CUPTI callback, say) counts in no shard.
  template <typename Fn>
  auto Begin(Fn&& begin) {
    ScopeDepth depth;
    // Inside the thread's own scope, waiting for the scopes to close would never end.
    if (!depth.outermost()) return std::forward<Fn>(begin)();
    BeginGate gate(*this);
    return std::forward<Fn>(begin)();
  }

  // True while a Begin waits for the open scopes or runs (for tests).
  bool begin_waiting() const { return begin_pending_.load(std::memory_order_acquire); }

  // In a forked child (one thread): forgets the parent's captures and scopes, whose threads the
  // child does not have, and re-creates the locks they may have held.
  void ResetInForkedChild();

  // CU_STREAM_PER_THREAD: the calling thread's own per-thread default stream, wherever a stream
  // is named below (each thread's is a capture of its own).
  static constexpr uintptr_t kPerThreadStream = 0x2;

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
  // Counts a call the shim skipped because of a capture, and says the first (at info level).
  void CountSkip(const char* what);
  // The calls HoldsBack and CountSkip skipped so far (the summary's engine.capture_skips).
  uint64_t held_back() const { return held_back_.load(std::memory_order_relaxed); }

 private:
  // The key a capture of `stream` is kept under: the calling thread's own for kPerThreadStream.
  static const void* Key(const void* stream);
  // Waits until no admitted scope is open (new ones are not admitted meanwhile) and keeps it so
  // until destroyed.
  class BeginGate {
   public:
    explicit BeginGate(CaptureTracker& tracker);
    ~BeginGate();
    BeginGate(const BeginGate&) = delete;
    BeginGate& operator=(const BeginGate&) = delete;

   private:
    CaptureTracker& tracker_;
  };
  // Counts the calling thread's open scopes (and a Begin in progress on it).
  struct ScopeDepth {
    ScopeDepth();
    ~ScopeDepth();
    bool outermost() const { return outermost_; }

   private:
    bool outermost_;
  };

  struct Capture {
    int mode = kGlobal;
    pthread_t thread{};
  };
  // The open scopes, counted per shard of threads (each counter on its own cache line), and
  // whether a capture is beginning. std::mutex, not absl::Mutex: ThreadSanitizer sees it (Debian's
  // Abseil is not built for it: scripts/tsan.supp).
  static constexpr int kShards = 32;
  struct alignas(64) Shard {
    std::atomic<int> readers{0};
  };
  Shard shards_[kShards];
  std::atomic<bool> begin_pending_{false};
  std::mutex begin_mutex_;  // one capture begins at a time
  mutable std::mutex mutex_;
  std::unordered_map<const void*, Capture> captures_;  // guarded by mutex_
  std::atomic<int> counted_{0};  // global + thread-local captures in captures_
  std::atomic<int> all_{0};      // every capture in captures_
  std::atomic<uint64_t> held_back_{0};
  std::atomic<bool> said_{false};
};

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_CAPTURE_STATE_H_

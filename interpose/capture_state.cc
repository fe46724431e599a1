// CaptureTracker: the stream captures in progress, by stream.
#include "interpose/capture_state.h"

#include "interpose/log.h"

namespace spillway::interpose {
namespace {

// The calling thread's interaction mode (initial-exec: read on the launch path of a preloaded
// library).
thread_local int t_thread_mode __attribute__((tls_model("initial-exec"))) = CaptureTracker::kGlobal;
// Stands for the calling thread's own per-thread default stream: every thread names it
// CU_STREAM_PER_THREAD, yet each has its own, and each may capture it.
thread_local char t_per_thread_stream __attribute__((tls_model("initial-exec")));
// The calling thread's open NoCaptureScopes (and a Begin in progress on it).
thread_local int t_scope_depth __attribute__((tls_model("initial-exec"))) = 0;

}  // namespace

CaptureTracker::ScopeDepth::ScopeDepth() : outermost_(t_scope_depth++ == 0) {}

CaptureTracker::ScopeDepth::~ScopeDepth() { --t_scope_depth; }

CaptureTracker::NoCaptureScope::NoCaptureScope(CaptureTracker& tracker) : tracker_(tracker) {
  if (t_scope_depth++ == 0) {
    tracker_.gate_.lock_shared();
    locked_ = true;
  }
}

CaptureTracker::NoCaptureScope::~NoCaptureScope() {
  --t_scope_depth;
  if (locked_) tracker_.gate_.unlock_shared();
}

const void* CaptureTracker::Key(const void* stream) {
  return reinterpret_cast<uintptr_t>(stream) == kPerThreadStream ? &t_per_thread_stream : stream;
}

void CaptureTracker::OnThreadModeSet(int mode) { t_thread_mode = mode; }

int CaptureTracker::ThreadMode() { return t_thread_mode; }

void CaptureTracker::OnBegin(const void* stream, int mode) {
  stream = Key(stream);
  std::lock_guard lock(mutex_);
  const auto [it, inserted] = captures_.try_emplace(stream, Capture{mode, pthread_self()});
  if (!inserted) {
    if (it->second.mode != kRelaxed) counted_.fetch_sub(1, std::memory_order_relaxed);
    it->second = Capture{mode, pthread_self()};
  }
  if (mode != kRelaxed) counted_.fetch_add(1, std::memory_order_relaxed);
  if (inserted) all_.fetch_add(1, std::memory_order_relaxed);
}

void CaptureTracker::OnEnd(const void* stream) {
  stream = Key(stream);
  std::lock_guard lock(mutex_);
  const auto it = captures_.find(stream);
  if (it == captures_.end()) return;
  if (it->second.mode != kRelaxed) counted_.fetch_sub(1, std::memory_order_relaxed);
  captures_.erase(it);
  all_.fetch_sub(1, std::memory_order_relaxed);
}

bool CaptureTracker::IsCapturing(const void* stream) const {
  if (all_.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard lock(mutex_);
  return captures_.count(Key(stream)) != 0;
}

bool CaptureTracker::ActiveForThisThread() const {
  if (counted_.load(std::memory_order_relaxed) == 0) return false;
  const int thread_mode = t_thread_mode;
  if (thread_mode == kRelaxed) return false;
  const pthread_t self = pthread_self();
  std::lock_guard lock(mutex_);
  for (const auto& [stream, capture] : captures_) {
    // The thread's own capture (not relaxed) holds it back in global and thread-local mode;
    // another thread's only a global-mode thread, and only when that capture is global too.
    if (capture.mode != kRelaxed && pthread_equal(capture.thread, self) != 0) return true;
    if (capture.mode == kGlobal && thread_mode == kGlobal) return true;
  }
  return false;
}

bool CaptureTracker::HoldsBack(const char* what) {
  if (!ActiveForThisThread()) return false;
  CountSkip(what);
  return true;
}

void CaptureTracker::CountSkip(const char* what) {
  held_back_.fetch_add(1, std::memory_order_relaxed);
  if (!said_.exchange(true, std::memory_order_relaxed)) {
    Log(LogLevel::kInfo,
        "a stream capture is in progress that a driver call of spillway's would join or "
        "invalidate: %s skipped (and any such call while it lasts; counted in "
        "engine.capture_skips)",
        what);
  }
}

}  // namespace spillway::interpose

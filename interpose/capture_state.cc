// CaptureTracker: the stream captures in progress, by stream.
#include "interpose/capture_state.h"

namespace spillway::interpose {

void CaptureTracker::OnBegin(const void* stream, int mode) {
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
  return captures_.count(stream) != 0;
}

bool CaptureTracker::ActiveForThisThread() const {
  if (counted_.load(std::memory_order_relaxed) == 0) return false;
  const pthread_t self = pthread_self();
  std::lock_guard lock(mutex_);
  for (const auto& [stream, capture] : captures_) {
    if (capture.mode == kGlobal) return true;
    if (capture.mode == kThreadLocal && pthread_equal(capture.thread, self) != 0) return true;
  }
  return false;
}

}  // namespace spillway::interpose

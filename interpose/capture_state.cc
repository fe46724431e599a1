// CaptureTracker: the stream captures in progress, by stream.
#include "interpose/capture_state.h"

#include <sched.h>

#include <new>

#include "interpose/log.h"

namespace spillway::interpose {
namespace {

// The calling thread's interaction mode (initial-exec: read on the launch path of a preloaded
// library).
thread_local int t_thread_mode __attribute__((tls_model("initial-exec"))) = CaptureTracker::kGlobal;
// Stands for the calling thread's own per-thread default stream: every thread names it
// CU_STREAM_PER_THREAD, yet each has its own, and each may capture it.
thread_local char t_per_thread_stream __attribute__((tls_model("initial-exec")));
// The calling thread's open NoCaptureScopes (and a Begin in progress on it), and whether its
// outermost one was admitted (a Begin in progress on the thread counts as admitted).
thread_local int t_scope_depth __attribute__((tls_model("initial-exec"))) = 0;
thread_local bool t_scope_admitted __attribute__((tls_model("initial-exec"))) = false;

// The shard of the gate's counters the calling thread counts its scopes in: threads are dealt
// round the shards as they first open one.
int ShardOfThisThread(int shards) {
  static constinit std::atomic<int> next{0};
  thread_local int shard __attribute__((tls_model("initial-exec"))) = -1;
  if (shard < 0) shard = next.fetch_add(1, std::memory_order_relaxed) % shards;
  return shard;
}

}  // namespace

CaptureTracker::ScopeDepth::ScopeDepth() : outermost_(t_scope_depth++ == 0) {
  if (outermost_) t_scope_admitted = true;  // what the begin reaches of the shim may call
}

CaptureTracker::ScopeDepth::~ScopeDepth() { --t_scope_depth; }

CaptureTracker::NoCaptureScope::NoCaptureScope(CaptureTracker& tracker) {
  if (t_scope_depth++ != 0) {
    admitted_ = t_scope_admitted;  // as the thread's outermost scope
    return;
  }
  std::atomic<int>& readers = tracker.shards_[ShardOfThisThread(kShards)].readers;
  // Sequentially consistent, as the gate's store and loads: either this scope sees the beginning
  // capture, or the capture waits for this scope. A scope never waits: one that meets a beginning
  // capture is not admitted, and its caller makes none of its calls.
  readers.fetch_add(1, std::memory_order_seq_cst);
  if (tracker.begin_pending_.load(std::memory_order_seq_cst)) {
    readers.fetch_sub(1, std::memory_order_seq_cst);
  } else {
    readers_ = &readers;
    admitted_ = true;
  }
  t_scope_admitted = admitted_;
}

CaptureTracker::NoCaptureScope::~NoCaptureScope() {
  --t_scope_depth;
  if (readers_ != nullptr) readers_->fetch_sub(1, std::memory_order_release);
}

CaptureTracker::BeginGate::BeginGate(CaptureTracker& tracker) : tracker_(tracker) {
  tracker_.begin_mutex_.lock();
  tracker_.begin_pending_.store(true, std::memory_order_seq_cst);
  for (Shard& shard : tracker_.shards_) {
    while (shard.readers.load(std::memory_order_seq_cst) != 0) sched_yield();
  }
}

CaptureTracker::BeginGate::~BeginGate() {
  tracker_.begin_pending_.store(false, std::memory_order_release);
  tracker_.begin_mutex_.unlock();
}

void CaptureTracker::ResetInForkedChild() {
  for (Shard& shard : shards_) shard.readers.store(0, std::memory_order_relaxed);
  begin_pending_.store(false, std::memory_order_relaxed);
  new (&begin_mutex_) std::mutex();
  new (&mutex_) std::mutex();
  // Another parent thread may have been changing the map: a new one, the old one left as it is.
  new (&captures_) std::unordered_map<const void*, Capture>();
  counted_.store(0, std::memory_order_relaxed);
  all_.store(0, std::memory_order_relaxed);
  held_back_.store(0, std::memory_order_relaxed);
  said_.store(false, std::memory_order_relaxed);
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

// Streams, their worker threads and the virtual clock. Each stream has a worker that runs its
// operations in order; an operation waits for its dependencies (events, the legacy stream's
// implicit synchronization), then its body advances the stream's virtual timeline, booking the
// compute engine or a copy engine.
#include <sched.h>

#include <algorithm>
#include <set>

#include "simgpu_internal.h"

namespace simgpu {
namespace {

std::mutex* g_mu = new std::mutex();
std::condition_variable* g_done_cv = new std::condition_variable();
std::set<Stream*>* g_streams = new std::set<Stream*>();  // guarded by g_mu
Stream* g_legacy = nullptr;
uint64_t g_next_stream_id = 1;
double g_engine_free[3] = {0, 0, 0};  // guarded by g_mu
double g_max_vtime = 0;               // guarded by g_mu

thread_local Stream* tls_per_thread = nullptr;
thread_local bool tls_worker = false;  // this thread is a stream's worker
// This thread's host clock (virtual seconds): the time its driver calls blocked it, and the ends of
// the work it waited for. Work it enqueues starts no earlier (Stream::Op::not_before).
thread_local double tls_host_vtime = 0;

void WorkerLoop(Stream* s) {
  tls_worker = true;
  s->worker_started.store(true, std::memory_order_release);
  std::unique_lock<std::mutex> lock(*g_mu);
  for (;;) {
    s->cv.wait(lock, [s] { return !s->queue.empty(); });
    Stream::Op op = std::move(s->queue.front());
    s->queue.pop_front();
    if (op.stop) return;
    double start = std::max(s->vtime, op.not_before);
    for (const MarkerPtr& dep : op.deps) {
      g_done_cv->wait(lock, [&dep] { return dep->done; });
      start = std::max(start, dep->vtime);
    }
    lock.unlock();
    double end = op.body ? op.body(start) : start;
    lock.lock();
    end = std::max(end, start);
    s->vtime = end;
    g_max_vtime = std::max(g_max_vtime, end);
    op.done->vtime = end;
    op.done->done = true;
    g_done_cv->notify_all();
  }
}

Stream* NewStreamLocked(unsigned flags, int priority, Context* ctx) {
  Stream* s = new Stream();
  s->id = g_next_stream_id++;
  s->flags = flags;
  s->priority = priority;
  s->ctx = ctx;
  g_streams->insert(s);
  s->worker = std::thread(WorkerLoop, s);
  // The thread's start-up (which allocates) is over before the stream is handed out, so a fork()
  // right after cannot catch it holding an allocator lock the child would inherit (ASan's
  // allocator has no fork handlers in GCC 12).
  while (!s->worker_started.load(std::memory_order_acquire)) sched_yield();
  return s;
}

bool Blocking(const Stream* s) { return (s->flags & CU_STREAM_NON_BLOCKING) == 0; }

}  // namespace

std::mutex& SyncMutex() { return *g_mu; }

double BookEngine(Engine engine, double earliest, double seconds) {
  int e = static_cast<int>(engine);
  if (engine == Engine::kD2H && config().copy_engines < 2) e = static_cast<int>(Engine::kH2D);
  std::lock_guard<std::mutex> lock(*g_mu);
  double start = std::max(earliest, g_engine_free[e]);
  g_engine_free[e] = start + seconds;
  return start + seconds;
}

void StreamsInit() {
  std::lock_guard<std::mutex> lock(*g_mu);
  g_legacy = NewStreamLocked(0, 0, nullptr);
  g_legacy->legacy = true;
}

Stream* LegacyStream() { return g_legacy; }

Stream* PerThreadStream() {
  if (tls_per_thread != nullptr) return tls_per_thread;
  std::lock_guard<std::mutex> lock(*g_mu);
  tls_per_thread = NewStreamLocked(0, 0, nullptr);
  tls_per_thread->per_thread = true;
  return tls_per_thread;
}

Stream* CreateStream(unsigned flags, int priority, Context* ctx) {
  std::lock_guard<std::mutex> lock(*g_mu);
  return NewStreamLocked(flags, priority, ctx);
}

void DestroyStream(Stream* s) {
  SynchronizeStream(s);
  {
    std::lock_guard<std::mutex> lock(*g_mu);
    g_streams->erase(s);
    Stream::Op stop;
    stop.stop = true;
    s->queue.push_back(std::move(stop));
    s->cv.notify_all();
  }
  s->worker.join();
  delete s;
}

bool IsLiveStream(Stream* s) {
  std::lock_guard<std::mutex> lock(*g_mu);
  return g_streams->count(s) > 0 && !s->legacy && !s->per_thread;
}

bool LegacyStreamUnusable(bool invalidate) {
  std::lock_guard<std::mutex> lock(*g_mu);
  bool unusable = false;
  for (Stream* s : *g_streams) {
    if (s->legacy || !Blocking(s) || s->capture_mode.load(std::memory_order_relaxed) < 0) continue;
    if (s->ctx != nullptr && s->ctx != CurrentContext()) continue;
    unusable = true;
    if (invalidate) s->capture_invalidated.store(true, std::memory_order_relaxed);
  }
  return unusable;
}

CUresult ResolveStream(CUstream h, bool ptsz, Stream** out) {
  if (CUresult r = ResolveStreamAnyState(h, ptsz, out)) return r;
  if ((*out)->capture_mode.load(std::memory_order_relaxed) >= 0) {
    (*out)->capture_invalidated.store(true, std::memory_order_relaxed);  // as the driver does
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return RefuseLegacyDuringCapture(*out);
}

CUresult RefuseLegacyDuringCapture(const Stream* s) {
  // cuda.h: while a blocking stream (of the context) captures, the legacy stream is unusable;
  // work on it would depend on the capture, which that breaks.
  if (s->legacy && LegacyStreamUnusable(/*invalidate=*/true)) {
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  }
  return CUDA_SUCCESS;
}

CUresult ResolveStreamAnyState(CUstream h, bool ptsz, Stream** out) {
  if (h == nullptr) {
    *out = ptsz ? PerThreadStream() : LegacyStream();
  } else if (h == CU_STREAM_LEGACY) {
    *out = LegacyStream();
  } else if (h == CU_STREAM_PER_THREAD) {
    *out = PerThreadStream();
  } else {
    Stream* s = reinterpret_cast<Stream*>(h);
    if (!IsLiveStream(s)) return CUDA_ERROR_INVALID_HANDLE;
    *out = s;
  }
  return CUDA_SUCCESS;
}

MarkerPtr Enqueue(Stream* s, OpBody body, std::vector<MarkerPtr> extra_deps, MarkerPtr* publish) {
  std::unique_lock<std::mutex> lock(*g_mu);
  // A full launch queue holds the host thread until the device takes an operation, as a real
  // GPU's does. Not a worker (a host function's body), which would wait for itself.
  if (const uint32_t depth = config().queue_depth; depth != 0 && !tls_worker) {
    g_done_cv->wait(lock, [s, depth] { return s->queue.size() < depth; });
  }
  Stream::Op op;
  op.deps = std::move(extra_deps);
  // The legacy default stream waits for all blocking streams and they wait for it (completed
  // ops too: their virtual end times still order the timelines).
  if (s->legacy) {
    for (Stream* other : *g_streams) {
      if (other != s && Blocking(other) && other->last) {
        op.deps.push_back(other->last);
      }
    }
  } else if (Blocking(s) && g_legacy->last) {
    op.deps.push_back(g_legacy->last);
  }
  op.body = std::move(body);
  op.not_before = tls_worker ? 0 : tls_host_vtime;
  op.done = std::make_shared<Marker>();
  MarkerPtr done = op.done;
  s->last = done;
  if (publish != nullptr) *publish = done;
  s->queue.push_back(std::move(op));
  s->cv.notify_all();
  return done;
}

void WaitMarker(const MarkerPtr& m) {
  if (!m) return;
  std::unique_lock<std::mutex> lock(*g_mu);
  g_done_cv->wait(lock, [&m] { return m->done; });
  // The host thread waited for that work: its clock is past the work's end.
  if (!tls_worker) tls_host_vtime = std::max(tls_host_vtime, m->vtime);
}

void ChargeHost(double seconds) {
  if (!tls_worker && seconds > 0) tls_host_vtime += seconds;
}

bool MarkerDone(const MarkerPtr& m) {
  if (!m) return true;
  std::lock_guard<std::mutex> lock(*g_mu);
  return m->done;
}

void SynchronizeStream(Stream* s) {
  MarkerPtr last;
  {
    std::lock_guard<std::mutex> lock(*g_mu);
    last = s->last;
  }
  WaitMarker(last);
}

bool StreamIdle(Stream* s) {
  std::lock_guard<std::mutex> lock(*g_mu);
  return !s->last || s->last->done;
}

namespace {

// Waits for the last operation queued so far on each stream `wanted` picks.
template <typename Wanted>
void SynchronizeStreams(Wanted wanted) {
  std::vector<MarkerPtr> pending;
  {
    std::lock_guard<std::mutex> lock(*g_mu);
    for (Stream* s : *g_streams) {
      if (s->last && wanted(s)) pending.push_back(s->last);
    }
  }
  for (const MarkerPtr& m : pending) WaitMarker(m);
}

}  // namespace

void SynchronizeAll() {
  SynchronizeStreams([](const Stream*) { return true; });
}

void SynchronizeContext(const Context* ctx) {
  SynchronizeStreams([ctx](const Stream* s) { return s->ctx == ctx || s->ctx == nullptr; });
}

double VirtualSeconds() {
  std::lock_guard<std::mutex> lock(*g_mu);
  double t = g_max_vtime;
  for (double e : g_engine_free) t = std::max(t, e);
  return t;
}

}  // namespace simgpu

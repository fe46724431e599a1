// Online planning off the launching thread (see background_plan.h).
#include "policy/plan/background_plan.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace spillway::policy {

struct BackgroundPlan::Shared {
  absl::Mutex mutex;
  std::optional<Result> result ABSL_GUARDED_BY(mutex);
};

namespace {

// What the thread owns: its inputs and the shared result (kept alive by the thread even when the
// policy that started it is gone).
struct Job {
  StepPlanner planner;
  RecordedEvents events;
  uint64_t budget_bytes;
  std::shared_ptr<BackgroundPlan::Shared> shared;
};

void* RunPlanning(void* arg) {
  std::unique_ptr<Job> job(static_cast<Job*>(arg));
  pthread_setname_np(pthread_self(), "spillway-plan");
  const auto start = std::chrono::steady_clock::now();
  BackgroundPlan::Result result{job->planner(job->events, job->budget_bytes), 0};
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  job->events = RecordedEvents{};  // freed here, not by the launch that takes the result
  absl::MutexLock lock(&job->shared->mutex);
  job->shared->result = std::move(result);
  return nullptr;
}

}  // namespace

bool BackgroundPlan::Start(StepPlanner planner, RecordedEvents events, uint64_t budget_bytes) {
  if (running()) return false;
  auto shared = std::make_shared<Shared>();
  auto job =
      std::make_unique<Job>(Job{std::move(planner), std::move(events), budget_bytes, shared});
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  // The thread starts with every signal blocked (it inherits this thread's mask, restored after).
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pthread_t thread;
  const int created = pthread_create(&thread, &attr, RunPlanning, job.get());
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  pthread_attr_destroy(&attr);
  if (created != 0) return false;
  job.release();  // the thread owns it now
  shared_ = std::move(shared);
  started_in_ = getpid();
  return true;
}

bool BackgroundPlan::running() {
  if (shared_ != nullptr && started_in_ != getpid()) shared_.reset();  // forked: no thread here
  return shared_ != nullptr;
}

std::optional<BackgroundPlan::Result> BackgroundPlan::Take() {
  if (!running()) return std::nullopt;
  std::optional<Result> result;
  {
    absl::MutexLock lock(&shared_->mutex);
    if (!shared_->result.has_value()) return std::nullopt;
    result = std::move(shared_->result);
  }
  shared_.reset();
  return result;
}

}  // namespace spillway::policy

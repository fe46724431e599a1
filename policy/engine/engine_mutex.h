// The residency engine's lock: a std::mutex that also counts the engine locks the calling thread
// holds, so that a Device implementation can check the engine's promise that no device call is
// made under its lock (the tests' fake device fails a test that does).
#ifndef SPILLWAY_POLICY_ENGINE_ENGINE_MUTEX_H_
#define SPILLWAY_POLICY_ENGINE_ENGINE_MUTEX_H_

#include <mutex>

namespace spillway::policy {

class EngineMutex {
 public:
  // BasicLockable, for std::lock_guard and std::unique_lock.
  void lock() {
    mutex_.lock();
    ++held_by_thread_;
  }
  void unlock() {
    --held_by_thread_;
    mutex_.unlock();
  }

  // @brief Whether the calling thread holds an engine's lock (any engine's).
  static bool HeldByThisThread() { return held_by_thread_ != 0; }

 private:
  std::mutex mutex_;
  static thread_local int held_by_thread_;
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_ENGINE_MUTEX_H_

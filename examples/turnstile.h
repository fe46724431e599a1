// Replicas on their own threads that take turns at their kernel launches, one launch a turn, each
// next turn drawn from a fixed seed among the replicas still launching: an interleaving that
// changes from step to step like free-running threads', but the same on every run and on any
// host load (train_like --interleave shuffled, for tests that need the interleaving to change).
#ifndef SPILLWAY_EXAMPLES_TURNSTILE_H_
#define SPILLWAY_EXAMPLES_TURNSTILE_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace spillway_demo {

// Its lock is a std::mutex, not an absl::Mutex: Debian's Abseil is not built for
// ThreadSanitizer, which could not see what it orders (scripts/test.sh --tsan runs this).
class Turnstile {
 public:
  // `draw(turn, launching)` picks the replica of the turn-th turn: the index, modulo `launching`,
  // among the replicas still launching.
  using Draw = uint32_t (*)(uint64_t turn, uint32_t launching);

  Turnstile(size_t replicas, Draw draw) : launching_(replicas, true), draw_(draw) {
    std::lock_guard lock(mutex_);
    Next();
  }

  Turnstile(const Turnstile&) = delete;
  Turnstile& operator=(const Turnstile&) = delete;

  // Blocks until it is `replica`'s turn. The caller launches, then calls Pass.
  void Await(size_t replica) {
    std::unique_lock lock(mutex_);
    turn_changed_.wait(lock, [&] { return turn_ == replica; });
  }

  // Ends the current turn and draws the next.
  void Pass() {
    std::lock_guard lock(mutex_);
    Next();
  }

  // `replica` launches no more; if the turn was its, the next is drawn.
  void Leave(size_t replica) {
    std::lock_guard lock(mutex_);
    launching_[replica] = false;
    if (turn_ == replica) Next();
  }

 private:
  // REQUIRES: mutex_ held.
  void Next() {
    uint32_t count = 0;
    for (const bool launching : launching_) count += launching ? 1 : 0;
    turn_ = launching_.size();  // nobody's: all have left
    if (count != 0) {
      uint32_t pick = draw_(turns_++, count) % count;
      for (size_t r = 0; r < launching_.size(); ++r) {
        if (!launching_[r]) continue;
        if (pick == 0) {
          turn_ = r;
          break;
        }
        --pick;
      }
    }
    turn_changed_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable turn_changed_;
  std::vector<bool> launching_;  // guarded by mutex_, as the two below
  const Draw draw_;
  uint64_t turns_ = 0;
  size_t turn_ = 0;
};

}  // namespace spillway_demo

#endif  // SPILLWAY_EXAMPLES_TURNSTILE_H_

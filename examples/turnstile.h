// Replicas on their own threads that take turns at their kernel launches, one launch a turn, each
// next turn drawn from a fixed seed among the replicas still launching: an interleaving that
// changes from step to step like free-running threads', but the same on every run and on any
// host load (train_like --interleave shuffled, for tests that need the interleaving to change).
#ifndef SPILLWAY_EXAMPLES_TURNSTILE_H_
#define SPILLWAY_EXAMPLES_TURNSTILE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace spillway_demo {

class Turnstile {
 public:
  // `draw(turn, launching)` picks the replica of the turn-th turn: the index, modulo `launching`,
  // among the replicas still launching.
  using Draw = uint32_t (*)(uint64_t turn, uint32_t launching);

  Turnstile(size_t replicas, Draw draw) : launching_(replicas, true), draw_(draw) {
    absl::MutexLock lock(&mu_);
    Next();
  }

  Turnstile(const Turnstile&) = delete;
  Turnstile& operator=(const Turnstile&) = delete;

  // Blocks until it is `replica`'s turn. The caller launches, then calls Pass.
  void Await(size_t replica) {
    absl::MutexLock lock(&mu_);
    const auto my_turn = [this, replica]()
                             ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return turn_ == replica; };
    mu_.Await(absl::Condition(&my_turn));
  }

  // Ends the current turn and draws the next.
  void Pass() {
    absl::MutexLock lock(&mu_);
    Next();
  }

  // `replica` launches no more; if the turn was its, the next is drawn.
  void Leave(size_t replica) {
    absl::MutexLock lock(&mu_);
    launching_[replica] = false;
    if (turn_ == replica) Next();
  }

 private:
  void Next() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    uint32_t count = 0;
    for (const bool launching : launching_) count += launching ? 1 : 0;
    turn_ = launching_.size();  // nobody's: all have left
    if (count == 0) return;
    uint32_t pick = draw_(turns_++, count) % count;
    for (size_t r = 0; r < launching_.size(); ++r) {
      if (!launching_[r]) continue;
      if (pick == 0) {
        turn_ = r;
        return;
      }
      --pick;
    }
  }

  absl::Mutex mu_;
  std::vector<bool> launching_ ABSL_GUARDED_BY(mu_);
  const Draw draw_;
  uint64_t turns_ ABSL_GUARDED_BY(mu_) = 0;
  size_t turn_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace spillway_demo

#endif  // SPILLWAY_EXAMPLES_TURNSTILE_H_

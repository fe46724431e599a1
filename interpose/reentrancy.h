// The shim's reentrancy flag: true while this thread is inside a hook (or resolving the driver),
// so that a hook entered again (the driver calling itself through a hooked name, the shim's own
// calls) forwards straight to the real function.
#ifndef SPILLWAY_INTERPOSE_REENTRANCY_H_
#define SPILLWAY_INTERPOSE_REENTRANCY_H_

namespace spillway::interpose {

// Sets the flag for its lifetime; saves and restores the previous value.
class ReentrancyGuard {
 public:
  ReentrancyGuard() : previous_(active_) { active_ = true; }
  ~ReentrancyGuard() { active_ = previous_; }
  ReentrancyGuard(const ReentrancyGuard&) = delete;
  ReentrancyGuard& operator=(const ReentrancyGuard&) = delete;

  static bool Active() { return active_; }

 private:
  // Constant-initialized and initial-exec: read on every hooked call, from any thread, before
  // any dynamic initializer may have run.
  static inline thread_local constinit bool active_ __attribute__((tls_model("initial-exec"))) =
      false;
  bool previous_;
};

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_REENTRANCY_H_

// Observes kernel and transfer times for the residency engine with timing events, never
// blocking: events are recorded on the launch stream (and on the lookahead's prefetch stream) and
// read later, once complete, with a non-blocking query and the elapsed time between two of them.
//
// A launch's kernel interval runs from an event recorded after the engine's own waits and moves
// for it (the kernel may start) to an event recorded when the next launch arrives, before that
// launch's engine moves (on its stream, after the job's own waits there): for a step whose
// launches depend on each other that is the kernel's time, without the time the engine's own
// transfers held it up. A launch on another stream that does not wait for it gives a short or
// negative interval, counted as 0: the kernels overlapped. A transfer interval brackets a
// lookahead batch's prefetches on the prefetch stream, or its write-backs on the evict stream. A
// step interval runs between two step marks with consecutive tags (StepMark), each recorded
// where a step's first launch arrives: the device time of a whole step of the job, stalls and all.
//
// Thread-safe without blocking: every call try-locks and does nothing (loses a sample) when
// another thread holds the lock. A fixed ring of event pairs; when all are in flight (the job's
// launches run far ahead of the device) a new interval is not timed, so those in flight still
// give their samples; after kMaxRefused such refusals in a row the oldest is reused (its sample
// lost), so an event that never completes cannot stop the timing.
#ifndef SPILLWAY_POLICY_ENGINE_LAUNCH_TIMER_H_
#define SPILLWAY_POLICY_ENGINE_LAUNCH_TIMER_H_

#include <array>
#include <cstdint>
#include <mutex>
#include <vector>

#include "policy/engine/device.h"

namespace spillway::policy {

class LaunchTimer {
 public:
  enum class Kind { kKernel, kToDevice, kToHost, kStep };
  struct Sample {
    Kind kind = Kind::kKernel;
    uint64_t key = 0;  // a kernel's launch stamp, a transfer's bytes, or a step's first mark's tag
    double seconds = 0;
  };
  static constexpr size_t kEntries = 256;  // event pairs in flight at most
  static constexpr int kMaxRefused = 4096;
  static constexpr int kMaxHarvest = 8;  // samples read per Poll at most
  static constexpr size_t kMarks = 32;   // step marks in flight at most (the oldest is dropped)

  // REQUIRES: `device` outlives the timer.
  explicit LaunchTimer(Device* device) : device_(device) {}
  LaunchTimer(const LaunchTimer&) = delete;
  LaunchTimer& operator=(const LaunchTimer&) = delete;

  // @brief Appends the samples whose events have completed, oldest first (at most kMaxHarvest);
  // queries events, never waits for them.
  void Poll(std::vector<Sample>* out);
  // @brief Launch `stamp` arrived on `stream`, before the engine's own waits and moves: ends the
  // kernel interval of launch stamp - 1 (another launch's open interval is dropped).
  void LaunchArrived(uint64_t stamp, Stream stream);
  // @brief The engine's waits and moves for launch `stamp` are issued on `stream`: begins its
  // kernel interval.
  void KernelReady(uint64_t stamp, Stream stream);
  // @brief A step of the job begins on `stream`, before the engine's waits and moves for its first
  // launch: mark `tag` (tags count up; a skipped one breaks the chain). The marks `tag` and
  // `tag` + 1 give a kStep sample keyed `tag`.
  void StepMark(uint64_t tag, Stream stream);
  // @brief Begins a transfer interval on `stream`; returns its handle (-1: not timed).
  int BeginTransfer(Stream stream);
  // @brief Ends transfer interval `handle` (of `bytes`, to the device or to the host) on `stream`.
  void EndTransfer(int handle, uint64_t bytes, bool to_device, Stream stream);
  // @brief False once the device turned out unable to time (no samples will come).
  bool usable() const { return usable_; }

 private:
  enum class State { kFree, kOpen, kClosed };
  struct Entry {
    State state = State::kFree;
    Kind kind = Kind::kKernel;
    uint64_t key = 0;
    uint64_t sequence = 0;  // when it was opened: oldest first
    Event start = nullptr;
    Event end = nullptr;
  };
  struct Mark {
    uint64_t tag = 0;  // 0: free
    Event event = nullptr;
  };
  // REQUIRES: mutex_ held. Creates the events once; false when the device cannot time.
  bool ReadyLocked();
  // REQUIRES: mutex_ held. Appends the step samples whose marks have completed.
  void PollMarksLocked(std::vector<Sample>* out);
  // REQUIRES: mutex_ held, ReadyLocked(). A free entry, opened with `kind` and `key` (the oldest
  // entry when none is free).
  int OpenLocked(Kind kind, uint64_t key);

  Device* const device_;
  std::mutex mutex_;  // only ever try-locked
  bool tried_ = false;
  bool usable_ = true;
  std::array<Entry, kEntries> entries_{};
  std::array<Mark, kMarks> marks_{};
  uint64_t sequence_ = 0;
  int open_kernel_ = -1;  // the entry whose kernel interval is open
  int refused_ = 0;       // opens refused in a row (all entries in flight)
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_ENGINE_LAUNCH_TIMER_H_

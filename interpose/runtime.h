// Process-wide state of the shim: configuration, per-function call counters, the registry of live
// allocations made through the hooks, recorded problems, fork handling and the exit summary.
// Everything here is safe to call from any thread and from inside hooks; the counters are fixed-
// size atomics so the launch path neither locks nor allocates.
#ifndef SPILLWAY_INTERPOSE_RUNTIME_H_
#define SPILLWAY_INTERPOSE_RUNTIME_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "interpose/config.h"
#include "interpose/hook_table.h"
#include "interpose/log.h"
#include "interpose/real_driver.h"
#include "interpose/reentrancy.h"
#include "policy/front_door.h"

namespace spillway::interpose {

// Reads the environment once (later calls return at once), sets up logging and fork handlers.
void EnsureConfigured();
// Logs (and keeps for the summary) what is wrong with the SPILLWAY_* settings, once per process,
// at its first CUDA call through spillway (ResolveDriverSlow): a shell or `timeout` around the job
// carries the preload too, but says nothing about settings it never uses. REQUIRES:
// EnsureConfigured() has run.
void ReportConfigProblemsOnce();

// The settings read (once), then the real driver resolved (real_driver.h): what every hook makes
// sure of before it forwards. The settings' problems are said at the first resolution.
inline bool EnsureReady(bool allow_load = true) {
  if (__builtin_expect(g_driver_state.load(std::memory_order_acquire) == kReady, 1)) return true;
  EnsureConfigured();
  ReportConfigProblemsOnce();
  return ResolveDriverSlow(allow_load);
}

// The mode in effect. REQUIRES: EnsureConfigured() has run.
Mode CurrentMode();

struct alignas(64) CallCounter {
  std::atomic<uint64_t> value{0};
};
extern CallCounter g_call_counts[kNumHooks];

inline void CountCall(int index) {
  g_call_counts[index].value.fetch_add(1, std::memory_order_relaxed);
}

// True when the mode drives the residency engine (run, record).
inline bool EngineMode() { return CurrentMode() != Mode::kOff; }

// The front door to the engines (policy/front_door.h): the registry, one engine per device, the
// resolution of launches. Made when the settings are read (EnsureConfigured, which this calls).
policy::FrontDoor& Front();

// The registry of live allocations made through the hooks (the front door's).
policy::AllocationRegistry& Allocations();

// The residency engine of the current context's device (one per device, each with its own budget
// and DriverDevice, so streams and events never cross devices), started on first use in
// run/record mode; null without a current context, when it cannot start yet (no budget given and
// the driver cannot report memory) or in off mode. Starting it may hold the ballast
// (SPILLWAY_BALLAST). REQUIRES: the driver is resolved and the caller holds a ReentrancyGuard.
policy::ResidencyEngine* Engine();

// The engine of device `device` if it started; never starts one. No requirement.
policy::ResidencyEngine* EngineOf(int device);

// The total device memory the job is told about for `device` (-1: the current context's):
// max(physical, budget + SPILLWAY_HOST_MEMORY), with the configured budget when that device's
// engine has not started. REQUIRES: as Engine(); returns `physical_total` when no budget is known.
uint64_t ReportedTotal(uint64_t physical_total, int device = -1);

// Registry updates. Called after the real call succeeded; never while holding anything the driver
// could need. OnAllocated records the current context's device and tells that device's engine,
// when one runs; OnFreed is for frees the engine
// did not front (the memory is gone already) and returns what was freed.
policy::Allocation OnAllocated(uint64_t address, uint64_t bytes, policy::Backing backing,
                               bool stream_ordered = false, bool substituted = false);
void OnFreed(uint64_t address);
void OnVmmCreated();

// After `context` ended (cuCtxDestroy, a primary context's reset or last release; call after the
// real call succeeded): the driver freed its memory and destroyed its streams and events. The
// engines that started in it are retired (the device's next engine starts at its next use, in
// the context current then) and their ballast forgotten; the allocations made in it leave the
// registry and their engine. No driver call.
void OnContextEnded(CUcontext context);

// Writes the exit summary when SPILLWAY_SUMMARY is set. Makes no CUDA call.
void WriteSummaryAtExit();

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_RUNTIME_H_

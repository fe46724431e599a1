// Where the job's allocations get their memory, beyond "cuMemAlloc becomes cuMemAllocManaged":
// the managed memory pool per device that backs stream-ordered allocations, the exceptions that
// stay plain device memory (made during stream capture, or from a module on
// SPILLWAY_DEVICE_MODULES), IPC handles refused for managed memory, and the ballast
// (SPILLWAY_BALLAST). Counts for the exit summary. See docs/engine.md "Backing".
#ifndef SPILLWAY_INTERPOSE_BACKING_H_
#define SPILLWAY_INTERPOSE_BACKING_H_

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "interpose/capture_state.h"
#include "policy/front_door.h"

namespace spillway::interpose {

// Devices (ordinals) the shim keeps a registry budget/engine for; higher ordinals pass through.
inline constexpr int kMaxDevices = 64;

// Why an allocation stays plain device memory.
enum class DeviceReason { kCapture, kModule };

struct BackingCounts {
  uint64_t capture = 0;      // allocations made during a stream capture
  uint64_t module = 0;       // allocations from a module on SPILLWAY_DEVICE_MODULES
  uint64_t ipc_refused = 0;  // cuIpcGetMemHandle calls refused for managed memory
};

// REQUIRES (every function below unless said): the real driver is resolved and the caller holds
// a ReentrancyGuard.

// The stream captures in progress, fed by the capture hooks. No requirement.
CaptureTracker& Captures();

// True when work the shim enqueued on `stream` now would be captured into a job's graph or
// invalidate its capture: the stream is capturing (begun on it, or joined to another stream's
// capture by an event wait, which the tracker does not see), or it is the legacy stream while a
// blocking stream captures. The driver is asked only while a capture is in progress; when it
// cannot tell, true. Each such stream is counted in engine.capture_skips.
bool StreamTakenByCapture(CUstream stream);

// How many calls StreamTakenByCapture refused on the calling thread so far.
uint64_t CaptureRefusalsOnThisThread();

// Runs `calls` (the engine's, returning how many of its device calls failed) and says whether
// any failed for a reason worth a warning: refusals on streams a capture took are expected
// (counted in engine.capture_skips instead).
template <typename Calls>
bool EngineCallsFailed(Calls calls) {
  const uint64_t refused_before = CaptureRefusalsOnThisThread();
  const int failures = calls();
  return failures > 0 &&
         static_cast<uint64_t>(failures) > CaptureRefusalsOnThisThread() - refused_before;
}

// The current context's device ordinal; -1 without a current context. In a process that sees one
// device, 0 without asking the driver (also before a context exists).
int CurrentDevice();

// The modules whose allocations stay device memory (SPILLWAY_DEVICE_MODULES), set once the
// settings are read; null (the default) when none is listed. Kept, not copied.
void SetDeviceModules(const std::vector<std::string>* modules);

// Why an allocation the calling thread is making must stay plain device memory; nullopt when it
// may be managed. A stream-ordered allocation on `stream` is also checked with
// cuStreamIsCapturing (`per_thread`: a null stream is the per-thread default stream).
std::optional<DeviceReason> DeviceMemoryReason(bool stream_ordered, CUstream stream,
                                               bool per_thread);
void CountDeviceException(DeviceReason reason);  // no requirement

// The managed pool that backs stream-ordered allocations on the current context's device, made on
// first use (cuMemPoolCreate: managed, no preferred location; else the driver's current managed
// pool). Null when the driver offers none: said once, stream-ordered allocations pass through.
CUmemoryPool ManagedPool();

// True when `pool` is the current device's default pool: allocations from it are backed like
// cuMemAllocAsync's. Pools the job created stay its own.
bool IsDevicePool(CUmemoryPool pool);

// The job's calls on a default pool whose allocations a managed pool serves: each of these does,
// after the job's own call on `pool` succeeded, what that call means for the managed pools
// spillway made that stand in for it (nothing for any other pool, nor for the driver's own
// managed pool where that serves the allocations).
// - A setting (the release threshold, the reuse flags) is copied to them from the default pool as
//   it is then; a reset of a high watermark is made on them too.
// - A statistic (used and reserved bytes, current and high) adds theirs to `value` (a high
//   watermark: the sum of both pools', at least the true one).
// - A trim trims them too, each down to `min_bytes_to_keep`.
void ForwardPoolSetting(CUmemoryPool pool, CUmemPool_attribute attribute, void* value);
void AddManagedPoolStatistic(CUmemoryPool pool, CUmemPool_attribute attribute, void* value);
void TrimManagedPools(CUmemoryPool pool, size_t min_bytes_to_keep);

// True when the current device's current pool (what cuMemAllocAsync allocates from) is its
// default one, not a pool the job made current with cuDeviceSetMemPool.
bool CurrentPoolIsDefault();

// True when the driver says `address` lies in managed memory.
bool IsManagedMemory(CUdeviceptr address);

void CountIpcRefused();       // no requirement
BackingCounts CountsSoFar();  // no requirement

// SPILLWAY_BALLAST: allocates, with the real cuMemAlloc on `device`, the physical free memory
// beyond `budget` and `headroom` (SPILLWAY_BALLAST_HEADROOM; nullopt: 5% of `total`), for device
// `ordinal`. Returns the bytes held (0 when there is nothing to hold or the allocation failed,
// which is logged). Freed at exit.
uint64_t StartBallast(int ordinal, policy::Device* device, uint64_t budget, uint64_t free,
                      uint64_t total, std::optional<uint64_t> headroom = std::nullopt);
uint64_t BallastBytes();  // all devices; no requirement

// After the context that held device `device`'s ballast ended (the driver freed it): forgotten,
// so that nothing frees it again and the next engine holds a new one. No requirement.
void ForgetBallast(int device);

// After device `device`'s primary context ended: its managed pool and default pool are forgotten
// (the driver may have destroyed them with the context's resources; never destroyed here), and
// made or looked up again at the next stream-ordered allocation. No requirement.
void ForgetPools(int device);

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_BACKING_H_

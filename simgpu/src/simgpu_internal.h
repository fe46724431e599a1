// simgpu's internal interface: configuration, the managed-memory residency model, streams with
// their virtual clock, and the objects behind CUDA handles. The cu* entry points (api_*.cc) are
// thin translations onto these pieces.
#ifndef SIMGPU_SRC_SIMGPU_INTERNAL_H_
#define SIMGPU_SRC_SIMGPU_INTERNAL_H_

// Exposes the raw exported names (cuMemAlloc and cuMemAlloc_v2, the _ptsz/_ptds forms) and gives
// every declaration of cuda.h default visibility; all else in simgpu is hidden.
#define __CUDA_API_VERSION_INTERNAL 1
#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/cost_model.h"
#include "simgpu/kernel_library.h"

namespace simgpu {

inline constexpr size_t kChunkBytes = spillway::kChunkBytes;  // residency granule: 2 MiB root chunk
inline constexpr int kMaxDevices = 8;                         // SIMGPU_DEVICES at most

// ---- configuration (config.cc) ----------------------------------------------------------------

// The migration cost parameters (bandwidths, fault batches, copy engines, default kernel time)
// are common/cost_model.h's, shared with the planner's simulator; SIMGPU_* variables set them.
struct Config : spillway::CostModel {
  uint64_t capacity_bytes = uint64_t{4} << 30;  // SIMGPU_MEMORY
  std::string stats_path;                       // SIMGPU_STATS
  int devices = 1;                              // SIMGPU_DEVICES: each has capacity_bytes
  // SIMGPU_QUEUE_DEPTH: operations a stream holds before the host thread that enqueues the next
  // one waits for the device to take one (a real GPU's launch queue holds about a thousand per
  // stream); 0: no bound.
  uint32_t queue_depth = 1024;
  // SIMGPU_HOLD_KERNEL_US: each kernel waits this long (real time) on its stream's worker before
  // its body runs, as a GPU's kernel computes for a while before its writes land; an operation on
  // another stream that is not ordered after it then runs first, as on a GPU. 0: no hold.
  double hold_kernel_seconds = 0;
  // SIMGPU_MANAGED_POOL_CREATE=0: cuMemPoolCreate refuses CU_MEM_ALLOCATION_TYPE_MANAGED
  // (CUDA_ERROR_NOT_SUPPORTED), as a driver that offers a managed pool only as its default one
  // (cuMemGetMemPool) would.
  uint32_t managed_pool_create = 1;
};

// The CUDA version the simulated driver reports and serves (cuDriverGetVersion, cuGetProcAddress):
// SIMGPU_DRIVER_VERSION (e.g. 12040 for 12.4, from 11030 up to the headers' CUDA_VERSION), read
// once at the first call that needs it, which may come before cuInit. A bad value is reported on
// stderr and replaced by CUDA_VERSION.
int DriverVersion();

// Reads the SIMGPU_* variables (once, at cuInit). Bad values are reported on stderr and replaced
// by the default.
Config ReadConfig();
const Config& config();
void SetConfig(const Config& c);

// ---- statistics --------------------------------------------------------------------------------

struct Stats {
  std::atomic<uint64_t> peak_resident_bytes{0};  // the largest of the devices' peaks
  std::atomic<uint64_t> peak_resident_bytes_by_device[kMaxDevices] = {};
  std::atomic<uint64_t> device_alloc_bytes{0};
  std::atomic<uint64_t> device_alloc_bytes_peak{0};
  std::atomic<uint64_t> managed_alloc_bytes{0};
  std::atomic<uint64_t> managed_alloc_bytes_peak{0};
  std::atomic<uint64_t> fault_count{0};
  std::atomic<uint64_t> fault_bytes{0};
  std::atomic<uint64_t> fault_batches{0};
  std::atomic<uint64_t> prefetched_bytes{0};
  // Of the bytes faulted or prefetched in, those of chunks holding no data (populated on the
  // device with zeroes, no transfer).
  std::atomic<uint64_t> zero_filled_bytes{0};
  std::atomic<uint64_t> evicted_bytes{0};
  // Of evicted_bytes, those the simulated driver evicted on its own because a fault or a prefetch
  // found the device full (the rest were asked for: prefetch to the host, a move between devices).
  std::atomic<uint64_t> capacity_evicted_bytes{0};
  std::atomic<uint64_t> discarded_bytes{0};
  std::atomic<uint64_t> remote_mapped_bytes{0};
  std::atomic<uint64_t> host_opened_chunks{0};
  std::atomic<uint64_t> kernels_launched{0};
  std::atomic<uint64_t> memcpy_bytes{0};
  std::atomic<uint64_t> overcommit_faults{0};
};
Stats& stats();
// Notes the counters as a context synchronize returns (the stats file's `context_syncs`): a job
// that synchronizes once a step gives the counters of each step.
void NoteContextSync();
// Writes SIMGPU_STATS (if set); called at exit.
void WriteStatsFile();

// ---- residency (residency.cc) ------------------------------------------------------------------

// What one device-side operation (a kernel, a device copy) has cost in migrations so far. The
// SIGSEGV handler adds to the account of the faulting simulated-device thread.
struct DeviceAccount {
  int device = 0;  // the simulated device the operation runs on (its stream's context's)
  uint64_t fault_count = 0;
  uint64_t fault_bytes = 0;
  uint64_t zero_filled_bytes = 0;  // of fault_bytes, chunks holding no data: nothing copied
  uint64_t evicted_bytes = 0;
};

// Reserves the address arena and installs the SIGSEGV handler. REQUIRES: called once.
bool ResidencyInit();

// Marks the calling thread as a simulated-device thread for the duration of a device-side access;
// re-arms chunks the host opened so that the device's accesses fault again.
void BeginDeviceAccess(DeviceAccount* account);
void EndDeviceAccess();

struct AllocInfo {
  CUdeviceptr base = 0;
  size_t size = 0;
  bool managed = false;
  uint64_t id = 0;
  CUmemoryPool pool = nullptr;
  int device = 0;  // the device it was made on (a pool's device, else the current one)
};

// Device memory is charged to `device`, or where that is -1 to the current context's device
// (device 0 without one).
CUresult AllocateDevice(size_t bytes, CUmemoryPool pool, CUdeviceptr* out, int device = -1);
CUresult AllocateManaged(size_t bytes, CUmemoryPool pool, CUdeviceptr* out);
// Frees the allocation that starts at `ptr`.
CUresult FreeAllocation(CUdeviceptr ptr);
struct Context;
// The allocations made in `c` before its generation became `generation` (its end, at which they
// are freed).
std::vector<CUdeviceptr> AllocationsMadeIn(const Context* c, uint64_t generation);
// Frees those, as the driver frees a context's memory at its end (api_memory.cc).
void FreeContextMemory(const Context* c, uint64_t generation);
// Finds the allocation containing `ptr`.
bool FindAllocation(CUdeviceptr ptr, AllocInfo* info);
// True when [ptr, ptr+bytes) lies inside one live allocation.
bool IsDeviceRange(CUdeviceptr ptr, size_t bytes);

struct MoveResult {
  uint64_t in_bytes = 0;   // migrated host -> device
  uint64_t out_bytes = 0;  // evicted device -> host (copied back)
  uint64_t discarded_bytes = 0;
};
// Residency changes on managed chunks overlapping [ptr, ptr+bytes); other memory is ignored.
// A chunk resident on another device than `device` moves (dropped there, made resident here).
MoveResult PrefetchToDevice(CUdeviceptr ptr, size_t bytes, int device);
MoveResult PrefetchToHost(CUdeviceptr ptr, size_t bytes);
MoveResult Discard(CUdeviceptr ptr, size_t bytes);
MoveResult DiscardAndPrefetchToDevice(CUdeviceptr ptr, size_t bytes, int device);

enum AdviceBits : uint8_t {
  kAdvisePreferHost = 1,
  kAdvisePreferDevice = 2,
  kAdviseAccessedBy = 4,
  kAdviseReadMostly = 8,
};
void Advise(CUdeviceptr ptr, size_t bytes, uint8_t set_bits, uint8_t clear_bits);

uint64_t ResidentBytes();  // device allocations + resident managed chunks, all devices
uint64_t ResidentBytesOn(int device);
uint64_t DeviceAllocBytes();

// ---- streams, events and the virtual clock (streams.cc) ----------------------------------------

struct Context {
  CUdevice device = 0;
  bool primary = false;
  unsigned flags = 0;
  uint64_t id = 0;
  // Counts the context's ends (a primary context is reset, or released for the last time, and
  // lives on): a module loaded before an end is unloaded by it, one loaded after it is not.
  std::atomic<uint64_t> generation{0};
};

// Completion of one enqueued operation: its virtual end time once done. Guarded by the stream
// lock (SyncMutex()).
struct Marker {
  bool done = false;
  double vtime = 0;
};
using MarkerPtr = std::shared_ptr<Marker>;

enum class Engine { kCompute, kH2D, kD2H };

// Reserves `engine` for `seconds` starting no earlier than `earliest`; returns the end time.
double BookEngine(Engine engine, double earliest, double seconds);

// An operation's body runs on the stream's worker; it gets the virtual start time and returns the
// virtual end time.
using OpBody = std::function<double(double start)>;

struct Stream {
  uint64_t id = 0;
  unsigned flags = 0;
  int priority = 0;
  Context* ctx = nullptr;
  bool legacy = false;
  bool per_thread = false;
  // The CUstreamCaptureMode of the capture in progress, -1 when none. Kernel launches on a
  // capturing stream become graph nodes (graphs.cc); other work is refused and invalidates the
  // capture (capture_invalidated), as the real driver does with work it cannot capture.
  std::atomic<int> capture_mode{-1};
  std::atomic<bool> capture_invalidated{false};
  // Guarded by SyncMutex().
  struct Op {
    std::vector<MarkerPtr> deps;
    MarkerPtr done;
    OpBody body;
    double not_before = 0;  // the enqueuing thread's host clock then (ChargeHost)
    bool stop = false;
  };
  std::deque<Op> queue;
  MarkerPtr last;  // marker of the most recently enqueued op
  double vtime = 0;
  std::condition_variable cv;
  std::thread worker;
  std::atomic<bool> worker_started{false};  // the worker thread runs its own code
};

std::mutex& SyncMutex();
void StreamsInit();
Stream* LegacyStream();
Stream* PerThreadStream();
Stream* CreateStream(unsigned flags, int priority, Context* ctx);
// Waits for the stream's work, stops its worker and deletes it.
void DestroyStream(Stream* s);
bool IsLiveStream(Stream* s);
// The stream for handle `h` (null: legacy, or per-thread when `ptsz`) to put work on;
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED while it is capturing.
CUresult ResolveStream(CUstream h, bool ptsz, Stream** out);
// The same in any capture state, for queries and capture calls.
CUresult ResolveStreamAnyState(CUstream h, bool ptsz, Stream** out);
// Enqueues `body` (with extra dependencies) on `s`; returns the op's completion marker.
// `publish`, when given, is set to the new operation's marker in the same critical section that
// enqueues it (an event's recording: two threads recording one event at once leave the later).
MarkerPtr Enqueue(Stream* s, OpBody body, std::vector<MarkerPtr> extra_deps = {},
                  MarkerPtr* publish = nullptr);
// Waits for `m`; the calling host thread's clock advances to its end.
void WaitMarker(const MarkerPtr& m);
// The calling thread is blocked `seconds` in a driver call (Config::calls, from a calibration):
// its host clock, which what it enqueues later cannot start before, advances by that much. The
// clock also advances to the end of the work the thread waits for (WaitMarker). A stream's worker
// has none (its work is device time).
void ChargeHost(double seconds);
bool MarkerDone(const MarkerPtr& m);
void SynchronizeStream(Stream* s);
bool StreamIdle(Stream* s);
void SynchronizeAll();
// Waits for the work of `ctx`'s streams and of the default streams (legacy, per-thread), which
// are not told apart by context here.
void SynchronizeContext(const Context* ctx);
// True while a blocking stream of the current context (or a default stream) is capturing: the
// legacy stream is then unusable (cuda.h); `invalidate` breaks those captures, as work on the
// legacy stream does.
bool LegacyStreamUnusable(bool invalidate);
// CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (and those captures broken) for work on the legacy stream
// while it is unusable; for the paths that resolve a stream with ResolveStreamAnyState (launches,
// stream-ordered allocations and frees), which ResolveStream does itself.
CUresult RefuseLegacyDuringCapture(const Stream* s);
double VirtualSeconds();

struct Event {
  unsigned flags = 0;
  Context* ctx = nullptr;  // current at creation: it is recorded only on that context's streams
  MarkerPtr marker;        // null until recorded; guarded by SyncMutex()
};

// ---- modules -----------------------------------------------------------------------------------

struct Module;
struct Function;
// A CUkernel (cuLibraryGetKernel): a handle of its own, distinct from its function's CUfunction,
// as on the driver.
struct KernelHandle {
  Function* function = nullptr;
};
struct Function {
  Module* module = nullptr;
  const SimgpuKernel* kernel = nullptr;
  KernelHandle as_kernel{this};  // its CUkernel
};
struct Module {
  void* handle = nullptr;
  const SimgpuKernelLibrary* library = nullptr;
  bool is_library = false;  // loaded by cuLibraryLoadFromFile (else cuModuleLoad)
  // The context a module was loaded in, and that context's generation then: its end unloads the
  // module, as on the driver. Null for a library (context-independent).
  Context* context = nullptr;
  uint64_t context_generation = 0;
  std::vector<std::unique_ptr<Function>> functions;
};

// ---- kernel launches (api_exec.cc) and graphs (graphs.cc) ---------------------------------------

struct LaunchDims {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared;
};

// Unloads the modules loaded in `c` before its generation became `generation`, at the context's
// end (destroyed, or a primary context reset or released for the last time; the caller counts the
// end in c->generation): their functions' handles are dead from then on.
void UnloadModulesOf(Context* c, uint64_t generation);

// The function behind CUfunction `h` if it is live, else null.
Function* LiveFunctionOf(CUfunction h);
// The function behind CUkernel `h` if it is live, else null.
Function* LiveKernelOf(CUkernel h);
// CUDA_ERROR_INVALID_VALUE for a zero dimension or more than 1024 threads a block.
CUresult CheckLaunchDims(const LaunchDims& dims);
// Packs a launch's parameters (kernelParams, or extra's CU_LAUNCH_PARAM_BUFFER_*) into `out`,
// laid out per the kernel's parameter offsets.
CUresult PackKernelParams(const SimgpuKernel* k, void** params, void** extra,
                          std::vector<char>* out);
// Enqueues a run of `k` on `s` with the packed parameters; counts it in kernels_launched.
MarkerPtr EnqueueKernel(Stream* s, const SimgpuKernel* k, const LaunchDims& dims,
                        std::shared_ptr<const std::vector<char>> buffer,
                        std::vector<MarkerPtr> extra_deps = {});
// Records a launch on capturing stream `s` as a kernel node of the capture's graph.
CUresult CaptureKernel(Stream* s, Function* fn, const LaunchDims& dims, std::vector<char> buffer);
// Notes that the capture on `s` made a memory node (a stream-ordered allocation): its graph cannot
// be cloned into a child-graph node, only moved, as on the driver.
void NoteCapturedMemoryNode(Stream* s);
// For a "potentially unsafe" call (allocation, free, prefetch, query, synchronization, synchronous
// copy) by the calling thread: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the captures that forbid
// it invalidated, while a global-mode capture is in progress in any thread (unless this thread's
// interaction mode is not global) or a global/thread-local one begun by this thread (unless this
// thread is in relaxed mode); CUDA_SUCCESS otherwise (lock-free while no such capture exists).
CUresult RefuseIfCaptureForbids();

// ---- pools -------------------------------------------------------------------------------------

// A memory pool. Never deleted, even by cuMemPoolDestroy: a free still queued on a stream may
// report to it.
struct Pool {
  bool managed = false;
  CUmemLocation location{};
  // The attributes below are guarded by mu.
  std::mutex mu;
  uint64_t release_threshold = 0;
  // CU_MEMPOOL_ATTR_REUSE_*: stored and reported only (all on by default, as on the driver).
  int reuse_follow_event_dependencies = 1;
  int reuse_allow_opportunistic = 1;
  int reuse_allow_internal_dependencies = 1;
  // CU_MEMPOOL_ATTR_{USED,RESERVED}_MEM_{CURRENT,HIGH}. `used`: the requested bytes of the pool's
  // live allocations (not those made during a capture: graph memory, as on the driver).
  // `reserved`: those plus what freed ones left for reuse, until a synchronization releases what
  // is above the release threshold or cuMemPoolTrimTo trims it. Numbers only: simgpu frees the
  // memory itself at once, and rounds nothing to a physical granularity as the driver does.
  uint64_t used = 0;
  uint64_t used_high = 0;
  uint64_t reserved = 0;
  uint64_t reserved_high = 0;
};

// Pool accounting (api_memory.cc): an allocation from `pool` of `bytes`, its free, and what a
// stream, event or context synchronization releases from every pool.
void NotePoolAllocation(CUmemoryPool pool, uint64_t bytes);
void NotePoolFree(CUmemoryPool pool, uint64_t bytes);
void ReleasePoolMemory();

// ---- shared state of the API layer (api_core.cc) -----------------------------------------------

bool Initialized();
// The calling thread's current context, or null.
Context* CurrentContext();
Context* PrimaryContext(int device = 0);
// The device of the current context; 0 without one.
int CurrentDeviceOrdinal();
bool IsLiveContext(Context* c);
bool IsLivePool(Pool* p);
std::vector<Pool*> LivePools();
// A device's default pool (`managed` false; null for an ordinal past the devices), or the default
// managed pool, which is one for all devices (location NONE).
Pool* DefaultPool(bool managed, int device);
void RegisterPool(Pool* p);
// False for a default pool or a pool that is not live.
bool UnregisterPool(Pool* p);
// Migration stall of a device-side operation: fault batches, migrations in, evictions out.
double FaultStallSeconds(const DeviceAccount& account);

}  // namespace simgpu

// Entry-point guards.
#define SIMGPU_REQUIRE_INIT()                                        \
  do {                                                               \
    if (!::simgpu::Initialized()) return CUDA_ERROR_NOT_INITIALIZED; \
  } while (0)
#define SIMGPU_REQUIRE_CTX()                                                      \
  do {                                                                            \
    SIMGPU_REQUIRE_INIT();                                                        \
    if (::simgpu::CurrentContext() == nullptr) return CUDA_ERROR_INVALID_CONTEXT; \
  } while (0)

#endif  // SIMGPU_SRC_SIMGPU_INTERNAL_H_

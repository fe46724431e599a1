// Backing decisions: which allocations must stay device memory (stream captures, listed
// modules), the streams a capture has taken, the device of the current context, and IPC.
#include "interpose/backing.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "interpose/caller_module.h"
#include "interpose/log.h"
#include "interpose/real_driver.h"
#include "interpose/reentrancy.h"
#include "interpose/unhooked_function.h"

namespace spillway::interpose {
namespace {

// SPILLWAY_DEVICE_MODULES (SetDeviceModules); null: none listed.
constinit std::atomic<const std::vector<std::string>*> g_device_modules{nullptr};

constinit UnhookedFunction g_ctx_get_device{"cuCtxGetDevice", 2000};
constinit UnhookedFunction g_device_get_count{"cuDeviceGetCount", 2000};
constinit UnhookedFunction g_stream_is_capturing{"cuStreamIsCapturing", 10000};
constinit UnhookedFunction g_pointer_attribute{"cuPointerGetAttribute", 4000};

constinit std::atomic<uint64_t> g_capture_count{0};
constinit std::atomic<uint64_t> g_module_count{0};
constinit std::atomic<uint64_t> g_ipc_refused{0};

}  // namespace

CaptureTracker& Captures() {
  static CaptureTracker* tracker = new CaptureTracker;  // never freed
  return *tracker;
}

namespace {
thread_local uint64_t t_capture_refusals __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace

uint64_t CaptureRefusalsOnThisThread() { return t_capture_refusals; }

bool StreamTakenByCapture(CUstream stream) {
  if (!Captures().AnyInProgress()) return false;
  using IsCapturingFn = CUresult (*)(CUstream, CUstreamCaptureStatus*);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  const auto is_capturing = Lookup<IsCapturingFn>(g_stream_is_capturing);
  // The legacy stream while a blocking stream captures: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT.
  if (is_capturing != nullptr && is_capturing(stream, &status) == CUDA_SUCCESS &&
      status == CU_STREAM_CAPTURE_STATUS_NONE) {
    return false;
  }
  Captures().CountSkip("the engine's calls on a stream a capture has taken");
  ++t_capture_refusals;
  return true;
}

int CurrentDevice() {
  // With one device (the common case) the answer is 0 without a driver call per launch.
  static constinit std::atomic<int> device_count{0};  // 0: not known yet
  int count = device_count.load(std::memory_order_relaxed);
  if (count == 0) {
    const auto get_count = Lookup<CUresult (*)(int*)>(g_device_get_count);
    if (get_count != nullptr && get_count(&count) == CUDA_SUCCESS && count > 0) {
      device_count.store(count, std::memory_order_relaxed);
    } else {
      count = 0;
    }
  }
  if (count == 1) return 0;
  const auto get = Lookup<CUresult (*)(CUdevice*)>(g_ctx_get_device);
  CUdevice device = -1;
  if (get == nullptr) return 0;  // a driver without it has one device
  if (get(&device) != CUDA_SUCCESS) return -1;
  return device;
}

void SetDeviceModules(const std::vector<std::string>* modules) {
  g_device_modules.store(modules, std::memory_order_release);
}

std::optional<DeviceReason> DeviceMemoryReason(bool stream_ordered, CUstream stream,
                                               bool per_thread) {
  if (Captures().ActiveForThisThread()) return DeviceReason::kCapture;
  if (stream_ordered) {
    using IsCapturingFn = CUresult (*)(CUstream, CUstreamCaptureStatus*);
    if (const auto is_capturing = Lookup<IsCapturingFn>(g_stream_is_capturing)) {
      if (per_thread && stream == nullptr) stream = CU_STREAM_PER_THREAD;
      CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
      if (is_capturing(stream, &status) == CUDA_SUCCESS &&
          status != CU_STREAM_CAPTURE_STATUS_NONE) {
        return DeviceReason::kCapture;
      }
    }
  }
  if (const std::vector<std::string>* modules = g_device_modules.load(std::memory_order_acquire);
      modules != nullptr) {
    if (const std::optional<std::string> module = ListedCallerModule(*modules)) {
      static constinit std::atomic<bool> said{false};
      if (!said.exchange(true, std::memory_order_relaxed)) {
        Log(LogLevel::kInfo, "allocations from %s stay device memory (SPILLWAY_DEVICE_MODULES)",
            module->c_str());
      }
      return DeviceReason::kModule;
    }
  }
  return std::nullopt;
}

void CountDeviceException(DeviceReason reason) {
  (reason == DeviceReason::kCapture ? g_capture_count : g_module_count)
      .fetch_add(1, std::memory_order_relaxed);
}

bool IsManagedMemory(CUdeviceptr address) {
  using AttributeFn = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
  const auto get = Lookup<AttributeFn>(g_pointer_attribute);
  unsigned int managed = 0;
  return get != nullptr &&
         get(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, address) == CUDA_SUCCESS && managed != 0;
}

void CountIpcRefused() { g_ipc_refused.fetch_add(1, std::memory_order_relaxed); }

BackingCounts CountsSoFar() {
  BackingCounts counts;
  counts.capture = g_capture_count.load(std::memory_order_relaxed);
  counts.module = g_module_count.load(std::memory_order_relaxed);
  counts.ipc_refused = g_ipc_refused.load(std::memory_order_relaxed);
  return counts;
}

}  // namespace spillway::interpose

// DriverDevice: policy::Device over the real driver's functions.
#define __CUDA_API_VERSION_INTERNAL 1
#include "interpose/driver_device.h"

#include <cuda.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "interpose/backing.h"
#include "interpose/context_end.h"
#include "interpose/hook_table.h"
#include "interpose/log.h"
#include "interpose/page_range.h"
#include "interpose/real_driver.h"
#include "interpose/unhooked_function.h"

namespace spillway::interpose {
namespace {

using PrefetchFn = CUresult (*)(CUdeviceptr, size_t, CUmemLocation, unsigned int, CUstream);
using DiscardBatchFn = CUresult (*)(CUdeviceptr*, size_t*, size_t, unsigned long long, CUstream);
using CtxGetDeviceFn = CUresult (*)(CUdevice*);
using StreamCreateFn = CUresult (*)(CUstream*, unsigned int);
using EventCreateFn = CUresult (*)(CUevent*, unsigned int);
using EventRecordFn = CUresult (*)(CUevent, CUstream);
using StreamWaitEventFn = CUresult (*)(CUstream, CUevent, unsigned int);
using EventQueryFn = CUresult (*)(CUevent);
using EventElapsedFn = CUresult (*)(float*, CUevent, CUevent);
using AdviseFn = CUresult (*)(CUdeviceptr, size_t, CUmem_advise, CUmemLocation);

// Versions: cudaTypedefs.h's PFN_*_vNNNNN whose signature the typedefs above have. At 12020
// cuMemPrefetchAsync and cuMemAdvise are the _v2 variants (a CUmemLocation); cuCtxGetDevice stays
// at the one-argument variant (13000 would give cuCtxGetDevice_v2, which takes a context too).
constinit UnhookedFunction g_prefetch{"cuMemPrefetchAsync", 12020};
constinit UnhookedFunction g_discard{"cuMemDiscardBatchAsync", 13000};
constinit UnhookedFunction g_ctx_get_device{"cuCtxGetDevice", 2000};
constinit UnhookedFunction g_ctx_get_current{"cuCtxGetCurrent", 4000};
constinit UnhookedFunction g_stream_create{"cuStreamCreate", 2000};
constinit UnhookedFunction g_event_create{"cuEventCreate", 2000};
constinit UnhookedFunction g_event_record{"cuEventRecord", 2000};
constinit UnhookedFunction g_stream_wait_event{"cuStreamWaitEvent", 3020};
constinit UnhookedFunction g_event_query{"cuEventQuery", 2000};
constinit UnhookedFunction g_event_sync{"cuEventSynchronize", 2000};
// The same signature at 2000: what a driver before 12.8 has (a request for 12080 fails there).
constinit UnhookedFunction g_event_elapsed{"cuEventElapsedTime", 12080, 2000};
constinit UnhookedFunction g_advise{"cuMemAdvise", 12020};

template <typename Fn>
Fn Real(HookId id) {
  return reinterpret_cast<Fn>(RealFunction(Index(id)));
}

CUmemLocation DeviceLocation() {
  CUmemLocation location{};
  location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUdevice device = 0;
  const auto get_device = Lookup<CtxGetDeviceFn>(g_ctx_get_device);
  if (get_device == nullptr || get_device(&device) != CUDA_SUCCESS) device = 0;
  location.id = device;
  return location;
}

// What a call on a stream a capture has taken gets instead of being made (StreamTakenByCapture):
// made, it would be captured into the job's graph, or invalidate the capture.
constexpr CUresult kTakenByCapture = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;

CUresult Prefetch(uint64_t address, uint64_t bytes, CUmemLocation location, void* stream) {
  if (StreamTakenByCapture(static_cast<CUstream>(stream))) return kTakenByCapture;
  const auto prefetch = Lookup<PrefetchFn>(g_prefetch);
  if (prefetch == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  return prefetch(address, bytes, location, 0, static_cast<CUstream>(stream));
}

// Discards name whole pages only (page_range.h): the host's page size, which nvidia-uvm's page
// masks count in.
PageRange DiscardablePages(uint64_t address, uint64_t bytes) {
  static const uint64_t page = [] {
    const long size = sysconf(_SC_PAGESIZE);
    return size > 0 && (size & (size - 1)) == 0 ? static_cast<uint64_t>(size) : uint64_t{65536};
  }();
  return InnerPages(address, bytes, page);
}

}  // namespace

policy::DeviceResult DriverDevice::AllocateManaged(uint64_t* address, uint64_t bytes) {
  using Fn = CUresult (*)(CUdeviceptr*, size_t, unsigned int);
  const auto allocate = Real<Fn>(HookId::k_cuMemAllocManaged);
  if (allocate == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  CUdeviceptr pointer = 0;
  const CUresult result = allocate(&pointer, bytes, CU_MEM_ATTACH_GLOBAL);
  if (result == CUDA_SUCCESS) *address = pointer;
  return result;
}

policy::DeviceResult DriverDevice::AllocateDevice(uint64_t* address, uint64_t bytes) {
  using Fn = CUresult (*)(CUdeviceptr*, size_t);
  const auto allocate = Real<Fn>(HookId::k_cuMemAlloc_v2);
  if (allocate == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  CUdeviceptr pointer = 0;
  const CUresult result = allocate(&pointer, bytes);
  if (result == CUDA_SUCCESS) *address = pointer;
  return result;
}

policy::DeviceResult DriverDevice::Free(uint64_t address) {
  using Fn = CUresult (*)(CUdeviceptr);
  const auto free = Real<Fn>(HookId::k_cuMemFree_v2);
  return free != nullptr ? free(address) : CUDA_ERROR_NOT_SUPPORTED;
}

policy::DeviceResult DriverDevice::PrefetchToDevice(uint64_t address, uint64_t bytes,
                                                    policy::Stream stream) {
  return Prefetch(address, bytes, DeviceLocation(), stream);
}

policy::DeviceResult DriverDevice::PrefetchToHost(uint64_t address, uint64_t bytes,
                                                  policy::Stream stream) {
  CUmemLocation host{};
  host.type = CU_MEM_LOCATION_TYPE_HOST;
  host.id = 0;
  return Prefetch(address, bytes, host, stream);
}

void* DriverDevice::StandInFor(void* context) {
  const uint64_t ends = ContextEnds(static_cast<CUcontext>(context));
  {
    std::lock_guard lock(stand_ins_mutex_);
    for (const StandIn& stand_in : stand_ins_) {
      if (stand_in.context == context && stand_in.context_ends == ends) return stand_in.stream;
    }
  }
  const auto create_stream = Lookup<StreamCreateFn>(g_stream_create);
  CUstream stream = nullptr;
  if (create_stream == nullptr || create_stream(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    return nullptr;
  }
  std::lock_guard lock(stand_ins_mutex_);
  for (StandIn& stand_in : stand_ins_) {
    if (stand_in.context != context) continue;
    if (stand_in.context_ends == ends) return stand_in.stream;  // another thread's; ours unused
    stand_in = StandIn{context, ends, stream};  // the ended context's stream went with it
    return stream;
  }
  stand_ins_.push_back({context, ends, stream});
  return stream;
}

namespace {

// A thread's own two events for a context's stand-in: shared ones could be re-recorded by
// another thread between this thread's record and its wait, which would then order nothing of
// this thread's. A few contexts per thread; trivially destructible, never freed.
struct ThreadEvents {
  CUcontext context = nullptr;
  uint64_t context_ends = 0;  // ContextEnds(context) when made: an end of it took them
  CUevent before = nullptr;
  CUevent after = nullptr;
};
constexpr size_t kThreadEventSlots = 4;
thread_local ThreadEvents t_events[kThreadEventSlots];
thread_local size_t t_next_event_slot = 0;

const ThreadEvents* EventsFor(CUcontext context) {
  const uint64_t ends = ContextEnds(context);
  ThreadEvents* stale = nullptr;  // this context's, made before an end of it
  for (ThreadEvents& events : t_events) {
    if (events.context != context) continue;
    if (events.context_ends == ends) return &events;
    stale = &events;
  }
  const auto create_event = Lookup<EventCreateFn>(g_event_create);
  CUevent before = nullptr, after = nullptr;
  if (create_event == nullptr || create_event(&before, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS ||
      create_event(&after, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
    return nullptr;  // what was made stays with the context; rare
  }
  ThreadEvents& slot =
      stale != nullptr ? *stale : t_events[t_next_event_slot++ % kThreadEventSlots];  // or oldest
  slot = ThreadEvents{context, ends, before, after};
  return &slot;
}

}  // namespace

template <typename Issue>
policy::DeviceResult DriverDevice::OnLegacyStandIn(policy::Stream stream, Issue issue) {
  if (StreamTakenByCapture(static_cast<CUstream>(stream))) return kTakenByCapture;
  if (stream != nullptr && stream != CU_STREAM_LEGACY) return issue(static_cast<CUstream>(stream));
  using CtxGetCurrentFn = CUresult (*)(CUcontext*);
  using StreamSyncFn = CUresult (*)(CUstream);
  const auto get_current = Lookup<CtxGetCurrentFn>(g_ctx_get_current);
  const auto record = Lookup<EventRecordFn>(g_event_record);
  const auto wait = Lookup<StreamWaitEventFn>(g_stream_wait_event);
  CUcontext context = nullptr;
  // Failures here are not CUDA_ERROR_NOT_SUPPORTED, which says the driver cannot discard at all.
  if (get_current == nullptr || record == nullptr || wait == nullptr) return CUDA_ERROR_UNKNOWN;
  if (get_current(&context) != CUDA_SUCCESS || context == nullptr) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  // The legacy stream is the current context's, so the stand-in must be too.
  const auto side = static_cast<CUstream>(StandInFor(context));
  const ThreadEvents* events = EventsFor(context);
  if (side == nullptr || events == nullptr) return CUDA_ERROR_UNKNOWN;
  CUresult result = record(events->before, CU_STREAM_LEGACY);
  if (result == CUDA_SUCCESS) result = wait(side, events->before, 0);
  if (result != CUDA_SUCCESS) return result;  // nothing enqueued: the discard is not made
  const CUresult issued = issue(side);
  result = record(events->after, side);
  if (result == CUDA_SUCCESS) result = wait(CU_STREAM_LEGACY, events->after, 0);
  if (result != CUDA_SUCCESS) {
    // The legacy stream's next work could overtake what was enqueued: wait for it here instead
    // (the stand-in holds only that and what it waited for on the legacy stream), or for the
    // whole context. Where neither wait succeeds the context is unusable, and so is the job's
    // next call in it.
    const auto sync = Real<StreamSyncFn>(HookId::k_cuStreamSynchronize);
    if (sync == nullptr || sync(side) != CUDA_SUCCESS) {
      using CtxSyncFn = CUresult (*)();
      const auto sync_context = Real<CtxSyncFn>(HookId::k_cuCtxSynchronize);
      if (sync_context == nullptr || sync_context() != CUDA_SUCCESS) return result;
    }
  }
  return issued;
}

policy::DeviceResult DriverDevice::Discard(uint64_t address, uint64_t bytes,
                                           policy::Stream stream) {
  const auto discard = Lookup<DiscardBatchFn>(g_discard);
  if (discard == nullptr) {
    static constinit std::atomic<bool> said{false};
    if (!said.exchange(true, std::memory_order_relaxed)) {
      Log(LogLevel::kInfo,
          "the driver has no cuMemDiscardBatchAsync (CUDA 13.0 and later): freed and overwritten "
          "data is not discarded, and may be copied when it moves");
    }
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  const PageRange pages = DiscardablePages(address, bytes);
  if (pages.bytes() == 0) return CUDA_SUCCESS;  // no whole page: nothing may be discarded
  return OnLegacyStandIn(stream, [&](CUstream on) {
    CUdeviceptr pointer = pages.begin;
    size_t size = pages.bytes();
    return discard(&pointer, &size, 1, 0, on);
  });
}

policy::DeviceResult DriverDevice::PlaceOnHost(uint64_t address, uint64_t bytes) {
  const auto advise = Lookup<AdviseFn>(g_advise);
  if (advise == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  CUmemLocation host{};
  host.type = CU_MEM_LOCATION_TYPE_HOST;
  host.id = 0;
  const CUresult preferred = advise(address, bytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host);
  if (preferred != CUDA_SUCCESS) return preferred;
  const CUresult mapped = advise(address, bytes, CU_MEM_ADVISE_SET_ACCESSED_BY, DeviceLocation());
  if (mapped != CUDA_SUCCESS) {
    // Half-placed memory would fault back and forth: take the preference back.
    advise(address, bytes, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, host);
  }
  return mapped;
}

policy::DeviceResult DriverDevice::MemoryInfo(uint64_t* free, uint64_t* total) {
  using Fn = CUresult (*)(size_t*, size_t*);
  const auto info = Real<Fn>(HookId::k_cuMemGetInfo_v2);
  if (info == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  size_t free_bytes = 0, total_bytes = 0;
  const CUresult result = info(&free_bytes, &total_bytes);
  *free = free_bytes;
  *total = total_bytes;
  return result;
}

policy::DeviceResult DriverDevice::CreateSideStream(policy::Stream* stream) {
  const auto create = Lookup<StreamCreateFn>(g_stream_create);
  if (create == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  CUstream created = nullptr;
  const CUresult result = create(&created, CU_STREAM_NON_BLOCKING);
  if (result == CUDA_SUCCESS) *stream = created;
  return result;
}

policy::DeviceResult DriverDevice::CreateEvent(policy::Event* event) {
  const auto create = Lookup<EventCreateFn>(g_event_create);
  if (create == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  CUevent created = nullptr;
  const CUresult result = create(&created, CU_EVENT_DISABLE_TIMING);
  if (result == CUDA_SUCCESS) *event = created;
  return result;
}

policy::DeviceResult DriverDevice::CreateTimingEvent(policy::Event* event) {
  const auto create = Lookup<EventCreateFn>(g_event_create);
  if (create == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  CUevent created = nullptr;
  const CUresult result = create(&created, CU_EVENT_DEFAULT);
  if (result == CUDA_SUCCESS) *event = created;
  return result;
}

policy::DeviceResult DriverDevice::QueryEvent(policy::Event event) {
  const auto query = Lookup<EventQueryFn>(g_event_query);
  if (query == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  return query(static_cast<CUevent>(event));
}

policy::DeviceResult DriverDevice::SynchronizeEvent(policy::Event event) {
  const auto sync = Lookup<EventQueryFn>(g_event_sync);  // the same signature
  if (sync == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  return sync(static_cast<CUevent>(event));
}

policy::DeviceResult DriverDevice::ElapsedMilliseconds(policy::Event start, policy::Event end,
                                                       float* ms) {
  const auto elapsed = Lookup<EventElapsedFn>(g_event_elapsed);
  if (elapsed == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  return elapsed(ms, static_cast<CUevent>(start), static_cast<CUevent>(end));
}

policy::DeviceResult DriverDevice::RecordEvent(policy::Event event, policy::Stream stream) {
  const auto record = Lookup<EventRecordFn>(g_event_record);
  if (record == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  if (StreamTakenByCapture(static_cast<CUstream>(stream))) return kTakenByCapture;
  return record(static_cast<CUevent>(event), static_cast<CUstream>(stream));
}

policy::DeviceResult DriverDevice::StreamWaitEvent(policy::Stream stream, policy::Event event) {
  const auto wait = Lookup<StreamWaitEventFn>(g_stream_wait_event);
  if (wait == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  if (StreamTakenByCapture(static_cast<CUstream>(stream))) return kTakenByCapture;
  return wait(static_cast<CUstream>(stream), static_cast<CUevent>(event), 0);
}

}  // namespace spillway::interpose

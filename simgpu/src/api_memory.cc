// Entry points for memory: device and managed allocation, memory pools and stream-ordered
// allocation, copies and memsets (run on stream workers as device-side accesses), prefetch,
// discard and advice on managed memory, pointer attributes.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "simgpu_internal.h"

namespace simgpu {

double FaultStallSeconds(const DeviceAccount& a) {
  if (a.fault_bytes == 0 && a.evicted_bytes == 0) return 0;
  const Config& c = config();
  stats().fault_batches.fetch_add(spillway::FaultBatches(c, a.fault_bytes),
                                  std::memory_order_relaxed);
  // Every fault batch costs its latency; only chunks that held data are copied in.
  return spillway::FaultStallSeconds(c, a.fault_bytes - a.zero_filled_bytes, a.evicted_bytes) +
         static_cast<double>(spillway::FaultBatches(c, a.fault_bytes) -
                             spillway::FaultBatches(c, a.fault_bytes - a.zero_filled_bytes)) *
             c.fault_batch_seconds;
}

namespace {

std::mutex* g_pool_mu = new std::mutex();
// Each device's current pool and the current managed pool (null: the default one); guarded by
// g_pool_mu.
Pool* g_current_device_pool[kMaxDevices] = {};
Pool* g_current_managed_pool = nullptr;
// Stream-ordered allocations made while their stream was capturing (a graph's memory nodes):
// reserved from the capture on, their captured free is no free. Guarded by g_pool_mu.
std::unordered_set<CUdeviceptr>* g_graph_allocations = new std::unordered_set<CUdeviceptr>();

// `device`'s current pool, or (`managed`) the current managed pool; `device` is a valid ordinal.
Pool* CurrentPool(bool managed, int device) {
  std::lock_guard<std::mutex> lock(*g_pool_mu);
  Pool* p = managed ? g_current_managed_pool : g_current_device_pool[device];
  return p != nullptr ? p : DefaultPool(managed, device);
}

void SetCurrentPool(bool managed, int device, Pool* pool) {
  std::lock_guard<std::mutex> lock(*g_pool_mu);
  (managed ? g_current_managed_pool : g_current_device_pool[device]) = pool;
}

}  // namespace

// The allocation takes the pool's free reserved bytes first, then reserves what it lacks.
void NotePoolAllocation(CUmemoryPool pool, uint64_t bytes) {
  Pool* p = reinterpret_cast<Pool*>(pool);
  std::lock_guard<std::mutex> lock(p->mu);
  p->used += bytes;
  p->reserved = std::max(p->reserved, p->used);
  p->used_high = std::max(p->used_high, p->used);
  p->reserved_high = std::max(p->reserved_high, p->reserved);
}

// The freed bytes stay reserved for reuse.
void NotePoolFree(CUmemoryPool pool, uint64_t bytes) {
  Pool* p = reinterpret_cast<Pool*>(pool);
  std::lock_guard<std::mutex> lock(p->mu);
  p->used -= std::min(p->used, bytes);
}

void FreeContextMemory(const Context* c, uint64_t generation) {
  for (const CUdeviceptr base : AllocationsMadeIn(c, generation)) {
    {
      std::lock_guard<std::mutex> lock(*g_pool_mu);
      g_graph_allocations->erase(base);
    }
    FreeAllocation(base);
  }
}

// As the driver does at a synchronization: a pool holding more than its release threshold gives
// back what its live allocations do not use, down to the threshold.
void ReleasePoolMemory() {
  for (Pool* p : LivePools()) {
    std::lock_guard<std::mutex> lock(p->mu);
    if (p->reserved > p->release_threshold) {
      p->reserved = std::max(p->used, p->release_threshold);
    }
  }
}

namespace {

enum class Dir { kH2D, kD2H, kD2D, kH2H };

bool IsSimgpuPtr(const void* p) {
  AllocInfo info;
  return FindAllocation(reinterpret_cast<CUdeviceptr>(p), &info);
}

Dir Classify(const void* dst, const void* src) {
  bool d = IsSimgpuPtr(dst), s = IsSimgpuPtr(src);
  if (d && s) return Dir::kD2D;
  if (d) return Dir::kH2D;
  if (s) return Dir::kD2H;
  return Dir::kH2H;
}

// Runs `work` as a device-side access on the worker; returns the op's end time.
// `device`: the device of the context current when the work was enqueued.
double RunDeviceWork(double start, Dir dir, uint64_t bytes, int device,
                     const std::function<void()>& work) {
  DeviceAccount account;
  account.device = device;
  BeginDeviceAccess(&account);
  work();
  EndDeviceAccess();
  const Config& c = config();
  double stall = FaultStallSeconds(account);
  switch (dir) {
    case Dir::kH2D:
      return BookEngine(Engine::kH2D, start,
                        stall + static_cast<double>(bytes) / c.h2d_bytes_per_s);
    case Dir::kD2H:
      return BookEngine(Engine::kD2H, start,
                        stall + static_cast<double>(bytes) / c.d2h_bytes_per_s);
    case Dir::kD2D:
      return start + stall + 2.0 * static_cast<double>(bytes) / c.d2d_bytes_per_s;
    case Dir::kH2H:
      return start + stall;
  }
  return start;
}

CUresult Copy(void* dst, const void* src, size_t bytes, CUstream h, bool ptsz, bool sync, Dir dir) {
  SIMGPU_REQUIRE_CTX();
  if (sync) {
    if (CUresult r = RefuseIfCaptureForbids()) return r;
  }
  if (bytes == 0) return CUDA_SUCCESS;
  if (dst == nullptr || src == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((dir == Dir::kH2D || dir == Dir::kD2D) &&
      !IsDeviceRange(reinterpret_cast<CUdeviceptr>(dst), bytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if ((dir == Dir::kD2H || dir == Dir::kD2D) &&
      !IsDeviceRange(reinterpret_cast<CUdeviceptr>(src), bytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s)) return r;
  stats().memcpy_bytes.fetch_add(bytes, std::memory_order_relaxed);
  const int device = s->ctx != nullptr ? s->ctx->device : CurrentDeviceOrdinal();
  MarkerPtr m = Enqueue(s, [=](double start) {
    return RunDeviceWork(start, dir, bytes, device, [=] { std::memcpy(dst, src, bytes); });
  });
  if (sync) WaitMarker(m);
  return CUDA_SUCCESS;
}

void* P(CUdeviceptr p) { return reinterpret_cast<void*>(p); }

template <typename T>
CUresult Memset(CUdeviceptr dst, T value, size_t n, CUstream h, bool ptsz, bool sync) {
  SIMGPU_REQUIRE_CTX();
  if (n == 0) return CUDA_SUCCESS;
  if (dst % sizeof(T) != 0 || !IsDeviceRange(dst, n * sizeof(T))) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s)) return r;
  const int device = s->ctx != nullptr ? s->ctx->device : CurrentDeviceOrdinal();
  MarkerPtr m = Enqueue(s, [=](double start) {
    return RunDeviceWork(start, Dir::kD2D, n * sizeof(T) / 2, device, [=] {
      T* p = reinterpret_cast<T*>(dst);
      if (sizeof(T) == 1)
        std::memset(p, static_cast<int>(value), n);
      else
        std::fill(p, p + n, value);
    });
  });
  if (sync) WaitMarker(m);
  return CUDA_SUCCESS;
}

// ---- managed residency operations on streams ---------------------------------------------------

enum class Where { kDevice, kHost };

CUresult ParseLocation(const CUmemLocation& loc, Where* where, int* device = nullptr) {
  switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (loc.id < 0 || loc.id >= config().devices) return CUDA_ERROR_INVALID_DEVICE;
      *where = Where::kDevice;
      if (device != nullptr) *device = loc.id;
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      *where = Where::kHost;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// A range a residency call may name: all of it managed memory, without gaps (nvidia-uvm refuses a
// range that managed ranges do not cover whole), across consecutive allocations if it spans
// several. An allocation covers its size rounded up to the 4 KiB page.
CUresult CheckManagedRange(CUdeviceptr ptr, size_t bytes) {
  if (ptr == 0 || bytes == 0 || ptr + bytes < ptr) return CUDA_ERROR_INVALID_VALUE;
  constexpr uint64_t kPage = 4096;
  for (CUdeviceptr at = ptr; at < ptr + bytes;) {
    AllocInfo info;
    if (!FindAllocation(at, &info) || !info.managed) return CUDA_ERROR_INVALID_VALUE;
    at = info.base + (info.size + kPage - 1) / kPage * kPage;
  }
  return CUDA_SUCCESS;
}

double MoveTime(double start, const MoveResult& r) {
  const Config& c = config();
  double end = start;
  if (r.in_bytes) {
    end = std::max(
        end, BookEngine(Engine::kH2D, start, static_cast<double>(r.in_bytes) / c.h2d_bytes_per_s));
  }
  if (r.out_bytes) {
    end = std::max(
        end, BookEngine(Engine::kD2H, start, static_cast<double>(r.out_bytes) / c.d2h_bytes_per_s));
  }
  return end;
}

struct RangeOp {
  CUdeviceptr ptr;
  size_t bytes;
  Where where;
  int device;  // for Where::kDevice
};

enum class RangeKind { kPrefetch, kDiscard, kDiscardAndPrefetch };

CUresult EnqueueRanges(std::vector<RangeOp> ranges, RangeKind kind, CUstream h, bool ptsz) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s)) return r;
  // What the call blocks its thread for, range by range (a batch call's each range).
  const spillway::HostCallCosts& calls = config().calls;
  double blocked = 0;
  for (const RangeOp& op : ranges) {
    const bool to_device = op.where == Where::kDevice;
    const spillway::CallCost& cost =
        kind == RangeKind::kDiscard || (kind == RangeKind::kDiscardAndPrefetch && !to_device)
            ? calls.discard
            : (to_device ? calls.prefetch_to_device : calls.prefetch_to_host);
    blocked += cost.Of(op.bytes);
  }
  ChargeHost(blocked);
  Enqueue(s, [ranges = std::move(ranges), kind](double start) {
    MoveResult total;
    for (const RangeOp& op : ranges) {
      MoveResult r;
      if (kind == RangeKind::kDiscard) {
        r = Discard(op.ptr, op.bytes);
      } else if (kind == RangeKind::kPrefetch) {
        r = op.where == Where::kDevice ? PrefetchToDevice(op.ptr, op.bytes, op.device)
                                       : PrefetchToHost(op.ptr, op.bytes);
      } else {
        r = op.where == Where::kDevice ? DiscardAndPrefetchToDevice(op.ptr, op.bytes, op.device)
                                       : Discard(op.ptr, op.bytes);
      }
      total.in_bytes += r.in_bytes;
      total.out_bytes += r.out_bytes;
    }
    return MoveTime(start, total);
  });
  return CUDA_SUCCESS;
}

CUresult Prefetch(CUdeviceptr ptr, size_t bytes, CUmemLocation loc, unsigned flags, CUstream h,
                  bool ptsz) {
  SIMGPU_REQUIRE_CTX();
  if (CUresult r = RefuseIfCaptureForbids()) return r;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Where where;
  int device = 0;
  if (CUresult r = ParseLocation(loc, &where, &device)) return r;
  if (CUresult r = CheckManagedRange(ptr, bytes)) return r;
  return EnqueueRanges({RangeOp{ptr, bytes, where, device}}, RangeKind::kPrefetch, h, ptsz);
}

CUmemLocation DeviceToLocation(CUdevice dev) {
  CUmemLocation loc{};
  if (dev == CU_DEVICE_CPU) {
    loc.type = CU_MEM_LOCATION_TYPE_HOST;
  } else {
    loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
    loc.id = dev;
  }
  return loc;
}

CUresult Batch(CUdeviceptr* dptrs, size_t* sizes, size_t count, CUmemLocation* locs,
               size_t* loc_idxs, size_t num_locs, unsigned long long flags, CUstream h, bool ptsz,
               RangeKind kind) {
  SIMGPU_REQUIRE_CTX();
  if (CUresult r = RefuseIfCaptureForbids()) return r;
  if (flags != 0 || count == 0 || dptrs == nullptr || sizes == nullptr)
    return CUDA_ERROR_INVALID_VALUE;
  // cuda.h of all three batch calls: the stream "Must not be legacy NULL stream" (the error it
  // gets is not documented; this one is a guess).
  if ((h == nullptr && !ptsz) || h == CU_STREAM_LEGACY) return CUDA_ERROR_INVALID_VALUE;
  if (kind != RangeKind::kDiscard) {
    if (locs == nullptr || loc_idxs == nullptr || num_locs == 0 || num_locs > count ||
        loc_idxs[0] != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  std::vector<RangeOp> ranges;
  size_t li = 0;
  for (size_t i = 0; i < count; ++i) {
    if (CUresult r = CheckManagedRange(dptrs[i], sizes[i])) return r;
    Where where = Where::kDevice;
    int device = 0;
    if (kind != RangeKind::kDiscard) {
      while (li + 1 < num_locs && loc_idxs[li + 1] <= i) ++li;
      if (CUresult r = ParseLocation(locs[li], &where, &device)) return r;
    }
    ranges.push_back(RangeOp{dptrs[i], sizes[i], where, device});
  }
  return EnqueueRanges(std::move(ranges), kind, h, ptsz);
}

CUresult AdviseImpl(CUdeviceptr ptr, size_t bytes, CUmem_advise advice, CUmemLocation loc) {
  SIMGPU_REQUIRE_CTX();
  if (CUresult r = CheckManagedRange(ptr, bytes)) return r;
  Where where = Where::kDevice;
  bool needs_location = advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION ||
                        advice == CU_MEM_ADVISE_SET_ACCESSED_BY ||
                        advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY;
  if (needs_location) {
    if (CUresult r = ParseLocation(loc, &where)) return r;
  }
  switch (advice) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY:
      Advise(ptr, bytes, kAdviseReadMostly, 0);
      break;
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
      Advise(ptr, bytes, 0, kAdviseReadMostly);
      break;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
      if (where == Where::kHost)
        Advise(ptr, bytes, kAdvisePreferHost, kAdvisePreferDevice);
      else
        Advise(ptr, bytes, kAdvisePreferDevice, kAdvisePreferHost);
      break;
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
      Advise(ptr, bytes, 0, kAdvisePreferHost | kAdvisePreferDevice);
      break;
    case CU_MEM_ADVISE_SET_ACCESSED_BY:
      Advise(ptr, bytes, kAdviseAccessedBy, 0);
      break;
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
      Advise(ptr, bytes, 0, kAdviseAccessedBy);
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  ChargeHost(config().calls.advise.Of(bytes));
  return CUDA_SUCCESS;
}

// ---- pools -------------------------------------------------------------------------------------

// An allocation from `pool`, or where that is null (cuMemAllocAsync) from the current pool of the
// stream's device. Device memory lies on the pool's device.
CUresult AllocFromPool(CUdeviceptr* dptr, size_t bytes, Pool* pool, CUstream h, bool ptsz) {
  SIMGPU_REQUIRE_CTX();
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStreamAnyState(h, ptsz, &s)) return r;
  if (pool == nullptr) {
    pool = CurrentPool(false, s->ctx != nullptr ? s->ctx->device : CurrentDeviceOrdinal());
  }
  if (pool == nullptr || !IsLivePool(pool)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = RefuseLegacyDuringCapture(s)) return r;
  const bool captured = s->capture_mode.load() >= 0;
  if (captured && s->capture_invalidated.load()) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  CUmemoryPool handle = reinterpret_cast<CUmemoryPool>(pool);
  const CUresult r = pool->managed ? AllocateManaged(bytes, handle, dptr)
                                   : AllocateDevice(bytes, handle, dptr, pool->location.id);
  if (r == CUDA_SUCCESS && !captured) {
    NotePoolAllocation(handle, bytes);
    ChargeHost(config().calls.pool_alloc.Of(bytes));  // with its free
  }
  // Captured: a memory node of the graph. The memory is reserved now, at a fixed address, for
  // the rest of the process (the driver maps it at each launch of the graph and may reuse it
  // between launches; simgpu keeps it).
  if (r == CUDA_SUCCESS && captured) {
    {
      std::lock_guard<std::mutex> lock(*g_pool_mu);
      g_graph_allocations->insert(*dptr);
    }
    NoteCapturedMemoryNode(s);
  }
  return r;
}

CUresult FreeAsync(CUdeviceptr dptr, CUstream h, bool ptsz) {
  SIMGPU_REQUIRE_CTX();
  AllocInfo info;
  if (!FindAllocation(dptr, &info) || info.base != dptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStreamAnyState(h, ptsz, &s)) return r;
  if (CUresult r = RefuseLegacyDuringCapture(s)) return r;
  if (s->capture_mode.load() >= 0) {
    // Captured: the free node of a memory the graph allocated (kept: see AllocFromPool); any
    // other free cannot be captured here.
    std::lock_guard<std::mutex> lock(*g_pool_mu);
    if (!s->capture_invalidated.load() && g_graph_allocations->count(dptr) != 0) {
      return CUDA_SUCCESS;
    }
    s->capture_invalidated.store(true);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  Enqueue(s, [dptr](double start) {
    FreeAllocation(dptr);
    return start;
  });
  return CUDA_SUCCESS;
}

// The pool kind a location and allocation type name: managed (one for every location), or the
// device pool of `*device`.
CUresult LocationTypeToPool(const CUmemLocation* location, CUmemAllocationType type, bool* managed,
                            int* device) {
  *device = 0;
  if (type == CU_MEM_ALLOCATION_TYPE_MANAGED) {
    *managed = true;
    return CUDA_SUCCESS;
  }
  if (type != CU_MEM_ALLOCATION_TYPE_PINNED || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_NOT_SUPPORTED;
  if (location->id < 0 || location->id >= config().devices) return CUDA_ERROR_INVALID_DEVICE;
  *managed = false;
  *device = location->id;
  return CUDA_SUCCESS;
}

// ---- pointer attributes ------------------------------------------------------------------------

CUresult PointerAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr,
                          const AllocInfo* info) {
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) =
          info ? reinterpret_cast<CUcontext>(PrimaryContext(info->device)) : nullptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) = info ? CU_MEMORYTYPE_DEVICE : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = info ? ptr : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      *static_cast<void**>(data) = (info && info->managed) ? P(ptr) : nullptr;
      return (info && !info->managed) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<unsigned int*>(data) = (info && info->managed) ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = info ? info->device : -2;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = info ? info->base : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = info ? info->size : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = info ? info->id : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *static_cast<int*>(data) = info ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
      *static_cast<int*>(data) = 1;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      *static_cast<int*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
      *static_cast<unsigned long long*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
      *static_cast<unsigned int*>(data) = info ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      *static_cast<CUmemoryPool*>(data) = info ? info->pool : nullptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
      *static_cast<int*>(data) = 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace
}  // namespace simgpu

using namespace simgpu;  // NOLINT: entry points below

extern "C" {

// ---- allocation --------------------------------------------------------------------------------

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  SIMGPU_REQUIRE_CTX();
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  uint64_t cap = config().capacity_bytes, used = ResidentBytesOn(CurrentDeviceOrdinal());
  *total = cap;
  *free = used >= cap ? 0 : cap - used;
  ChargeHost(config().calls.mem_get_info.Of(0));
  return CUDA_SUCCESS;
}

CUresult cuMemGetInfo(unsigned int* free, unsigned int* total) {
  size_t f = 0, t = 0;
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = cuMemGetInfo_v2(&f, &t)) return r;
  *free = static_cast<unsigned int>(std::min<size_t>(f, 0xffffffffu));
  *total = static_cast<unsigned int>(std::min<size_t>(t, 0xffffffffu));
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  SIMGPU_REQUIRE_CTX();
  if (CUresult r = RefuseIfCaptureForbids()) return r;
  return AllocateDevice(bytesize, nullptr, dptr);
}

// The 32-bit-pointer ABI: simgpu's arena lies above 4 GiB, so no address fits.
CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) {
  SIMGPU_REQUIRE_CTX();
  if (CUresult r = RefuseIfCaptureForbids()) return r;
  if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr p = 0;
  if (CUresult r = AllocateDevice(bytesize, nullptr, &p)) return r;
  if (p > 0xffffffffull) {
    FreeAllocation(p);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *dptr = static_cast<CUdeviceptr_v1>(p);
  return CUDA_SUCCESS;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) {
  SIMGPU_REQUIRE_CTX();
  if (CUresult r = RefuseIfCaptureForbids()) return r;
  if (dptr == nullptr || pPitch == nullptr || WidthInBytes == 0 || Height == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // A size past 64 bits is more memory than any device has.
  if (WidthInBytes > SIZE_MAX - 511) return CUDA_ERROR_OUT_OF_MEMORY;
  size_t pitch = (WidthInBytes + 511) / 512 * 512;
  if (pitch > SIZE_MAX / Height) return CUDA_ERROR_OUT_OF_MEMORY;
  if (CUresult r = AllocateDevice(pitch * Height, nullptr, dptr)) return r;
  *pPitch = pitch;
  return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  SIMGPU_REQUIRE_CTX();
  if (CUresult r = RefuseIfCaptureForbids()) return r;
  if (dptr == 0) return CUDA_SUCCESS;
  // Freeing waits for the device, as on the real driver.
  SynchronizeAll();
  return FreeAllocation(dptr);
}

CUresult cuMemFree(CUdeviceptr_v1 dptr) { return cuMemFree_v2(dptr); }

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  SIMGPU_REQUIRE_CTX();
  if (CUresult r = RefuseIfCaptureForbids()) return r;
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  const CUresult r = AllocateManaged(bytesize, nullptr, dptr);
  if (r == CUDA_SUCCESS) ChargeHost(config().calls.alloc_managed.Of(bytesize));  // with its free
  return r;
}

CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  SIMGPU_REQUIRE_CTX();
  if (CUresult r = RefuseIfCaptureForbids()) return r;
  if (pp == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = std::aligned_alloc(4096, (bytesize + 4095) / 4096 * 4096);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  *pp = p;
  return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  (void)Flags;
  return cuMemAllocHost_v2(pp, bytesize);
}

CUresult cuMemFreeHost(void* p) {
  SIMGPU_REQUIRE_CTX();
  if (CUresult r = RefuseIfCaptureForbids()) return r;
  std::free(p);
  return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  SIMGPU_REQUIRE_CTX();
  AllocInfo info;
  if (!FindAllocation(dptr, &info)) return CUDA_ERROR_NOT_FOUND;
  if (pbase) *pbase = info.base;
  if (psize) *psize = info.size;
  return CUDA_SUCCESS;
}

// ---- pools -------------------------------------------------------------------------------------

CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  SIMGPU_REQUIRE_INIT();
  if (pool == nullptr || poolProps == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (poolProps->allocType == CU_MEM_ALLOCATION_TYPE_MANAGED) {
    // Managed pools came with CUDA 13.0: an older driver does not know the type.
    if (DriverVersion() < 13000) return CUDA_ERROR_INVALID_VALUE;
    if (config().managed_pool_create == 0) return CUDA_ERROR_NOT_SUPPORTED;
  }
  Pool* p = new Pool();
  if (poolProps->allocType == CU_MEM_ALLOCATION_TYPE_MANAGED) {
    p->managed = true;
  } else if (poolProps->allocType == CU_MEM_ALLOCATION_TYPE_PINNED) {
    if (poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
      delete p;
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (poolProps->location.id < 0 || poolProps->location.id >= config().devices) {
      delete p;
      return CUDA_ERROR_INVALID_DEVICE;
    }
  } else {
    delete p;
    return CUDA_ERROR_INVALID_VALUE;
  }
  p->location = poolProps->location;
  RegisterPool(p);
  *pool = reinterpret_cast<CUmemoryPool>(p);
  return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  SIMGPU_REQUIRE_INIT();
  Pool* p = reinterpret_cast<Pool*>(pool);
  if (!UnregisterPool(p)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(*g_pool_mu);
  for (Pool*& current : g_current_device_pool) {
    if (current == p) current = nullptr;
  }
  if (g_current_managed_pool == p) g_current_managed_pool = nullptr;
  // Not deleted (see Pool): outstanding allocations keep working; their MEMPOOL_HANDLE is only a
  // value.
  return CUDA_SUCCESS;
}

// Releases what the pool holds beyond its live allocations, down to `minBytesToKeep` reserved.
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  SIMGPU_REQUIRE_INIT();
  Pool* p = reinterpret_cast<Pool*>(pool);
  if (!IsLivePool(p)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(p->mu);
  p->reserved = std::max<uint64_t>(p->used, std::min<uint64_t>(p->reserved, minBytesToKeep));
  return CUDA_SUCCESS;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  SIMGPU_REQUIRE_INIT();
  Pool* p = reinterpret_cast<Pool*>(pool);
  if (!IsLivePool(p) || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(p->mu);
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      p->release_threshold = *static_cast<cuuint64_t*>(value);
      break;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      p->reuse_follow_event_dependencies = *static_cast<int*>(value) != 0;
      break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      p->reuse_allow_opportunistic = *static_cast<int*>(value) != 0;
      break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      p->reuse_allow_internal_dependencies = *static_cast<int*>(value) != 0;
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: {
      // A high watermark can only be reset, to the current value, by setting it to zero.
      if (*static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
      if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) {
        p->reserved_high = p->reserved;
      } else {
        p->used_high = p->used;
      }
      break;
    }
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      return CUDA_ERROR_INVALID_VALUE;  // read-only
    default:
      break;
  }
  return CUDA_SUCCESS;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  SIMGPU_REQUIRE_INIT();
  Pool* p = reinterpret_cast<Pool*>(pool);
  if (!IsLivePool(p) || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(p->mu);
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      *static_cast<int*>(value) = p->reuse_follow_event_dependencies;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      *static_cast<int*>(value) = p->reuse_allow_opportunistic;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      *static_cast<int*>(value) = p->reuse_allow_internal_dependencies;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      *static_cast<cuuint64_t*>(value) = p->release_threshold;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: {
      *static_cast<cuuint64_t*>(value) = attr == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT ? p->reserved
                                         : attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH
                                             ? p->reserved_high
                                         : attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT ? p->used
                                                                                    : p->used_high;
      return CUDA_SUCCESS;
    }
    default:
      *static_cast<cuuint64_t*>(value) = 0;
      return CUDA_SUCCESS;
  }
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  SIMGPU_REQUIRE_INIT();
  if (pool_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= config().devices) return CUDA_ERROR_INVALID_DEVICE;
  *pool_out = reinterpret_cast<CUmemoryPool>(DefaultPool(false, dev));
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  SIMGPU_REQUIRE_INIT();
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= config().devices) return CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<CUmemoryPool>(CurrentPool(false, dev));
  return CUDA_SUCCESS;
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  SIMGPU_REQUIRE_INIT();
  if (dev < 0 || dev >= config().devices) return CUDA_ERROR_INVALID_DEVICE;
  Pool* p = reinterpret_cast<Pool*>(pool);
  // The device's own pools only, as on the driver; lenient: a managed pool may serve
  // cuMemAllocAsync.
  if (!IsLivePool(p) || (!p->managed && p->location.id != dev)) return CUDA_ERROR_INVALID_VALUE;
  SetCurrentPool(false, dev, p);
  return CUDA_SUCCESS;
}

CUresult cuMemGetDefaultMemPool(CUmemoryPool* pool_out, CUmemLocation* location,
                                CUmemAllocationType type) {
  SIMGPU_REQUIRE_INIT();
  if (pool_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  bool managed = false;
  int device = 0;
  if (CUresult r = LocationTypeToPool(location, type, &managed, &device)) return r;
  *pool_out = reinterpret_cast<CUmemoryPool>(DefaultPool(managed, device));
  return CUDA_SUCCESS;
}

CUresult cuMemGetMemPool(CUmemoryPool* pool, CUmemLocation* location, CUmemAllocationType type) {
  SIMGPU_REQUIRE_INIT();
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  bool managed = false;
  int device = 0;
  if (CUresult r = LocationTypeToPool(location, type, &managed, &device)) return r;
  *pool = reinterpret_cast<CUmemoryPool>(CurrentPool(managed, device));
  return CUDA_SUCCESS;
}

CUresult cuMemSetMemPool(CUmemLocation* location, CUmemAllocationType type, CUmemoryPool pool) {
  SIMGPU_REQUIRE_INIT();
  bool managed = false;
  int device = 0;
  if (CUresult r = LocationTypeToPool(location, type, &managed, &device)) return r;
  Pool* p = reinterpret_cast<Pool*>(pool);
  if (!IsLivePool(p) || p->managed != managed) return CUDA_ERROR_INVALID_VALUE;
  if (!managed && p->location.id != device) return CUDA_ERROR_INVALID_VALUE;
  SetCurrentPool(managed, device, p);
  return CUDA_SUCCESS;
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  SIMGPU_REQUIRE_INIT();
  return AllocFromPool(dptr, bytesize, nullptr, hStream, false);
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  SIMGPU_REQUIRE_INIT();
  return AllocFromPool(dptr, bytesize, nullptr, hStream, true);
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream) {
  SIMGPU_REQUIRE_INIT();
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AllocFromPool(dptr, bytesize, reinterpret_cast<Pool*>(pool), hStream, false);
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream) {
  SIMGPU_REQUIRE_INIT();
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AllocFromPool(dptr, bytesize, reinterpret_cast<Pool*>(pool), hStream, true);
}
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return FreeAsync(dptr, hStream, false);
}
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return FreeAsync(dptr, hStream, true);
}

// ---- copies and memsets ------------------------------------------------------------------------

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return Copy(P(dst), P(src), n, nullptr, false, true, Classify(P(dst), P(src)));
}
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return Copy(P(dst), P(src), n, nullptr, true, true, Classify(P(dst), P(src)));
}
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return Copy(P(dst), P(src), n, s, false, false, Classify(P(dst), P(src)));
}
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return Copy(P(dst), P(src), n, s, true, false, Classify(P(dst), P(src)));
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  return Copy(P(dst), src, n, nullptr, false, true, Dir::kH2D);
}
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n) {
  return Copy(P(dst), src, n, nullptr, true, true, Dir::kH2D);
}
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  return Copy(dst, P(src), n, nullptr, false, true, Dir::kD2H);
}
CUresult cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n) {
  return Copy(dst, P(src), n, nullptr, true, true, Dir::kD2H);
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return Copy(P(dst), P(src), n, nullptr, false, true, Dir::kD2D);
}
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return Copy(P(dst), P(src), n, nullptr, true, true, Dir::kD2D);
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  return Copy(P(dst), src, n, s, false, false, Dir::kH2D);
}
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  return Copy(P(dst), src, n, s, true, false, Dir::kH2D);
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return Copy(dst, P(src), n, s, false, false, Dir::kD2H);
}
CUresult cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return Copy(dst, P(src), n, s, true, false, Dir::kD2H);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return Copy(P(dst), P(src), n, s, false, false, Dir::kD2D);
}
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return Copy(P(dst), P(src), n, s, true, false, Dir::kD2D);
}
CUresult cuMemcpyHtoD(CUdeviceptr_v1 dst, const void* src, unsigned int n) {
  return cuMemcpyHtoD_v2(dst, src, n);
}
CUresult cuMemcpyDtoH(void* dst, CUdeviceptr_v1 src, unsigned int n) {
  return cuMemcpyDtoH_v2(dst, src, n);
}

CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
  return Memset<uint8_t>(d, v, n, nullptr, false, true);
}
CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n) {
  return Memset<uint8_t>(d, v, n, nullptr, true, true);
}
CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) {
  return Memset<uint16_t>(d, v, n, nullptr, false, true);
}
CUresult cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n) {
  return Memset<uint16_t>(d, v, n, nullptr, true, true);
}
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) {
  return Memset<uint32_t>(d, v, n, nullptr, false, true);
}
CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n) {
  return Memset<uint32_t>(d, v, n, nullptr, true, true);
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
  return Memset<uint8_t>(d, v, n, s, false, false);
}
CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
  return Memset<uint8_t>(d, v, n, s, true, false);
}
CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) {
  return Memset<uint16_t>(d, v, n, s, false, false);
}
CUresult cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short v, size_t n, CUstream s) {
  return Memset<uint16_t>(d, v, n, s, true, false);
}
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s) {
  return Memset<uint32_t>(d, v, n, s, false, false);
}
CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream s) {
  return Memset<uint32_t>(d, v, n, s, true, false);
}

// ---- managed memory ----------------------------------------------------------------------------

CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                               unsigned int flags, CUstream hStream) {
  return Prefetch(devPtr, count, location, flags, hStream, false);
}
CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                    unsigned int flags, CUstream hStream) {
  return Prefetch(devPtr, count, location, flags, hStream, true);
}
CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                            CUstream hStream) {
  return Prefetch(devPtr, count, DeviceToLocation(dstDevice), 0, hStream, false);
}
CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                 CUstream hStream) {
  return Prefetch(devPtr, count, DeviceToLocation(dstDevice), 0, hStream, true);
}

CUresult cuMemPrefetchBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                 CUmemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                 size_t numPrefetchLocs, unsigned long long flags,
                                 CUstream hStream) {
  return Batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream,
               false, RangeKind::kPrefetch);
}
CUresult cuMemPrefetchBatchAsync_ptsz(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                      CUmemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                      size_t numPrefetchLocs, unsigned long long flags,
                                      CUstream hStream) {
  return Batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream,
               true, RangeKind::kPrefetch);
}
CUresult cuMemDiscardBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                unsigned long long flags, CUstream hStream) {
  return Batch(dptrs, sizes, count, nullptr, nullptr, 0, flags, hStream, false,
               RangeKind::kDiscard);
}
CUresult cuMemDiscardBatchAsync_ptsz(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                     unsigned long long flags, CUstream hStream) {
  return Batch(dptrs, sizes, count, nullptr, nullptr, 0, flags, hStream, true, RangeKind::kDiscard);
}
CUresult cuMemDiscardAndPrefetchBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                           CUmemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                           size_t numPrefetchLocs, unsigned long long flags,
                                           CUstream hStream) {
  return Batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream,
               false, RangeKind::kDiscardAndPrefetch);
}
CUresult cuMemDiscardAndPrefetchBatchAsync_ptsz(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                CUmemLocation* prefetchLocs,
                                                size_t* prefetchLocIdxs, size_t numPrefetchLocs,
                                                unsigned long long flags, CUstream hStream) {
  return Batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream,
               true, RangeKind::kDiscardAndPrefetch);
}

CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                        CUmemLocation location) {
  return AdviseImpl(devPtr, count, advice, location);
}
CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device) {
  return AdviseImpl(devPtr, count, advice, DeviceToLocation(device));
}

// ---- pointer attributes ------------------------------------------------------------------------

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  SIMGPU_REQUIRE_INIT();
  AllocInfo info;
  if (!FindAllocation(ptr, &info)) return CUDA_ERROR_INVALID_VALUE;
  return PointerAttribute(data, attribute, ptr, &info);
}

CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute* attributes,
                                void** data, CUdeviceptr ptr) {
  SIMGPU_REQUIRE_INIT();
  if (numAttributes == 0 || attributes == nullptr || data == nullptr)
    return CUDA_ERROR_INVALID_VALUE;
  AllocInfo info;
  bool found = FindAllocation(ptr, &info);
  for (unsigned i = 0; i < numAttributes; ++i) {
    CUresult r = PointerAttribute(data[i], attributes[i], ptr, found ? &info : nullptr);
    if (r != CUDA_SUCCESS && attributes[i] != CU_POINTER_ATTRIBUTE_HOST_POINTER) return r;
  }
  return CUDA_SUCCESS;
}

// IPC handles exist for plain device allocations only (as on the real driver, managed memory has
// none); the handle carries the allocation's base and id. Opening one is not simulated (one
// process).
CUresult cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
  SIMGPU_REQUIRE_CTX();
  if (pHandle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  AllocInfo info;
  if (!FindAllocation(dptr, &info) || info.managed) return CUDA_ERROR_INVALID_VALUE;
  std::memset(pHandle, 0, sizeof(*pHandle));
  std::memcpy(pHandle->reserved, &info.base, sizeof(info.base));
  std::memcpy(pHandle->reserved + sizeof(info.base), &info.id, sizeof(info.id));
  return CUDA_SUCCESS;
}

// Virtual memory management is not simulated.
CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  (void)ptr, (void)size, (void)alignment, (void)addr, (void)flags;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
  (void)handle, (void)size, (void)prop, (void)flags;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  (void)ptr, (void)size, (void)offset, (void)handle, (void)flags;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  (void)ptr, (void)size;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  (void)handle;
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // extern "C"

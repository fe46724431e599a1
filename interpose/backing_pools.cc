// Managed memory pools, one per device, that stream-ordered allocations are backed by, with the
// default pool's settings, statistics and trims carried over (backing.h).
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "interpose/backing.h"
#include "interpose/caller_module.h"
#include "interpose/log.h"
#include "interpose/real_driver.h"
#include "interpose/reentrancy.h"
#include "interpose/unhooked_function.h"

namespace spillway::interpose {
namespace {

constinit UnhookedFunction g_pool_create{"cuMemPoolCreate", 11020};
constinit UnhookedFunction g_get_mem_pool{"cuMemGetMemPool", 13000};
constinit UnhookedFunction g_device_default_pool{"cuDeviceGetDefaultMemPool", 11020};
constinit UnhookedFunction g_device_current_pool{"cuDeviceGetMemPool", 11020};
constinit UnhookedFunction g_pool_get_attribute{"cuMemPoolGetAttribute", 11020};
constinit UnhookedFunction g_pool_set_attribute{"cuMemPoolSetAttribute", 11020};
constinit UnhookedFunction g_pool_trim{"cuMemPoolTrimTo", 11020};
constinit UnhookedFunction g_pool_destroy{"cuMemPoolDestroy", 11020};

// Counts the settings the job made on a default pool known here (ForwardPoolSetting): a copy of
// the default pool's settings to a managed pool runs again when one came during it.
constinit std::atomic<uint64_t> g_default_pool_settings{0};

// Managed pools by device: 0 not tried, 1 ready, 2 unavailable.
struct Pools {
  std::mutex mutex;
  int state[kMaxDevices] = {};          // guarded by mutex
  CUmemoryPool pool[kMaxDevices] = {};  // guarded by mutex
  // True where spillway made the pool (cuMemPoolCreate); false for the driver's current managed
  // pool, which the job may use itself: never given the default pool's settings, statistics or
  // trims. Guarded by mutex.
  bool owned[kMaxDevices] = {};
  CUmemoryPool default_pool[kMaxDevices] = {};  // the device's own default pool; guarded by mutex
};
Pools& ThePools() {
  static Pools* pools = new Pools;  // never freed
  return *pools;
}

using DevicePoolFn = CUresult (*)(CUmemoryPool*, CUdevice);

// `device`'s default pool (cached), or null: the pool spillway's managed pool stands in for (a
// pool the job made current keeps its own allocations).
CUmemoryPool DefaultPool(int device) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  Pools& pools = ThePools();
  CUmemoryPool default_pool = nullptr;
  {
    std::lock_guard lock(pools.mutex);
    default_pool = pools.default_pool[device];
  }
  if (default_pool == nullptr) {
    if (const auto get = Lookup<DevicePoolFn>(g_device_default_pool)) {
      if (get(&default_pool, device) == CUDA_SUCCESS) {
        std::lock_guard lock(pools.mutex);
        pools.default_pool[device] = default_pool;
      }
    }
  }
  return default_pool;
}

// The job's settings of its default pool carry over to the managed pool that now serves its
// stream-ordered allocations: the release threshold (PyTorch's cudaMallocAsync backend sets
// UINT64_MAX, so that a synchronize does not hand the pool's memory back to the OS) and the
// reuse policies. One that cannot be copied keeps the driver's default (logged at info).
void CopyDevicePoolAttributes(int device, CUmemoryPool managed) {
  using AttributeFn = CUresult (*)(CUmemoryPool, CUmemPool_attribute, void*);
  const auto get = Lookup<AttributeFn>(g_pool_get_attribute);
  const auto set = Lookup<AttributeFn>(g_pool_set_attribute);
  const CUmemoryPool source = DefaultPool(device);
  if (get == nullptr || set == nullptr || source == nullptr) {
    Log(LogLevel::kInfo,
        "device %d: the default pool's attributes are not copied to the managed pool", device);
    return;
  }
  struct Copied {
    CUmemPool_attribute attribute;
    const char* name;
  };
  static constexpr Copied kCopied[] = {
      {CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, "RELEASE_THRESHOLD"},
      {CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, "REUSE_FOLLOW_EVENT_DEPENDENCIES"},
      {CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, "REUSE_ALLOW_OPPORTUNISTIC"},
      {CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, "REUSE_ALLOW_INTERNAL_DEPENDENCIES"},
  };
  for (const Copied& copied : kCopied) {
    // Wide enough for either type: cuuint64_t (the threshold) or int (the reuse flags).
    cuuint64_t value = 0;
    CUresult result = get(source, copied.attribute, &value);
    if (result == CUDA_SUCCESS) result = set(managed, copied.attribute, &value);
    if (result != CUDA_SUCCESS) {
      Log(LogLevel::kInfo,
          "device %d: CU_MEMPOOL_ATTR_%s not copied to the managed pool (error %d)", device,
          copied.name, result);
    }
  }
}

// Copies the default pool's settings to `managed` again while a setting came during the last copy
// (counted from `settings`, read before the first copy). 16 rounds at most: a job that never stops
// setting its pool cannot keep the caller here (the last copy then stands, possibly one value
// behind).
void CopyWhileSettingsChange(int device, CUmemoryPool managed, uint64_t settings) {
  for (int round = 0; round < 16; ++round) {
    const uint64_t now = g_default_pool_settings.load();
    if (now == settings) return;
    settings = now;
    CopyDevicePoolAttributes(device, managed);
  }
}

struct MadePool {
  CUmemoryPool pool = nullptr;
  bool owned = false;
};

MadePool CreateManagedPool(int device) {
  CUmemLocation none{};
  none.type = CU_MEM_LOCATION_TYPE_NONE;
  if (const auto create =
          Lookup<CUresult (*)(CUmemoryPool*, const CUmemPoolProps*)>(g_pool_create)) {
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_MANAGED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location = none;
    CUmemoryPool pool = nullptr;
    const CUresult result = create(&pool, &props);
    if (result == CUDA_SUCCESS && pool != nullptr) return {pool, true};
    Log(LogLevel::kInfo, "device %d: cuMemPoolCreate (managed) failed (error %d)", device, result);
  }
  if (const auto get = Lookup<CUresult (*)(CUmemoryPool*, CUmemLocation*, CUmemAllocationType)>(
          g_get_mem_pool)) {
    CUmemoryPool pool = nullptr;
    if (get(&pool, &none, CU_MEM_ALLOCATION_TYPE_MANAGED) == CUDA_SUCCESS && pool != nullptr) {
      Log(LogLevel::kInfo,
          "device %d: the driver's current managed pool serves stream-ordered allocations; the "
          "default pool's settings and statistics stay its own",
          device);
      return {pool, false};
    }
  }
  return {};
}

}  // namespace

CUmemoryPool ManagedPool() {
  const int device = CurrentDevice();
  if (device < 0 || device >= kMaxDevices) return nullptr;
  Pools& pools = ThePools();
  {
    std::lock_guard lock(pools.mutex);
    if (pools.state[device] == 1) return pools.pool[device];
    if (pools.state[device] == 2) return nullptr;
  }
  // Made outside the lock (a driver call); a thread that loses a race to make it destroys its own.
  const MadePool made = CreateManagedPool(device);
  // A pool spillway made takes the default pool's settings before anything is allocated from
  // it. A setting made during that copy (counted) is copied again once the pool is published;
  // one made after it is published is forwarded by ForwardPoolSetting, which finds the pool.
  const uint64_t settings = g_default_pool_settings.load();
  if (made.owned) CopyDevicePoolAttributes(device, made.pool);
  CUmemoryPool published = nullptr;
  bool lost = false;
  {
    std::lock_guard lock(pools.mutex);
    if (pools.state[device] != 0) {
      lost = true;
      published = pools.pool[device];
    } else {
      pools.state[device] = made.pool != nullptr ? 1 : 2;
      pools.pool[device] = made.pool;
      pools.owned[device] = made.owned;
    }
  }
  if (lost) {
    if (made.owned) {
      if (const auto destroy = Lookup<CUresult (*)(CUmemoryPool)>(g_pool_destroy)) {
        destroy(made.pool);
      }
    }
    return published;
  }
  if (made.pool == nullptr) {
    ReportProblem(LogLevel::kWarn,
                  "device %d: the driver offers no managed memory pool; stream-ordered "
                  "allocations stay device memory",
                  device);
    return nullptr;
  }
  Log(LogLevel::kInfo, "device %d: stream-ordered allocations come from a managed pool", device);
  if (made.owned) CopyWhileSettingsChange(device, made.pool, settings);
  return made.pool;
}

namespace {

struct StandIn {
  int device;
  CUmemoryPool managed;
};

// The managed pools spillway made that stand in for `pool`: those of the devices whose default
// pool it is. With `setting`, a setting the job just made on `pool`: when `pool` is a default
// pool known here, it is counted in g_default_pool_settings and `setting` gets the new count
// (else 0). Counted under the lock that publishes a new pool, so a pool published after the count
// is found by ManagedPool's second copy, and one published before it by this call.
std::vector<StandIn> ManagedPoolsStandingInFor(CUmemoryPool pool, uint64_t* setting = nullptr) {
  std::vector<StandIn> stand_ins;
  if (setting != nullptr) *setting = 0;
  if (pool == nullptr) return stand_ins;
  Pools& pools = ThePools();
  std::lock_guard lock(pools.mutex);
  bool is_default = false;
  for (int device = 0; device < kMaxDevices; ++device) {
    if (pools.default_pool[device] != pool) continue;
    is_default = true;
    if (pools.state[device] == 1 && pools.owned[device]) {
      stand_ins.push_back({device, pools.pool[device]});
    }
  }
  if (is_default && setting != nullptr) *setting = g_default_pool_settings.fetch_add(1) + 1;
  return stand_ins;
}

}  // namespace

void ForwardPoolSetting(CUmemoryPool pool, CUmemPool_attribute attribute, void* value) {
  const bool reset =
      attribute == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH || attribute == CU_MEMPOOL_ATTR_USED_MEM_HIGH;
  if (!reset && attribute != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD &&
      attribute != CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES &&
      attribute != CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC &&
      attribute != CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES) {
    return;
  }
  uint64_t settings = 0;
  const std::vector<StandIn> stand_ins = ManagedPoolsStandingInFor(pool, &settings);
  if (settings == 0) return;  // not a default pool spillway knows
  if (reset) {
    // A reset of a high watermark to the current value: the same on the managed pool.
    using AttributeFn = CUresult (*)(CUmemoryPool, CUmemPool_attribute, void*);
    const auto set = Lookup<AttributeFn>(g_pool_set_attribute);
    for (const StandIn& stand_in : stand_ins) {
      if (set == nullptr || set(stand_in.managed, attribute, value) != CUDA_SUCCESS) {
        Log(LogLevel::kInfo, "a high watermark's reset not forwarded to the managed pool");
      }
    }
    return;
  }
  // After the job's own call. The default pool's settings as they are now, not the job's value:
  // of two threads setting the pool at once, the one whose value the default pool kept wins on the
  // managed pool too (a copy that read the other value runs again).
  for (const StandIn& stand_in : stand_ins) {
    CopyDevicePoolAttributes(stand_in.device, stand_in.managed);
    CopyWhileSettingsChange(stand_in.device, stand_in.managed, settings);
  }
}

void AddManagedPoolStatistic(CUmemoryPool pool, CUmemPool_attribute attribute, void* value) {
  if (attribute != CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT &&
      attribute != CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH &&
      attribute != CU_MEMPOOL_ATTR_USED_MEM_CURRENT && attribute != CU_MEMPOOL_ATTR_USED_MEM_HIGH) {
    return;
  }
  using AttributeFn = CUresult (*)(CUmemoryPool, CUmemPool_attribute, void*);
  const auto get = Lookup<AttributeFn>(g_pool_get_attribute);
  if (get == nullptr) return;
  for (const StandIn& stand_in : ManagedPoolsStandingInFor(pool)) {
    cuuint64_t bytes = 0;
    if (get(stand_in.managed, attribute, &bytes) == CUDA_SUCCESS) {
      *static_cast<cuuint64_t*>(value) += bytes;
    }
  }
}

void TrimManagedPools(CUmemoryPool pool, size_t min_bytes_to_keep) {
  const auto trim = Lookup<CUresult (*)(CUmemoryPool, size_t)>(g_pool_trim);
  if (trim == nullptr) return;
  for (const StandIn& stand_in : ManagedPoolsStandingInFor(pool)) {
    if (const CUresult result = trim(stand_in.managed, min_bytes_to_keep); result != CUDA_SUCCESS) {
      Log(LogLevel::kInfo, "cuMemPoolTrimTo on the managed pool failed (error %d)", result);
    }
  }
}

bool IsDevicePool(CUmemoryPool pool) {
  return pool != nullptr && pool == DefaultPool(CurrentDevice());
}

bool CurrentPoolIsDefault() {
  const int device = CurrentDevice();
  const CUmemoryPool default_pool = DefaultPool(device);
  if (default_pool == nullptr) return false;
  CUmemoryPool current = nullptr;
  const auto get_current = Lookup<DevicePoolFn>(g_device_current_pool);
  return get_current != nullptr && get_current(&current, device) == CUDA_SUCCESS &&
         current == default_pool;
}

void ForgetPools(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  Pools& pools = ThePools();
  std::lock_guard lock(pools.mutex);
  pools.state[device] = 0;
  pools.pool[device] = nullptr;
  pools.owned[device] = false;
  pools.default_pool[device] = nullptr;
}

}  // namespace spillway::interpose

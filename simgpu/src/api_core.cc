// Entry points for initialization, the device, contexts and error strings.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "simgpu_internal.h"

namespace simgpu {
namespace {

std::atomic<bool> g_initialized{false};
std::once_flag g_init_once;
bool g_init_ok = false;

std::mutex* g_ctx_mu = new std::mutex();
std::set<Context*>* g_contexts = new std::set<Context*>();  // guarded by g_ctx_mu
Context* g_primaries[kMaxDevices] = {};                     // one per device, made at cuInit
int g_primary_refs[kMaxDevices] = {};                       // guarded by g_ctx_mu
uint64_t g_next_ctx_id = 1;

// Destroyed contexts stay allocated (another thread may still have one current), here.
std::vector<Context*>* g_retired_contexts = new std::vector<Context*>();  // guarded by g_ctx_mu

// The calling thread's context stack. Trivially destructible (no thread-local destructor), so it
// stays usable from exit handlers that run after thread-local destructors (a preloaded shim frees
// memory from one).
class ContextStack {
 public:
  static constexpr int kMaxDepth = 64;
  bool empty() const { return size_ == 0; }
  Context*& back() { return items_[size_ - 1]; }
  bool push_back(Context* c) {
    if (size_ == kMaxDepth) return false;
    items_[size_++] = c;
    return true;
  }
  void pop_back() { --size_; }
  void erase(Context* c) {
    int kept = 0;
    for (int i = 0; i < size_; ++i) {
      if (items_[i] != c) items_[kept++] = items_[i];
    }
    size_ = kept;
  }

 private:
  Context* items_[kMaxDepth];
  int size_;
};
constinit thread_local ContextStack tls_ctx_stack{};

ContextStack& CtxStack() { return tls_ctx_stack; }

std::set<Pool*>* g_pools = new std::set<Pool*>();                // guarded by g_ctx_mu
std::vector<Pool*>* g_retired_pools = new std::vector<Pool*>();  // destroyed; guarded by g_ctx_mu
// Each device's default pool, and the one default managed pool (location NONE). Made at init.
Pool* g_default_device_pools[kMaxDevices] = {};
Pool* g_default_managed_pool = nullptr;

void DoInit() {
  SetConfig(ReadConfig());
  if (!ResidencyInit()) return;
  StreamsInit();
  for (int device = 0; device < config().devices; ++device) {
    Context* primary = new Context();
    primary->primary = true;
    primary->device = device;
    primary->id = g_next_ctx_id++;
    g_contexts->insert(primary);
    g_primaries[device] = primary;
  }
  for (int device = 0; device < config().devices; ++device) {
    Pool* p = new Pool();
    p->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p->location.id = device;
    g_pools->insert(p);
    g_default_device_pools[device] = p;
  }
  Pool* managed = new Pool();
  managed->managed = true;
  managed->location.type = CU_MEM_LOCATION_TYPE_NONE;
  g_pools->insert(managed);
  g_default_managed_pool = managed;
  std::atexit([] { WriteStatsFile(); });
  g_init_ok = true;
  g_initialized.store(true, std::memory_order_release);
}

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};

#define SIMGPU_ERR(code, text) \
  { code, #code, text }
constexpr ErrorText kErrors[] = {
    SIMGPU_ERR(CUDA_SUCCESS, "no error"),
    SIMGPU_ERR(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    SIMGPU_ERR(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    SIMGPU_ERR(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    SIMGPU_ERR(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    SIMGPU_ERR(CUDA_ERROR_PROFILER_DISABLED,
               "profiler disabled while using an external profiling tool"),
    SIMGPU_ERR(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
    SIMGPU_ERR(CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA-capable device(s) is/are busy or unavailable"),
    SIMGPU_ERR(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    SIMGPU_ERR(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    SIMGPU_ERR(CUDA_ERROR_DEVICE_NOT_LICENSED, "device doesn't have valid Grid license"),
    SIMGPU_ERR(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
    SIMGPU_ERR(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    SIMGPU_ERR(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current"),
    SIMGPU_ERR(CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed"),
    SIMGPU_ERR(CUDA_ERROR_UNMAP_FAILED, "unmapping of buffer object failed"),
    SIMGPU_ERR(CUDA_ERROR_ARRAY_IS_MAPPED, "array is mapped"),
    SIMGPU_ERR(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped"),
    SIMGPU_ERR(CUDA_ERROR_NO_BINARY_FOR_GPU,
               "no kernel image is available for execution on the device"),
    SIMGPU_ERR(CUDA_ERROR_ALREADY_ACQUIRED, "resource already acquired"),
    SIMGPU_ERR(CUDA_ERROR_NOT_MAPPED, "resource not mapped"),
    SIMGPU_ERR(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered"),
    SIMGPU_ERR(CUDA_ERROR_UNSUPPORTED_LIMIT, "limit is not supported on this architecture"),
    SIMGPU_ERR(CUDA_ERROR_CONTEXT_ALREADY_IN_USE,
               "exclusive-thread device already in use by a different thread"),
    SIMGPU_ERR(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
               "peer access is not supported between these two devices"),
    SIMGPU_ERR(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed"),
    SIMGPU_ERR(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid"),
    SIMGPU_ERR(CUDA_ERROR_FILE_NOT_FOUND, "file not found"),
    SIMGPU_ERR(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, "shared object symbol not found"),
    SIMGPU_ERR(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "shared object initialization failed"),
    SIMGPU_ERR(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS"),
    SIMGPU_ERR(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    SIMGPU_ERR(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state"),
    SIMGPU_ERR(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    SIMGPU_ERR(CUDA_ERROR_NOT_READY, "device not ready"),
    SIMGPU_ERR(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
    SIMGPU_ERR(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"),
    SIMGPU_ERR(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated"),
    SIMGPU_ERR(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled"),
    SIMGPU_ERR(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled"),
    SIMGPU_ERR(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE,
               "cannot set while device is active in this process"),
    SIMGPU_ERR(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
    SIMGPU_ERR(CUDA_ERROR_ASSERT, "device-side assert triggered"),
    SIMGPU_ERR(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
               "part or all of the requested memory range is already mapped"),
    SIMGPU_ERR(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
               "pointer does not correspond to a registered memory region"),
    SIMGPU_ERR(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
    SIMGPU_ERR(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "too many blocks in cooperative launch"),
    SIMGPU_ERR(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    SIMGPU_ERR(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    SIMGPU_ERR(CUDA_ERROR_SYSTEM_NOT_READY, "system not yet initialized"),
    SIMGPU_ERR(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
               "operation not permitted when stream is capturing"),
    SIMGPU_ERR(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
               "operation failed due to a previous error during capture"),
    SIMGPU_ERR(CUDA_ERROR_CAPTURED_EVENT,
               "operation not permitted on an event last recorded in a capturing stream"),
    SIMGPU_ERR(CUDA_ERROR_TIMEOUT, "wait operation timed out"),
    SIMGPU_ERR(CUDA_ERROR_UNKNOWN, "unknown error"),
};
#undef SIMGPU_ERR

const ErrorText* FindError(CUresult code) {
  for (const ErrorText& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

CUresult CheckDevice(CUdevice dev) {
  SIMGPU_REQUIRE_INIT();
  return dev >= 0 && dev < config().devices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult NewContext(CUcontext* pctx, unsigned flags, CUdevice dev) {
  if (CUresult r = CheckDevice(dev)) return r;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* c = new Context();
  c->device = dev;
  c->flags = flags;
  {
    std::lock_guard<std::mutex> lock(*g_ctx_mu);
    c->id = g_next_ctx_id++;
    g_contexts->insert(c);
  }
  CtxStack().push_back(c);
  *pctx = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}

}  // namespace

bool Initialized() { return g_initialized.load(std::memory_order_acquire); }

Context* CurrentContext() {
  if (tls_ctx_stack.empty()) return nullptr;
  return tls_ctx_stack.back();
}

Context* PrimaryContext(int device) {
  return device >= 0 && device < kMaxDevices ? g_primaries[device] : nullptr;
}

int CurrentDeviceOrdinal() {
  const Context* c = CurrentContext();
  return c != nullptr ? c->device : 0;
}

bool IsLiveContext(Context* c) {
  std::lock_guard<std::mutex> lock(*g_ctx_mu);
  return g_contexts->count(c) > 0;
}

bool IsLivePool(Pool* p) {
  std::lock_guard<std::mutex> lock(*g_ctx_mu);
  return g_pools->count(p) > 0;
}

std::vector<Pool*> LivePools() {
  std::lock_guard<std::mutex> lock(*g_ctx_mu);
  return std::vector<Pool*>(g_pools->begin(), g_pools->end());
}

Pool* DefaultPool(bool managed, int device) {
  if (managed) return g_default_managed_pool;
  return device >= 0 && device < kMaxDevices ? g_default_device_pools[device] : nullptr;
}

void RegisterPool(Pool* p) {
  std::lock_guard<std::mutex> lock(*g_ctx_mu);
  g_pools->insert(p);
}

bool UnregisterPool(Pool* p) {
  std::lock_guard<std::mutex> lock(*g_ctx_mu);
  if (p == g_default_managed_pool) return false;
  for (const Pool* default_pool : g_default_device_pools) {
    if (p == default_pool) return false;
  }
  if (g_pools->erase(p) == 0) return false;
  g_retired_pools->push_back(p);  // kept (see Pool)
  return true;
}

}  // namespace simgpu

using namespace simgpu;  // NOLINT: entry points below

extern "C" {

CUresult cuInit(unsigned int Flags) {
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::call_once(g_init_once, DoInit);
  return g_init_ok ? CUDA_SUCCESS : CUDA_ERROR_OPERATING_SYSTEM;
}

CUresult cuDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = DriverVersion();
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = FindError(error);
  *pStr = e ? e->name : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = FindError(error);
  *pStr = e ? e->text : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetExportTable(const void** ppExportTable, const CUuuid* pExportTableId) {
  if (ppExportTable == nullptr || pExportTableId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *ppExportTable = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  SIMGPU_REQUIRE_INIT();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= config().devices) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  SIMGPU_REQUIRE_INIT();
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = config().devices;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (CUresult r = CheckDevice(dev)) return r;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<size_t>(len), "simgpu (simulated H100 PCIe)");
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  if (CUresult r = CheckDevice(dev)) return r;
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const char uuid_bytes[16] = {'s', 'i', 'm', 'g', 'p', 'u', 0, 0,
                               0,   0,   0,   0,   0,   0,   0, static_cast<char>(1 + dev)};
  std::memcpy(uuid->bytes, uuid_bytes, 16);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

CUresult cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  if (CUresult r = CheckDevice(dev)) return r;
  if (pciBusId == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(pciBusId, static_cast<size_t>(len), "0000:%02x:00.0", 1 + dev);
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (CUresult r = CheckDevice(dev)) return r;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *bytes = config().capacity_bytes;
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  size_t b = 0;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = cuDeviceTotalMem_v2(&b, dev)) return r;
  *bytes = b > 0xffffffffu ? 0xffffffffu : static_cast<unsigned int>(b);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  if (CUresult r = CheckDevice(dev)) return r;
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int v;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
      v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      v = 64;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      v = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
      v = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      v = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      v = 49152;
      break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
      v = 65536;
      break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
      v = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
      v = 65536;
      break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      v = 1755000;
      break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
      v = 512;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      v = 114;
      break;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
      v = CU_COMPUTEMODE_DEFAULT;
      break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      v = 1593000;
      break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      v = 5120;
      break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      v = 50 << 20;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
      v = 2048;
      break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
      v = config().copy_engines;
      break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      v = 9;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      v = 233472;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
      v = 65536;
      break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO:
      v = 2;
      break;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      v = 232448;
      break;
    case CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
      v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK:
      v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
      v = 0;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  *pi = v;
  return CUDA_SUCCESS;
}

// ---- contexts ----------------------------------------------------------------------------------

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  if (CUresult r = CheckDevice(dev)) return r;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(*g_ctx_mu);
  ++g_primary_refs[dev];
  *pctx = reinterpret_cast<CUcontext>(g_primaries[dev]);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  if (CUresult r = CheckDevice(dev)) return r;
  Context* primary = nullptr;
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(*g_ctx_mu);
    if (g_primary_refs[dev] <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--g_primary_refs[dev] == 0) {
      primary = g_primaries[dev];
      generation = ++primary->generation;
    }
  }
  // The last release resets the primary context: its modules are unloaded and its memory freed
  // (simgpu keeps its streams and events).
  if (primary != nullptr) {
    SynchronizeAll();
    UnloadModulesOf(primary, generation);
    FreeContextMemory(primary, generation);
  }
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

// Unloads the primary context's modules and frees its memory (simgpu keeps its streams and
// events).
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  if (CUresult r = CheckDevice(dev)) return r;
  SynchronizeAll();
  Context* primary = nullptr;
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(*g_ctx_mu);
    primary = g_primaries[dev];
    generation = ++primary->generation;
  }
  UnloadModulesOf(primary, generation);
  FreeContextMemory(primary, generation);
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return cuDevicePrimaryCtxReset_v2(dev); }

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  if (CUresult r = CheckDevice(dev)) return r;
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(*g_ctx_mu);
  *flags = g_primaries[dev]->flags;
  *active = g_primary_refs[dev] > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  if (CUresult r = CheckDevice(dev)) return r;
  std::lock_guard<std::mutex> lock(*g_ctx_mu);
  g_primaries[dev]->flags = flags;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return NewContext(pctx, flags, dev);
}
CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return NewContext(pctx, flags, dev);
}
CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* ctxCreateParams, unsigned int flags,
                        CUdevice dev) {
  (void)ctxCreateParams;  // execution affinity and CIG parameters have no meaning here
  return NewContext(pctx, flags, dev);
}

CUresult cuCtxDestroy_v2(CUcontext ctx) {
  SIMGPU_REQUIRE_INIT();
  Context* c = reinterpret_cast<Context*>(ctx);
  if (c == nullptr || !IsLiveContext(c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (c->primary) return CUDA_ERROR_INVALID_CONTEXT;
  SynchronizeAll();
  {
    std::lock_guard<std::mutex> lock(*g_ctx_mu);
    g_contexts->erase(c);
    g_retired_contexts->push_back(c);
  }
  CtxStack().erase(c);
  const uint64_t generation = ++c->generation;
  UnloadModulesOf(c, generation);
  FreeContextMemory(c, generation);
  return CUDA_SUCCESS;
}
CUresult cuCtxDestroy(CUcontext ctx) { return cuCtxDestroy_v2(ctx); }

CUresult cuCtxGetCurrent(CUcontext* pctx) {
  SIMGPU_REQUIRE_INIT();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = reinterpret_cast<CUcontext>(CurrentContext());
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  SIMGPU_REQUIRE_INIT();
  ContextStack& stack = CtxStack();
  Context* c = reinterpret_cast<Context*>(ctx);
  if (c == nullptr) {
    if (!stack.empty()) stack.pop_back();
    return CUDA_SUCCESS;
  }
  if (!IsLiveContext(c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (stack.empty())
    stack.push_back(c);
  else
    stack.back() = c;
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  SIMGPU_REQUIRE_INIT();
  Context* c = reinterpret_cast<Context*>(ctx);
  if (c == nullptr || !IsLiveContext(c)) return CUDA_ERROR_INVALID_CONTEXT;
  return CtxStack().push_back(c) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuCtxPushCurrent(CUcontext ctx) { return cuCtxPushCurrent_v2(ctx); }

CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  SIMGPU_REQUIRE_INIT();
  ContextStack& stack = CtxStack();
  if (stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx != nullptr) *pctx = reinterpret_cast<CUcontext>(stack.back());
  stack.pop_back();
  return CUDA_SUCCESS;
}
CUresult cuCtxPopCurrent(CUcontext* pctx) { return cuCtxPopCurrent_v2(pctx); }

CUresult cuCtxGetDevice(CUdevice* device) {
  SIMGPU_REQUIRE_CTX();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *device = CurrentContext()->device;
  return CUDA_SUCCESS;
}

// CUDA 13's variant (cuGetProcAddress("cuCtxGetDevice") at 13000): the given context's device,
// or the current context's for a null one.
CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  SIMGPU_REQUIRE_INIT();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* c = ctx ? reinterpret_cast<Context*>(ctx) : CurrentContext();
  if (c == nullptr || !IsLiveContext(c)) return CUDA_ERROR_INVALID_CONTEXT;
  *device = c->device;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetFlags(unsigned int* flags) {
  SIMGPU_REQUIRE_CTX();
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *flags = CurrentContext()->flags;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetId(CUcontext ctx, unsigned long long* ctxId) {
  SIMGPU_REQUIRE_INIT();
  if (ctxId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* c = ctx ? reinterpret_cast<Context*>(ctx) : CurrentContext();
  if (c == nullptr || !IsLiveContext(c)) return CUDA_ERROR_INVALID_CONTEXT;
  *ctxId = c->id;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int* version) {
  SIMGPU_REQUIRE_INIT();
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* c = ctx ? reinterpret_cast<Context*>(ctx) : CurrentContext();
  if (c == nullptr || !IsLiveContext(c)) return CUDA_ERROR_INVALID_CONTEXT;
  *version = 3020;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  SIMGPU_REQUIRE_CTX();
  if (leastPriority) *leastPriority = 0;
  if (greatestPriority) *greatestPriority = -5;
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
  SIMGPU_REQUIRE_CTX();
  if (CUresult r = RefuseIfCaptureForbids()) return r;
  SynchronizeContext(CurrentContext());  // the current context's work only, as on the driver
  ReleasePoolMemory();
  NoteContextSync();
  return CUDA_SUCCESS;
}

// CUDA 13's variant (cuGetProcAddress("cuCtxSynchronize") at 13000): the given context's work, or
// the current context's for a null one.
CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  SIMGPU_REQUIRE_INIT();
  Context* c = ctx ? reinterpret_cast<Context*>(ctx) : CurrentContext();
  if (c == nullptr || !IsLiveContext(c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = RefuseIfCaptureForbids()) return r;
  SynchronizeContext(c);
  ReleasePoolMemory();
  NoteContextSync();
  return CUDA_SUCCESS;
}

}  // extern "C"

// Entry points for execution: streams, events, modules (host kernel libraries, see
// simgpu/include/simgpu/kernel_library.h) and kernel launches.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>

#include "simgpu_internal.h"

namespace simgpu {
namespace {

std::mutex* g_obj_mu = new std::mutex();
std::set<Event*>* g_events = new std::set<Event*>();                 // guarded by g_obj_mu
std::set<Module*>* g_modules = new std::set<Module*>();              // guarded by g_obj_mu
std::set<Function*>* g_functions = new std::set<Function*>();        // guarded by g_obj_mu
std::set<KernelHandle*>* g_kernels = new std::set<KernelHandle*>();  // guarded by g_obj_mu

Event* LiveEvent(CUevent h) {
  Event* e = reinterpret_cast<Event*>(h);
  std::lock_guard<std::mutex> lock(*g_obj_mu);
  return g_events->count(e) ? e : nullptr;
}

Function* LiveFunction(CUfunction h) {
  Function* f = reinterpret_cast<Function*>(h);
  std::lock_guard<std::mutex> lock(*g_obj_mu);
  return g_functions->count(f) ? f : nullptr;
}

Function* LiveKernel(CUkernel h) {
  KernelHandle* k = reinterpret_cast<KernelHandle*>(h);
  std::lock_guard<std::mutex> lock(*g_obj_mu);
  return g_kernels->count(k) ? k->function : nullptr;
}

// The offset and size of `f`'s parameter `index` (cuFuncGetParamInfo, cuKernelGetParamInfo).
CUresult ParamInfo(const Function* f, size_t index, size_t* offset, size_t* size) {
  if (index >= f->kernel->num_params) return CUDA_ERROR_INVALID_VALUE;
  if (offset) *offset = f->kernel->params[index].offset;
  if (size) *size = f->kernel->params[index].size;
  return CUDA_SUCCESS;
}

// What cuLaunchKernel and the cuFunc* queries other than cuFuncGetParamInfo accept: a CUfunction
// or a CUkernel cast to one.
Function* FunctionOrKernel(CUfunction h) {
  Function* f = LiveFunction(h);
  return f != nullptr ? f : LiveKernel(reinterpret_cast<CUkernel>(h));
}

// dlopen()s a host kernel library (simgpu/include/simgpu/kernel_library.h).
CUresult LoadKernelLibrary(const char* fname, bool as_library, Module** out) {
  if (out == nullptr || fname == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (access(fname, R_OK) != 0) return CUDA_ERROR_FILE_NOT_FOUND;
  void* handle = dlopen(fname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    std::fprintf(stderr, "simgpu: cannot load %s: not a kernel library: %s\n", fname,
                 err ? err : "dlopen failed");
    return CUDA_ERROR_INVALID_IMAGE;
  }
  auto fn = reinterpret_cast<SimgpuKernelLibraryFn>(dlsym(handle, SIMGPU_KERNEL_LIBRARY_SYMBOL));
  const SimgpuKernelLibrary* lib = fn ? fn() : nullptr;
  if (lib == nullptr || lib->abi_version != SIMGPU_KERNEL_ABI_VERSION ||
      (lib->num_kernels > 0 && lib->kernels == nullptr)) {
    std::fprintf(stderr,
                 "simgpu: cannot load %s: no %s() of ABI version %u (see "
                 "simgpu/include/simgpu/kernel_library.h)\n",
                 fname, SIMGPU_KERNEL_LIBRARY_SYMBOL, SIMGPU_KERNEL_ABI_VERSION);
    dlclose(handle);
    return CUDA_ERROR_INVALID_IMAGE;
  }
  Module* m = new Module();
  m->handle = handle;
  m->library = lib;
  m->is_library = as_library;
  m->context = as_library ? nullptr : CurrentContext();
  m->context_generation = m->context != nullptr ? m->context->generation.load() : 0;
  for (uint32_t i = 0; i < lib->num_kernels; ++i) {
    auto f = std::make_unique<Function>();
    f->module = m;
    f->kernel = &lib->kernels[i];
    m->functions.push_back(std::move(f));
  }
  std::lock_guard<std::mutex> lock(*g_obj_mu);
  g_modules->insert(m);
  for (auto& f : m->functions) {
    g_functions->insert(f.get());
    g_kernels->insert(&f->as_kernel);
  }
  *out = m;
  return CUDA_SUCCESS;
}

// Takes live module `m` and its functions out of the live sets; g_obj_mu held.
void DetachModuleLocked(Module* m) {
  g_modules->erase(m);
  for (auto& f : m->functions) {
    g_functions->erase(f.get());
    g_kernels->erase(&f->as_kernel);
  }
}

// Ends a detached module.
void FinishUnload(Module* m) {
  SynchronizeAll();  // no launch of its kernels may still be queued
  dlclose(m->handle);
  delete m;
}

CUresult UnloadKernelLibrary(Module* m, bool as_library) {
  {
    std::lock_guard<std::mutex> lock(*g_obj_mu);
    if (g_modules->count(m) == 0 || m->is_library != as_library) return CUDA_ERROR_INVALID_HANDLE;
    DetachModuleLocked(m);
  }
  FinishUnload(m);
  return CUDA_SUCCESS;
}

CUresult FindKernel(Module* m, const char* name, Function** out) {
  if (out == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(*g_obj_mu);
  if (g_modules->count(m) == 0) return CUDA_ERROR_INVALID_HANDLE;
  for (auto& f : m->functions) {
    if (f->kernel->name != nullptr && std::strcmp(f->kernel->name, name) == 0) {
      *out = f.get();
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

CUresult StreamSync(CUstream h, bool ptsz) {
  SIMGPU_REQUIRE_CTX();
  if (CUresult r = RefuseIfCaptureForbids()) return r;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s)) return r;
  SynchronizeStream(s);
  ReleasePoolMemory();
  return CUDA_SUCCESS;
}

CUresult StreamQuery(CUstream h, bool ptsz) {
  SIMGPU_REQUIRE_CTX();
  if (CUresult r = RefuseIfCaptureForbids()) return r;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s)) return r;
  return StreamIdle(s) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult StreamWaitEvent(CUstream h, CUevent ev, unsigned flags, bool ptsz) {
  SIMGPU_REQUIRE_CTX();
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s)) return r;
  Event* e = LiveEvent(ev);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (flags & ~static_cast<unsigned>(CU_EVENT_WAIT_EXTERNAL)) return CUDA_ERROR_INVALID_VALUE;
  MarkerPtr m;
  {
    std::lock_guard<std::mutex> lock(SyncMutex());
    m = e->marker;
  }
  if (m) Enqueue(s, nullptr, {m});
  return CUDA_SUCCESS;
}

CUresult EventRecord(CUevent ev, CUstream h, unsigned flags, bool ptsz) {
  SIMGPU_REQUIRE_CTX();
  Event* e = LiveEvent(ev);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (flags & ~static_cast<unsigned>(CU_EVENT_RECORD_EXTERNAL)) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s)) return r;
  // cuda.h: "hEvent and hStream must be from the same context otherwise CUDA_ERROR_INVALID_HANDLE";
  // the default streams are the current context's.
  if (e->ctx != (s->ctx != nullptr ? s->ctx : CurrentContext())) return CUDA_ERROR_INVALID_HANDLE;
  Enqueue(s, nullptr, {}, &e->marker);  // guarded by SyncMutex(), which Enqueue holds
  return CUDA_SUCCESS;
}

CUresult ElapsedTime(float* ms, CUevent start, CUevent end) {
  SIMGPU_REQUIRE_CTX();
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Event* a = LiveEvent(start);
  Event* b = LiveEvent(end);
  if (a == nullptr || b == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(SyncMutex());
  if (!a->marker || !b->marker) return CUDA_ERROR_INVALID_HANDLE;
  if (!a->marker->done || !b->marker->done) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>((b->marker->vtime - a->marker->vtime) * 1e3);
  return CUDA_SUCCESS;
}

// ---- launches ----------------------------------------------------------------------------------

}  // namespace

// One module at a time, allocating nothing: the heap then hands a function loaded later the
// memory, and so the handle, of one unloaded here, as after cuModuleUnload.
void UnloadModulesOf(Context* c, uint64_t generation) {
  for (;;) {
    Module* loaded_in_c = nullptr;
    {
      std::lock_guard<std::mutex> lock(*g_obj_mu);
      for (Module* m : *g_modules) {
        if (!m->is_library && m->context == c && m->context_generation < generation) {
          loaded_in_c = m;
          DetachModuleLocked(m);
          break;
        }
      }
    }
    if (loaded_in_c == nullptr) return;
    FinishUnload(loaded_in_c);
  }
}

Function* LiveFunctionOf(CUfunction h) { return LiveFunction(h); }
Function* LiveKernelOf(CUkernel h) { return LiveKernel(h); }

CUresult PackKernelParams(const SimgpuKernel* k, void** params, void** extra,
                          std::vector<char>* out) {
  size_t packed = 0;
  for (unsigned i = 0; i < k->num_params; ++i) {
    packed = std::max(packed, k->params[i].offset + k->params[i].size);
  }
  out->assign(packed, 0);
  if (params != nullptr && extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (params != nullptr) {
    for (unsigned i = 0; i < k->num_params; ++i) {
      if (params[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
      std::memcpy(out->data() + k->params[i].offset, params[i], k->params[i].size);
    }
  } else if (extra != nullptr) {
    void* buf = nullptr;
    size_t* size = nullptr;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
        buf = extra[i + 1];
      else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
        size = static_cast<size_t*>(extra[i + 1]);
      else
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (buf == nullptr || size == nullptr || *size < packed) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(out->data(), buf, packed);
  } else if (k->num_params > 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult CheckLaunchDims(const LaunchDims& dims) {
  for (int i = 0; i < 3; ++i) {
    if (dims.grid[i] == 0 || dims.block[i] == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  if (static_cast<uint64_t>(dims.block[0]) * dims.block[1] * dims.block[2] > 1024) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

MarkerPtr EnqueueKernel(Stream* s, const SimgpuKernel* k, const LaunchDims& dims,
                        std::shared_ptr<const std::vector<char>> buffer,
                        std::vector<MarkerPtr> extra_deps) {
  stats().kernels_launched.fetch_add(1, std::memory_order_relaxed);
  const int device = s->ctx != nullptr ? s->ctx->device : CurrentDeviceOrdinal();
  return Enqueue(
      s,
      [k, dims, buffer, device](double start) {
        std::vector<void*> args(k->num_params);
        for (unsigned i = 0; i < k->num_params; ++i) {
          args[i] = const_cast<char*>(buffer->data()) + k->params[i].offset;
        }
        SimgpuLaunch launch;
        for (int i = 0; i < 3; ++i) {
          launch.grid[i] = dims.grid[i];
          launch.block[i] = dims.block[i];
        }
        launch.shared_bytes = dims.shared;
        launch.args = args.data();
        if (const double hold = config().hold_kernel_seconds; hold > 0) {
          std::this_thread::sleep_for(std::chrono::duration<double>(hold));
        }
        DeviceAccount account;
        account.device = device;
        BeginDeviceAccess(&account);
        k->run(&launch);
        EndDeviceAccess();
        double compute =
            k->compute_seconds ? k->compute_seconds(&launch) : config().default_kernel_seconds;
        if (!(compute >= 0)) compute = 0;
        return BookEngine(Engine::kCompute, start, compute + FaultStallSeconds(account));
      },
      std::move(extra_deps));
}

namespace {

CUresult Launch(CUfunction f, const LaunchDims& dims, CUstream h, void** params, void** extra,
                bool ptsz) {
  SIMGPU_REQUIRE_CTX();
  Function* fn = FunctionOrKernel(f);  // cuda.h: "a CUDA function ::CUfunction or a CUDA kernel"
  if (fn == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = CheckLaunchDims(dims)) return r;
  const SimgpuKernel* k = fn->kernel;
  // The parameter values are captured now: the launch runs later.
  auto buffer = std::make_shared<std::vector<char>>();
  if (CUresult r = PackKernelParams(k, params, extra, buffer.get())) return r;
  Stream* s = nullptr;
  if (CUresult r = ResolveStreamAnyState(h, ptsz, &s)) return r;
  if (CUresult r = RefuseLegacyDuringCapture(s)) return r;
  // On a capturing stream the launch becomes a kernel node of the capture's graph (graphs.cc).
  if (s->capture_mode.load(std::memory_order_relaxed) >= 0) {
    return CaptureKernel(s, fn, dims, std::move(*buffer));
  }
  ChargeHost(config().calls.launch.Of(0));
  EnqueueKernel(s, k, dims, std::move(buffer));
  return CUDA_SUCCESS;
}

LaunchDims Dims(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned shared) {
  return LaunchDims{{gx, gy, gz}, {bx, by, bz}, shared};
}

CUresult LaunchEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra,
                  bool ptsz) {
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Launch(f,
                Dims(config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                     config->blockDimY, config->blockDimZ, config->sharedMemBytes),
                config->hStream, params, extra, ptsz);
}

CUresult HostFunc(CUstream h, CUhostFn fn, void* user, bool ptsz) {
  SIMGPU_REQUIRE_CTX();
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s)) return r;
  Enqueue(s, [fn, user](double start) {
    fn(user);
    return start;
  });
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace simgpu

using namespace simgpu;  // NOLINT: entry points below

extern "C" {

// ---- streams -----------------------------------------------------------------------------------

CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  SIMGPU_REQUIRE_CTX();
  if (phStream == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (Flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  *phStream = reinterpret_cast<CUstream>(CreateStream(Flags, 0, CurrentContext()));
  return CUDA_SUCCESS;
}

CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) {
  SIMGPU_REQUIRE_CTX();
  if (phStream == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  priority = std::min(0, std::max(-5, priority));
  *phStream = reinterpret_cast<CUstream>(CreateStream(flags, priority, CurrentContext()));
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream hStream) {
  SIMGPU_REQUIRE_CTX();
  Stream* s = reinterpret_cast<Stream*>(hStream);
  if (s == nullptr || !IsLiveStream(s)) return CUDA_ERROR_INVALID_HANDLE;
  DestroyStream(s);
  return CUDA_SUCCESS;
}
CUresult cuStreamDestroy(CUstream hStream) { return cuStreamDestroy_v2(hStream); }

CUresult cuStreamSynchronize(CUstream h) { return StreamSync(h, false); }
CUresult cuStreamSynchronize_ptsz(CUstream h) { return StreamSync(h, true); }
CUresult cuStreamQuery(CUstream h) { return StreamQuery(h, false); }
CUresult cuStreamQuery_ptsz(CUstream h) { return StreamQuery(h, true); }
CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned int flags) {
  return StreamWaitEvent(h, e, flags, false);
}
CUresult cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int flags) {
  return StreamWaitEvent(h, e, flags, true);
}

static CUresult StreamInfo(CUstream h, bool ptsz, Stream** s) {
  SIMGPU_REQUIRE_CTX();
  return ResolveStreamAnyState(h, ptsz, s);
}

CUresult cuStreamGetId(CUstream h, unsigned long long* id) {
  Stream* s = nullptr;
  if (CUresult r = StreamInfo(h, false, &s)) return r;
  if (id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *id = s->id;
  return CUDA_SUCCESS;
}
CUresult cuStreamGetId_ptsz(CUstream h, unsigned long long* id) {
  Stream* s = nullptr;
  if (CUresult r = StreamInfo(h, true, &s)) return r;
  if (id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *id = s->id;
  return CUDA_SUCCESS;
}
CUresult cuStreamGetFlags(CUstream h, unsigned int* flags) {
  Stream* s = nullptr;
  if (CUresult r = StreamInfo(h, false, &s)) return r;
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *flags = s->flags;
  return CUDA_SUCCESS;
}
CUresult cuStreamGetFlags_ptsz(CUstream h, unsigned int* flags) {
  Stream* s = nullptr;
  if (CUresult r = StreamInfo(h, true, &s)) return r;
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *flags = s->flags;
  return CUDA_SUCCESS;
}
CUresult cuStreamGetPriority(CUstream h, int* priority) {
  Stream* s = nullptr;
  if (CUresult r = StreamInfo(h, false, &s)) return r;
  if (priority == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *priority = s->priority;
  return CUDA_SUCCESS;
}
CUresult cuStreamGetPriority_ptsz(CUstream h, int* priority) {
  Stream* s = nullptr;
  if (CUresult r = StreamInfo(h, true, &s)) return r;
  if (priority == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *priority = s->priority;
  return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx(CUstream h, CUcontext* pctx) {
  Stream* s = nullptr;
  if (CUresult r = StreamInfo(h, false, &s)) return r;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = reinterpret_cast<CUcontext>(s->ctx ? s->ctx : CurrentContext());
  return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx_ptsz(CUstream h, CUcontext* pctx) {
  Stream* s = nullptr;
  if (CUresult r = StreamInfo(h, true, &s)) return r;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = reinterpret_cast<CUcontext>(s->ctx ? s->ctx : CurrentContext());
  return CUDA_SUCCESS;
}

CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void* userData) {
  return HostFunc(h, fn, userData, false);
}
CUresult cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void* userData) {
  return HostFunc(h, fn, userData, true);
}

static CUresult IsCapturing(CUstream h, CUstreamCaptureStatus* status, bool ptsz) {
  Stream* s = nullptr;
  if (CUresult r = StreamInfo(h, ptsz, &s)) return r;
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // cuda.h: on the legacy stream while a blocking stream captures, an error; the capture goes on.
  if (s->legacy && LegacyStreamUnusable(/*invalidate=*/false)) {
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  }
  *status = s->capture_mode.load(std::memory_order_relaxed) >= 0 ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                                 : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus* status) {
  return IsCapturing(h, status, false);
}
CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus* status) {
  return IsCapturing(h, status, true);
}

static CUresult AddCallback(CUstream h, CUstreamCallback cb, void* user, unsigned flags,
                            bool ptsz) {
  SIMGPU_REQUIRE_CTX();
  if (cb == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s)) return r;
  Enqueue(s, [cb, user, h](double start) {
    cb(h, CUDA_SUCCESS, user);
    return start;
  });
  return CUDA_SUCCESS;
}
CUresult cuStreamAddCallback(CUstream h, CUstreamCallback cb, void* user, unsigned int flags) {
  return AddCallback(h, cb, user, flags, false);
}
CUresult cuStreamAddCallback_ptsz(CUstream h, CUstreamCallback cb, void* user, unsigned int flags) {
  return AddCallback(h, cb, user, flags, true);
}

// ---- events ------------------------------------------------------------------------------------

CUresult cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  SIMGPU_REQUIRE_CTX();
  if (phEvent == nullptr) return CUDA_ERROR_INVALID_VALUE;
  unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (Flags & ~known) return CUDA_ERROR_INVALID_VALUE;
  Event* e = new Event();
  e->flags = Flags;
  e->ctx = CurrentContext();
  {
    std::lock_guard<std::mutex> lock(*g_obj_mu);
    g_events->insert(e);
  }
  *phEvent = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent hEvent) {
  SIMGPU_REQUIRE_CTX();
  Event* e = reinterpret_cast<Event*>(hEvent);
  {
    std::lock_guard<std::mutex> lock(*g_obj_mu);
    if (g_events->erase(e) == 0) return CUDA_ERROR_INVALID_HANDLE;
  }
  delete e;  // pending waits hold their own reference to the marker
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy(CUevent hEvent) { return cuEventDestroy_v2(hEvent); }

CUresult cuEventRecord(CUevent e, CUstream s) { return EventRecord(e, s, 0, false); }
CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { return EventRecord(e, s, 0, true); }
CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags) {
  return EventRecord(e, s, flags, false);
}
CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int flags) {
  return EventRecord(e, s, flags, true);
}

CUresult cuEventQuery(CUevent hEvent) {
  SIMGPU_REQUIRE_CTX();
  if (CUresult r = RefuseIfCaptureForbids()) return r;
  Event* e = LiveEvent(hEvent);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> lock(SyncMutex());
  return (!e->marker || e->marker->done) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent hEvent) {
  SIMGPU_REQUIRE_CTX();
  if (CUresult r = RefuseIfCaptureForbids()) return r;
  Event* e = LiveEvent(hEvent);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  MarkerPtr m;
  {
    std::lock_guard<std::mutex> lock(SyncMutex());
    m = e->marker;
  }
  WaitMarker(m);
  ReleasePoolMemory();
  return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  return ElapsedTime(ms, start, end);
}
CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  return ElapsedTime(ms, start, end);
}

// ---- modules -----------------------------------------------------------------------------------

CUresult cuModuleLoad(CUmodule* module, const char* fname) {
  SIMGPU_REQUIRE_CTX();
  Module* m = nullptr;
  if (CUresult r = LoadKernelLibrary(fname, false, &m)) return r;
  *module = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule hmod) {
  SIMGPU_REQUIRE_CTX();
  return UnloadKernelLibrary(reinterpret_cast<Module*>(hmod), false);
}

CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  SIMGPU_REQUIRE_CTX();
  Function* f = nullptr;
  if (CUresult r = FindKernel(reinterpret_cast<Module*>(hmod), name, &f)) return r;
  *hfunc = reinterpret_cast<CUfunction>(f);
  return CUDA_SUCCESS;
}

// Context-independent loading (CUDA 12): a CUlibrary is a loaded kernel library; a CUkernel is a
// handle of its own (Function::as_kernel), launched as is or through cuKernelGetFunction's
// CUfunction.
CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* fileName, CUjit_option* jitOptions,
                               void** jitOptionsValues, unsigned int numJitOptions,
                               CUlibraryOption* libraryOptions, void** libraryOptionValues,
                               unsigned int numLibraryOptions) {
  SIMGPU_REQUIRE_INIT();
  (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
  (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
  if (library == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Module* m = nullptr;
  if (CUresult r = LoadKernelLibrary(fileName, true, &m)) return r;
  *library = reinterpret_cast<CUlibrary>(m);
  return CUDA_SUCCESS;
}

CUresult cuLibraryUnload(CUlibrary library) {
  SIMGPU_REQUIRE_INIT();
  return UnloadKernelLibrary(reinterpret_cast<Module*>(library), true);
}

CUresult cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library, const char* name) {
  SIMGPU_REQUIRE_INIT();
  if (pKernel == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Function* f = nullptr;
  if (CUresult r = FindKernel(reinterpret_cast<Module*>(library), name, &f)) return r;
  *pKernel = reinterpret_cast<CUkernel>(&f->as_kernel);
  return CUDA_SUCCESS;
}

CUresult cuLibraryGetModule(CUmodule* pMod, CUlibrary library) {
  SIMGPU_REQUIRE_CTX();
  if (pMod == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Module* m = reinterpret_cast<Module*>(library);
  std::lock_guard<std::mutex> lock(*g_obj_mu);
  if (g_modules->count(m) == 0 || !m->is_library) return CUDA_ERROR_INVALID_HANDLE;
  *pMod = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

CUresult cuLibraryGetKernelCount(unsigned int* count, CUlibrary lib) {
  SIMGPU_REQUIRE_INIT();
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Module* m = reinterpret_cast<Module*>(lib);
  std::lock_guard<std::mutex> lock(*g_obj_mu);
  if (g_modules->count(m) == 0) return CUDA_ERROR_INVALID_HANDLE;
  *count = static_cast<unsigned>(m->functions.size());
  return CUDA_SUCCESS;
}

CUresult cuKernelGetFunction(CUfunction* pFunc, CUkernel kernel) {
  SIMGPU_REQUIRE_CTX();
  if (pFunc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Function* f = LiveKernel(kernel);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *pFunc = reinterpret_cast<CUfunction>(f);
  return CUDA_SUCCESS;
}

CUresult cuKernelGetName(const char** name, CUkernel hfunc) {
  SIMGPU_REQUIRE_INIT();
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Function* f = LiveKernel(hfunc);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *name = f->kernel->name;
  return CUDA_SUCCESS;
}

CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t* paramOffset,
                              size_t* paramSize) {
  SIMGPU_REQUIRE_INIT();
  Function* f = LiveKernel(kernel);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return ParamInfo(f, paramIndex, paramOffset, paramSize);
}

CUresult cuModuleGetFunctionCount(unsigned int* count, CUmodule mod) {
  SIMGPU_REQUIRE_CTX();
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Module* m = reinterpret_cast<Module*>(mod);
  std::lock_guard<std::mutex> lock(*g_obj_mu);
  if (g_modules->count(m) == 0) return CUDA_ERROR_INVALID_HANDLE;
  *count = static_cast<unsigned>(m->functions.size());
  return CUDA_SUCCESS;
}

CUresult cuFuncGetName(const char** name, CUfunction hfunc) {
  SIMGPU_REQUIRE_INIT();
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // A CUkernel is refused, as by cuFuncGetParamInfo (cuda.h documents a CUfunction here and has
  // cuKernelGetName for kernels; see README.md).
  Function* f = LiveFunction(hfunc);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *name = f->kernel->name;
  return CUDA_SUCCESS;
}

CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t* paramOffset,
                            size_t* paramSize) {
  SIMGPU_REQUIRE_INIT();
  // A CUkernel is refused (deliberately strict: cuda.h documents a CUfunction here and points to
  // cuKernelGetParamInfo for kernels; see README.md).
  Function* f = LiveFunction(func);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return ParamInfo(f, paramIndex, paramOffset, paramSize);
}

CUresult cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction hfunc) {
  SIMGPU_REQUIRE_INIT();
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Function* f = FunctionOrKernel(hfunc);
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *pi = 1024;
      break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *pi = 32;
      break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
      *pi = 90;
      break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *pi = 232448;
      break;
    default:
      *pi = 0;
      break;
  }
  return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  SIMGPU_REQUIRE_INIT();
  (void)attrib, (void)value;
  return FunctionOrKernel(hfunc) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

// ---- launches ----------------------------------------------------------------------------------

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                        CUstream s, void** kernelParams, void** extra) {
  return Launch(f, Dims(gx, gy, gz, bx, by, bz, shared), s, kernelParams, extra, false);
}
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                             CUstream s, void** kernelParams, void** extra) {
  return Launch(f, Dims(gx, gy, gz, bx, by, bz, shared), s, kernelParams, extra, true);
}
CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                          void** extra) {
  return LaunchEx(config, f, kernelParams, extra, false);
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                               void** extra) {
  return LaunchEx(config, f, kernelParams, extra, true);
}
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shared, CUstream s, void** kernelParams) {
  return Launch(f, Dims(gx, gy, gz, bx, by, bz, shared), s, kernelParams, nullptr, false);
}
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shared, CUstream s,
                                        void** kernelParams) {
  return Launch(f, Dims(gx, gy, gz, bx, by, bz, shared), s, kernelParams, nullptr, true);
}

// Stream capture and graphs: graphs.cc.

}  // extern "C"

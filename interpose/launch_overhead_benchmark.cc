// What spillway's hooks add to the launch path: the same no-op kernel launched through the real
// driver's cuLaunchKernel and through spillway's hook, and the same for a cheap hooked call
// (cuEventSynchronize on a completed event), so the hook's own cost shows apart from the driver's;
// and an allocation (cuMemAlloc + cuMemFree of 4 KiB), whose hook in run and record mode backs it
// with managed memory. Run once with SPILLWAY_MODE=run and once with SPILLWAY_MODE=record: the
// difference of the "added" columns is what recording costs (trace, stacks, kernel-time events).
//
// The benchmark loads libspillway.so itself (dlopen, RTLD_LOCAL, from its own folder) instead of
// being preloaded, so it can hold both pointers: dlsym(libcuda) is the real function,
// dlsym(libspillway) the hook, which forwards to that same real function. The mode is whatever
// SPILLWAY_MODE says (default run; off = pure passthrough).
//
// Besides Google Benchmark's runs it prints an interleaved comparison: many rounds, each timing a
// batch of direct calls and a batch of hooked calls in alternating order; medians per variant and
// the median of the per-round differences ("added"). See docs/benchmarks.md.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/program_dir.h"

namespace {

using spillway::ProgramDir;

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);
using EventSyncFn = CUresult (*)(CUevent);
using CtxSyncFn = CUresult (*)();
using AllocFn = CUresult (*)(CUdeviceptr*, size_t);
using FreeFn = CUresult (*)(CUdeviceptr);

// An empty kernel for a real GPU (JIT-compiled by the driver).
constexpr const char* kNoopPtx = R"(
.version 7.0
.target sm_75
.address_size 64
.visible .entry noop()
{
  ret;
}
)";

struct Setup {
  LaunchFn launch_direct = nullptr;
  LaunchFn launch_hook = nullptr;
  EventSyncFn event_sync_direct = nullptr;
  EventSyncFn event_sync_hook = nullptr;
  CtxSyncFn ctx_sync = nullptr;
  AllocFn alloc_direct = nullptr;
  AllocFn alloc_hook = nullptr;
  FreeFn free_direct = nullptr;
  FreeFn free_hook = nullptr;
  CUfunction noop = nullptr;
  CUevent done = nullptr;
  std::string device_name;
};

Setup g_setup;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "launch_overhead_benchmark: %s\n", what.c_str());
  std::exit(1);
}

template <typename Fn>
Fn Lookup(void* handle, const char* name) {
  const auto fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (fn == nullptr) Die(std::string("missing ") + name);
  return fn;
}

void Check(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS) Die(std::string(what) + " failed: " + std::to_string(result));
}

void Initialize() {
  if (dlopen("libspillway.so", RTLD_NOW | RTLD_NOLOAD) != nullptr) {
    Die("run me without LD_PRELOAD=libspillway.so: I load it myself to compare");
  }
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (driver == nullptr) Die(std::string("cannot load libcuda.so.1: ") + dlerror());
  const std::string spillway_path = ProgramDir() + "/libspillway.so";
  void* spillway = dlopen(spillway_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (spillway == nullptr) Die("cannot load " + spillway_path + ": " + dlerror());

  Check(Lookup<CUresult (*)(unsigned)>(driver, "cuInit")(0), "cuInit");
  CUdevice device = 0;
  Check(Lookup<CUresult (*)(CUdevice*, int)>(driver, "cuDeviceGet")(&device, 0), "cuDeviceGet");
  char name[256] = {};
  Lookup<CUresult (*)(char*, int, CUdevice)>(driver, "cuDeviceGetName")(name, sizeof(name), device);
  g_setup.device_name = name;
  CUcontext context = nullptr;
  Check(Lookup<CUresult (*)(CUcontext*, CUdevice)>(driver, "cuDevicePrimaryCtxRetain")(&context,
                                                                                       device),
        "cuDevicePrimaryCtxRetain");
  Check(Lookup<CUresult (*)(CUcontext)>(driver, "cuCtxSetCurrent")(context), "cuCtxSetCurrent");
  CUmodule module = nullptr;
  if (g_setup.device_name.rfind("simgpu", 0) == 0) {
    const std::string kernels = ProgramDir() + "/libspillway_noop_kernels.so";
    Check(Lookup<CUresult (*)(CUmodule*, const char*)>(driver, "cuModuleLoad")(&module,
                                                                               kernels.c_str()),
          "cuModuleLoad");
  } else {
    Check(
        Lookup<CUresult (*)(CUmodule*, const void*)>(driver, "cuModuleLoadData")(&module, kNoopPtx),
        "cuModuleLoadData");
  }
  Check(Lookup<CUresult (*)(CUfunction*, CUmodule, const char*)>(driver, "cuModuleGetFunction")(
            &g_setup.noop, module, "noop"),
        "cuModuleGetFunction");
  Check(Lookup<CUresult (*)(CUevent*, unsigned)>(driver, "cuEventCreate")(&g_setup.done,
                                                                          CU_EVENT_DISABLE_TIMING),
        "cuEventCreate");
  Check(Lookup<CUresult (*)(CUevent, CUstream)>(driver, "cuEventRecord")(g_setup.done, nullptr),
        "cuEventRecord");

  g_setup.launch_direct = Lookup<LaunchFn>(driver, "cuLaunchKernel");
  g_setup.launch_hook = Lookup<LaunchFn>(spillway, "cuLaunchKernel");
  g_setup.event_sync_direct = Lookup<EventSyncFn>(driver, "cuEventSynchronize");
  g_setup.event_sync_hook = Lookup<EventSyncFn>(spillway, "cuEventSynchronize");
  g_setup.ctx_sync = Lookup<CtxSyncFn>(driver, "cuCtxSynchronize");
  g_setup.alloc_direct = Lookup<AllocFn>(driver, "cuMemAlloc_v2");
  g_setup.alloc_hook = Lookup<AllocFn>(spillway, "cuMemAlloc_v2");
  g_setup.free_direct = Lookup<FreeFn>(driver, "cuMemFree_v2");
  g_setup.free_hook = Lookup<FreeFn>(spillway, "cuMemFree_v2");
  if (g_setup.launch_direct == g_setup.launch_hook) Die("the hook is the driver's own function");
  Check(g_setup.ctx_sync(), "cuCtxSynchronize");
}

inline void Launch(LaunchFn fn) {
  fn(g_setup.noop, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
}

// ---- Google Benchmark runs ----

constexpr int kSyncEvery = 1024;

void BM_LaunchKernel(benchmark::State& state, LaunchFn fn) {
  int n = 0;
  for (auto _ : state) {
    Launch(fn);
    if (++n == kSyncEvery) {
      g_setup.ctx_sync();
      n = 0;
    }
  }
  g_setup.ctx_sync();
}

void BM_EventSynchronize(benchmark::State& state, EventSyncFn fn) {
  for (auto _ : state) benchmark::DoNotOptimize(fn(g_setup.done));
}

// ---- interleaved comparison ----

struct Options {
  int rounds = 501;
  int launch_batch = 200;
  int call_batch = 20000;
  int alloc_batch = 100;
};

// One allocation of 4 KiB and its free, through `alloc` and `free`.
void AllocateAndFree(AllocFn alloc, FreeFn free) {
  CUdeviceptr pointer = 0;
  if (alloc(&pointer, 4096) == CUDA_SUCCESS) free(pointer);
}

// The q-quantile (0..1) of `values`, nearest rank.
double Quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(q * static_cast<double>(values.size() - 1) + 0.5);
  return values[rank];
}
double Median(const std::vector<double>& values) { return Quantile(values, 0.5); }

template <typename Body>
double NanosPerCall(int batch, Body body) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < batch; ++i) body();
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(stop - start).count() / batch;
}

struct Comparison {
  double direct = 0;
  double hook = 0;
  double added = 0;  // median of per-round (hook - direct)
  double added_p25 = 0;
  double added_p75 = 0;
};

template <typename Direct, typename Hook, typename Between>
Comparison Compare(int rounds, int batch, Direct direct, Hook hook, Between between) {
  std::vector<double> direct_ns, hook_ns, added_ns;
  for (int round = 0; round < rounds; ++round) {
    double d = 0;
    double h = 0;
    if (round % 2 == 0) {
      d = NanosPerCall(batch, direct);
      between();
      h = NanosPerCall(batch, hook);
    } else {
      h = NanosPerCall(batch, hook);
      between();
      d = NanosPerCall(batch, direct);
    }
    between();
    direct_ns.push_back(d);
    hook_ns.push_back(h);
    added_ns.push_back(h - d);
  }
  return {Median(direct_ns), Median(hook_ns), Median(added_ns), Quantile(added_ns, 0.25),
          Quantile(added_ns, 0.75)};
}

void PrintRow(const char* call, const Comparison& c) {
  char spread[64];
  std::snprintf(spread, sizeof(spread), "%.1f .. %.1f", c.added_p25, c.added_p75);
  std::printf("%-34s %10.1f %10.1f %10.1f %20s\n", call, c.direct, c.hook, c.added, spread);
}

void RunInterleaved(const Options& options) {
  const auto sync = [] { g_setup.ctx_sync(); };
  // Warm both paths (driver resolution happens on the hook's first call).
  for (int i = 0; i < 100; ++i) {
    Launch(g_setup.launch_direct);
    Launch(g_setup.launch_hook);
  }
  sync();
  const Comparison launch = Compare(
      options.rounds, options.launch_batch, [] { Launch(g_setup.launch_direct); },
      [] { Launch(g_setup.launch_hook); }, sync);
  const Comparison event = Compare(
      options.rounds, options.call_batch, [] { g_setup.event_sync_direct(g_setup.done); },
      [] { g_setup.event_sync_hook(g_setup.done); }, [] {});
  for (int i = 0; i < 100; ++i) AllocateAndFree(g_setup.alloc_hook, g_setup.free_hook);
  const Comparison alloc = Compare(
      options.rounds, options.alloc_batch,
      [] { AllocateAndFree(g_setup.alloc_direct, g_setup.free_direct); },
      [] { AllocateAndFree(g_setup.alloc_hook, g_setup.free_hook); }, [] {});
  const char* mode = std::getenv("SPILLWAY_MODE");
  std::printf(
      "\ninterleaved comparison: device '%s', SPILLWAY_MODE=%s, %d rounds, batches of %d "
      "launches / %d calls / %d allocations\n",
      g_setup.device_name.c_str(), mode != nullptr ? mode : "(unset: run)", options.rounds,
      options.launch_batch, options.call_batch, options.alloc_batch);
  std::printf("%-34s %10s %10s %10s %20s\n", "call (median ns per call)", "direct", "hook", "added",
              "added p25 .. p75");
  PrintRow("cuLaunchKernel (no-op kernel)", launch);
  PrintRow("cuEventSynchronize (completed)", event);
  PrintRow("cuMemAlloc + cuMemFree (4 KiB)", alloc);
}

bool ParseIntFlag(std::string_view arg, std::string_view flag, int* value) {
  if (arg.substr(0, flag.size()) != flag) return false;
  *value = std::atoi(std::string(arg.substr(flag.size())).c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (ParseIntFlag(arg, "--rounds=", &options.rounds) ||
        ParseIntFlag(arg, "--launch_batch=", &options.launch_batch) ||
        ParseIntFlag(arg, "--call_batch=", &options.call_batch) ||
        ParseIntFlag(arg, "--alloc_batch=", &options.alloc_batch)) {
      continue;
    }
    std::fprintf(stderr,
                 "usage: launch_overhead_benchmark [benchmark flags] [--rounds=N] "
                 "[--launch_batch=N] [--call_batch=N] [--alloc_batch=N]\n");
    return 2;
  }
  if (options.rounds < 1 || options.launch_batch < 1 || options.call_batch < 1 ||
      options.alloc_batch < 1) {
    std::fprintf(stderr, "launch_overhead_benchmark: counts must be positive\n");
    return 2;
  }
  Initialize();
  benchmark::RegisterBenchmark("cuLaunchKernel/direct", BM_LaunchKernel, g_setup.launch_direct);
  benchmark::RegisterBenchmark("cuLaunchKernel/hook", BM_LaunchKernel, g_setup.launch_hook);
  benchmark::RegisterBenchmark("cuEventSynchronize/direct", BM_EventSynchronize,
                               g_setup.event_sync_direct);
  benchmark::RegisterBenchmark("cuEventSynchronize/hook", BM_EventSynchronize,
                               g_setup.event_sync_hook);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  RunInterleaved(options);
  return 0;
}

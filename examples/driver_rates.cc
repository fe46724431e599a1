// What demand faults and kernel launches cost on this device, through the driver API with the
// demo kernels: the GPU check's `rates` step runs it without and with spillway (the hook's cost
// per launch is the difference), and scripts/gpu_calibration.py takes its figures for the
// calibration's fault batch and launch cost (docs/calibration.md). Prints a table, then one
// `result: {json}` line.
//
//   driver_rates [--bytes SIZE] [--launches N]
//
// Faults: a kernel reads and writes every word of SIZE of managed memory the host wrote (so every
// page faults in with its data), then again with all of it resident; the difference is what the
// faults cost. The same memory prefetched to the device gives the link's rate, and the fault
// batch is what the faults cost beyond moving their bytes at that rate, per 2 MiB (the cost
// model's batch: common/cost_model.h). Launches: N launches of the same kernel over no words,
// timed on the host (the calling thread's time per cuLaunchKernel) and on the device.
//
// A managed pool (whether the engine should prefetch a fresh stream-ordered allocation before
// its first kernel): 64 blocks of 1 MiB from a managed memory pool that keeps what is freed,
// each touched by one kernel: new (first touch), freed and allocated again (does a block handed
// back keep its pages on the device?), the same with each block prefetched to the device first
// (the calling thread's time per prefetch call, and the prefetches' device time), and new again
// after trimming the pool, prefetched first. Skipped, with one line, where the driver makes no
// managed pool (before CUDA 13.0).
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>

#include "common/command_line.h"
#include "common/size.h"
#include "examples/example_util.h"

namespace {

using spillway_demo::kExitError;
using spillway_demo::kExitOk;

constexpr uint64_t kBatchBytes = uint64_t{2} << 20;  // the cost model's fault batch

struct Options {
  uint64_t bytes = uint64_t{256} << 20;
  long launches = 2000;
};

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: driver_rates [--bytes SIZE] [--launches N]\n"
               "  What demand faults cost on SIZE of managed memory (256MiB, at least 2MiB) and\n"
               "  what a kernel launch costs the calling thread, over N launches (2000).\n");
}

[[noreturn]] void Bad(const std::string& why) {
  spillway_demo::BadCommandLine("driver_rates", why, Usage);
}

Options ParseOptions(int argc, char** argv) {
  Options options;
  std::string bytes, launches;
  spillway::CommandLine cl(
      {.name = "driver_rates", .usage = "", .unknown_option = "unknown option '{}'"});
  cl.Option("--bytes", &bytes);
  cl.Option("--launches", &launches);
  const spillway::ParsedArguments parsed = cl.Parse(argc, argv);
  spillway_demo::ExitIfHelp(parsed.help, Usage);
  if (!parsed.error.empty()) Bad(parsed.error);
  if (cl.Given("--bytes")) {
    const auto size = spillway::ParseSize(bytes);
    if (!size.ok()) Bad("--bytes: " + std::string(size.status().message()));
    if (*size < kBatchBytes) Bad("--bytes " + bytes + " is less than 2MiB");
    options.bytes = *size / kBatchBytes * kBatchBytes;
  }
  if (cl.Given("--launches")) {
    char* end = nullptr;
    options.launches = std::strtol(launches.c_str(), &end, 10);
    if (end == launches.c_str() || *end != '\0' || options.launches < 1 ||
        options.launches > 10000000) {
      Bad("--launches '" + launches + "' is not a whole number from 1 to 10000000");
    }
  }
  return options;
}

CUmemLocation Where(bool device) {
  CUmemLocation location{};
  location.type = device ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST;
  location.id = 0;
  return location;
}

// The managed pool's figures (see the top of the file); `made` false where no pool was made.
struct PoolFigures {
  bool made = false;
  int reused_blocks = 0;               // blocks allocated again at an address freed before
  double new_touch_ms = 0;             // the kernels over new blocks (first touch)
  double reused_touch_ms = 0;          // over blocks freed and allocated again, not prefetched
  double reused_prefetch_ms = 0;       // the prefetches of such blocks, on the device
  double reused_prefetch_call_us = 0;  // the calling thread's time per prefetch call
  double reused_prefetched_touch_ms = 0;
  double trimmed_prefetch_ms = 0;  // new blocks after a trim, prefetched
  double trimmed_prefetched_touch_ms = 0;
  double resident_touch_ms = 0;  // the kernels once every block is resident
};

constexpr int kPoolBlocks = 64;
constexpr uint64_t kPoolBlockBytes = uint64_t{1} << 20;

PoolFigures MeasurePool(CUdevice device, CUfunction update, CUstream stream) {
  PoolFigures figures;
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_MANAGED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device;
  CUmemoryPool pool = nullptr;
  if (const CUresult made = cuMemPoolCreate(&pool, &props); made != CUDA_SUCCESS) {
    std::printf("managed pool: none made (error %d); its figures are skipped\n", made);
    return figures;
  }
  figures.made = true;
  cuuint64_t keep = ~cuuint64_t{0};  // freed memory stays in the pool, as frameworks set it
  DEMO_CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
  CUevent begin = nullptr, middle = nullptr, end = nullptr;
  DEMO_CHECK(cuEventCreate(&begin, CU_EVENT_DEFAULT));
  DEMO_CHECK(cuEventCreate(&middle, CU_EVENT_DEFAULT));
  DEMO_CHECK(cuEventCreate(&end, CU_EVENT_DEFAULT));
  CUdeviceptr blocks[kPoolBlocks] = {}, before[kPoolBlocks] = {};
  uint64_t words = 0, count = kPoolBlockBytes / sizeof(uint32_t);
  uint32_t mul = 3, add = 1;
  void* params[] = {&words, &count, &mul, &add};
  auto ms = [](CUevent from, CUevent to) {
    float elapsed = 0;
    DEMO_CHECK(cuEventElapsedTime(&elapsed, from, to));
    return static_cast<double>(elapsed);
  };
  // One kernel over each block, after recording `from`; returns `from` once they have run.
  auto touch_all = [&](CUevent from) {
    DEMO_CHECK(cuEventRecord(from, stream));
    for (CUdeviceptr block : blocks) {
      words = block;
      DEMO_CHECK(cuLaunchKernel(update, 64, 1, 1, 256, 1, 1, 0, stream, params, nullptr));
    }
    DEMO_CHECK(cuEventRecord(end, stream));
    DEMO_CHECK(cuStreamSynchronize(stream));
    return from;
  };
  // One round: allocate every block, optionally prefetch each (timed on the host), touch each.
  // Returns {prefetch ms on the device, touch ms}; the blocks stay allocated.
  auto round = [&](bool prefetch, double* call_us) {
    for (CUdeviceptr& block : blocks) {
      DEMO_CHECK(cuMemAllocFromPoolAsync(&block, kPoolBlockBytes, pool, stream));
    }
    DEMO_CHECK(cuEventRecord(begin, stream));
    if (prefetch) {
      const auto start = std::chrono::steady_clock::now();
      for (CUdeviceptr block : blocks) {
        DEMO_CHECK(cuMemPrefetchAsync(block, kPoolBlockBytes, Where(true), 0, stream));
      }
      const auto issued = std::chrono::steady_clock::now();
      if (call_us != nullptr) {
        *call_us = std::chrono::duration<double, std::micro>(issued - start).count() / kPoolBlocks;
      }
    }
    const double prefetch_ms = ms(begin, touch_all(middle));
    return std::make_pair(prefetch_ms, ms(middle, end));
  };
  auto free_all = [&] {
    for (int b = 0; b < kPoolBlocks; ++b) {
      before[b] = blocks[b];
      DEMO_CHECK(cuMemFreeAsync(blocks[b], stream));
    }
    DEMO_CHECK(cuStreamSynchronize(stream));
  };
  figures.new_touch_ms = round(false, nullptr).second;
  free_all();
  figures.reused_touch_ms = round(false, nullptr).second;
  for (CUdeviceptr block : blocks) {
    figures.reused_blocks += std::count(before, before + kPoolBlocks, block) != 0 ? 1 : 0;
  }
  free_all();
  std::tie(figures.reused_prefetch_ms, figures.reused_prefetched_touch_ms) =
      round(true, &figures.reused_prefetch_call_us);
  free_all();
  DEMO_CHECK(cuMemPoolTrimTo(pool, 0));
  std::tie(figures.trimmed_prefetch_ms, figures.trimmed_prefetched_touch_ms) = round(true, nullptr);
  // Once more over the same blocks, all resident: the kernels' own time.
  figures.resident_touch_ms = ms(touch_all(begin), end);
  free_all();
  DEMO_CHECK(cuMemPoolDestroy(pool));
  for (CUevent e : {begin, middle, end}) DEMO_CHECK(cuEventDestroy(e));
  return figures;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = ParseOptions(argc, argv);
  const spillway_demo::OpenedDevice opened = spillway_demo::OpenDevice();
  const CUmodule module = spillway_demo::LoadDemoKernels(opened.device);
  const CUfunction update = spillway_demo::GetKernel(module, "update");
  CUstream stream = nullptr;
  DEMO_CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUevent events[8];
  for (CUevent& e : events) DEMO_CHECK(cuEventCreate(&e, CU_EVENT_DEFAULT));
  auto elapsed_ms = [&](int from, int to) {
    float ms = 0;
    DEMO_CHECK(cuEventElapsedTime(&ms, events[from], events[to]));
    return static_cast<double>(ms);
  };
  uint64_t words = 0, count = options.bytes / sizeof(uint32_t);
  uint32_t mul = 3, add = 1;
  void* params[] = {&words, &count, &mul, &add};
  auto launch = [&] {
    DEMO_CHECK(cuLaunchKernel(update, 1024, 1, 1, 256, 1, 1, 0, stream, params, nullptr));
  };

  // Faults: the host writes every page, the kernel then faults them all in, then runs resident.
  CUdeviceptr data = 0;
  DEMO_CHECK(cuMemAllocManaged(&data, options.bytes, CU_MEM_ATTACH_GLOBAL));
  words = data;
  std::memset(reinterpret_cast<void*>(data), 1, options.bytes);
  DEMO_CHECK(cuMemPrefetchAsync(data, options.bytes, Where(false), 0, stream));
  DEMO_CHECK(cuStreamSynchronize(stream));
  DEMO_CHECK(cuEventRecord(events[0], stream));
  launch();
  DEMO_CHECK(cuEventRecord(events[1], stream));
  launch();
  DEMO_CHECK(cuEventRecord(events[2], stream));
  // The link: the same bytes to the host and back to the device by prefetch.
  DEMO_CHECK(cuMemPrefetchAsync(data, options.bytes, Where(false), 0, stream));
  DEMO_CHECK(cuEventRecord(events[3], stream));
  DEMO_CHECK(cuMemPrefetchAsync(data, options.bytes, Where(true), 0, stream));
  DEMO_CHECK(cuEventRecord(events[4], stream));
  DEMO_CHECK(cuStreamSynchronize(stream));
  const double fault_ms = elapsed_ms(0, 1), resident_ms = elapsed_ms(1, 2);
  const double prefetch_ms = elapsed_ms(3, 4);
  DEMO_CHECK(cuMemFree(data));

  // Launches over no words (a warm-up first: module loading, the first launch's setup).
  words = 0;
  count = 0;
  for (int i = 0; i < 100; ++i) launch();
  DEMO_CHECK(cuStreamSynchronize(stream));
  DEMO_CHECK(cuEventRecord(events[5], stream));
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < options.launches; ++i) launch();
  const auto issued = std::chrono::steady_clock::now();
  DEMO_CHECK(cuEventRecord(events[6], stream));
  DEMO_CHECK(cuStreamSynchronize(stream));
  const double n = static_cast<double>(options.launches);
  const double host_us = std::chrono::duration<double, std::micro>(issued - start).count() / n;
  const double device_us = elapsed_ms(5, 6) * 1e3 / n;

  const PoolFigures pool = MeasurePool(opened.device, update, stream);

  const double bytes = static_cast<double>(options.bytes);
  const double extra_s = std::max(0.0, (fault_ms - resident_ms) * 1e-3);
  const double h2d_gbps = prefetch_ms > 0 ? bytes / (prefetch_ms * 1e-3) / 1e9 : 0;
  const double fault_gbps = extra_s > 0 ? bytes / extra_s / 1e9 : 0;
  // Beyond the bytes' time at the prefetch rate, per 2 MiB batch.
  const double moving_s = h2d_gbps > 0 ? bytes / (h2d_gbps * 1e9) : 0;
  const double batch_us = std::max(0.0, extra_s - moving_s) / (bytes / kBatchBytes) * 1e6;
  std::printf("device %s: %s of managed memory, %ld launches\n", opened.name,
              spillway::FormatSize(options.bytes).c_str(), options.launches);
  std::printf("%-34s %12s\n", "figure", "value");
  std::printf("%-34s %12.3f\n", "kernel, every page faulting (ms)", fault_ms);
  std::printf("%-34s %12.3f\n", "kernel, all resident (ms)", resident_ms);
  std::printf("%-34s %12.3f\n", "prefetch to the device (ms)", prefetch_ms);
  std::printf("%-34s %12.2f\n", "prefetch rate (GB/s)", h2d_gbps);
  std::printf("%-34s %12.2f\n", "demand-fault rate (GB/s)", fault_gbps);
  std::printf("%-34s %12.2f\n", "fault batch beyond the bytes (us)", batch_us);
  std::printf("%-34s %12.3f\n", "launch, calling thread (us)", host_us);
  std::printf("%-34s %12.3f\n", "launch, device (us)", device_us);
  std::string pool_json = "null";
  if (pool.made) {
    std::printf("managed pool, %d blocks of 1 MiB, one kernel each:\n", kPoolBlocks);
    const std::pair<const char*, double> rows[] = {
        {"  new blocks, kernels (ms)", pool.new_touch_ms},
        {"  reused blocks, kernels (ms)", pool.reused_touch_ms},
        {"  reused, prefetches (ms)", pool.reused_prefetch_ms},
        {"  reused, prefetch call (us)", pool.reused_prefetch_call_us},
        {"  reused, prefetched, kernels (ms)", pool.reused_prefetched_touch_ms},
        {"  trimmed, prefetches (ms)", pool.trimmed_prefetch_ms},
        {"  trimmed, prefetched, kernels (ms)", pool.trimmed_prefetched_touch_ms},
        {"  all resident, kernels (ms)", pool.resident_touch_ms}};
    for (const auto& [name, value] : rows) std::printf("%-34s %12.3f\n", name, value);
    std::printf("%-34s %12d\n", "  blocks reused at their address", pool.reused_blocks);
    char buffer[512];
    std::snprintf(buffer, sizeof(buffer),
                  "{\"blocks\": %d, \"block_bytes\": %" PRIu64
                  ", \"reused_blocks\": %d, \"new_touch_ms\": %.6f, "
                  "\"reused_touch_ms\": %.6f, \"reused_prefetch_ms\": %.6f, "
                  "\"reused_prefetch_call_us\": %.4f, \"reused_prefetched_touch_ms\": %.6f, "
                  "\"trimmed_prefetch_ms\": %.6f, \"trimmed_prefetched_touch_ms\": %.6f, "
                  "\"resident_touch_ms\": %.6f}",
                  kPoolBlocks, kPoolBlockBytes, pool.reused_blocks, pool.new_touch_ms,
                  pool.reused_touch_ms, pool.reused_prefetch_ms, pool.reused_prefetch_call_us,
                  pool.reused_prefetched_touch_ms, pool.trimmed_prefetch_ms,
                  pool.trimmed_prefetched_touch_ms, pool.resident_touch_ms);
    pool_json = buffer;
  }
  std::printf("result: {\"bytes\": %" PRIu64
              ", \"fault_ms\": %.6f, \"resident_ms\": %.6f, \"prefetch_ms\": %.6f, "
              "\"h2d_prefetch_gbps\": %.4f, \"fault_gbps\": %.4f, \"fault_batch_us\": %.4f, "
              "\"launches\": %ld, \"launch_host_us\": %.4f, \"launch_device_us\": %.4f, "
              "\"managed_pool\": %s}\n",
              options.bytes, fault_ms, resident_ms, prefetch_ms, h2d_gbps, fault_gbps, batch_us,
              options.launches, host_us, device_us, pool_json.c_str());
  for (CUevent e : events) DEMO_CHECK(cuEventDestroy(e));
  DEMO_CHECK(cuStreamDestroy(stream));
  DEMO_CHECK(cuDevicePrimaryCtxRelease(opened.device));
  return kExitOk;
}

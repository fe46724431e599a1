// A multi-threaded, multi-stream driver-API workload: each thread owns a non-blocking stream and
// its buffers (one from cuMemAlloc, one stream-ordered from cuMemAllocAsync), uploads data,
// runs kernels (both launch forms), and a collector stream waits on every thread's event before
// summing. Prints one checksum per thread and verifies each against the host.
//
//   multistream [--threads N] [--words N] [--rounds N]
#include <cuda.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/command_line.h"
#include "examples/example_util.h"
#include "examples/kernels/demo_kernels.h"

namespace spillway_demo {
namespace {

struct Options {
  int threads = 4;
  uint64_t words = 1u << 20;
  int rounds = 4;
};

// `flag`'s value, which must be positive.
long Positive(const char* flag, const std::string& text) {
  const long value = std::atol(text.c_str());
  if (value <= 0) {
    std::fprintf(stderr, "multistream: %s must be positive\n", flag);
    std::exit(kExitError);
  }
  return value;
}

Options ParseOptions(int argc, char** argv) {
  Options options;
  std::string threads, words, rounds;
  spillway::CommandLine cl(
      {.name = "multistream", .usage = "", .unknown_option = "unknown option '{}'"});
  cl.Option("--threads", &threads);
  cl.Option("--words", &words);
  cl.Option("--rounds", &rounds);
  const spillway::ParsedArguments parsed = cl.Parse(argc, argv);
  if (parsed.help) {
    std::printf("usage: multistream [--threads N] [--words N] [--rounds N]\n");
    std::exit(kExitOk);
  }
  if (!parsed.error.empty()) {
    std::fprintf(stderr, "multistream: %s\n", parsed.error.c_str());
    std::exit(kExitError);
  }
  if (cl.Given("--threads")) options.threads = static_cast<int>(Positive("--threads", threads));
  if (cl.Given("--words")) options.words = static_cast<uint64_t>(Positive("--words", words));
  if (cl.Given("--rounds")) options.rounds = static_cast<int>(Positive("--rounds", rounds));
  return options;
}

struct Worker {
  CUstream stream = nullptr;
  CUevent done = nullptr;
  CUdeviceptr uploaded = 0;  // cuMemAlloc, filled from the host
  CUdeviceptr computed = 0;  // cuMemAllocAsync, filled by a kernel
};

uint32_t RoundMul(int thread, int round) {
  return 69069u + 4u * static_cast<uint32_t>(thread + round);
}
uint32_t RoundAdd(int thread, int round) {
  return 12345u + static_cast<uint32_t>(thread * 7 + round);
}

// What thread t's two buffers sum to after all rounds.
uint64_t Expected(int t, const Options& options) {
  uint64_t sum = 0;
  for (uint64_t i = 0; i < options.words; ++i) {
    uint32_t uploaded = static_cast<uint32_t>(i * 3 + t);
    uint32_t computed = Mix(i, 1000u + static_cast<uint32_t>(t));
    for (int r = 0; r < options.rounds; ++r) {
      uploaded = uploaded * RoundMul(t, r) + RoundAdd(t, r);
      computed = computed * RoundMul(t, r) + RoundAdd(t, r);
    }
    sum += uploaded + static_cast<uint64_t>(computed);
  }
  return sum;
}

void LaunchUpdate(CUfunction update, CUstream stream, CUdeviceptr words, uint64_t count,
                  uint32_t mul, uint32_t add, bool packed) {
  if (packed) {  // the `extra` form: one packed argument buffer
    WordsArgs args{words, count, mul, add};
    size_t size = sizeof(args);
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    DEMO_CHECK(cuLaunchKernel(update, 256, 1, 1, 256, 1, 1, 0, stream, nullptr, extra));
    return;
  }
  void* params[] = {&words, &count, &mul, &add};
  DEMO_CHECK(cuLaunchKernel(update, 256, 1, 1, 256, 1, 1, 0, stream, params, nullptr));
}

void RunWorker(int t, const Options& options, CUcontext context, CUmodule module, Worker& w) {
  DEMO_CHECK(cuCtxSetCurrent(context));
  const CUfunction fill = GetKernel(module, "fill");
  const CUfunction update = GetKernel(module, "update");
  const size_t bytes = options.words * sizeof(uint32_t);
  DEMO_CHECK(cuStreamCreate(&w.stream, CU_STREAM_NON_BLOCKING));
  DEMO_CHECK(cuEventCreate(&w.done, CU_EVENT_DEFAULT));
  DEMO_CHECK(cuMemAlloc(&w.uploaded, bytes));
  DEMO_CHECK(cuMemAllocAsync(&w.computed, bytes, w.stream));

  std::vector<uint32_t> host(options.words);
  for (uint64_t i = 0; i < options.words; ++i) host[i] = static_cast<uint32_t>(i * 3 + t);
  DEMO_CHECK(cuMemcpyHtoDAsync(w.uploaded, host.data(), bytes, w.stream));
  uint64_t words = w.computed, count = options.words;
  uint32_t seed = 1000u + static_cast<uint32_t>(t), unused = 0;
  void* params[] = {&words, &count, &seed, &unused};
  DEMO_CHECK(cuLaunchKernel(fill, 256, 1, 1, 256, 1, 1, 0, w.stream, params, nullptr));
  for (int r = 0; r < options.rounds; ++r) {
    LaunchUpdate(update, w.stream, w.uploaded, count, RoundMul(t, r), RoundAdd(t, r), r % 2 == 1);
    LaunchUpdate(update, w.stream, w.computed, count, RoundMul(t, r), RoundAdd(t, r), r % 2 == 0);
  }
  DEMO_CHECK(cuEventRecord(w.done, w.stream));
  // The host buffer is released when this thread returns: the upload must have happened.
  DEMO_CHECK(cuStreamSynchronize(w.stream));
}

int Run(const Options& options) {
  DEMO_CHECK(cuInit(0));
  CUdevice device;
  DEMO_CHECK(cuDeviceGet(&device, 0));
  CUcontext context;
  DEMO_CHECK(cuDevicePrimaryCtxRetain(&context, device));
  DEMO_CHECK(cuCtxSetCurrent(context));
  const CUmodule module = LoadDemoKernels(device);
  const CUfunction checksum = GetKernel(module, "checksum");

  std::vector<Worker> workers(static_cast<size_t>(options.threads));
  std::vector<std::thread> threads;
  for (int t = 0; t < options.threads; ++t) {
    threads.emplace_back(RunWorker, t, std::cref(options), context, module, std::ref(workers[t]));
  }
  for (auto& thread : threads) thread.join();

  // The collector stream sums every thread's buffers once that thread's event has fired.
  CUstream collector;
  DEMO_CHECK(cuStreamCreate(&collector, CU_STREAM_NON_BLOCKING));
  CUdeviceptr sums;
  DEMO_CHECK(cuMemAlloc(&sums, sizeof(uint64_t) * workers.size()));
  DEMO_CHECK(cuMemsetD32Async(sums, 0, 2 * workers.size(), collector));
  for (size_t t = 0; t < workers.size(); ++t) {
    DEMO_CHECK(cuStreamWaitEvent(collector, workers[t].done, 0));
    for (CUdeviceptr buffer : {workers[t].uploaded, workers[t].computed}) {
      uint64_t words = buffer, count = options.words, out = sums + t * sizeof(uint64_t);
      void* params[] = {&words, &count, &out};
      DEMO_CHECK(cuLaunchKernel(checksum, 256, 1, 1, 256, 1, 1, 0, collector, params, nullptr));
    }
  }
  std::vector<uint64_t> results(workers.size());
  DEMO_CHECK(cuMemcpyDtoHAsync(results.data(), sums, sizeof(uint64_t) * workers.size(), collector));
  DEMO_CHECK(cuStreamSynchronize(collector));

  int status = kExitOk;
  for (size_t t = 0; t < workers.size(); ++t) {
    const uint64_t expected = Expected(static_cast<int>(t), options);
    std::printf("thread %zu checksum 0x%016" PRIx64 " %s\n", t, results[t],
                results[t] == expected ? "ok" : "WRONG");
    if (results[t] != expected) status = kExitWrongResult;
    DEMO_CHECK(cuMemFreeAsync(workers[t].computed, collector));
    DEMO_CHECK(cuMemFree(workers[t].uploaded));
    DEMO_CHECK(cuEventDestroy(workers[t].done));
    DEMO_CHECK(cuStreamDestroy(workers[t].stream));
  }
  DEMO_CHECK(cuStreamSynchronize(collector));
  DEMO_CHECK(cuMemFree(sums));
  DEMO_CHECK(cuStreamDestroy(collector));
  DEMO_CHECK(cuModuleUnload(module));
  DEMO_CHECK(cuDevicePrimaryCtxRelease(device));
  return status;
}

}  // namespace
}  // namespace spillway_demo

int main(int argc, char** argv) {
  return spillway_demo::Run(spillway_demo::ParseOptions(argc, argv));
}

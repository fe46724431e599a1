// The demo workload: allocates several times the device memory with cuMemAlloc, runs a few passes
// of kernels over all of it, and checks the checksum against one computed on the host. Without
// spillway it stops with out-of-memory; under `spillway run` it is meant to finish. With
// --overwrite, once every buffer is filled, each is overwritten from its second MiB on by a memset
// (as frameworks zero-initialize a buffer) before the passes; with --overwrite-with copy by a copy
// from the host instead (as a checkpoint is loaded into tensors that exist).
//
//   oversubscribe [--factor F] [--bytes SIZE] [--buffer SIZE] [--passes N] [--overwrite]
//                 [--overwrite-with memset|copy]
#include <cuda.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/command_line.h"
#include "common/size.h"
#include "examples/example_util.h"
#include "examples/kernels/demo_kernels.h"

namespace spillway_demo {
namespace {

struct Options {
  double factor = 3.0;
  uint64_t bytes = 0;  // 0: factor × the device memory cuMemGetInfo reports
  uint64_t buffer = 64ull << 20;
  int passes = 3;
  bool overwrite = false;
  bool overwrite_by_copy = false;  // --overwrite-with copy
};

// --overwrite: the words from here on are set to OverwriteValue(buffer) by cuMemsetD32 (or
// cuMemcpyHtoD).
constexpr uint64_t kOverwriteFromWord = (1ull << 20) / sizeof(uint32_t);
uint32_t OverwriteValue(size_t buffer) { return 0x5eed0000u + static_cast<uint32_t>(buffer); }

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: oversubscribe [--factor F] [--bytes SIZE] [--buffer SIZE] [--passes N]\n"
               "                     [--overwrite] [--overwrite-with memset|copy]\n"
               "  Allocates F times the device memory (default 3) in buffers of SIZE (64MiB),\n"
               "  runs N passes of kernels over it (3) and verifies a checksum. --overwrite:\n"
               "  once filled, each buffer is set from its second MiB on by a memset;\n"
               "  --overwrite-with copy: by a copy from the host (implies --overwrite).\n");
}

uint64_t SizeArg(const char* flag, const char* text) {
  const auto size = spillway::ParseSize(text);
  if (!size.ok() || *size == 0) {
    std::fprintf(stderr, "oversubscribe: %s: %s\n", flag,
                 size.ok() ? "must be positive" : std::string(size.status().message()).c_str());
    std::exit(kExitError);
  }
  return *size;
}

Options ParseOptions(int argc, char** argv) {
  Options options;
  std::string factor, bytes, buffer, passes, with;
  spillway::CommandLine cl(
      {.name = "oversubscribe", .usage = "", .unknown_option = "unknown option '{}'"});
  cl.Flag("--overwrite", &options.overwrite);
  cl.Option("--factor", &factor);
  cl.Option("--bytes", &bytes);
  cl.Option("--buffer", &buffer);
  cl.Option("--passes", &passes);
  cl.Option("--overwrite-with", &with);
  const spillway::ParsedArguments parsed = cl.Parse(argc, argv);
  spillway_demo::ExitIfHelp(parsed.help, Usage);
  if (!parsed.error.empty()) spillway_demo::BadCommandLine("oversubscribe", parsed.error, Usage);
  if (cl.Given("--factor")) options.factor = std::atof(factor.c_str());
  if (cl.Given("--bytes")) options.bytes = SizeArg("--bytes", bytes.c_str());
  if (cl.Given("--buffer")) options.buffer = SizeArg("--buffer", buffer.c_str());
  if (cl.Given("--passes")) options.passes = std::atoi(passes.c_str());
  if (cl.Given("--overwrite-with")) {
    if (with != "memset" && with != "copy") {
      std::fprintf(stderr, "oversubscribe: --overwrite-with: '%s' is not memset or copy\n",
                   with.c_str());
      std::exit(kExitError);
    }
    options.overwrite = true;
    options.overwrite_by_copy = with == "copy";
  }
  if (options.factor <= 0 || options.passes < 0) {
    std::fprintf(stderr, "oversubscribe: --factor must be > 0 and --passes >= 0\n");
    std::exit(kExitError);
  }
  return options;
}

uint32_t PassMul(int pass) { return 1664525u + 2u * static_cast<uint32_t>(pass); }
uint32_t PassAdd(int pass) { return 1013904223u + static_cast<uint32_t>(pass); }

// The checksum the device must produce, computed on the host (two threads).
uint64_t ExpectedChecksum(size_t buffers, uint64_t words_per_buffer, int passes, bool overwrite) {
  std::vector<uint64_t> partial(2, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < partial.size(); ++t) {
    threads.emplace_back([&, t] {
      for (size_t b = t; b < buffers; b += partial.size()) {
        for (uint64_t i = 0; i < words_per_buffer; ++i) {
          uint32_t v = overwrite && i >= kOverwriteFromWord ? OverwriteValue(b)
                                                            : Mix(i, static_cast<uint32_t>(b));
          for (int p = 0; p < passes; ++p) v = v * PassMul(p) + PassAdd(p);
          partial[t] += v;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return partial[0] + partial[1];
}

void Launch(CUfunction function, void** params) {
  DEMO_CHECK(cuLaunchKernel(function, 1024, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
}

int Run(const Options& options) {
  const OpenedDevice opened = OpenDevice();
  const CUdevice device = opened.device;
  const char* name = opened.name;
  const size_t total_bytes = opened.total_bytes;

  const uint64_t target =
      options.bytes != 0 ? options.bytes
                         : static_cast<uint64_t>(options.factor * static_cast<double>(total_bytes));
  const uint64_t words_per_buffer = options.buffer / sizeof(uint32_t);
  const size_t buffers = static_cast<size_t>((target + options.buffer - 1) / options.buffer);
  std::printf("device: %s, %s of memory; workload: %zu buffers of %s = %s (%.2fx)\n", name,
              spillway::FormatSize(total_bytes).c_str(), buffers,
              spillway::FormatSize(options.buffer).c_str(),
              spillway::FormatSize(buffers * options.buffer).c_str(),
              static_cast<double>(buffers * options.buffer) / static_cast<double>(total_bytes));

  const CUmodule module = LoadDemoKernels(device);
  const CUfunction fill = GetKernel(module, "fill");
  const CUfunction update = GetKernel(module, "update");
  const CUfunction checksum = GetKernel(module, "checksum");

  std::vector<CUdeviceptr> data(buffers);
  for (size_t b = 0; b < buffers; ++b) {
    const CUresult result = cuMemAlloc(&data[b], options.buffer);
    if (result == CUDA_ERROR_OUT_OF_MEMORY) {
      std::printf(
          "out of memory: the device held %s of the %s this workload needs "
          "(cuMemAlloc of buffer %zu returned CUDA_ERROR_OUT_OF_MEMORY)\n",
          spillway::FormatSize(b * options.buffer).c_str(),
          spillway::FormatSize(buffers * options.buffer).c_str(), b);
      return kExitOutOfMemory;
    }
    if (result != CUDA_SUCCESS) Fail("cuMemAlloc", result);
  }

  for (size_t b = 0; b < buffers; ++b) {
    uint64_t words = data[b], count = words_per_buffer;
    uint32_t seed = static_cast<uint32_t>(b), unused = 0;
    void* params[] = {&words, &count, &seed, &unused};
    Launch(fill, params);
  }
  for (size_t b = 0; options.overwrite && b < buffers; ++b) {
    if (words_per_buffer <= kOverwriteFromWord) continue;
    const CUdeviceptr from = data[b] + kOverwriteFromWord * sizeof(uint32_t);
    const uint64_t words = words_per_buffer - kOverwriteFromWord;
    if (options.overwrite_by_copy) {
      const std::vector<uint32_t> host(words, OverwriteValue(b));
      DEMO_CHECK(cuMemcpyHtoD(from, host.data(), words * sizeof(uint32_t)));
    } else {
      DEMO_CHECK(cuMemsetD32(from, OverwriteValue(b), words));
    }
  }
  for (int p = 0; p < options.passes; ++p) {
    for (size_t b = 0; b < buffers; ++b) {
      uint64_t words = data[b], count = words_per_buffer;
      uint32_t mul = PassMul(p), add = PassAdd(p);
      void* params[] = {&words, &count, &mul, &add};
      Launch(update, params);
    }
  }
  CUdeviceptr sum_device;
  DEMO_CHECK(cuMemAlloc(&sum_device, sizeof(uint64_t)));
  DEMO_CHECK(cuMemsetD32(sum_device, 0, 2));
  for (size_t b = 0; b < buffers; ++b) {
    uint64_t words = data[b], count = words_per_buffer, out = sum_device;
    void* params[] = {&words, &count, &out};
    Launch(checksum, params);
  }
  uint64_t sum = 0;
  DEMO_CHECK(cuMemcpyDtoH(&sum, sum_device, sizeof(sum)));
  DEMO_CHECK(cuCtxSynchronize());

  const uint64_t expected =
      ExpectedChecksum(buffers, words_per_buffer, options.passes, options.overwrite);
  for (const CUdeviceptr buffer : data) DEMO_CHECK(cuMemFree(buffer));
  DEMO_CHECK(cuMemFree(sum_device));
  DEMO_CHECK(cuModuleUnload(module));
  DEMO_CHECK(cuDevicePrimaryCtxRelease(device));
  if (sum != expected) {
    std::printf("checksum 0x%016" PRIx64 " is WRONG: expected 0x%016" PRIx64 "\n", sum, expected);
    return kExitWrongResult;
  }
  std::printf("checksum 0x%016" PRIx64 " matches the host's: %d passes over %s done\n", sum,
              options.passes, spillway::FormatSize(buffers * options.buffer).c_str());
  return kExitOk;
}

}  // namespace
}  // namespace spillway_demo

int main(int argc, char** argv) {
  return spillway_demo::Run(spillway_demo::ParseOptions(argc, argv));
}

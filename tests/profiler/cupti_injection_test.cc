// libspillway_cupti_injection.so (profiler/cupti/cupti_injection.cc) with the fake libcupti: a
// child process calls InitializeInjection() as the CUDA driver would, CUPTI "delivers" a kernel,
// a UVM migration and an allocation, the child exits, and its trace must hold them. Also checks
// that the library exports nothing but InitializeInjection.
#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <variant>

#include "profiler/trace/trace_reader.h"

namespace spillway::trace {
namespace {

// In the child: start the injection, let the fake CUPTI produce records, exit (the injection's
// exit handler flushes CUPTI and closes the trace).
[[noreturn]] void RunChild(const std::string& trace_path) {
  setenv("SPILLWAY_CUPTI", FAKE_CUPTI_PATH, 1);
  setenv("SPILLWAY_CUPTI_TRACE", trace_path.c_str(), 1);
  void* injection = dlopen(INJECTION_PATH, RTLD_NOW | RTLD_LOCAL);
  void* fake = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_LOCAL);
  if (injection == nullptr || fake == nullptr) _exit(10);
  auto initialize = reinterpret_cast<int (*)()>(dlsym(injection, "InitializeInjection"));
  auto queue_kernel =
      reinterpret_cast<void (*)(uint32_t, uint64_t, uint64_t, uint32_t, const char*)>(
          dlsym(fake, "FakeCuptiQueueKernel"));
  auto queue_uvm = reinterpret_cast<void (*)(int, uint64_t, uint64_t, uint64_t, uint64_t, uint32_t,
                                             uint32_t, uint32_t)>(dlsym(fake, "FakeCuptiQueueUvm"));
  auto queue_memory = reinterpret_cast<void (*)(int, int, uint64_t, uint64_t, uint64_t)>(
      dlsym(fake, "FakeCuptiQueueMemory"));
  auto ahead = reinterpret_cast<uint64_t (*)()>(dlsym(fake, "FakeCuptiClockAheadNs"));
  if (initialize == nullptr || queue_kernel == nullptr || queue_uvm == nullptr ||
      queue_memory == nullptr || ahead == nullptr) {
    _exit(11);
  }
  if (initialize() != 1) _exit(12);
  if (initialize() != 1) _exit(13);  // a second call changes nothing
  const uint64_t t = ahead() + 1000000;
  queue_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
               0x10000, 1 << 20, t);
  queue_kernel(31, t + 100, t + 900, 0, "_Z6kernelPf");
  queue_uvm(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD, 4096, t + 200, t + 300,
            0x10000, 0, 0, CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_COHERENCE);
  queue_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
               0x10000, 1 << 20, t + 1000);
  exit(0);
}

TEST(CuptiInjection, WritesWhatCuptiDeliversToItsOwnTrace) {
  const std::string path =
      ::testing::TempDir() + "cupti_injection_test." + std::to_string(getpid()) + ".trace";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) RunChild(path);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);

  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->header().pid, static_cast<uint32_t>(child));
  int launches = 0, times = 0, uvm = 0, allocs = 0, frees = 0;
  uint64_t alloc_id = 0;
  std::string kernel_name;
  Record record;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    if (auto* s = std::get_if<StringRecord>(&record)) kernel_name = std::string(s->text);
    if (auto* l = std::get_if<LaunchRecord>(&record)) {
      ++launches;
      EXPECT_EQ(l->correlation_id, 31u);  // CUPTI's id: the injection has no launches of its own
      EXPECT_EQ(l->grid[0], 4u);
      EXPECT_NE(l->function_name, 0u);
    }
    if (auto* k = std::get_if<KernelTimeRecord>(&record)) {
      ++times;
      EXPECT_EQ(k->correlation_id, 31u);
      EXPECT_EQ(k->end_ns - k->start_ns, 800u);
    }
    if (auto* u = std::get_if<UvmCounterRecord>(&record)) {
      ++uvm;
      EXPECT_EQ(u->kind, UvmKind::kMigrateToDevice);
      EXPECT_EQ(u->bytes, 4096u);
    }
    if (auto* a = std::get_if<AllocRecord>(&record)) {
      ++allocs;
      alloc_id = a->allocation_id;
      EXPECT_EQ(a->bytes, 1u << 20);
    }
    if (auto* f = std::get_if<FreeRecord>(&record)) {
      ++frees;
      EXPECT_EQ(f->allocation_id, alloc_id);
    }
  }
  EXPECT_EQ(launches, 1);
  EXPECT_EQ(times, 1);
  EXPECT_EQ(uvm, 1);
  EXPECT_EQ(allocs, 1);
  EXPECT_EQ(frees, 1);
  EXPECT_EQ(kernel_name, "_Z6kernelPf");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace spillway::trace

// CPU tests of the CUPTI conversions (profiler/cupti/cupti_convert.h), the correlation table and
// the libcupti search (cupti_library.h), on hand-made CUDA 13.0 activity records.
#include "profiler/cupti/cupti_convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "profiler/cupti/correlation_table.h"
#include "profiler/cupti/cupti_library.h"

namespace spillway::cupti {
namespace {

TEST(CuptiConvert, KernelTimeShiftsClockAndKeepsIds) {
  CUpti_ActivityKernel10 k = {};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 5000;
  k.end = 7000;
  k.deviceId = 2;
  k.streamId = 13;
  k.correlationId = 99;
  const trace::KernelTimeRecord out = KernelTime(k, /*correlation_id=*/1234, /*offset_ns=*/-1000);
  EXPECT_EQ(out.correlation_id, 1234u);
  EXPECT_EQ(out.start_ns, 4000u);
  EXPECT_EQ(out.end_ns, 6000u);
  EXPECT_EQ(out.device, 2u);
  EXPECT_EQ(out.stream, 13u);
  EXPECT_EQ(out.activity, trace::Activity::kKernel);
  EXPECT_EQ(out.source, trace::KernelTimeRecord::kCupti);
}

TEST(CuptiConvert, ZeroTimeStaysUnrecorded) {
  EXPECT_EQ(ToTraceClock(0, 12345), 0u);
  EXPECT_EQ(ToTraceClock(10, 5), 15u);
}

TEST(CuptiConvert, MemcpyAndMemsetAreTimedAsTheirActivity) {
  CUpti_ActivityMemcpy6 m = {};
  m.start = 10;
  m.end = 20;
  m.streamId = 3;
  EXPECT_EQ(MemcpyTime(m, 5, 0).activity, trace::Activity::kMemcpy);
  EXPECT_EQ(MemcpyTime(m, 5, 0).end_ns, 20u);
  CUpti_ActivityMemset4 s = {};
  s.start = 30;
  s.end = 40;
  EXPECT_EQ(MemsetTime(s, 6, 0).activity, trace::Activity::kMemset);
  EXPECT_EQ(MemsetTime(s, 6, 0).correlation_id, 6u);
}

TEST(CuptiConvert, EveryUvmCounterKindMaps) {
  EXPECT_EQ(UvmKindOf(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT),
            trace::UvmKind::kGpuPageFault);
  EXPECT_EQ(UvmKindOf(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT),
            trace::UvmKind::kCpuPageFault);
  EXPECT_EQ(UvmKindOf(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD),
            trace::UvmKind::kMigrateToDevice);
  EXPECT_EQ(UvmKindOf(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH),
            trace::UvmKind::kMigrateToHost);
  EXPECT_EQ(UvmKindOf(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING),
            trace::UvmKind::kThrashing);
  EXPECT_EQ(UvmKindOf(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING),
            trace::UvmKind::kThrottling);
  EXPECT_EQ(UvmKindOf(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP),
            trace::UvmKind::kRemoteMap);
  EXPECT_FALSE(UvmKindOf(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOD));
  EXPECT_FALSE(UvmKindOf(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_UNKNOWN));
}

CUpti_ActivityUnifiedMemoryCounter3 Uvm(CUpti_ActivityUnifiedMemoryCounterKind kind) {
  CUpti_ActivityUnifiedMemoryCounter3 u = {};
  u.kind = CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER;
  u.counterKind = kind;
  u.value = 65536;
  u.start = 100;
  u.end = 300;
  u.address = 0x7f0000200000;
  u.srcId = 1;
  u.dstId = 2;
  return u;
}

TEST(CuptiConvert, MigrationCarriesBytesCauseAndTheGpu) {
  CUpti_ActivityUnifiedMemoryCounter3 u =
      Uvm(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH);
  u.flags = CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_EVICTION;
  const auto out = UvmCounter(u, 1000);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->kind, trace::UvmKind::kMigrateToHost);
  EXPECT_EQ(out->bytes, 65536u);
  EXPECT_EQ(out->start_ns, 1100u);
  EXPECT_EQ(out->end_ns, 1300u);
  EXPECT_EQ(out->address, 0x7f0000200000u);
  EXPECT_EQ(out->device, 1u);  // device-to-host: the source is the GPU
  EXPECT_STREQ(UvmCauseName(out->kind, out->cause), "eviction");

  u = Uvm(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD);
  u.flags = CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_USER;
  const auto in = UvmCounter(u, 0);
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(in->kind, trace::UvmKind::kMigrateToDevice);
  EXPECT_EQ(in->device, 2u);  // host-to-device: the destination is the GPU
  EXPECT_STREQ(UvmCauseName(in->kind, in->cause), "user");
}

TEST(CuptiConvert, GpuFaultCountsGroupsWithAccessType) {
  CUpti_ActivityUnifiedMemoryCounter3 u =
      Uvm(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT);
  u.value = 3;
  u.flags = CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_WRITE;
  const auto out = UvmCounter(u, 0);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->count, 3u);
  EXPECT_EQ(out->bytes, 0u);
  EXPECT_EQ(out->device, 1u);
  EXPECT_STREQ(UvmCauseName(out->kind, out->cause), "write");
}

TEST(CuptiConvert, CpuFaultIsAnInstantWithoutThePc) {
  CUpti_ActivityUnifiedMemoryCounter3 u =
      Uvm(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT);
  u.value = 0x401234;  // the faulting PC, not a count
  const auto out = UvmCounter(u, 0);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->count, 1u);
  EXPECT_EQ(out->end_ns, 0u);
  EXPECT_EQ(out->start_ns, 100u);
}

TEST(CuptiConvert, ThrashingNamesTheLowestFightingGpuAndRemoteMapItsCause) {
  CUpti_ActivityUnifiedMemoryCounter3 u = Uvm(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING);
  u.srcId = 0b1100;  // devices 2 and 3
  const auto thrash = UvmCounter(u, 0);
  ASSERT_TRUE(thrash.has_value());
  EXPECT_EQ(thrash->device, 2u);
  EXPECT_EQ(thrash->bytes, 65536u);
  EXPECT_EQ(thrash->end_ns, 0u);

  u = Uvm(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP);
  u.flags = CUPTI_ACTIVITY_UNIFIED_MEMORY_REMOTE_MAP_CAUSE_THRASHING;
  const auto remote = UvmCounter(u, 0);
  ASSERT_TRUE(remote.has_value());
  EXPECT_EQ(remote->device, 2u);
  EXPECT_STREQ(UvmCauseName(remote->kind, remote->cause), "thrashing");

  u = Uvm(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING);
  const auto throttle = UvmCounter(u, 0);
  ASSERT_TRUE(throttle.has_value());
  EXPECT_EQ(throttle->end_ns, 300u);
  EXPECT_FALSE(UvmCounter(Uvm(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOD), 0));
}

TEST(CuptiConvert, CauseNamesCoverEveryCuptiValue) {
  const char* migrations[] = {"unknown",  "user",     "coherence",
                              "prefetch", "eviction", "access_counters"};
  for (uint32_t cause = 0; cause < std::size(migrations); ++cause) {
    EXPECT_STREQ(UvmCauseName(trace::UvmKind::kMigrateToDevice, cause), migrations[cause]);
  }
  const char* faults[] = {"unknown", "read", "write", "atomic", "prefetch"};
  for (uint32_t cause = 0; cause < std::size(faults); ++cause) {
    EXPECT_STREQ(UvmCauseName(trace::UvmKind::kGpuPageFault, cause), faults[cause]);
  }
  const char* remote[] = {"unknown", "coherence",     "thrashing",
                          "policy",  "out_of_memory", "eviction"};
  for (uint32_t cause = 0; cause < std::size(remote); ++cause) {
    EXPECT_STREQ(UvmCauseName(trace::UvmKind::kRemoteMap, cause), remote[cause]);
  }
  EXPECT_STREQ(UvmCauseName(trace::UvmKind::kMigrateToHost, 77), "unknown");
}

TEST(CuptiConvert, MemoryEventsMapKindsAndOperations) {
  CUpti_ActivityMemory4 m = {};
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
  m.address = 0x1000;
  m.bytes = 4096;
  m.timestamp = 50;
  m.correlationId = 8;
  auto event = MemoryEventOf(m, 10);
  ASSERT_TRUE(event.has_value());
  EXPECT_TRUE(event->allocation);
  EXPECT_EQ(event->kind, trace::AllocKind::kManaged);
  EXPECT_EQ(event->time_ns, 60u);
  EXPECT_EQ(event->correlation_id, 8u);

  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
  event = MemoryEventOf(m, 0);
  ASSERT_TRUE(event.has_value());
  EXPECT_FALSE(event->allocation);
  EXPECT_EQ(event->kind, trace::AllocKind::kAsync);

  m.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  EXPECT_EQ(MemoryEventOf(m, 0)->kind, trace::AllocKind::kHost);
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_ARRAY;
  EXPECT_EQ(MemoryEventOf(m, 0)->kind, trace::AllocKind::kOther);
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID;
  EXPECT_FALSE(MemoryEventOf(m, 0).has_value());
}

TEST(CorrelationTable, MapsErasesAndForgetsOverwrittenIds) {
  CorrelationTable table(8);
  table.Put(3, 1003);
  table.Put(4, 1004);
  EXPECT_EQ(table.Get(3, /*erase=*/false), 1003u);
  EXPECT_EQ(table.Get(3, /*erase=*/true), 1003u);
  EXPECT_EQ(table.Get(3, /*erase=*/true), 0u);  // erased
  table.Put(12, 1012);                          // same slot as 4
  EXPECT_EQ(table.Get(4, true), 0u);
  EXPECT_EQ(table.Get(12, true), 1012u);
  table.Put(0, 5);  // CUPTI never uses id 0
  EXPECT_EQ(table.Get(0, true), 0u);
  EXPECT_EQ(table.Get(99, true), 0u);
}

TEST(CuptiLibrary, OverrideIsTheOnlyCandidate) {
  EXPECT_EQ(CuptiCandidates("/opt/x/libcupti.so.13", "/usr/local/cuda-13.0", ""),
            std::vector<std::string>{"/opt/x/libcupti.so.13"});
}

TEST(CuptiLibrary, ToolkitFoldersThenSonames) {
  const std::vector<std::string> candidates = CuptiCandidates("", "/opt/cuda/", "/opt/cuda");
  ASSERT_GE(candidates.size(), 9u);
  EXPECT_EQ(candidates[0], "/opt/cuda/lib64/libcupti.so");
  EXPECT_EQ(candidates[2], "/opt/cuda/extras/CUPTI/lib64/libcupti.so");
  EXPECT_EQ(candidates[3], "/usr/local/cuda/lib64/libcupti.so");
  EXPECT_EQ(candidates[candidates.size() - 3], "libcupti.so");
  EXPECT_EQ(candidates.back(), "libcupti.so.12");
}

// A libcupti the process has loaded comes first (no second copy); the copies Python wheels ship
// beside a loaded library of theirs come after the toolkit's, before the sonames.
TEST(CuptiLibrary, ALoadedCopyFirstAndTheWheelsCopiesAfterTheToolkit) {
  const std::string site = "/venv/lib/python3.12/site-packages/";
  const std::vector<std::string> loaded = {
      "/lib/x86_64-linux-gnu/libc.so.6", site + "nvidia/cuda_runtime/lib/libcudart.so.12",
      site + "torch/lib/libtorch_cuda.so", "/opt/prof/libcupti.so.2025.1"};
  const std::vector<std::string> candidates = CuptiCandidates("", "", "", loaded);
  ASSERT_GE(candidates.size(), 13u);
  EXPECT_EQ(candidates[0], "/opt/prof/libcupti.so.2025.1");
  EXPECT_EQ(candidates[1], "/usr/local/cuda/lib64/libcupti.so");
  const auto at = [&](const std::string& path) {
    return std::find(candidates.begin(), candidates.end(), path) - candidates.begin();
  };
  const auto wheel = at(site + "nvidia/cuda_cupti/lib/libcupti.so.13");
  EXPECT_LT(at("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"), wheel);
  EXPECT_LT(at(site + "nvidia/cu13/lib/libcupti.so.13"), wheel);
  EXPECT_LT(wheel, at(site + "nvidia/cuda_cupti/lib/libcupti.so.12"));
  EXPECT_LT(at(site + "torch/lib/libcupti.so.13"), at("libcupti.so"));
  EXPECT_EQ(candidates.back(), "libcupti.so.12");
  // This process's own objects are listed (the test binary's libc among them).
  const std::vector<std::string> own = LoadedObjectPaths();
  EXPECT_TRUE(std::any_of(own.begin(), own.end(), [](const std::string& p) {
    return p.find("libc.so") != std::string::npos;
  }));
}

TEST(CuptiLibrary, OnlyTheSameMajorVersionIsCompatible) {
  EXPECT_TRUE(CompatibleApiVersion(CUPTI_API_VERSION));
  EXPECT_TRUE(CompatibleApiVersion(CUPTI_API_VERSION / 10000 * 10000 + 300));
  EXPECT_FALSE(CompatibleApiVersion(28));  // CUDA 12.9's CUPTI
  EXPECT_FALSE(CompatibleApiVersion((CUPTI_API_VERSION / 10000 + 1) * 10000));
}

TEST(CuptiLibrary, MissingLibraryIsNotFound) {
  const auto loaded = LoadCupti({"/nonexistent/libcupti.so"});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(loaded.status().message().find("/nonexistent/libcupti.so"), absl::string_view::npos);
}

TEST(CuptiLibrary, LibraryWithoutCuptiIsRefused) {
  const auto loaded = LoadCupti({"libz.so.1"});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(loaded.status().message().find("lacks cuptiGetVersion"), absl::string_view::npos);
}

}  // namespace
}  // namespace spillway::cupti

// CPU tests of the CUPTI recorder (profiler/cupti/cupti_recorder.h) against a fake libcupti
// (fake_cupti.cc, FAKE_CUPTI_PATH): absent CUPTI, another subscriber, a wrong version, records
// flowing to the sink with the caller's correlation ids and the clock offset applied, UVM
// counters deferred to the first context, and the bounded flush at stop.
#include "profiler/cupti/cupti_recorder.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace spillway::cupti {
namespace {

using ::testing::HasSubstr;

class CollectingSink : public CuptiSink {
 public:
  void OnKernelTime(const trace::KernelTimeRecord& record, const KernelDetails* details) override {
    std::lock_guard<std::mutex> lock(mu);
    times.push_back(record);
    if (details != nullptr) {
      names.push_back(details->name != nullptr ? details->name : "");
      shared.push_back(details->shared_memory_bytes);
    }
  }
  void OnUvmCounter(const trace::UvmCounterRecord& record) override {
    std::lock_guard<std::mutex> lock(mu);
    uvm.push_back(record);
  }
  void OnMemory(const MemoryEvent& event) override {
    std::lock_guard<std::mutex> lock(mu);
    memory.push_back(event);
  }
  std::mutex mu;
  std::vector<trace::KernelTimeRecord> times;
  std::vector<std::string> names;
  std::vector<uint32_t> shared;
  std::vector<trace::UvmCounterRecord> uvm;
  std::vector<MemoryEvent> memory;
};

// The fake's control functions (it is the same library the recorder dlopens).
struct Fake {
  Fake() {
    handle = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(handle, nullptr) << dlerror();
    Get(reset, "FakeCuptiReset");
    Get(clock_ahead, "FakeCuptiClockAheadNs");
    Get(kind_enabled, "FakeCuptiKindEnabled");
    Get(uvm_configured, "FakeCuptiUvmCountersConfigured");
    Get(set_dropped, "FakeCuptiSetDropped");
    Get(driver_call, "FakeCuptiDriverCall");
    Get(context_created, "FakeCuptiContextCreated");
    Get(queue_kernel, "FakeCuptiQueueKernel");
    Get(queue_memcpy, "FakeCuptiQueueMemcpy");
    Get(queue_uvm, "FakeCuptiQueueUvm");
    Get(queue_memory, "FakeCuptiQueueMemory");
    Get(flush, "cuptiActivityFlushAll");
    Get(force_queue, "FakeCuptiForceQueue");
  }
  template <typename Fn>
  void Get(Fn& fn, const char* name) {
    fn = reinterpret_cast<Fn>(dlsym(handle, name));
    ASSERT_NE(fn, nullptr) << name;
  }
  void* handle = nullptr;
  void (*reset)(int) = nullptr;
  uint64_t (*clock_ahead)() = nullptr;
  int (*kind_enabled)(int) = nullptr;
  uint32_t (*uvm_configured)() = nullptr;
  void (*set_dropped)(size_t) = nullptr;
  void (*driver_call)(uint32_t, uint32_t) = nullptr;
  void (*context_created)() = nullptr;
  void (*queue_kernel)(uint32_t, uint64_t, uint64_t, uint32_t, const char*) = nullptr;
  void (*queue_memcpy)(uint32_t, uint64_t, uint64_t) = nullptr;
  void (*queue_uvm)(int, uint64_t, uint64_t, uint64_t, uint64_t, uint32_t, uint32_t,
                    uint32_t) = nullptr;
  void (*queue_memory)(int, int, uint64_t, uint64_t, uint64_t) = nullptr;
  CUptiResult (*flush)(uint32_t) = nullptr;
  void (*force_queue)(int) = nullptr;
};

class CuptiRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("SPILLWAY_CUPTI");
    ResetCuptiRecorderMessagesForTesting();
    fake_.reset(0);
    options_.sink = &sink_;
    options_.library = FAKE_CUPTI_PATH;
    options_.log = [this](const std::string& line) { lines_.push_back(line); };
  }
  void TearDown() override { (void)StopCuptiRecorder(absl::Seconds(5)); }

  Fake fake_;
  CollectingSink sink_;
  CuptiRecorderOptions options_;
  std::vector<std::string> lines_;
};

TEST_F(CuptiRecorderTest, AbsentCuptiIsSaidOnceAndStartFails) {
  options_.library = "/nonexistent/dir/libcupti.so";
  absl::Status status = StartCuptiRecorder(options_);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(CuptiRecorderActive());
  status = StartCuptiRecorder(options_);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_THAT(lines_[0], HasSubstr("/nonexistent/dir/libcupti.so"));
  EXPECT_THAT(lines_[0], HasSubstr("recording without CUPTI"));
}

TEST_F(CuptiRecorderTest, SpillwayCuptiEnvironmentOverridesAndOffDisables) {
  options_.library = "";
  setenv("SPILLWAY_CUPTI", "/nonexistent/env/libcupti.so", 1);
  EXPECT_EQ(StartCuptiRecorder(options_).code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_THAT(lines_[0], HasSubstr("/nonexistent/env/libcupti.so"));
  setenv("SPILLWAY_CUPTI", "off", 1);
  EXPECT_EQ(StartCuptiRecorder(options_).code(), absl::StatusCode::kCancelled);
  unsetenv("SPILLWAY_CUPTI");
}

TEST_F(CuptiRecorderTest, AnotherSubscriberIsSaidOnceAndStartFails) {
  fake_.reset(1);
  const absl::Status status = StartCuptiRecorder(options_);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(CuptiRecorderActive());
  EXPECT_EQ(StartCuptiRecorder(options_).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_THAT(lines_[0], HasSubstr("already in use by another profiler"));
  EXPECT_FALSE(fake_.kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
}

TEST_F(CuptiRecorderTest, OtherMajorVersionIsRefused) {
  fake_.reset(2);
  const absl::Status status = StartCuptiRecorder(options_);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("API version 28"));
}

TEST_F(CuptiRecorderTest, NoSinkIsAnError) {
  options_.sink = nullptr;
  EXPECT_EQ(StartCuptiRecorder(options_).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CuptiRecorderTest, RecordsReachTheSinkWithCallerIdsOnTheTraceClock) {
  ASSERT_TRUE(StartCuptiRecorder(options_).ok());
  EXPECT_TRUE(CuptiRecorderActive());
  for (int kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                   CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMORY2,
                   CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER}) {
    EXPECT_TRUE(fake_.kind_enabled(kind)) << "kind " << kind;
  }
  EXPECT_EQ(fake_.uvm_configured(), 7u);
  EXPECT_TRUE(GetCuptiRecorderStats().uvm_enabled);
  EXPECT_FALSE(GetCuptiRecorderStats().clock_callback);

  {
    CuptiCorrelationScope scope(1001);
    fake_.driver_call(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 7);
  }
  fake_.driver_call(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 8);  // no scope: no caller id
  {
    CuptiCorrelationScope outer(2000);
    CuptiCorrelationScope inner(2002);
    fake_.driver_call(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, 9);
  }
  const uint64_t ahead = fake_.clock_ahead();
  fake_.queue_kernel(7, ahead + 5000000, ahead + 6000000, 0, "kernel_a");
  fake_.queue_kernel(8, ahead + 7000000, ahead + 8000000, 0, "kernel_b");
  fake_.queue_memcpy(9, ahead + 9000000, ahead + 9500000);
  fake_.queue_uvm(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH, 2 << 20,
                  ahead + 100, ahead + 200, 0x200000, 0, 1,
                  CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_EVICTION);
  fake_.queue_uvm(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOD, 1, 1, 2, 0, 0, 0,
                  0);
  fake_.queue_memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                     CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, 0x400000, 1 << 20, ahead + 50);
  fake_.set_dropped(3);
  ASSERT_TRUE(StopCuptiRecorder(absl::Seconds(5)).ok());
  EXPECT_FALSE(CuptiRecorderActive());
  EXPECT_FALSE(fake_.kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));

  ASSERT_EQ(sink_.times.size(), 3u);
  EXPECT_EQ(sink_.times[0].correlation_id, 1001u);
  EXPECT_EQ(sink_.times[1].correlation_id, 0u);
  EXPECT_EQ(sink_.times[2].correlation_id, 2002u);
  EXPECT_EQ(sink_.times[2].activity, trace::Activity::kMemcpy);
  EXPECT_EQ(sink_.names, (std::vector<std::string>{"kernel_a", "kernel_b"}));
  EXPECT_EQ(sink_.shared[0], 3072u);
  // The fake's clock runs `ahead` of CLOCK_MONOTONIC: converted times are back on the trace
  // clock (the offset is measured, so allow a millisecond).
  EXPECT_NEAR(static_cast<double>(sink_.times[0].end_ns - sink_.times[0].start_ns), 1e6, 1.0);
  EXPECT_NEAR(static_cast<double>(sink_.times[0].start_ns), 5e6, 1e6);
  ASSERT_EQ(sink_.uvm.size(), 1u);
  EXPECT_EQ(sink_.uvm[0].kind, trace::UvmKind::kMigrateToHost);
  EXPECT_EQ(sink_.uvm[0].bytes, 2u << 20);
  EXPECT_EQ(sink_.uvm[0].cause,
            static_cast<uint32_t>(CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_EVICTION));
  ASSERT_EQ(sink_.memory.size(), 1u);
  EXPECT_EQ(sink_.memory[0].kind, trace::AllocKind::kManaged);

  const CuptiRecorderStats stats = GetCuptiRecorderStats();
  EXPECT_GE(stats.kernels, 2u);
  EXPECT_GE(stats.uncorrelated, 1u);
  EXPECT_GE(stats.cupti_dropped, 3u);
  EXPECT_GE(stats.uvm_unconverted, 1u);
  EXPECT_TRUE(lines_.empty());
}

TEST_F(CuptiRecorderTest, SinkIsNotCalledAfterStop) {
  ASSERT_TRUE(StartCuptiRecorder(options_).ok());
  fake_.queue_kernel(1, 10, 20, 0, "k");
  ASSERT_TRUE(StopCuptiRecorder(absl::Seconds(5)).ok());
  const size_t seen = sink_.times.size();
  EXPECT_EQ(seen, 1u);
  fake_.force_queue(1);  // a buffer CUPTI delivers late
  fake_.queue_kernel(2, 10, 20, 0, "late");
  fake_.flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  EXPECT_EQ(sink_.times.size(), seen);
}

TEST_F(CuptiRecorderTest, KernelsOfAGraphLaunchShareItsId) {
  ASSERT_TRUE(StartCuptiRecorder(options_).ok());
  {
    CuptiCorrelationScope scope(77);
    fake_.driver_call(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, 40);
  }
  fake_.queue_kernel(40, 10, 20, /*graph_id=*/5, "node_a");
  fake_.queue_kernel(40, 30, 40, /*graph_id=*/5, "node_b");
  ASSERT_TRUE(StopCuptiRecorder(absl::Seconds(5)).ok());
  ASSERT_EQ(sink_.times.size(), 2u);
  EXPECT_EQ(sink_.times[0].correlation_id, 77u);
  EXPECT_EQ(sink_.times[1].correlation_id, 77u);
}

TEST_F(CuptiRecorderTest, CuptiIdsWhenTheCallerHasNone) {
  options_.caller_correlation_ids = false;
  ASSERT_TRUE(StartCuptiRecorder(options_).ok());
  fake_.driver_call(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 55);  // callbacks not enabled
  fake_.queue_kernel(55, 10, 20, 0, "k");
  ASSERT_TRUE(StopCuptiRecorder(absl::Seconds(5)).ok());
  ASSERT_EQ(sink_.times.size(), 1u);
  EXPECT_EQ(sink_.times[0].correlation_id, 55u);
}

TEST_F(CuptiRecorderTest, UvmCountersWaitForTheFirstContext) {
  fake_.reset(3);
  ASSERT_TRUE(StartCuptiRecorder(options_).ok());
  EXPECT_FALSE(GetCuptiRecorderStats().uvm_enabled);
  EXPECT_FALSE(fake_.kind_enabled(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER));
  fake_.context_created();
  EXPECT_TRUE(GetCuptiRecorderStats().uvm_enabled);
  EXPECT_TRUE(fake_.kind_enabled(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER));
  EXPECT_EQ(fake_.uvm_configured(), 7u);
  EXPECT_TRUE(lines_.empty());
}

// One counter kind the platform refuses refuses a configuration that lists it: the others are
// configured on their own and recorded, and the refused one is named in one line.
TEST_F(CuptiRecorderTest, ACounterKindThePlatformRefusesLeavesTheOthersRecorded) {
  fake_.reset(6);
  ASSERT_TRUE(StartCuptiRecorder(options_).ok());
  EXPECT_TRUE(GetCuptiRecorderStats().uvm_enabled);
  EXPECT_TRUE(fake_.kind_enabled(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER));
  EXPECT_EQ(fake_.uvm_configured(), 6u);
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_THAT(lines_[0], HasSubstr("throttling refused on this platform"));
  EXPECT_THAT(lines_[0], HasSubstr("recording the other 6"));
  ASSERT_TRUE(StopCuptiRecorder(absl::Seconds(5)).ok());
}

TEST_F(CuptiRecorderTest, UnsupportedUvmCountersAreSaidOnceAndKernelsGoOn) {
  fake_.reset(5);
  ASSERT_TRUE(StartCuptiRecorder(options_).ok());
  EXPECT_FALSE(GetCuptiRecorderStats().uvm_enabled);
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_THAT(lines_[0], HasSubstr("unified-memory counters unavailable"));
  fake_.context_created();  // no retry: the device cannot
  EXPECT_EQ(lines_.size(), 1u);
  fake_.queue_kernel(3, 10, 20, 0, "k");
  ASSERT_TRUE(StopCuptiRecorder(absl::Seconds(5)).ok());
  EXPECT_EQ(sink_.times.size(), 1u);
}

// Last: the fake's slow flush is still running in the background when the test ends.
TEST_F(CuptiRecorderTest, ZzSlowFlushIsBounded) {
  fake_.reset(4);
  ASSERT_TRUE(StartCuptiRecorder(options_).ok());
  const absl::Time start = absl::Now();
  const absl::Status status = StopCuptiRecorder(absl::Milliseconds(100));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(CuptiRecorderActive());
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_THAT(lines_[0], HasSubstr("flush did not finish"));
}

}  // namespace
}  // namespace spillway::cupti

// The driver-free parts of allocation backing: which stream captures make an allocation stay
// device memory, which calling module is on SPILLWAY_DEVICE_MODULES, and the two settings.
#include <dlfcn.h>
#include <zlib.h>  // types only: zlib is dlopen'ed by the test that needs it

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "interpose/caller_module.h"
#include "interpose/capture_state.h"
#include "interpose/config.h"
#include "interpose/summary.h"
#include "profiler/callsite/unwinder.h"

namespace spillway::interpose {
namespace {

int g_stream_a = 0;  // addresses stand in for CUstreams
int g_stream_b = 0;

bool ActiveOnOtherThread(const CaptureTracker& tracker) {
  bool active = false;
  std::thread([&] { active = tracker.ActiveForThisThread(); }).join();
  return active;
}

TEST(CaptureTrackerTest, NothingCapturingMeansInactive) {
  CaptureTracker tracker;
  EXPECT_FALSE(tracker.ActiveForThisThread());
  tracker.OnEnd(&g_stream_a);  // unknown stream: ignored
  EXPECT_FALSE(tracker.ActiveForThisThread());
}

TEST(CaptureTrackerTest, GlobalCaptureAffectsEveryThreadUntilItEnds) {
  CaptureTracker tracker;
  tracker.OnBegin(&g_stream_a, CaptureTracker::kGlobal);
  EXPECT_TRUE(tracker.ActiveForThisThread());
  EXPECT_TRUE(ActiveOnOtherThread(tracker));
  tracker.OnEnd(&g_stream_a);
  EXPECT_FALSE(tracker.ActiveForThisThread());
  EXPECT_FALSE(ActiveOnOtherThread(tracker));
}

TEST(CaptureTrackerTest, ThreadLocalCaptureAffectsOnlyTheCapturingThread) {
  CaptureTracker tracker;
  tracker.OnBegin(&g_stream_a, CaptureTracker::kThreadLocal);
  EXPECT_TRUE(tracker.ActiveForThisThread());
  EXPECT_FALSE(ActiveOnOtherThread(tracker));
  tracker.OnEnd(&g_stream_a);
  EXPECT_FALSE(tracker.ActiveForThisThread());
}

TEST(CaptureTrackerTest, RelaxedCaptureAffectsNobody) {
  CaptureTracker tracker;
  tracker.OnBegin(&g_stream_a, CaptureTracker::kRelaxed);
  EXPECT_FALSE(tracker.ActiveForThisThread());
  tracker.OnBegin(&g_stream_b, CaptureTracker::kGlobal);
  EXPECT_TRUE(tracker.ActiveForThisThread());
  tracker.OnEnd(&g_stream_b);
  EXPECT_FALSE(tracker.ActiveForThisThread());
  tracker.OnEnd(&g_stream_a);
}

TEST(CaptureTrackerTest, RestartingACaptureOnTheSameStreamCountsOnce) {
  CaptureTracker tracker;
  tracker.OnBegin(&g_stream_a, CaptureTracker::kGlobal);
  tracker.OnBegin(&g_stream_a, CaptureTracker::kGlobal);  // e.g. after an unseen failed end
  tracker.OnEnd(&g_stream_a);
  EXPECT_FALSE(tracker.ActiveForThisThread());
}

TEST(CaptureTrackerTest, ARelaxedThreadIsNeverHeldBack) {
  CaptureTracker tracker;
  tracker.OnBegin(&g_stream_a, CaptureTracker::kGlobal);
  ASSERT_EQ(CaptureTracker::ThreadMode(), CaptureTracker::kGlobal);
  CaptureTracker::OnThreadModeSet(CaptureTracker::kRelaxed);
  EXPECT_FALSE(tracker.ActiveForThisThread());
  EXPECT_FALSE(tracker.HoldsBack("test"));
  CaptureTracker::OnThreadModeSet(CaptureTracker::kGlobal);
  EXPECT_TRUE(tracker.HoldsBack("test"));
  EXPECT_EQ(tracker.held_back(), 1u);
  tracker.OnEnd(&g_stream_a);
}

TEST(CaptureTrackerTest, AThreadLocalModeThreadIgnoresOtherThreadsGlobalCaptures) {
  CaptureTracker tracker;
  bool other_held = true;
  std::thread([&] { tracker.OnBegin(&g_stream_a, CaptureTracker::kGlobal); }).join();
  EXPECT_TRUE(tracker.ActiveForThisThread());
  CaptureTracker::OnThreadModeSet(CaptureTracker::kThreadLocal);
  EXPECT_FALSE(tracker.ActiveForThisThread());
  // Its own capture (global or thread-local) still holds it back.
  tracker.OnBegin(&g_stream_b, CaptureTracker::kThreadLocal);
  EXPECT_TRUE(tracker.ActiveForThisThread());
  std::thread([&] { other_held = tracker.ActiveForThisThread(); }).join();
  EXPECT_TRUE(other_held);  // the other thread is in global mode: the global capture holds it
  tracker.OnEnd(&g_stream_b);
  tracker.OnEnd(&g_stream_a);
  EXPECT_FALSE(tracker.AnyInProgress());
  CaptureTracker::OnThreadModeSet(CaptureTracker::kGlobal);
}

// A capture begins only once no NoCaptureScope is open, so what a scope checked holds for the
// calls made in it.
TEST(CaptureTrackerTest, ACaptureBeginsOnlyOnceNoScopeIsOpen) {
  CaptureTracker tracker;
  std::atomic<bool> begun{false};
  std::optional<CaptureTracker::NoCaptureScope> scope(std::in_place, tracker);
  std::thread capturer([&] {
    const int result = tracker.Begin([&] {
      tracker.OnBegin(&g_stream_a, CaptureTracker::kRelaxed);
      begun = true;
      return 7;
    });
    EXPECT_EQ(result, 7);  // the real call's result comes back
  });
  while (!tracker.begin_waiting()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // time to begin, were it let
  EXPECT_FALSE(begun.load());
  EXPECT_FALSE(tracker.AnyInProgress());
  {
    // Another scope on the same thread while the capture waits: admitted as the outermost was.
    CaptureTracker::NoCaptureScope inner(tracker);
    EXPECT_TRUE(inner.admitted());
    EXPECT_FALSE(tracker.AnyInProgress());
  }
  scope.reset();
  capturer.join();
  EXPECT_TRUE(begun.load());
  {
    CaptureTracker::NoCaptureScope after(tracker);
    EXPECT_TRUE(tracker.AnyInProgress());
  }
  tracker.OnEnd(&g_stream_a);
}

// Every thread names its own per-thread default stream CU_STREAM_PER_THREAD: one thread's capture
// of it is not another's.
TEST(CaptureTrackerTest, EachThreadCapturesItsOwnPerThreadStream) {
  CaptureTracker tracker;
  const void* per_thread = reinterpret_cast<const void*>(CaptureTracker::kPerThreadStream);
  tracker.OnBegin(per_thread, CaptureTracker::kRelaxed);
  bool other_sees_capture = true;
  bool other_still_capturing = false;
  std::thread([&] {
    other_sees_capture = tracker.IsCapturing(per_thread);
    tracker.OnBegin(per_thread, CaptureTracker::kRelaxed);
    tracker.OnEnd(per_thread);  // its own capture ends, not the first thread's
    other_still_capturing = tracker.IsCapturing(per_thread);
  }).join();
  EXPECT_FALSE(other_sees_capture);
  EXPECT_FALSE(other_still_capturing);
  EXPECT_TRUE(tracker.IsCapturing(per_thread));
  EXPECT_TRUE(tracker.AnyInProgress());
  tracker.OnEnd(per_thread);
  EXPECT_FALSE(tracker.IsCapturing(per_thread));
  EXPECT_FALSE(tracker.AnyInProgress());
}

// Once a capture waits to begin, a scope opened on another thread is not admitted, at once (its
// caller makes none of its calls): a stream of launches cannot keep the capture waiting, and no
// launch waits for another thread's scope.
TEST(CaptureTrackerTest, AScopeOpenedWhileACaptureWaitsIsNotAdmitted) {
  CaptureTracker tracker;
  std::optional<CaptureTracker::NoCaptureScope> first(std::in_place, tracker);
  EXPECT_TRUE(first->admitted());
  std::thread capturer([&] {
    tracker.Begin([&] {
      tracker.OnBegin(&g_stream_a, CaptureTracker::kRelaxed);
      return 0;
    });
  });
  while (!tracker.begin_waiting()) std::this_thread::yield();
  bool admitted = true, nested_admitted = true;
  std::thread([&] {  // joined while the capture still waits: the scope must not wait
    CaptureTracker::NoCaptureScope scope(tracker);
    admitted = scope.admitted();
    CaptureTracker::NoCaptureScope nested(tracker);
    nested_admitted = nested.admitted();
  })
      .join();
  EXPECT_FALSE(admitted);
  EXPECT_FALSE(nested_admitted);
  first.reset();
  capturer.join();
  {
    CaptureTracker::NoCaptureScope after(tracker);
    EXPECT_TRUE(after.admitted());
    EXPECT_TRUE(tracker.AnyInProgress());
  }
  tracker.OnEnd(&g_stream_a);
}

// A capture begun from inside the thread's own scope (what a callback reached from the shim's
// calls could do) does not wait for that scope, which would never end.
TEST(CaptureTrackerTest, ABeginInsideTheThreadsOwnScopeDoesNotWait) {
  CaptureTracker tracker;
  CaptureTracker::NoCaptureScope scope(tracker);
  tracker.Begin([&] {
    tracker.OnBegin(&g_stream_a, CaptureTracker::kGlobal);
    return 0;
  });
  EXPECT_TRUE(tracker.AnyInProgress());
  tracker.OnEnd(&g_stream_a);
}

TEST(CallerModuleTest, ListedIsASubstringMatch) {
  EXPECT_TRUE(ModuleListed("/usr/lib/x86_64-linux-gnu/libnccl.so.2", {"libnccl"}));
  EXPECT_TRUE(ModuleListed("/opt/lib/libfoo.so", {"nothere", "foo"}));
  EXPECT_FALSE(ModuleListed("/usr/lib/libcudart.so.13", {"libnccl"}));
  EXPECT_FALSE(ModuleListed("/usr/lib/libcudart.so.13", {""}));
  EXPECT_FALSE(ModuleListed("/usr/lib/libcudart.so.13", {}));
  // The file name only, not its folders.
  EXPECT_FALSE(ModuleListed("/opt/nccl-2.0/lib/libcudart.so.13", {"nccl"}));
  EXPECT_TRUE(ModuleListed("/opt/nccl-2.0/lib/libnccl.so.2", {"nccl"}));
}

// qsort calls the comparator from inside libc: from there, libc is a calling module.
std::optional<std::string> g_found_from_libc;
int CompareAndLook(const void* a, const void* b) {
  if (!g_found_from_libc.has_value()) g_found_from_libc = ListedCallerModule({"libc.so"});
  return *static_cast<const int*>(a) - *static_cast<const int*>(b);
}

void ExpectLibcFoundAndStdcxxNot() {
  int values[] = {3, 1, 2};
  g_found_from_libc.reset();
  std::qsort(values, 3, sizeof(int), CompareAndLook);
  ASSERT_TRUE(g_found_from_libc.has_value());
  EXPECT_NE(g_found_from_libc->find("libc.so"), std::string::npos) << *g_found_from_libc;
  EXPECT_FALSE(ListedCallerModule({"libnccl"}).has_value());    // not loaded
  EXPECT_FALSE(ListedCallerModule({}).has_value());             // nothing listed
  EXPECT_FALSE(ListedCallerModule({"libstdc++"}).has_value());  // loaded, not calling
}

// Both walks: libunwind's (loaded privately) and glibc's backtrace(), used when libunwind is not.
TEST(CallerModuleTest, FindsAListedCallerWithLibunwind) {
  callsite::ResetUnwinderForTesting("libunwind.so.8");
  if (!PrepareCallerWalk()) GTEST_SKIP() << "libunwind.so.8 is not installed";
  ExpectLibcFoundAndStdcxxNot();
}

TEST(CallerModuleTest, FindsAListedCallerWithoutLibunwind) {
  callsite::ResetUnwinderForTesting("libspillway-no-such-unwinder.so");
  EXPECT_FALSE(PrepareCallerWalk());
  ExpectLibcFoundAndStdcxxNot();
  callsite::ResetUnwinderForTesting("libunwind.so.8");
}

// zlib calls the allocator it is given from inside deflateInit_: from there, libz is a caller.
std::optional<std::string> g_found_from_zlib;
voidpf AllocAndLook(voidpf, uInt items, uInt size) {
  g_found_from_zlib = ListedCallerModule({"libz.so"});
  return std::calloc(items, size);
}
void FreeBlock(voidpf, voidpf block) { std::free(block); }

// A listed module loaded after an earlier check found none is seen: the module map rescans after
// a dlopen, and which modules are listed is recomputed from its new snapshot.
TEST(CallerModuleTest, SeesAListedModuleLoadedAfterTheFirstCheck) {
  EXPECT_FALSE(ListedCallerModule({"libz.so"}).has_value());  // not loaded, or not calling
  void* handle = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  using DeflateInit = int (*)(z_streamp, int, const char*, int);
  using DeflateEnd = int (*)(z_streamp);
  const auto init = reinterpret_cast<DeflateInit>(dlsym(handle, "deflateInit_"));
  const auto end = reinterpret_cast<DeflateEnd>(dlsym(handle, "deflateEnd"));
  ASSERT_NE(init, nullptr);
  ASSERT_NE(end, nullptr);
  z_stream stream{};
  stream.zalloc = AllocAndLook;
  stream.zfree = FreeBlock;
  g_found_from_zlib.reset();
  ASSERT_EQ(init(&stream, Z_DEFAULT_COMPRESSION, ZLIB_VERSION, static_cast<int>(sizeof(stream))),
            Z_OK);
  end(&stream);
  ASSERT_TRUE(g_found_from_zlib.has_value());
  EXPECT_NE(g_found_from_zlib->find("libz.so"), std::string::npos) << *g_found_from_zlib;
  EXPECT_FALSE(ListedCallerModule({"libz.so"}).has_value());  // loaded, not calling
  dlclose(handle);
}

TEST(BackingSettingsTest, DefaultsKeepNcclOnDeviceMemoryAndNoBallast) {
  Config config;
  ApplyBackingSettings(std::nullopt, std::nullopt, &config);
  EXPECT_EQ(config.device_modules, std::vector<std::string>{"libnccl"});
  EXPECT_FALSE(config.ballast);
  EXPECT_TRUE(config.problems.empty());
}

TEST(BackingSettingsTest, ModuleListAndBallastParse) {
  Config config;
  ApplyBackingSettings(" libnccl , librccl,,libmine ", "1", &config);
  EXPECT_EQ(config.device_modules, (std::vector<std::string>{"libnccl", "librccl", "libmine"}));
  // A part with no letter would match file names by their version numbers: one line, ignored.
  Config digits = MakeConfig({}, {}, {}, {});
  ApplyBackingSettings("0,libmine", std::nullopt, &digits);
  EXPECT_EQ(digits.device_modules, std::vector<std::string>{"libmine"});
  ASSERT_EQ(digits.problems.size(), 1u);
  EXPECT_EQ(digits.problems[0],
            "SPILLWAY_DEVICE_MODULES: '0' names no module (give part of a library's file name, "
            "such as libnccl); ignored");
  EXPECT_TRUE(config.ballast);
  Config empty;
  ApplyBackingSettings("", "0", &empty);
  EXPECT_TRUE(empty.device_modules.empty());
  EXPECT_FALSE(empty.ballast);
}

TEST(BackingSettingsTest, BallastHeadroomIsASizeOrNamed) {
  Config config;
  ApplyBallastHeadroom(std::nullopt, &config);
  EXPECT_FALSE(config.ballast_headroom.has_value());
  ApplyBallastHeadroom("768MiB", &config);
  EXPECT_EQ(config.ballast_headroom, uint64_t{768} << 20);
  Config bad;
  ApplyBallastHeadroom("lots", &bad);
  EXPECT_FALSE(bad.ballast_headroom.has_value());
  ASSERT_EQ(bad.problems.size(), 1u);
  EXPECT_EQ(bad.problems[0].rfind("SPILLWAY_BALLAST_HEADROOM: cannot use 'lots' (", 0), 0u)
      << bad.problems[0];
}

TEST(BackingSettingsTest, BadBallastIsNamed) {
  Config config;
  ApplyBackingSettings(std::nullopt, "yes", &config);
  EXPECT_FALSE(config.ballast);
  ASSERT_EQ(config.problems.size(), 1u);
  EXPECT_NE(config.problems[0].find("SPILLWAY_BALLAST: cannot use 'yes'"), std::string::npos);
}

}  // namespace
}  // namespace spillway::interpose

namespace spillway::interpose {
namespace {

TEST(BackingSummaryTest, ExceptionsIpcDevicesAndBallastAreInTheSummary) {
  SummaryData data;
  data.device_exceptions_capture = 2;
  data.device_exceptions_module = 5;
  data.ipc_refused = 1;
  data.engine_devices = 2;
  data.ballast_bytes = 1024;
  const std::string json = FormatSummary(data);
  for (const char* field : {"\"device_exceptions\":{\"capture\":2,\"module\":5}",
                            "\"ipc_refused\":1", "\"devices\":2", "\"ballast_bytes\":1024"}) {
    EXPECT_NE(json.find(field), std::string::npos) << field << " in " << json;
  }
}

}  // namespace
}  // namespace spillway::interpose

// Against simgpu: every hooked name resolves in the driver, and a program run with
// libspillway.so preloaded reaches the driver by all three roads with every call counted in the
// exit summary. Also SPILLWAY_MODE=off and an unknown mode (passthrough, logged, job succeeds).
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "interpose/hook_table.h"

namespace spillway::interpose {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A tiny JSON reader for the summary: the text of the object under `key`, and integer fields.
std::string ObjectField(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\":{");
  if (at == std::string::npos) return "";
  const size_t open = json.find('{', at);
  int depth = 0;
  for (size_t i = open; i < json.size(); ++i) {
    if (json[i] == '{') ++depth;
    if (json[i] == '}' && --depth == 0) return json.substr(open, i - open + 1);
  }
  return "";
}

long IntField(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  const size_t at = json.find(needle);
  if (at == std::string::npos) return -1;
  size_t end = at + needle.size();
  while (end < json.size() && (std::isdigit(static_cast<unsigned char>(json[end])) != 0)) ++end;
  if (end == at + needle.size()) return -1;
  return std::stol(json.substr(at + needle.size(), end - at - needle.size()));
}

long Calls(const std::string& summary, const std::string& name) {
  const long count = IntField(ObjectField(summary, "calls"), name);
  return count < 0 ? 0 : count;  // only nonzero counts are listed
}

struct RunResult {
  int status = -1;
  std::string summary;
  std::string log;
};

// Runs the roads program under the preload with `extra_env` ("NAME=value ..." for env(1)).
RunResult RunRoads(const std::string& extra_env) {
  const std::string dir = ::testing::TempDir() + "roads_" + std::to_string(::getpid()) + "_" +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const std::string summary = dir + ".json";
  const std::string log = dir + ".log";
  std::remove(summary.c_str());
  std::remove(log.c_str());
  const char* runner_preload = std::getenv("SPILLWAY_TEST_PRELOAD");  // sanitizer runtimes
  std::string preload = runner_preload != nullptr && *runner_preload != '\0'
                            ? std::string(runner_preload) + ":" + SPILLWAY_LIB
                            : std::string(SPILLWAY_LIB);
  const std::string command = std::string("env LD_PRELOAD=") + preload +
                              " LD_LIBRARY_PATH=" + SIMGPU_DIR + " SPILLWAY_SUMMARY=" + summary +
                              " SPILLWAY_LOG_FILE=" + log + " " + extra_env + " " + ROADS_PROGRAM +
                              " " + KERNEL_LIBRARY + " >>" + log + " 2>&1";
  RunResult result;
  const int raw = std::system(command.c_str());
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  result.summary = ReadFile(summary);
  result.log = ReadFile(log);
  return result;
}

TEST(DriverTest, EveryHookedNameResolvesInSimgpu) {
  void* driver = dlopen(SIMGPU_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(driver, nullptr) << dlerror();
  for (const HookInfo& hook : kHookInfo) {
    const std::string name(hook.name);
    EXPECT_NE(dlsym(driver, name.c_str()), nullptr) << name << " is not exported by simgpu";
  }
}

TEST(RoadsTest, EveryRoadReachesTheHooksAndIsCounted) {
  const RunResult run = RunRoads("");
  ASSERT_EQ(run.status, 0) << run.log;
  const std::string& s = run.summary;
  ASSERT_FALSE(s.empty()) << "no summary; log:\n" << run.log;
  EXPECT_NE(s.find("\"mode\":\"run\""), std::string::npos) << s;
  EXPECT_EQ(Calls(s, "cuInit"), 1) << s;
  EXPECT_EQ(Calls(s, "cuMemAlloc_v2"), 3) << s;  // linked, dlsym, cuGetProcAddress
  EXPECT_EQ(Calls(s, "cuMemAllocManaged"), 1) << s;
  EXPECT_EQ(Calls(s, "cuMemsetD32_v2"), 1) << s;
  EXPECT_EQ(Calls(s, "cuMemcpyDtoH_v2"), 1) << s;
  EXPECT_EQ(Calls(s, "cuLaunchKernel"), 4) << s;       // 2 linked, 1 dlsym, 1 gpa
  EXPECT_EQ(Calls(s, "cuLaunchKernel_ptsz"), 1) << s;  // gpa, per-thread flag
  EXPECT_EQ(Calls(s, "cuCtxSynchronize"), 2) << s;     // linked, gpa at 12000
  EXPECT_EQ(Calls(s, "cuCtxSynchronize_v2"), 1) << s;  // gpa at 13000
  EXPECT_EQ(Calls(s, "cuStreamSynchronize"), 1) << s;
  EXPECT_EQ(Calls(s, "cuStreamSynchronize_ptsz"), 1) << s;
  EXPECT_EQ(Calls(s, "cuMemGetInfo_v2"), 2) << s;  // linked, legacy gpa
  EXPECT_EQ(Calls(s, "cuMemFree_v2"), 4) << s;
  EXPECT_EQ(Calls(s, "cuGetProcAddress_v2"), 10) << s;  // 2 from dlsym's pointer, 8 via gpa
  EXPECT_EQ(Calls(s, "cuGetProcAddress"), 1) << s;
  EXPECT_EQ(IntField(s, "launches"), 5) << s;
  EXPECT_EQ(IntField(s, "graph_launches"), 0) << s;
  const std::string allocations = ObjectField(s, "allocations");
  EXPECT_EQ(IntField(allocations, "count"), 4) << s;
  EXPECT_EQ(IntField(allocations, "bytes_peak"), 3 << 20) << s;
  // In run mode every cuMemAlloc is backed by managed memory, so the managed peak is the peak.
  EXPECT_EQ(IntField(allocations, "managed_bytes_peak"), 3 << 20) << s;
  EXPECT_NE(s.find("\"policy\":\"learned\""), std::string::npos) << s;  // the default
  EXPECT_NE(s.find("\"errors\":[]"), std::string::npos) << s;
}

TEST(RoadsTest, ModeOffPassesThroughAndCountsOnlyCalls) {
  const RunResult run = RunRoads("SPILLWAY_MODE=off");
  ASSERT_EQ(run.status, 0) << run.log;
  EXPECT_NE(run.summary.find("\"mode\":\"off\""), std::string::npos) << run.summary;
  EXPECT_EQ(Calls(run.summary, "cuMemAlloc_v2"), 3) << run.summary;
  EXPECT_EQ(IntField(ObjectField(run.summary, "allocations"), "count"), 0) << run.summary;
  EXPECT_EQ(run.log.find("spillway: error"), std::string::npos) << run.log;
}

TEST(RoadsTest, UnknownModeLogsAnErrorAndFallsBackToPassthrough) {
  const RunResult run = RunRoads("SPILLWAY_MODE=turbo");
  ASSERT_EQ(run.status, 0) << run.log;
  EXPECT_NE(run.log.find("spillway: error: SPILLWAY_MODE: unknown value 'turbo'"),
            std::string::npos)
      << run.log;
  EXPECT_NE(run.summary.find("\"mode\":\"off\""), std::string::npos) << run.summary;
  EXPECT_NE(run.summary.find("SPILLWAY_MODE: unknown value 'turbo'"), std::string::npos)
      << run.summary;
}

}  // namespace
}  // namespace spillway::interpose

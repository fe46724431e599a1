// The hooked-function list as data: unique names, driver-style names, lookups; and the shim's
// settings parsing and summary format, which need no driver.
#include "interpose/hook_table.h"

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "interpose/config.h"
#include "interpose/summary.h"

namespace spillway::interpose {
namespace {

TEST(HookTableTest, NamesAreUniqueDriverNames) {
  std::set<std::string_view> seen;
  for (const HookInfo& hook : kHookInfo) {
    EXPECT_TRUE(seen.insert(hook.name).second) << "listed twice: " << hook.name;
    EXPECT_EQ(hook.name.substr(0, 2), "cu") << hook.name;
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kNumHooks));
}

TEST(HookTableTest, ListsEveryRequiredEntryPoint) {
  for (const char* name : {"cuInit",
                           "cuGetProcAddress",
                           "cuGetProcAddress_v2",
                           "cuMemAlloc_v2",
                           "cuMemAllocManaged",
                           "cuMemAllocAsync",
                           "cuMemAllocAsync_ptsz",
                           "cuMemAllocFromPoolAsync",
                           "cuMemFree_v2",
                           "cuMemFreeAsync_ptsz",
                           "cuMemCreate",
                           "cuMemMap",
                           "cuMemRelease",
                           "cuMemUnmap",
                           "cuMemGetInfo_v2",
                           "cuDeviceTotalMem_v2",
                           "cuLaunchKernel",
                           "cuLaunchKernel_ptsz",
                           "cuLaunchKernelEx",
                           "cuLaunchCooperativeKernel_ptsz",
                           "cuGraphLaunch",
                           "cuGraphLaunch_ptsz",
                           "cuGraphInstantiateWithFlags",
                           "cuGraphInstantiateWithParams_ptsz",
                           "cuGraphExecUpdate_v2",
                           "cuGraphExecKernelNodeSetParams_v2",
                           "cuGraphExecDestroy",
                           "cuModuleUnload",
                           "cuLibraryUnload",
                           "cuCtxDestroy_v2",
                           "cuDevicePrimaryCtxReset_v2",
                           "cuDevicePrimaryCtxRelease_v2",
                           "cuMemcpyHtoD_v2_ptds",
                           "cuMemsetD32Async_ptsz",
                           "cuCtxSynchronize",
                           "cuCtxSynchronize_v2",
                           "cuStreamSynchronize_ptsz",
                           "cuEventSynchronize"}) {
    EXPECT_TRUE(FindHook(name).has_value()) << name;
  }
  EXPECT_FALSE(FindHook("cuGetExportTable").has_value());  // passes through untouched
  EXPECT_FALSE(FindHook("cuMemAlloc").has_value());        // the 32-bit legacy entry point
}

TEST(HookTableTest, FindHookReturnsTheMatchingId) {
  const std::optional<HookId> id = FindHook("cuLaunchKernel_ptsz");
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(*id, HookId::k_cuLaunchKernel_ptsz);
  EXPECT_EQ(HookName(*id), "cuLaunchKernel_ptsz");
  EXPECT_EQ(KindOf(Index(*id)), HookKind::kLaunch);
  EXPECT_EQ(KindOf(Index(HookId::k_cuGraphLaunch)), HookKind::kGraphLaunch);
  EXPECT_EQ(KindOf(Index(HookId::k_cuGraphInstantiateWithFlags)), HookKind::kGraph);
}

TEST(ConfigTest, DefaultsWhenUnset) {
  const Config config = MakeConfig(std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  EXPECT_EQ(config.mode, Mode::kRun);
  EXPECT_EQ(config.log_level, LogLevel::kWarn);
  EXPECT_TRUE(config.summary_path.empty());
  EXPECT_TRUE(config.problems.empty());
}

TEST(ConfigTest, ParsesEveryMode) {
  EXPECT_EQ(MakeConfig("run", {}, {}, {}).mode, Mode::kRun);
  EXPECT_EQ(MakeConfig("record", {}, {}, {}).mode, Mode::kRecord);
  EXPECT_EQ(MakeConfig("off", {}, {}, {}).mode, Mode::kOff);
  EXPECT_EQ(ModeName(Mode::kRecord), "record");
}

TEST(ConfigTest, UnknownModeFallsBackToPassthroughAndSaysSo) {
  const Config config = MakeConfig("turbo", {}, {}, {});
  EXPECT_EQ(config.mode, Mode::kOff);
  ASSERT_EQ(config.problems.size(), 1u);
  EXPECT_NE(config.problems[0].find("SPILLWAY_MODE"), std::string::npos);
  EXPECT_NE(config.problems[0].find("'turbo'"), std::string::npos);
}

TEST(ConfigTest, LookaheadIsSizedFromTimeUnlessACountIsGiven) {
  Config config = MakeConfig({}, {}, {}, {});
  EXPECT_TRUE(config.lookahead_auto);
  EXPECT_EQ(config.lookahead, Config::kMaxLookahead);
  ApplyEvictionSetting(std::nullopt, "4", &config);
  EXPECT_FALSE(config.lookahead_auto);
  EXPECT_EQ(config.lookahead, 4);
  ApplyEvictionSetting(std::nullopt, "auto", &config);
  EXPECT_TRUE(config.lookahead_auto);
  EXPECT_EQ(config.lookahead, Config::kMaxLookahead);
  EXPECT_TRUE(config.problems.empty());

  Config bad = MakeConfig({}, {}, {}, {});
  ApplyEvictionSetting(std::nullopt, "65", &bad);
  EXPECT_TRUE(bad.lookahead_auto);  // the default stays
  ASSERT_EQ(bad.problems.size(), 1u);
  EXPECT_NE(bad.problems[0].find("SPILLWAY_LOOKAHEAD"), std::string::npos);
  EXPECT_NE(bad.problems[0].find("'65'"), std::string::npos);
}

TEST(ConfigTest, EvictionIsLearnedLruOrNone) {
  Config config = MakeConfig({}, {}, {}, {});
  EXPECT_EQ(config.eviction, "learned");
  for (const char* name : {"lru", "none", "learned"}) {
    ApplyEvictionSetting(name, std::nullopt, &config);
    EXPECT_EQ(config.eviction, name);
  }
  EXPECT_TRUE(config.problems.empty());
  ApplyEvictionSetting("mru", std::nullopt, &config);
  EXPECT_EQ(config.eviction, "learned");  // kept
  ASSERT_EQ(config.problems.size(), 1u);
  EXPECT_EQ(
      config.problems[0],
      "SPILLWAY_EVICTION: unknown value 'mru' (expected learned, lru or none); using learned");
}

TEST(ConfigTest, OnlinePlanningIsOnUnlessTurnedOff) {
  Config config = MakeConfig({}, {}, {}, {});
  EXPECT_TRUE(config.online_plan);
  ApplyOnlinePlanSetting("0", &config);
  EXPECT_FALSE(config.online_plan);
  ApplyOnlinePlanSetting("", &config);  // empty: unset, no change
  EXPECT_FALSE(config.online_plan);
  ApplyOnlinePlanSetting("1", &config);
  EXPECT_TRUE(config.online_plan);
  EXPECT_FALSE(config.online_plan_inline);  // on a thread of its own
  ApplyOnlinePlanSetting("inline", &config);
  EXPECT_TRUE(config.online_plan);
  EXPECT_TRUE(config.online_plan_inline);
  ApplyOnlinePlanSetting("1", &config);
  EXPECT_FALSE(config.online_plan_inline);
  EXPECT_TRUE(config.problems.empty());

  Config bad = MakeConfig({}, {}, {}, {});
  ApplyOnlinePlanSetting("yes", &bad);
  EXPECT_TRUE(bad.online_plan);  // the default stays
  ASSERT_EQ(bad.problems.size(), 1u);
  EXPECT_EQ(bad.problems[0],
            "SPILLWAY_ONLINE_PLAN: unknown value 'yes' (expected 0, 1 or inline); using 1");
}

TEST(ConfigTest, MemorySettings) {
  Config config = MakeConfig({}, {}, {}, {});
  ApplyMemorySettings(std::nullopt, std::nullopt, &config);
  EXPECT_FALSE(config.device_memory.has_value());
  EXPECT_EQ(config.host_memory, 0u);
  ApplyMemorySettings("64MiB", "1GiB", &config);
  EXPECT_EQ(config.device_memory, std::optional<uint64_t>(64ull << 20));
  EXPECT_EQ(config.host_memory, 1ull << 30);
  EXPECT_TRUE(config.problems.empty());

  Config bad = MakeConfig({}, {}, {}, {});
  ApplyMemorySettings("lots", "0", &bad);
  EXPECT_FALSE(bad.device_memory.has_value());
  ASSERT_EQ(bad.problems.size(), 1u);
  EXPECT_NE(bad.problems[0].find("SPILLWAY_DEVICE_MEMORY"), std::string::npos);
  EXPECT_NE(bad.problems[0].find("'lots'"), std::string::npos);

  // Under a page (1.5 parses as 2 bytes): refused, as the launcher refuses it; a page is taken.
  for (const char* tiny : {"1.5", "0", "4095"}) {
    Config small = MakeConfig({}, {}, {}, {});
    ApplyMemorySettings(tiny, std::nullopt, &small);
    EXPECT_FALSE(small.device_memory.has_value()) << tiny;
    ASSERT_EQ(small.problems.size(), 1u) << tiny;
    EXPECT_EQ(small.problems[0], std::string("SPILLWAY_DEVICE_MEMORY: cannot use '") + tiny +
                                     "' (a budget is at least 4 KiB); using the default");
  }
  // More host memory than the host has: bounded by it, one line (16383PiB once crashed the job).
  Config huge = MakeConfig({}, {}, {}, {});
  ApplyMemorySettings("64MiB", "16383PiB", &huge);
  ASSERT_NE(HostMemoryBytes(), 0u);
  EXPECT_EQ(huge.host_memory, HostMemoryBytes());
  ASSERT_EQ(huge.problems.size(), 1u);
  EXPECT_EQ(huge.problems[0].rfind("SPILLWAY_HOST_MEMORY: '16383PiB' is more than this host's ", 0),
            0u)
      << huge.problems[0];

  Config page = MakeConfig({}, {}, {}, {});
  ApplyMemorySettings("4KiB", std::nullopt, &page);
  EXPECT_EQ(page.device_memory, std::optional<uint64_t>(4096));
  EXPECT_TRUE(page.problems.empty());
}

TEST(ConfigTest, LogLevels) {
  EXPECT_EQ(MakeConfig({}, "debug", {}, {}).log_level, LogLevel::kDebug);
  EXPECT_EQ(MakeConfig({}, "error", {}, {}).log_level, LogLevel::kError);
  const Config bad = MakeConfig({}, "loud", "/tmp/x.log", "/tmp/s.json");
  EXPECT_EQ(bad.log_level, LogLevel::kWarn);
  ASSERT_EQ(bad.problems.size(), 1u);
  EXPECT_NE(bad.problems[0].find("SPILLWAY_LOG"), std::string::npos);
  EXPECT_EQ(bad.log_file, "/tmp/x.log");
  EXPECT_EQ(bad.summary_path, "/tmp/s.json");
}

TEST(ConfigTest, SummaryPathExpandsPid) {
  EXPECT_EQ(ExpandSummaryPath("/tmp/s.%p.json", 42), "/tmp/s.42.json");
  EXPECT_EQ(ExpandSummaryPath("/tmp/s.json", 42), "/tmp/s.json");
  EXPECT_EQ(ExpandSummaryPath("%", 42), "%");
}

TEST(SummaryTest, HasEveryDocumentedField) {
  SummaryData data;
  data.version = "0.1.0";
  data.mode = "run";
  data.pid = 7;
  data.calls = {{"cuMemAlloc_v2", 3}, {"cuLaunchKernel", 2}};
  data.launches = 2;
  data.allocation_count = 3;
  data.bytes_peak = 4096;
  data.errors = {"a \"quoted\" problem"};
  const std::string json = FormatSummary(data);
  for (const char* field :
       {"\"version\":\"0.1.0\"", "\"mode\":\"run\"", "\"pid\":7", "\"cuMemAlloc_v2\":3",
        "\"cuLaunchKernel\":2", "\"launches\":2", "\"graph_launches\":0", "\"count\":3",
        "\"bytes_peak\":4096", "\"managed_bytes_peak\":0", "\"vmm_count\":0",
        "\"policy\":\"passthrough\"", "\"prefetch_bytes\":0", "\"evict_bytes\":0",
        "\"discard_bytes\":0", "\"errors\":[\"a \\\"quoted\\\" problem\"]"}) {
    EXPECT_NE(json.find(field), std::string::npos) << field << " in " << json;
  }
}

// A message of megabytes (a policy file's key quoted in an error) is cut, saying how much was left.
TEST(SummaryTest, MessagesAreBounded) {
  SummaryData data;
  data.errors = {std::string(2 << 20, 'k'), "short"};
  const std::string json = FormatSummary(data);
  EXPECT_LT(json.size(), 4096u);
  EXPECT_NE(json.find("... (" + std::to_string((2 << 20) - (kMaxSummaryMessageBytes - 64)) +
                      " more bytes)"),
            std::string::npos);
  EXPECT_NE(json.find("\"short\""), std::string::npos);
  EXPECT_EQ(BoundedMessage("short"), "short");
  EXPECT_LE(BoundedMessage(std::string(5000, 'x')).size(), kMaxSummaryMessageBytes);
}

// An online plan's trial, from the first device that has one: its verdict and the two medians.
TEST(SummaryTest, PolicyFileSaysTheOnlinePlansTrial) {
  SummaryData data;
  policy::ScheduleAdherence none, tried;
  none.path = tried.path = "online plan";
  none.steps_followed = 2;
  tried.steps_followed = 13;
  tried.trial = "rejected";
  tried.trial_plan_step_seconds = 0.412275;
  tried.trial_learned_step_seconds = 0.398548;
  data.policy_file = {none, tried};
  const std::string json = FormatSummary(data);
  for (const char* field :
       {"\"path\":\"online plan\"", "\"steps_followed\":15", "\"trial\":\"rejected\"",
        "\"trial_plan_step_ms\":412.275", "\"trial_learned_step_ms\":398.548"}) {
    EXPECT_NE(json.find(field), std::string::npos) << field << " in " << json;
  }
}

}  // namespace
}  // namespace spillway::interpose

// Tests of the call-site stacks (profiler/callsite/): the private libunwind walk, the module map
// (build-ids, dlopen'd objects) and the de-duplication into stable ids with one definition each.
#include <dlfcn.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "profiler/callsite/call_site_table.h"
#include "profiler/callsite/module_map.h"
#include "profiler/callsite/unwinder.h"
#include "profiler/report/symbolizer.h"

namespace spillway::callsite {
namespace {

// Records what a table defines, naming modules 100, 101, ... and keeping the table's site ids.
class RecordingSink : public CallSiteSink {
 public:
  uint32_t OnModule(const ModuleInfo& info) override {
    modules.push_back(info);
    return 100 + static_cast<uint32_t>(modules.size() - 1);
  }
  uint64_t OnCallSite(uint64_t site, std::span<const Frame> frames) override {
    sites.push_back(site);
    last_frames.assign(frames.begin(), frames.end());
    return site;
  }
  std::vector<ModuleInfo> modules;
  std::vector<uint64_t> sites;
  std::vector<Frame> last_frames;
};

std::string SelfPath() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string();
}

__attribute__((noinline)) uint64_t CaptureHere(CallSiteTable& table, CallSiteSink* sink) {
  const uint64_t id = table.Capture(nullptr, sink);
  asm volatile("" ::: "memory");  // keeps the call from becoming a tail call
  return id;
}

__attribute__((noinline)) uint64_t CaptureElsewhere(CallSiteTable& table, CallSiteSink* sink) {
  const uint64_t id = table.Capture(nullptr, sink);
  asm volatile("" ::: "memory");
  return id;
}

TEST(UnwinderTest, WalksTheCallingStackThroughPrivateLibunwind) {
  ASSERT_TRUE(UnwinderAvailable()) << "libunwind.so.8 is expected on the build machines";
  void* pcs[32];
  const int count = Backtrace(pcs, 32);
  ASSERT_GT(count, 2);
  Dl_info info;
  ASSERT_NE(dladdr(pcs[0], &info), 0);
  EXPECT_EQ(info.dli_fbase,
            dladdr(reinterpret_cast<void*>(&SelfPath), &info) != 0 ? info.dli_fbase : nullptr);
  // Private: libunwind's symbols did not enter the global scope.
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "unw_backtrace"), nullptr);
}

TEST(UnwinderTest, MissingLibraryIsSaidOnceAndGivesNoStacks) {
  static int lines = 0;
  static std::string said;
  ResetUnwinderForTesting("libspillway-no-such-unwinder.so.8");
  const UnwindLogFn log = [](const char* line) {
    ++lines;
    said = line;
  };
  EXPECT_FALSE(UnwinderAvailable(log));
  EXPECT_FALSE(UnwinderAvailable(log));
  EXPECT_EQ(lines, 1);
  EXPECT_NE(said.find("libspillway-no-such-unwinder.so.8"), std::string::npos) << said;
  CallSiteTable table;
  RecordingSink sink;
  EXPECT_EQ(table.Capture(nullptr, &sink), kNoCallSite);
  EXPECT_TRUE(sink.sites.empty());
  void* pcs[4];
  EXPECT_EQ(Backtrace(pcs, 4), 0);
  ResetUnwinderForTesting("libunwind.so.8");
  EXPECT_TRUE(UnwinderAvailable());
}

TEST(ModuleMapTest, ResolvesOwnCodeWithItsBuildId) {
  ModuleMap map;
  void* pc = reinterpret_cast<void*>(&SelfPath);
  Location where;
  map.Resolve(&pc, 1, &where);
  ASSERT_NE(where.module, ModuleMap::kUnknownModule);
  const ModuleInfo info = map.Module(where.module);
  EXPECT_EQ(info.path, SelfPath());
  // The same build-id the offline symbolizer reads from the file.
  const std::optional<std::string> on_disk = report::ReadBuildId(info.path);
  ASSERT_TRUE(on_disk.has_value());
  EXPECT_EQ(info.build_id, *on_disk);
  EXPECT_NE(where.key, 0u);
  // The offset is the address in the file's own terms: the bias added back gives the pc.
  Dl_info dl;
  ASSERT_NE(dladdr(pc, &dl), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(dl.dli_fbase) + where.offset,
            reinterpret_cast<uintptr_t>(pc));
}

TEST(ModuleMapTest, SeesObjectsLoadedAfterTheFirstScanAndKeepsIndices) {
  ModuleMap map;
  void* own = reinterpret_cast<void*>(&SelfPath);
  Location first;
  map.Resolve(&own, 1, &first);
  void* handle = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  void* zlib = dlsym(handle, "zlibVersion");
  ASSERT_NE(zlib, nullptr);
  Location where;
  map.Resolve(&zlib, 1, &where);
  ASSERT_NE(where.module, ModuleMap::kUnknownModule);
  EXPECT_NE(map.Module(where.module).path.find("libz.so"), std::string::npos);
  Location again;
  map.Resolve(&own, 1, &again);
  EXPECT_EQ(again.module, first.module);
  dlclose(handle);
  // An address in no object stays unknown, with the raw address as offset.
  void* nowhere = reinterpret_cast<void*>(uintptr_t{16});
  map.Resolve(&nowhere, 1, &where);
  EXPECT_EQ(where.module, ModuleMap::kUnknownModule);
  EXPECT_EQ(where.offset, 16u);
}

TEST(CallSiteTableTest, SameSiteSameIdDefinedOnce) {
  CallSiteTable table;
  RecordingSink sink;
  uint64_t ids[3];
  for (uint64_t& id : ids) id = CaptureHere(table, &sink);
  EXPECT_NE(ids[0], kNoCallSite);
  EXPECT_EQ(ids[0], ids[1]);
  EXPECT_EQ(ids[0], ids[2]);
  const uint64_t other = CaptureElsewhere(table, &sink);
  EXPECT_NE(other, ids[0]);
  ASSERT_EQ(sink.sites.size(), 2u);
  // Each module was defined once, and every frame names a defined module (or none).
  std::vector<std::string> paths;
  for (const ModuleInfo& info : sink.modules) paths.push_back(info.path);
  std::sort(paths.begin(), paths.end());
  EXPECT_EQ(std::adjacent_find(paths.begin(), paths.end()), paths.end());
  for (const Frame& frame : sink.last_frames) {
    EXPECT_TRUE(frame.module == 0 || (frame.module >= 100 && frame.module < 100 + paths.size()));
  }
}

TEST(CallSiteTableTest, IdDependsOnBuildIdAndOffsetNotAddress) {
  // The same frames resolved by two tables (as in two runs): the same id.
  CallSiteTable a;
  CallSiteTable b;
  void* pcs[2] = {reinterpret_cast<void*>(&SelfPath), reinterpret_cast<void*>(&CaptureHere)};
  EXPECT_EQ(a.Intern(pcs, 2, nullptr), b.Intern(pcs, 2, nullptr));
  void* swapped[2] = {pcs[1], pcs[0]};
  EXPECT_NE(a.Intern(pcs, 2, nullptr), a.Intern(swapped, 2, nullptr));
  // The id is a function of (build-id, offset) only: recompute it by hand.
  Location where[2];
  a.modules().Resolve(pcs, 2, where);
  uint64_t expected = 0xcbf29ce484222325ull;
  for (const Location& location : where) {
    expected = HashWord(HashWord(expected, location.key), location.offset);
  }
  EXPECT_EQ(a.Intern(pcs, 2, nullptr), expected);
  const ModuleInfo info = a.modules().Module(where[0].module);
  EXPECT_EQ(where[0].key, HashBytes(info.build_id.data(), info.build_id.size()));
}

TEST(CallSiteTableTest, SkipsTheLeadingFramesOfTheNamedObject) {
  CallSiteTable table;
  RecordingSink sink;
  const uint64_t id = table.Capture(reinterpret_cast<const void*>(&SelfPath), &sink);
  if (id == kNoCallSite) GTEST_SKIP() << "the whole stack is in the test binary";
  ASSERT_FALSE(sink.last_frames.empty());
  const std::string self = SelfPath();
  // The innermost frame kept is not in this binary.
  const uint32_t innermost = sink.last_frames[0].module;
  ASSERT_GE(innermost, 100u);
  EXPECT_NE(sink.modules[innermost - 100].path, self);
}

TEST(CallSiteTableTest, ForkedChildDefinesEverythingAgain) {
  CallSiteTable table;
  RecordingSink sink;
  uint64_t ids[3];
  size_t sites[3];
  size_t modules[3];
  for (int round = 0; round < 3; ++round) {  // one call site for all three captures
    if (round == 1) {                        // a fork, seen from the parent: nothing changes
      table.LockForFork();
      table.UnlockInParent();
    } else if (round == 2) {  // as in the child: a new trace needs every definition again
      table.LockForFork();
      table.ResetInChild();
    }
    ids[round] = CaptureHere(table, &sink);
    sites[round] = sink.sites.size();
    modules[round] = sink.modules.size();
  }
  EXPECT_EQ(ids[1], ids[0]);
  EXPECT_EQ(ids[2], ids[0]);
  EXPECT_EQ(sites[0], 1u);
  EXPECT_EQ(sites[1], 1u);
  EXPECT_EQ(sites[2], 2u);
  EXPECT_EQ(modules[1], modules[0]);
  EXPECT_EQ(modules[2], 2 * modules[0]);
}

}  // namespace
}  // namespace spillway::callsite

// Tests of offline symbolization: build-ids read from ELF notes, frames of this very test binary
// symbolized through addr2line, and modules whose build-id differs left raw.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "profiler/report/symbolizer.h"

namespace spillway::report {
namespace {

extern "C" __attribute__((noinline, used)) int SpillwayReportSymbolizerProbe(int x) {
  return x * 3 + 1;
}

// The module of this test and a frame pointing just past the start of the probe function.
TraceModel ModelOfSelf(std::string* build_id) {
  Dl_info info{};
  EXPECT_NE(dladdr(reinterpret_cast<void*>(&SpillwayReportSymbolizerProbe), &info), 0);
  const uint64_t offset = reinterpret_cast<uintptr_t>(&SpillwayReportSymbolizerProbe) -
                          reinterpret_cast<uintptr_t>(info.dli_fbase);
  const std::optional<std::string> id = ReadBuildId("/proc/self/exe");
  EXPECT_TRUE(id.has_value());
  *build_id = id.value_or("");
  TraceModel m;
  // The file itself: /proc/self/exe would name addr2line in the child that reads it.
  m.modules = {{*build_id, std::filesystem::read_symlink("/proc/self/exe").string()}};
  m.sites = {{{{0, offset + 1, ""}}}};
  return m;
}

TEST(ReportSymbolizerTest, ReadsBuildIdsAndRejectsNonElf) {
  const std::optional<std::string> id = ReadBuildId("/proc/self/exe");
  ASSERT_TRUE(id.has_value());
  EXPECT_GE(id->size(), 16u);
  EXPECT_EQ(id->find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_FALSE(ReadBuildId("/proc/self/status").has_value());
  EXPECT_FALSE(ReadBuildId("/nonexistent").has_value());
}

TEST(ReportSymbolizerTest, SymbolizesFramesOfAModuleWithTheRecordedBuildId) {
  std::string build_id;
  TraceModel m = ModelOfSelf(&build_id);
  const SymbolizeResult r = Symbolize(m);
  EXPECT_EQ(r.modules_found, 1u);
  if (!r.addr2line_available) GTEST_SKIP() << "addr2line (binutils) is not installed";
  EXPECT_EQ(r.frames_symbolized, 1u);
  EXPECT_TRUE(absl::StrContains(m.sites[0].frames[0].symbol, "SpillwayReportSymbolizerProbe"))
      << m.sites[0].frames[0].symbol;
}

TEST(ReportSymbolizerTest, LeavesFramesRawWhenTheBuildIdDiffers) {
  std::string build_id;
  TraceModel m = ModelOfSelf(&build_id);
  m.modules[0].build_id = "00112233445566778899aabbccddeeff00112233";
  const SymbolizeResult r = Symbolize(m);
  EXPECT_EQ(r.modules_found, 0u);
  EXPECT_EQ(r.modules_missing, 1u);
  EXPECT_TRUE(m.sites[0].frames[0].symbol.empty());
}

TEST(ReportSymbolizerTest, MissingAddr2lineLeavesFramesRaw) {
  std::string build_id;
  TraceModel m = ModelOfSelf(&build_id);
  const SymbolizeResult r = Symbolize(m, "/nonexistent/addr2line");
  EXPECT_FALSE(r.addr2line_available);
  EXPECT_TRUE(m.sites[0].frames[0].symbol.empty());
}

}  // namespace
}  // namespace spillway::report

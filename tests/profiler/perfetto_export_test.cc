// Tests of the Perfetto export: valid JSON with counter, slice, async and flow events, and a gzip
// stream that inflates back to it.
#include "profiler/report/perfetto_export.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "tests/profiler/report_json_check.h"
#include "tests/profiler/report_synthetic_trace.h"

namespace spillway::report {
namespace {

std::string Gunzip(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buffer[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof(buffer);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - z.avail_out);
  }
  inflateEnd(&z);
  EXPECT_EQ(rc, Z_STREAM_END);
  return out;
}

TEST(PerfettoExportTest, JsonHasCounterSliceAsyncAndFlowEvents) {
  const testing::SyntheticShape shape;
  const TraceModel m = testing::SyntheticTrace(shape);
  const std::string json = ChromeTraceJson(m);
  testing::JsonCheck check;
  ASSERT_TRUE(check.Parse(json)) << "invalid JSON at offset " << check.error_offset();
  const auto& ph = check.phases();
  const int launches = static_cast<int>(m.launches.size());
  EXPECT_GT(ph.at("C"), 0);
  EXPECT_EQ(ph.at("X"), 2 * launches + static_cast<int>(m.copies.size()));  // launch + kernel
  EXPECT_EQ(ph.at("s"), launches);
  EXPECT_EQ(ph.at("f"), launches);
  EXPECT_EQ(ph.at("b"), static_cast<int>(m.allocations.size()));
  EXPECT_EQ(ph.at("e"), static_cast<int>(m.allocations.size()));
  EXPECT_EQ(ph.at("M"), 3);  // process, host track, one stream
  EXPECT_TRUE(absl::StrContains(json, "\"name\":\"device memory\""));
  EXPECT_TRUE(absl::StrContains(json, "\"name\":\"managed resident\""));
  EXPECT_TRUE(absl::StrContains(json, "\"name\":\"fwd_0\""));
  EXPECT_TRUE(absl::StrContains(json, "stream 0x7"));
}

TEST(PerfettoExportTest, KernelsWithoutTimesAreEstimatedPerStream) {
  TraceModel m;
  m.functions = {"a", "b"};
  m.launches = {{1000, 1, 0, {}, kNoTime, kNoTime},
                {2000, 2, 1, {}, kNoTime, kNoTime},
                {5000, 1, 1, {}, kNoTime, kNoTime}};
  const std::string json = ChromeTraceJson(m);
  testing::JsonCheck check;
  ASSERT_TRUE(check.Parse(json));
  EXPECT_EQ(check.phases().at("X"), 6);
  EXPECT_EQ(check.phases().at("M"), 4);  // process, host, two streams
  EXPECT_TRUE(absl::StrContains(json, "\"estimated_time\":true"));
  // The first kernel on stream 1 runs until the next launch on stream 1 (4 µs).
  EXPECT_TRUE(absl::StrContains(json, "\"ts\":1,\"dur\":4,"));
}

TEST(PerfettoExportTest, GzipRoundTripsAndTheFileIsWritten) {
  const TraceModel m = testing::SyntheticTrace();
  const std::string json = ChromeTraceJson(m);
  absl::StatusOr<std::string> gz = Gzip(json);
  ASSERT_TRUE(gz.ok()) << gz.status();
  ASSERT_GE(gz->size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>((*gz)[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>((*gz)[1]), 0x8b);
  EXPECT_LT(gz->size(), json.size());
  EXPECT_EQ(Gunzip(*gz), json);

  const std::string path = ::testing::TempDir() + "/perfetto_export_test.json.gz";
  ASSERT_TRUE(WritePerfettoTrace(m, path).ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  EXPECT_EQ(Gunzip(contents.str()), json);
  std::remove(path.c_str());
  EXPECT_FALSE(WritePerfettoTrace(m, "/nonexistent-dir/x.json.gz").ok());
}

TEST(PerfettoExportTest, GzipOfLargeAndEmptyInputs) {
  std::string big(3 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 7) big[i] = static_cast<char>('a' + i % 26);
  absl::StatusOr<std::string> gz = Gzip(big);
  ASSERT_TRUE(gz.ok());
  EXPECT_EQ(Gunzip(*gz), big);
  absl::StatusOr<std::string> empty = Gzip("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(Gunzip(*empty), "");
}

TEST(JsonCheckTest, RejectsInvalidDocuments) {
  testing::JsonCheck check;
  EXPECT_TRUE(check.Parse(R"({"a":[1,-2.5e3,true,null,"x\n"]})"));
  EXPECT_FALSE(check.Parse(R"({"a":1,})"));
  EXPECT_FALSE(check.Parse(R"({"a":01})"));
  EXPECT_FALSE(check.Parse(R"(["unterminated)"));
  EXPECT_FALSE(check.Parse(R"({"a":1} x)"));
}

}  // namespace
}  // namespace spillway::report

// spillway-replay's --json line (replay_results.h), written with nlohmann-json: the keys in their
// documented order on one line, and a trace name that is not UTF-8 written, not refused.
#include "workloads/replay/replay_results.h"

#include <string>

#include "gtest/gtest.h"

namespace spillway::replay {
namespace {

TEST(ReplayResults, JsonIsOneLineWithTheKeysInOrder) {
  ReplayResults r;
  r.trace = "t\xff.trace";  // a path need not be UTF-8
  r.device = "simgpu";
  r.step_ms = {2.5, 3};
  r.warmup = 1;
  const std::string json = ResultsJson(r);
  EXPECT_EQ(json.find('\n'), std::string::npos);
  EXPECT_EQ(json.rfind("{\"trace\":\"t\xef\xbf\xbd.trace\",\"device\":\"simgpu\",", 0), 0u) << json;
  EXPECT_NE(json.find("\"steps\":2,\"warmup\":1,\"mean_step_ms\":3.0,\"step_ms\":[2.5,3.0],"),
            std::string::npos)
      << json;
  EXPECT_EQ(json.back(), '}');
  size_t last = 0;
  for (const char* key : {"\"recorded_step_ms\"", "\"peak_live_bytes\"", "\"has_modes\":true",
                          "\"verified_bytes\"", "\"digest\""}) {
    const size_t at = json.find(key);
    ASSERT_NE(at, std::string::npos) << key;
    EXPECT_GT(at, last) << key;
    last = at;
  }
}

}  // namespace
}  // namespace spillway::replay

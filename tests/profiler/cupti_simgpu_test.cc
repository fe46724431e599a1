// The real libcupti (found by the recorder's own search) in a process whose libcuda.so.1 is
// simgpu: CUPTI cannot start on a simulated driver, and the recorder must say so once and return
// an error, never crash or hang. Skipped where no libcupti is installed.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <string>
#include <vector>

#include "profiler/cupti/cupti_recorder.h"

namespace spillway::cupti {
namespace {

class NullSink : public CuptiSink {
 public:
  void OnKernelTime(const trace::KernelTimeRecord&, const KernelDetails*) override { ++records; }
  void OnUvmCounter(const trace::UvmCounterRecord&) override { ++records; }
  int records = 0;
};

TEST(CuptiOnSimgpu, RealCuptiFailsCleanlyOnTheSimulatedDriver) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(driver, nullptr) << dlerror();
  Dl_info info;
  ASSERT_NE(dladdr(dlsym(driver, "cuInit"), &info), 0);
  ASSERT_NE(std::string(info.dli_fname).find("simgpu"), std::string::npos)
      << "run with simgpu's folder on LD_LIBRARY_PATH, not " << info.dli_fname;
  unsetenv("SPILLWAY_CUPTI");
  NullSink sink;
  std::vector<std::string> lines;
  CuptiRecorderOptions options;
  options.sink = &sink;
  options.log = [&](const std::string& line) { lines.push_back(line); };
  const absl::Status status = StartCuptiRecorder(options);
  if (absl::IsNotFound(status)) GTEST_SKIP() << status;
  EXPECT_FALSE(status.ok()) << "CUPTI claims to record on simgpu";
  EXPECT_FALSE(CuptiRecorderActive());
  ASSERT_EQ(lines.size(), 1u);
  std::printf("said: %s\n", lines[0].c_str());
  EXPECT_NE(lines[0].find("recording without CUPTI"), std::string::npos) << lines[0];
  EXPECT_TRUE(StopCuptiRecorder(absl::Seconds(1)).ok());
  EXPECT_EQ(sink.records, 0);
}

}  // namespace
}  // namespace spillway::cupti

// Launch handles the shim must read the right parameter layout for, end to end on simgpu
// (kernel_handles_program.cc under the preload): a function that gets an unloaded function's
// handle must not inherit its cached layout, and a CUkernel (cuLibraryGetKernel, what the CUDA
// runtime launches), which simgpu's cuFuncGetParamInfo refuses as a strict driver may, gets its
// layout from cuKernelGetParamInfo, launched directly or from a graph's kernel node.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include "profiler/trace/trace_reader.h"
#include "tests/integration/subprocess.h"

namespace spillway::testing {
namespace {

struct Outcome {
  int status = -1;
  std::string output;
  std::string summary;
};

// Runs `scenario` under the shim, unless `shim` is false, with `extra` in its environment.
Outcome RunScenario(const std::string& scenario, bool shim = true,
                    const std::map<std::string, std::string>& extra = {}) {
  const std::string summary =
      ::testing::TempDir() + "kernel_handles_" + std::to_string(::getpid()) + "_" +
      ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json";
  std::remove(summary.c_str());
  std::map<std::string, std::string> env;
  env["LD_LIBRARY_PATH"] = SIMGPU_DIR;
  env["SIMGPU_MEMORY"] = "64MiB";
  if (shim) {
    const char* runner = std::getenv("SPILLWAY_TEST_PRELOAD");  // sanitizer runtimes
    env["LD_PRELOAD"] = runner != nullptr && *runner != '\0'
                            ? std::string(runner) + ":" + SPILLWAY_LIB
                            : std::string(SPILLWAY_LIB);
    env["SPILLWAY_SUMMARY"] = summary;
  }
  for (const auto& [key, value] : extra) env[key] = value;
  const ProcessResult process =
      RunProcess({KERNEL_HANDLES_PROGRAM, scenario, FOUR_LIBRARY, THREE_LIBRARY}, env);
  Outcome run{process.exit_code, process.output, ReadFile(summary)};
  std::remove(summary.c_str());
  return run;
}

// `scenario`: "reuse" (modules unloaded by cuModuleUnload) or "reuse_reset" (by resetting the
// primary context).
void ExpectEachFunctionGetsItsOwnLayout(const std::string& scenario) {
  const Outcome without = RunScenario(scenario, /*shim=*/false);
  ASSERT_EQ(without.status, 0) << without.output;
  const Outcome run = RunScenario(scenario);
  // A stale 4-parameter layout for `fill` reads past its 3-entry array into a guard page.
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "wrong"), 0) << run.output;
  if (Fact(run.output, "reused") == 0) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "no handle was reused (AddressSanitizer's quarantine): nothing was checked";
#else
    ADD_FAILURE() << "no function got an unloaded one's handle: the test checked nothing\n"
                  << run.output;
#endif
  }
  EXPECT_EQ(JsonInt(run.summary, "launches_resolved"), Fact(run.output, "launches")) << run.summary;
}

TEST(KernelHandlesTest, AFunctionWithAnUnloadedFunctionsHandleGetsItsOwnLayout) {
  ExpectEachFunctionGetsItsOwnLayout("reuse");
}

// A context's end unloads its modules too (simgpu: at cuCtxDestroy, cuDevicePrimaryCtxReset and
// the last cuDevicePrimaryCtxRelease); the shim forgets what it cached as for cuModuleUnload.
TEST(KernelHandlesTest, AFunctionWithAResetContextsFunctionsHandleGetsItsOwnLayout) {
  ExpectEachFunctionGetsItsOwnLayout("reuse_reset");
}

// The launches a trace holds, by the kernel name it gives them; "(failed)" when it cannot be read.
std::map<std::string, int> LaunchesByName(const std::string& trace_path) {
  std::map<std::string, int> launches;
  auto reader = trace::TraceReader::Open(trace_path);
  if (!reader.ok()) return {{"(failed)", 1}};
  std::map<trace::StringId, std::string> strings;
  trace::Record record;
  for (;;) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) return {{"(failed)", 1}};
    if (!*more) break;
    if (const auto* text = std::get_if<trace::StringRecord>(&record)) {
      strings[text->id] = std::string(text->text.data(), text->text.size());
    } else if (const auto* launch = std::get_if<trace::LaunchRecord>(&record)) {
      ++launches[strings[launch->function_name]];
    }
  }
  return launches;
}

std::string TracePath() {
  return ::testing::TempDir() + "kernel_handles_" + std::to_string(::getpid()) + "_" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".trace";
}

// Record mode names each launch's kernel: a function with an unloaded one's handle gets its own.
TEST(KernelHandlesTest, ATraceNamesAFunctionWithAnUnloadedFunctionsHandleByItsOwnName) {
  const std::string trace_path = TracePath();
  const Outcome run = RunScenario("reuse", /*shim=*/true,
                                  {{"SPILLWAY_MODE", "record"}, {"SPILLWAY_TRACE", trace_path}});
  const std::map<std::string, int> launches = LaunchesByName(trace_path);
  std::remove(trace_path.c_str());
  ASSERT_EQ(run.status, 0) << run.output;
  if (Fact(run.output, "reused") == 0) GTEST_SKIP() << "no handle was reused: nothing to check";
  // Each round launches scale_add from one module, then fill from another.
  const int rounds = static_cast<int>(Fact(run.output, "launches")) / 2;
  EXPECT_EQ(launches, (std::map<std::string, int>{{"fill", rounds}, {"scale_add", rounds}}));
}

// Record mode names a CUkernel's launches too (cuKernelGetName where cuFuncGetName refuses it).
TEST(KernelHandlesTest, ATraceNamesACUkernelsLaunches) {
  const std::string trace_path = TracePath();
  const Outcome run = RunScenario("kernel", /*shim=*/true,
                                  {{"SPILLWAY_MODE", "record"}, {"SPILLWAY_TRACE", trace_path}});
  const std::map<std::string, int> launches = LaunchesByName(trace_path);
  std::remove(trace_path.c_str());
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(launches, (std::map<std::string, int>{{"fill", 2}}));
}

TEST(KernelHandlesTest, ACUkernelLaunchGetsItsAccessSet) {
  const Outcome run = RunScenario("kernel");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "filled"), 2) << run.output;
  EXPECT_EQ(JsonInt(run.summary, "launches_resolved"), 2) << run.summary;
}

TEST(KernelHandlesTest, AGraphNodeGivenACUkernelGetsItsAccessSet) {
  const Outcome run = RunScenario("kernel_graph");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Fact(run.output, "filled"), 1) << run.output;
  EXPECT_EQ(JsonInt(run.summary, "graph_launches"), 1) << run.summary;
  // The engine brought the node's buffer in before the launch: it knew the access set.
  EXPECT_GT(JsonInt(run.summary, "prefetch_bytes"), 0) << run.summary;
}

}  // namespace
}  // namespace spillway::testing

// libspillway.so preloaded where no driver can be loaded: hooks answer CUDA_ERROR_NOT_INITIALIZED
// (3), the problem is logged once and listed in the summary, and the job runs to its end. And with
// a driver older than some entry points spillway exports (old_driver.cc): those are not found.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// LD_PRELOAD for a job under libspillway.so (after the sanitizer runtimes in a sanitized build).
std::string Preload() {
  const char* runner_preload = std::getenv("SPILLWAY_TEST_PRELOAD");
  return runner_preload != nullptr && *runner_preload != '\0'
             ? std::string(runner_preload) + ":" + SPILLWAY_LIB
             : std::string(SPILLWAY_LIB);
}

TEST(NoDriverTest, HooksFailCleanlyWithoutADriver) {
  if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(driver);
    GTEST_SKIP() << "a libcuda.so.1 is installed on this machine";
  }
  const std::string base = ::testing::TempDir() + "no_driver_" + std::to_string(::getpid());
  const std::string preload = Preload();
  const std::string command = "env LD_PRELOAD=" + preload + " SPILLWAY_SUMMARY=" + base + ".json " +
                              NO_DRIVER_PROGRAM + " >" + base + ".out 2>" + base + ".err";
  const int raw = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_EQ(WEXITSTATUS(raw), 0);
  EXPECT_EQ(ReadFile(base + ".out"), "cuInit=3\ncuInit=3\n");
  const std::string err = ReadFile(base + ".err");
  EXPECT_NE(err.find("spillway: error: cannot load libcuda.so.1"), std::string::npos) << err;
  EXPECT_EQ(err.find("cannot load", err.find("cannot load") + 1), std::string::npos)
      << "logged more than once: " << err;
  const std::string summary = ReadFile(base + ".json");
  EXPECT_NE(summary.find("cannot load libcuda.so.1"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"driver\":\"\""), std::string::npos) << summary;
}

// An older driver lacks some entry points spillway exports (cuCtxSynchronize_v2 before CUDA 13,
// cuLibraryUnload before 12, ...). A program probing for one with dlsym(RTLD_DEFAULT, ...) finds
// nothing, as without spillway, not spillway's export, which could only refuse; the ones the driver
// has are found (spillway's hooks).
TEST(NoDriverTest, AnEntryPointTheDriverLacksIsNotFound) {
  const std::string base = ::testing::TempDir() + "old_driver_" + std::to_string(::getpid());
  const std::string preload = Preload();
  const std::string command = "env LD_LIBRARY_PATH=" OLD_DRIVER_DIR " LD_PRELOAD=" + preload +
                              " SPILLWAY_SUMMARY=" + base + ".json " + NO_DRIVER_PROGRAM +
                              " probe >" + base + ".out 2>" + base + ".err";
  const int raw = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_EQ(WEXITSTATUS(raw), 0) << ReadFile(base + ".err");
  EXPECT_EQ(ReadFile(base + ".out"),
            "cuInit=0\ncuInit=0\nfound cuCtxSynchronize_v2=0\nfound cuInit=1\n")
      << ReadFile(base + ".err");
}

// glibc's dlsym(RTLD_DEFAULT, ...) searches the caller's scope: a library loaded with RTLD_LOCAL
// finds its own dependencies' symbols. With spillway's dlsym in between, it still does (the
// override hands glibc the caller's return address for every name it does not hook).
TEST(NoDriverTest, DlsymOfADefaultHandleSearchesTheCallersScope) {
  const std::string base = ::testing::TempDir() + "scope_" + std::to_string(::getpid());
  const std::string preload = Preload();
  for (const std::string& with : {std::string(), "LD_PRELOAD=" + preload}) {
    const std::string command = "env " + with + " " + SCOPE_PROGRAM + " " + SCOPE_OUTER + " >" +
                                base + ".out 2>" + base + ".err";
    const int raw = std::system(command.c_str());
    ASSERT_TRUE(WIFEXITED(raw));
    EXPECT_EQ(WEXITSTATUS(raw), 0) << ReadFile(base + ".err");
    EXPECT_EQ(ReadFile(base + ".out"), "found=1\n")
        << (with.empty() ? "without" : "with") << " spillway: " << ReadFile(base + ".err");
  }
}

}  // namespace

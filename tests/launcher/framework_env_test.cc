// Tests of the framework settings `spillway run` exports and reports (launcher/framework_env.h):
// defaults where the user chose nothing, the user's own kept, and a driver without managed memory
// pools (before CUDA 13.0) leaving PyTorch's and TensorFlow's caching allocators alone.
#include "launcher/framework_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace spillway::launcher {
namespace {

using Strings = std::vector<std::string>;

class FrameworkEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kNames) unsetenv(name);
  }
  void TearDown() override { SetUp(); }

  static constexpr const char* kNames[] = {"PYTORCH_CUDA_ALLOC_CONF",
                                           "PYTORCH_ALLOC_CONF",
                                           "TF_GPU_ALLOCATOR",
                                           "TF_FORCE_GPU_ALLOW_GROWTH",
                                           "XLA_PYTHON_CLIENT_PREALLOCATE",
                                           "XLA_PYTHON_CLIENT_ALLOCATOR"};
};

TEST_F(FrameworkEnvTest, DefaultsAndKeptChoices) {
  setenv("TF_GPU_ALLOCATOR", "bfc", 1);
  const FrameworkSettings settings = SetFrameworkAllocators(false, 13000);
  EXPECT_EQ(settings.set,
            (Strings{"PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync",
                     "XLA_PYTHON_CLIENT_ALLOCATOR=platform", "TF_FORCE_GPU_ALLOW_GROWTH=true",
                     "XLA_PYTHON_CLIENT_PREALLOCATE=false"}));
  EXPECT_EQ(settings.kept, (Strings{"TF_GPU_ALLOCATOR"}));
  EXPECT_STREQ(std::getenv("TF_GPU_ALLOCATOR"), "bfc");
  EXPECT_EQ(ReportFrameworkAllocators(settings),
            (Strings{"spillway: framework settings: set "
                     "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "
                     "XLA_PYTHON_CLIENT_ALLOCATOR=platform TF_FORCE_GPU_ALLOW_GROWTH=true "
                     "XLA_PYTHON_CLIENT_PREALLOCATE=false; kept yours: TF_GPU_ALLOCATOR"}));
}

TEST_F(FrameworkEnvTest, FrameworkAllocatorSetsOnlyGrowth) {
  const FrameworkSettings settings = SetFrameworkAllocators(true, -1);
  EXPECT_EQ(settings.set,
            (Strings{"TF_FORCE_GPU_ALLOW_GROWTH=true", "XLA_PYTHON_CLIENT_PREALLOCATE=false"}));
  EXPECT_EQ(std::getenv("PYTORCH_CUDA_ALLOC_CONF"), nullptr);
}

TEST_F(FrameworkEnvTest, ExpandableSegmentsWarned) {
  setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 1);
  const Strings lines = ReportFrameworkAllocators(SetFrameworkAllocators(false, -1));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].rfind("spillway: warning: expandable_segments:True makes PyTorch", 0), 0u);
}

TEST_F(FrameworkEnvTest, DriverWithoutPools) {
  setenv("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync", 1);
  const FrameworkSettings settings = SetFrameworkAllocators(false, 12040);
  EXPECT_EQ(settings.driver_without_pools, "12.4");
  EXPECT_EQ(std::getenv("TF_GPU_ALLOCATOR"), nullptr);
  const Strings lines = ReportFrameworkAllocators(settings);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1],
            "spillway: the driver is CUDA 12.4, without managed memory pools (CUDA 13.0): "
            "TensorFlow keeps its caching allocator, which spillway backs per 2 MiB chunk (as "
            "with --framework-allocator)");
  EXPECT_EQ(lines[2].rfind("spillway: warning: the driver is CUDA 12.4, without managed memory "
                           "pools (CUDA 13.0): PyTorch's cudaMallocAsync backend allocates",
                           0),
            0u);
}

}  // namespace
}  // namespace spillway::launcher

// The synthetic training steps are valid and have the sizes and times they claim.
#include "policy/planner/synthetic_workloads.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace spillway::policy {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST(SyntheticWorkloads, AllAreValid) {
  for (const std::string& name : SyntheticWorkloadNames()) {
    absl::StatusOr<Workload> w = MakeSyntheticWorkload(name);
    ASSERT_TRUE(w.ok()) << name;
    EXPECT_TRUE(ValidateWorkload(*w).ok()) << name << ": " << ValidateWorkload(*w);
    EXPECT_GT(w->num_launches(), 50u) << name;
    EXPECT_GT(w->compute_seconds(), 0) << name;
  }
  EXPECT_EQ(MakeSyntheticWorkload("vgg").status().message(),
            "unknown synthetic workload 'vgg' (known: transformer, transformer-small, cnn, "
            "cnn-small)");
}

TEST(SyntheticWorkloads, TransformerHasGpt2MediumSizes) {
  const Workload w = MakeTransformerStep(TransformerShape{});
  // 24 x 12 h^2 + vocab x h parameters = 353M, each with weight, grad and two Adam moments (fp32).
  const double params = 24.0 * 12 * 1024 * 1024 + 50257.0 * 1024;
  EXPECT_NEAR(static_cast<double>(w.persistent_bytes()), params * 16, params * 16 * 0.1);
  // One layer's MLP activation (batch 8 x 1024 tokens x 4096, fp16) is 64 MiB.
  const auto it =
      std::find_if(w.allocations.begin(), w.allocations.end(),
                   [](const WorkloadAllocation& a) { return a.name == "h.0.mlp.c_fc.out"; });
  ASSERT_NE(it, w.allocations.end());
  EXPECT_EQ(it->bytes, 64 * kMiB);
  // Forward + backward ~ 6 x params x tokens FLOPs at 200 TFLOP/s: roughly 100 ms.
  EXPECT_GT(w.compute_seconds(), 0.07);
  EXPECT_LT(w.compute_seconds(), 0.2);
  EXPECT_GT(w.peak_live_bytes(), uint64_t{10} << 30);
}

TEST(SyntheticWorkloads, CnnHasLargeEarlyActivations) {
  const Workload w = MakeCnnStep(CnnShape{});
  auto size_of = [&](const std::string& name) {
    for (const WorkloadAllocation& a : w.allocations) {
      if (a.name == name) return a.bytes;
    }
    return uint64_t{0};
  };
  // 128 x 64 x 112 x 112 fp16 = 196 MiB; the last stage's maps are 8x smaller.
  EXPECT_EQ(size_of("conv1.out"), 128ull * 64 * 112 * 112 * 2);
  EXPECT_GT(size_of("layer1.0.conv3.out"), 4 * size_of("layer4.0.conv3.out"));
  EXPECT_LT(w.persistent_bytes(), uint64_t{600} << 20);  // 25M parameters x 3 fp32 copies
  EXPECT_GT(w.peak_live_bytes(), uint64_t{5} << 29);     // 2.5 GiB
}

}  // namespace
}  // namespace spillway::policy

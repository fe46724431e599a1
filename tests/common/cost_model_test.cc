// The shared migration cost model: the formulas simgpu charges and the simulator predicts with.
#include "common/cost_model.h"

#include "gtest/gtest.h"

namespace spillway {
namespace {

TEST(CostModel, DefaultsAreTheDocumentedH100PCIeFigures) {
  const CostModel c;
  EXPECT_EQ(c.h2d_bytes_per_s, 45e9);
  EXPECT_EQ(c.d2h_bytes_per_s, 53e9);
  EXPECT_EQ(c.fault_batch_bytes, kChunkBytes);
  EXPECT_EQ(c.copy_engines, 2);
}

TEST(CostModel, FaultStallIsBatchesPlusTransfers) {
  CostModel c;
  c.fault_batch_bytes = 2 * kChunkBytes;
  EXPECT_EQ(FaultBatches(c, 0), 0u);
  EXPECT_EQ(FaultBatches(c, 1), 1u);
  EXPECT_EQ(FaultBatches(c, 3 * kChunkBytes), 2u);
  EXPECT_EQ(FaultStallSeconds(c, 0, 0), 0);
  const double expected = 2 * c.fault_batch_seconds + 3.0 * kChunkBytes / c.h2d_bytes_per_s +
                          1.0 * kChunkBytes / c.d2h_bytes_per_s;
  EXPECT_DOUBLE_EQ(FaultStallSeconds(c, 3 * kChunkBytes, kChunkBytes), expected);
}

TEST(CostModel, CopyEnginesOverlapOnlyWhenThereAreTwo) {
  CostModel c;
  c.h2d_bytes_per_s = 1e9;
  c.d2h_bytes_per_s = 2e9;
  EXPECT_DOUBLE_EQ(CopyEngineSeconds(c, 1000000000, 1000000000), 1.0);
  c.copy_engines = 1;
  EXPECT_DOUBLE_EQ(CopyEngineSeconds(c, 1000000000, 1000000000), 1.5);
}

}  // namespace
}  // namespace spillway

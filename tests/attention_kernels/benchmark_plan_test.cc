// CPU tests of attention_benchmark's plan: option parsing and its one-line errors, the SDPA grid
// (constant token count), FlashAttention's FLOP counts, and the additive byte accounting.
#include "attention_kernels/benchmark/benchmark_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace spillway::attention::benchmark {
namespace {

absl::StatusOr<BenchmarkOptions> Parse(std::vector<const char*> args) {
  return ParseBenchmarkOptions(args);
}

std::string Error(std::vector<const char*> args) {
  absl::StatusOr<BenchmarkOptions> parsed = Parse(std::move(args));
  EXPECT_FALSE(parsed.ok());
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

TEST(BenchmarkOptionsTest, DefaultsWithoutArguments) {
  absl::StatusOr<BenchmarkOptions> o = Parse({});
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->help);
  EXPECT_FALSE(o->quick);
  EXPECT_EQ(o->csv_path, "");
  EXPECT_EQ(o->tokens, 16384);
  EXPECT_EQ(o->warmup, 3);
  EXPECT_EQ(o->iters, 10);
}

TEST(BenchmarkOptionsTest, ParsesEveryFlagInBothForms) {
  absl::StatusOr<BenchmarkOptions> o =
      Parse({"--quick", "--csv", "out.csv", "--tokens=8192", "--warmup", "0", "--iters=7", "-h"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->quick);
  EXPECT_TRUE(o->help);
  EXPECT_EQ(o->csv_path, "out.csv");
  EXPECT_EQ(o->tokens, 8192);
  EXPECT_EQ(o->warmup, 0);
  EXPECT_EQ(o->iters, 7);
  o = Parse({"--csv=a=b.csv"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->csv_path, "a=b.csv");
}

TEST(BenchmarkOptionsTest, BadInputGivesOneLineNamingTheFlag) {
  EXPECT_EQ(Error({"--frob"}), "unknown flag '--frob' (see --help)");
  EXPECT_EQ(Error({"--quick=1"}), "unknown flag '--quick=1' (see --help)");
  EXPECT_EQ(Error({"quick"}), "unknown flag 'quick' (see --help)");
  EXPECT_EQ(Error({"--iters"}), "--iters needs a value");
  EXPECT_EQ(Error({"--iters", "x"}), "--iters: 'x' is not an integer");
  EXPECT_EQ(Error({"--iters=0"}), "--iters: 0 is out of range [1, 10000]");
  EXPECT_EQ(Error({"--warmup=-1"}), "--warmup: -1 is out of range [0, 1000]");
  EXPECT_EQ(Error({"--tokens", "100"}), "--tokens: 100 is out of range [512, 4194304]");
  EXPECT_EQ(Error({"--csv="}), "--csv: the path is empty");
  for (const std::string& e : {Error({"--frob"}), Error({"--iters", "x"})}) {
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(BenchmarkOptionsTest, UsageNamesEveryFlag) {
  const std::string usage = BenchmarkUsage();
  for (const char* flag : {"--quick", "--csv PATH", "--tokens N", "--warmup N", "--iters N"}) {
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
  }
}

TEST(SdpaGridTest, FullGridCoversEveryCombinationAtConstantTokens) {
  const std::vector<SdpaConfig> grid = SdpaGrid(BenchmarkOptions{});
  ASSERT_EQ(grid.size(), 2u * 2 * 2 * 6);
  std::set<std::string> seen;
  for (const SdpaConfig& c : grid) {
    EXPECT_EQ(int64_t{c.batch} * c.seqlen, 16384) << c.seqlen;
    EXPECT_EQ(c.heads * c.head_dim, kModelDim);
    seen.insert(std::string(DtypeName(c.dtype)) + "/" + std::to_string(c.head_dim) + "/" +
                std::to_string(c.causal) + "/" + std::to_string(c.seqlen));
  }
  EXPECT_EQ(seen.size(), grid.size());
  EXPECT_EQ(grid.front().seqlen, 512);
  EXPECT_EQ(grid.back().seqlen, 16384);
  EXPECT_EQ(grid.front().dtype, Dtype::kBf16);
  EXPECT_EQ(grid.back().dtype, Dtype::kFp16);
}

TEST(SdpaGridTest, QuickGridIsBf16AtOneAndFourK) {
  BenchmarkOptions options;
  options.quick = true;
  options.tokens = 2048;  // fewer tokens than 4k: batch stays 1
  const std::vector<SdpaConfig> grid = SdpaGrid(options);
  ASSERT_EQ(grid.size(), 8u);
  for (const SdpaConfig& c : grid) {
    EXPECT_EQ(c.dtype, Dtype::kBf16);
    EXPECT_TRUE(c.seqlen == 1024 || c.seqlen == 4096);
    EXPECT_EQ(c.batch, c.seqlen == 1024 ? 2 : 1);
  }
}

TEST(FlopsTest, CountsAsFlashAttention) {
  const SdpaConfig c{Dtype::kBf16, 128, false, 4, 16, 4096};
  EXPECT_DOUBLE_EQ(SdpaForwardFlops(c), 4.0 * 4 * 16 * 4096.0 * 4096 * 128);
  EXPECT_DOUBLE_EQ(SdpaBackwardFlops(c), 2.5 * SdpaForwardFlops(c));
  SdpaConfig causal = c;
  causal.causal = true;
  EXPECT_DOUBLE_EQ(SdpaForwardFlops(causal), SdpaForwardFlops(c) / 2);
  EXPECT_DOUBLE_EQ(SdpaBackwardFlops(causal), SdpaBackwardFlops(c) / 2);
}

TEST(BytesTest, SdpaTensorsAreEightHalfTensorsAndTheLse) {
  const SdpaConfig c{Dtype::kFp16, 64, true, 2, 32, 512};
  const uint64_t rows = 2 * 512 * 32;
  EXPECT_EQ(SdpaTensorBytes(c), 8 * rows * 64 * 2 + rows * 4);
}

TEST(BytesTest, AdditiveUnfusedAddsTheTanhIntermediateExactly) {
  const AdditiveConfig c = AdditiveBenchmarkConfig();
  EXPECT_EQ(c.target_len, 400);
  EXPECT_EQ(c.source_len, 400);
  const uint64_t b = c.batch, t = 400, s = 400;
  const uint64_t fused =
      2 * (b * t * c.units + b * s * c.units + b * s * c.value_dim + b * t * c.value_dim) * 2 +
      (2 * uint64_t(c.units) + b * t) * 4;
  EXPECT_EQ(AdditiveFusedTensorBytes(c), fused);
  EXPECT_EQ(AdditiveUnfusedBytes(c), fused + b * t * s * c.units * 2 + b * t * s * 2);
  // The goal (< 1/10) is reachable at this size: the intermediate dwarfs the tensors.
  EXPECT_LT(AdditiveFusedTensorBytes(c) * 10, AdditiveUnfusedBytes(c));
}

TEST(DriverVersionTest, ReadsBothKernelModuleLines) {
  EXPECT_EQ(DriverVersionFromProcLine("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  "
                                      "Sun Jul 27 07:09:38 UTC 2025"),
            "580.65.06");
  EXPECT_EQ(DriverVersionFromProcLine("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
                                      "580.65.06  Release Build  (dvs-builder@U16)"),
            "580.65.06");
  EXPECT_EQ(DriverVersionFromProcLine(""), "unknown");
  EXPECT_EQ(DriverVersionFromProcLine("Kernel Module"), "unknown");
  EXPECT_EQ(DriverVersionFromProcLine("Kernel Module for x86_64"), "unknown");
}

}  // namespace
}  // namespace spillway::attention::benchmark

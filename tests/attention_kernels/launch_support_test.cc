// CPU tests of the host-side logic the launchers rely on: the once-per-(kernel, device) shared
// memory opt-in (driven with fake CUDA calls), the varlen offset check the kernels apply to each
// sequence, the SDPA workspace layout, and the varlen status messages.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "attention_kernels/src/smem_opt_in.h"
#include "attention_kernels/src/validate.h"
#include "attention_kernels/src/workspace.h"

namespace spillway::attention {
namespace {

// A fake device: the opt-in it currently holds per device, and counts of the calls made.
struct FakeDevice {
  std::vector<std::size_t> attribute = std::vector<std::size_t>(4, 0);
  int set_calls = 0;
  int launches = 0;
  bool fail_set = false;

  Check Set(int device, std::size_t bytes) {
    ++set_calls;
    if (fail_set) return {SPILLWAY_ATTENTION_ERROR_CUDA, "set failed"};
    attribute[device] = bytes;
    return {};
  }
  // A launch fails like the runtime does when the kernel is not opted into enough bytes.
  Check Launch(int device, std::size_t bytes) {
    ++launches;
    if (bytes > kDefaultSmemPerBlock && attribute[device] < bytes) {
      return {SPILLWAY_ATTENTION_ERROR_CUDA, "too much shared memory"};
    }
    return {};
  }
  Check Run(SmemOptIn& opt_in, int device, std::size_t bytes) {
    return LaunchWithSmemOptIn(
        opt_in, device, bytes, [&](std::size_t n) { return Set(device, n); },
        [&] { return Launch(device, bytes); });
  }
};

TEST(SmemOptInTest, SetsTheAttributeOncePerDevice) {
  SmemOptIn opt_in;
  FakeDevice gpu;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(gpu.Run(opt_in, 0, 100000).ok());
  EXPECT_EQ(gpu.set_calls, 1);
  EXPECT_EQ(gpu.launches, 5);
  ASSERT_TRUE(gpu.Run(opt_in, 1, 100000).ok());  // another device needs its own
  ASSERT_TRUE(gpu.Run(opt_in, 1, 100000).ok());
  EXPECT_EQ(gpu.set_calls, 2);
  EXPECT_EQ(opt_in.Recorded(0), 100000u);
  EXPECT_EQ(opt_in.Recorded(2), 0u);
}

TEST(SmemOptInTest, NeverSetsAtOrBelowTheDefault) {
  SmemOptIn opt_in;
  FakeDevice gpu;
  ASSERT_TRUE(gpu.Run(opt_in, 0, kDefaultSmemPerBlock).ok());
  ASSERT_TRUE(gpu.Run(opt_in, 0, 1024).ok());
  EXPECT_EQ(gpu.set_calls, 0);
  EXPECT_EQ(gpu.launches, 2);
}

TEST(SmemOptInTest, RaisesForLargerCallsAndNeverLowers) {
  SmemOptIn opt_in;
  FakeDevice gpu;
  ASSERT_TRUE(gpu.Run(opt_in, 0, 60000).ok());
  ASSERT_TRUE(gpu.Run(opt_in, 0, 90000).ok());  // a larger call (additive: per-call sizes)
  EXPECT_EQ(gpu.set_calls, 2);
  ASSERT_TRUE(gpu.Run(opt_in, 0, 60000).ok());  // covered by the larger opt-in
  EXPECT_EQ(gpu.set_calls, 2);
  EXPECT_EQ(gpu.attribute[0], 90000u);
}

TEST(SmemOptInTest, AFailedSetIsNotRememberedAndNothingLaunches) {
  SmemOptIn opt_in;
  FakeDevice gpu;
  gpu.fail_set = true;
  const Check c = gpu.Run(opt_in, 0, 100000);
  EXPECT_EQ(c.status, SPILLWAY_ATTENTION_ERROR_CUDA);
  EXPECT_EQ(c.message, "set failed");
  EXPECT_EQ(gpu.launches, 0);
  gpu.fail_set = false;
  ASSERT_TRUE(gpu.Run(opt_in, 0, 100000).ok());
  EXPECT_EQ(gpu.set_calls, 2);
}

TEST(SmemOptInTest, RedoesAStaleOptInOnceAfterADeviceReset) {
  SmemOptIn opt_in;
  FakeDevice gpu;
  ASSERT_TRUE(gpu.Run(opt_in, 0, 100000).ok());
  gpu.attribute[0] = 0;  // cudaDeviceReset() dropped the function attribute
  const Check c = gpu.Run(opt_in, 0, 100000);
  EXPECT_TRUE(c.ok()) << c.message;
  EXPECT_EQ(gpu.set_calls, 2);
  EXPECT_EQ(gpu.launches, 3);  // one failed, one retried
  ASSERT_TRUE(gpu.Run(opt_in, 0, 100000).ok());
  EXPECT_EQ(gpu.set_calls, 2);
}

TEST(SmemOptInTest, AFreshOptInIsNotRetriedWhenTheLaunchFails) {
  SmemOptIn opt_in;
  int launches = 0, sets = 0;
  const Check c = LaunchWithSmemOptIn(
      opt_in, 0, 100000,
      [&](std::size_t) {
        ++sets;
        return Check{};
      },
      [&] {
        ++launches;
        return Check{SPILLWAY_ATTENTION_ERROR_CUDA, "launch failed"};
      });
  EXPECT_EQ(c.message, "launch failed");
  EXPECT_EQ(sets, 1);
  EXPECT_EQ(launches, 1);
}

TEST(SmemOptInTest, DevicesPastTheTableAreSetEveryTime) {
  SmemOptIn opt_in;
  int sets = 0;
  for (int device : {-1, SmemOptIn::kMaxDevices, SmemOptIn::kMaxDevices}) {
    const Check c = LaunchWithSmemOptIn(
        opt_in, device, 100000,
        [&](std::size_t) {
          ++sets;
          return Check{};
        },
        [] { return Check{}; });
    EXPECT_TRUE(c.ok());
  }
  EXPECT_EQ(sets, 3);
}

TEST(SmemOptInTest, ConcurrentFirstLaunchesEndWithTheLargestOptInRecorded) {
  SmemOptIn opt_in;
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 8; ++t) {
    threads.emplace_back([&opt_in, t] {
      for (int i = 0; i < 1000; ++i) opt_in.Record(0, 50000 + t * 1000);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(opt_in.Recorded(0), 57000u);
}

constexpr uint32_t kQOffsets = SPILLWAY_ATTENTION_VARLEN_Q_OFFSETS;
constexpr uint32_t kQTooLong = SPILLWAY_ATTENTION_VARLEN_Q_TOO_LONG;
constexpr uint32_t kKOffsets = SPILLWAY_ATTENTION_VARLEN_K_OFFSETS;
constexpr uint32_t kKTooLong = SPILLWAY_ATTENTION_VARLEN_K_TOO_LONG;

// Errors of sequence b for offset arrays cu_q, cu_k, as the kernels compute them.
uint32_t ErrorsOf(const std::vector<int32_t>& cu_q, const std::vector<int32_t>& cu_k, int b,
                  int64_t seqlen_q, int64_t seqlen_k) {
  return VarlenSequenceErrors({cu_q[b], cu_q[b + 1], cu_q.back()},
                              {cu_k[b], cu_k[b + 1], cu_k.back()}, seqlen_q, seqlen_k);
}

TEST(VarlenCheckTest, AcceptsValidOffsetsUpToTheDeclaredMaximum) {
  const std::vector<int32_t> cu_q = {0, 37, 150, 190}, cu_k = {0, 170, 200, 330};
  for (int b = 0; b < 3; ++b) EXPECT_EQ(ErrorsOf(cu_q, cu_k, b, 113, 170), 0u) << b;
  // Empty sequences are valid.
  EXPECT_EQ(ErrorsOf({0, 0, 5}, {0, 0, 0}, 0, 5, 1), 0u);
}

TEST(VarlenCheckTest, FlagsLengthsPastTheDeclaredMaximum) {
  const std::vector<int32_t> cu_q = {0, 37, 150, 190}, cu_k = {0, 170, 200, 330};
  EXPECT_EQ(ErrorsOf(cu_q, cu_k, 1, 112, 170), kQTooLong);  // 113 queries, 112 declared
  EXPECT_EQ(ErrorsOf(cu_q, cu_k, 0, 112, 169), kKTooLong);
  EXPECT_EQ(ErrorsOf(cu_q, cu_k, 1, 100, 100), kQTooLong);
  EXPECT_EQ(ErrorsOf(cu_q, cu_k, 2, 39, 129), kQTooLong | kKTooLong);
}

TEST(VarlenCheckTest, FlagsNegativeDecreasingAndOverrunningOffsets) {
  EXPECT_EQ(ErrorsOf({-4, 10, 20}, {0, 10, 20}, 0, 64, 64), kQOffsets);
  EXPECT_EQ(ErrorsOf({0, 30, 20}, {0, 10, 20}, 1, 64, 64), kQOffsets);  // decreasing
  EXPECT_EQ(ErrorsOf({0, 30, 20}, {0, 10, 20}, 0, 64, 64), kQOffsets);  // past cu[batch]
  EXPECT_EQ(ErrorsOf({0, 10, 20}, {0, 25, 20}, 0, 64, 64), kKOffsets);
  EXPECT_EQ(ErrorsOf({0, 10, 20}, {0, -1, 20}, 0, 64, 64), kKOffsets);
}

// Whatever the offsets, a sequence the kernels compute touches only tokens in [0, cu[batch]) and
// rows below the declared maximum (so D rows stay in the workspace).
TEST(VarlenCheckTest, AcceptedSequencesStayInBoundsForArbitraryOffsets) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<int32_t> offset(-20, 300);
  int accepted = 0, rejected = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<int32_t> cu_q(6), cu_k(6);
    for (int32_t& x : cu_q) x = offset(gen);
    for (int32_t& x : cu_k) x = offset(gen);
    if (trial % 2 == 0) cu_q[0] = cu_k[0] = 0;
    for (int b = 0; b < 5; ++b) {
      if (ErrorsOf(cu_q, cu_k, b, 64, 80) != 0) {
        ++rejected;
        continue;
      }
      ++accepted;
      ASSERT_GE(cu_q[b], 0);
      ASSERT_LE(cu_q[b], cu_q[b + 1]);
      ASSERT_LE(cu_q[b + 1], cu_q.back());
      ASSERT_LE(cu_q[b + 1] - cu_q[b], 64);
      ASSERT_GE(cu_k[b], 0);
      ASSERT_LE(cu_k[b + 1], cu_k.back());
      ASSERT_LE(cu_k[b + 1] - cu_k[b], 80);
    }
  }
  EXPECT_GT(accepted, 100);  // both branches exercised
  EXPECT_GT(rejected, 100);
}

spillway_attention_sdpa_problem_t Problem(bool varlen) {
  spillway_attention_sdpa_problem_t p{};
  p.batch = 3;
  p.seqlen_q = 100;
  p.num_heads_q = 8;
  static const int32_t kOffsets[4] = {0, 1, 2, 3};  // never read: only their presence matters
  if (varlen) p.cu_seqlens_q = p.cu_seqlens_k = kOffsets;
  return p;
}

TEST(WorkspaceLayoutTest, VarlenCallsStartWithAStatusBlock) {
  EXPECT_EQ(SdpaForwardWorkspaceBytes(Problem(false)), 0u);
  EXPECT_EQ(SdpaForwardWorkspaceBytes(Problem(true)), 256u);
  EXPECT_EQ(SdpaBackwardWorkspaceBytes(Problem(false)), AlignWorkspace(4u * 3 * 100 * 8));
  EXPECT_EQ(SdpaBackwardWorkspaceBytes(Problem(true)), 256 + AlignWorkspace(4u * 3 * 100 * 8));
}

TEST(WorkspaceLayoutTest, EveryPaddedDeltaRowFitsAfterTheStatusBlock) {
  for (bool varlen : {false, true}) {
    const spillway_attention_sdpa_problem_t p = Problem(varlen);
    const int64_t last =
        SdpaDeltaIndex(p.batch - 1, p.seqlen_q - 1, p.num_heads_q - 1, p.seqlen_q, p.num_heads_q);
    EXPECT_EQ(static_cast<std::size_t>(last) + 1, SdpaDeltaCount(p));
    EXPECT_LE(SdpaStatusBytes(p) + 4 * SdpaDeltaCount(p), SdpaBackwardWorkspaceBytes(p));
    EXPECT_EQ(SdpaStatusBytes(p) % kWorkspaceAlignment, 0u);
    // Distinct (b, i, h) get distinct slots: row b, i and row b, i + 1 do not overlap.
    EXPECT_EQ(SdpaDeltaIndex(1, 0, 0, p.seqlen_q, p.num_heads_q),
              SdpaDeltaIndex(0, p.seqlen_q - 1, p.num_heads_q - 1, p.seqlen_q, p.num_heads_q) + 1);
  }
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(VarlenStatusTest, DescribesEachErrorAndTheFirstBadSequence) {
  EXPECT_TRUE(DescribeVarlenStatus({0, -1}).ok());
  const Check c = DescribeVarlenStatus({kQTooLong | kKOffsets, 4});
  EXPECT_EQ(c.status, SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
  EXPECT_PRED2(Contains, c.message, "a query length exceeds seqlen_q");
  EXPECT_PRED2(Contains, c.message, "cu_seqlens_k is negative, decreasing");
  EXPECT_PRED2(Contains, c.message, "first at sequence 4");
  EXPECT_FALSE(Contains(c.message, "key length"));
  const Check unknown = DescribeVarlenStatus({0x40, 0});
  EXPECT_EQ(unknown.status, SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
  EXPECT_PRED2(Contains, unknown.message, "unknown error bits 64");
}

constexpr uint32_t kSourceNegative = SPILLWAY_ATTENTION_VARLEN_SOURCE_NEGATIVE;
constexpr uint32_t kSourceTooLong = SPILLWAY_ATTENTION_VARLEN_SOURCE_TOO_LONG;

// Additive source lengths: [0, source_len] is computed (0 is a row with no source), anything else
// is flagged, never clamped.
TEST(SourceLengthCheckTest, AcceptsZeroUpToSourceLenAndFlagsTheRest) {
  for (int64_t length : {0, 1, 69, 70}) EXPECT_EQ(SourceLengthErrors(length, 70), 0u) << length;
  EXPECT_EQ(SourceLengthErrors(71, 70), kSourceTooLong);
  EXPECT_EQ(SourceLengthErrors(INT32_MAX, 70), kSourceTooLong);
  EXPECT_EQ(SourceLengthErrors(-1, 70), kSourceNegative);
  EXPECT_EQ(SourceLengthErrors(INT32_MIN, 70), kSourceNegative);
}

spillway_attention_additive_problem_t AdditiveProblem(bool lengths) {
  static const int32_t kLengths[3] = {1, 2, 3};  // never read: only their presence matters
  return {SPILLWAY_ATTENTION_FP16, 3, 40, 50, 256, 512, lengths ? kLengths : nullptr};
}

TEST(WorkspaceLayoutTest, AdditiveCallsWithSourceLengthsStartWithAStatusBlock) {
  EXPECT_EQ(AdditiveForwardWorkspaceBytes(AdditiveProblem(false)), 0u);
  EXPECT_EQ(AdditiveForwardWorkspaceBytes(AdditiveProblem(true)), 256u);
  EXPECT_EQ(AdditiveStatusBytes(AdditiveProblem(true)) % kWorkspaceAlignment, 0u);
  EXPECT_EQ(AdditiveBackwardWorkspaceBytes(AdditiveProblem(true)),
            256u + AdditiveBackwardWorkspaceBytes(AdditiveProblem(false)));
}

TEST(SourceLengthsStatusTest, DescribesEachErrorAndTheFirstBadSequence) {
  EXPECT_TRUE(DescribeSourceLengthsStatus({0, -1}).ok());
  const Check c = DescribeSourceLengthsStatus({kSourceTooLong, 3});
  EXPECT_EQ(c.status, SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
  EXPECT_EQ(c.message,
            "source_lengths: a source length exceeds source_len (first at sequence 3); those "
            "sequences were not computed: each source_lengths[b] must be in [0, source_len]");
  const Check both = DescribeSourceLengthsStatus({kSourceTooLong | kSourceNegative, 0});
  EXPECT_PRED2(Contains, both.message, "a source length is negative; a source length exceeds");
  // An SDPA varlen bit is not an additive error: the word did not come from an additive call.
  const Check foreign = DescribeSourceLengthsStatus({kQTooLong, 0});
  EXPECT_EQ(foreign.status, SPILLWAY_ATTENTION_ERROR_INVALID_SHAPE);
  EXPECT_PRED2(Contains, foreign.message, "unknown error bits 2");
}

}  // namespace
}  // namespace spillway::attention
